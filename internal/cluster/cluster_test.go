package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/state"
)

func TestConfigValidate(t *testing.T) {
	base := DefaultConfig(state.Dir{Root: t.TempDir()})
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"default", func(*Config) {}, ""},
		{"no home", func(c *Config) { c.Home.Root = "" }, "no state directory"},
		{"long bridge", func(c *Config) { c.Bridge = "a-very-long-bridge-name" }, "bridge name"},
		{"bad pod cidr", func(c *Config) { c.PodCIDR = "10.244.0.0" }, "pod CIDR"},
		{"ipv6 pod cidr", func(c *Config) { c.PodCIDR = "fd00::/64" }, "pod CIDR"},
		{"overlap", func(c *Config) { c.ServiceCIDR = "10.244.0.0/25" }, "overlap"},
		{"tiny pod cidr", func(c *Config) { c.PodCIDR = "10.244.0.0/30" }, "too small"},
		{"node name", func(c *Config) { c.NodeName = "Node_1" }, "node name"},
		{"cpu manager", func(c *Config) { c.CPUManager = "dynamic" }, "CPU manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	c := DefaultConfig(state.Dir{Root: "/x"})
	if got := c.NodeIP().String(); got != "10.244.0.1" {
		t.Errorf("NodeIP = %s, want 10.244.0.1", got)
	}
	if got := c.ServiceIP().String(); got != "10.96.0.1" {
		t.Errorf("ServiceIP = %s, want 10.96.0.1", got)
	}
	mac := c.BridgeMAC()
	if got := mac.String(); got != "02:6e:6e:f4:00:01" {
		t.Errorf("BridgeMAC = %s, want 02:6e:6e:f4:00:01", got)
	}
	if mac[0]&0x02 == 0 || mac[0]&0x01 != 0 {
		t.Errorf("BridgeMAC %s is not a locally administered unicast address", mac)
	}
	if got := c.APIServerURL(); got != "https://10.244.0.1:6443" {
		t.Errorf("APIServerURL = %s", got)
	}
	if got := c.Kubeconfig(); got != "/x/cluster/run/admin.kubeconfig" {
		t.Errorf("Kubeconfig = %s", got)
	}
}

func TestStagingModulesAndGoMod(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.22.0

require (
	github.com/x/y v1.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/x/y => github.com/x/z v1.0.1
)
`)
	got := StagingModules(gomod)
	if strings.Join(got, ",") != "k8s.io/api,k8s.io/client-go" {
		t.Fatalf("StagingModules = %v", got)
	}
	mod := string(KubernetesGoMod(got))
	for _, want := range []string{"require k8s.io/kubernetes " + KubernetesVersion, "\tk8s.io/api => k8s.io/api " + StagingVersion, "\tk8s.io/client-go => k8s.io/client-go " + StagingVersion} {
		if !strings.Contains(mod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, mod)
		}
	}
}

func TestPKI(t *testing.T) {
	c := DefaultConfig(state.Dir{Root: t.TempDir()})
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := NewPKI(dir, c.Identities()); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if !ca.IsCA {
		t.Fatal("ca.crt is not a CA")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, tc := range []struct {
		file   string
		cn     string
		org    string
		usage  x509.ExtKeyUsage
		ip, dn string
	}{
		{"apiserver", "kube-apiserver", "", x509.ExtKeyUsageServerAuth, "10.96.0.1", "kubernetes.default.svc"},
		{"admin", "nearnative-admin", "system:masters", x509.ExtKeyUsageClientAuth, "", ""},
		{"kubelet-client", "system:node:" + c.NodeName, "system:nodes", x509.ExtKeyUsageClientAuth, "", ""},
		{"kubelet", c.NodeName, "", x509.ExtKeyUsageServerAuth, "10.244.0.1", ""},
		{"kube-proxy", "system:kube-proxy", "system:node-proxier", x509.ExtKeyUsageClientAuth, "", ""},
		{"etcd", "etcd", "", x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost"},
		{"etcd", "etcd", "", x509.ExtKeyUsageClientAuth, "", ""}, // its peer port's client side
		{"apiserver-etcd-client", "kube-apiserver-etcd-client", "", x509.ExtKeyUsageClientAuth, "", ""},
	} {
		cert := readCert(t, filepath.Join(dir, tc.file+".crt"))
		if cert.Subject.CommonName != tc.cn {
			t.Errorf("%s: CN %q, want %q", tc.file, cert.Subject.CommonName, tc.cn)
		}
		if tc.org != "" && (len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != tc.org) {
			t.Errorf("%s: O %v, want %s", tc.file, cert.Subject.Organization, tc.org)
		}
		opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}
		if tc.dn != "" {
			opts.DNSName = tc.dn
		}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s does not verify against the CA for %v: %v", tc.file, tc.usage, err)
		}
		if tc.ip != "" {
			found := false
			for _, ip := range cert.IPAddresses {
				found = found || ip.String() == tc.ip
			}
			if !found {
				t.Errorf("%s: no IP SAN %s in %v", tc.file, tc.ip, cert.IPAddresses)
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, tc.file+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v, mode %v; want 0600", tc.file, err, fi.Mode())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sa.pub")); err != nil {
		t.Error(err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPauseArchive(t *testing.T) {
	bin := []byte("\x7fELF fake binary")
	b, err := PauseArchive(bin)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != PauseImage {
		t.Errorf("tags %v, want %s", m.RepoTags, PauseImage)
	}
	if _, ok := files[m.Config]; !ok {
		t.Errorf("config %s missing", m.Config)
	}
	layer := tar.NewReader(bytes.NewReader(files[m.Layers[0]]))
	h, err := layer.Next()
	if err != nil || h.Name != "pause" || h.Mode != 0o755 {
		t.Fatalf("layer entry %+v, %v; want pause with mode 0755", h, err)
	}
	if data, _ := io.ReadAll(layer); !bytes.Equal(data, bin) {
		t.Error("layer holds other bytes than the binary")
	}
}

func TestContainerdRef(t *testing.T) {
	for in, want := range map[string]string{
		"nearnative/workload:abc":          "docker.io/nearnative/workload:abc",
		"redis":                            "docker.io/library/redis:latest",
		"registry.example:5000/team/img:1": "registry.example:5000/team/img:1",
		"localhost/img":                    "localhost/img:latest",
		"registry.k8s.io/pause:3.10":       "registry.k8s.io/pause:3.10",
	} {
		if got := ContainerdRef(in); got != want {
			t.Errorf("ContainerdRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCachedDetectsChangedBinary(t *testing.T) {
	c := DefaultConfig(state.Dir{Root: t.TempDir()})
	if _, ok, err := c.Cached(); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	os.MkdirAll(c.BinDir(), 0o755)
	sums := map[string]string{}
	for _, n := range allBinaries() {
		p := filepath.Join(c.BinDir(), n)
		os.WriteFile(p, []byte(n), 0o755)
		sums[n], _ = fileSHA256(p)
	}
	if err := writeManifest(filepath.Join(c.BinDir(), manifest), sums); err != nil {
		t.Fatal(err)
	}
	bins, ok, err := c.Cached()
	if !ok || err != nil || bins["kubelet"] != filepath.Join(c.BinDir(), "kubelet") {
		t.Fatalf("Cached = %v %v %v", bins, ok, err)
	}
	os.WriteFile(filepath.Join(c.BinDir(), "kubelet"), []byte("tampered"), 0o755)
	if _, _, err := c.Cached(); err == nil || !strings.Contains(err.Error(), "changed after the build") {
		t.Fatalf("a changed binary gave %v", err)
	}
}

// TestComponentsAuthenticate: etcd serves clients and peers only with
// client-certificate TLS, the apiserver reaches it with its own
// certificate and lets no anonymous caller in.
func TestComponentsAuthenticate(t *testing.T) {
	c := DefaultConfig(state.Dir{Root: "/s"})
	bins := Binaries{}
	for _, n := range allBinaries() {
		bins[n] = "/bin/" + n
	}
	args := map[string]string{}
	for _, comp := range c.components(bins) {
		args[comp.name] = strings.Join(comp.argv, " ")
	}
	for name, wants := range map[string][]string{
		"etcd": {"--listen-client-urls https://127.0.0.1:", "--client-cert-auth", "--trusted-ca-file /s/cluster/run/pki/ca.crt",
			"--listen-peer-urls https://127.0.0.1:", "--peer-client-cert-auth", "--cert-file /s/cluster/run/pki/etcd.crt"},
		"kube-apiserver": {"--etcd-servers https://127.0.0.1:", "--etcd-certfile /s/cluster/run/pki/apiserver-etcd-client.crt",
			"--etcd-cafile /s/cluster/run/pki/ca.crt", "--anonymous-auth=false"},
	} {
		for _, w := range wants {
			if !strings.Contains(args[name], w) {
				t.Errorf("%s lacks %q: %s", name, w, args[name])
			}
		}
		if strings.Contains(args[name], "http://") {
			t.Errorf("%s has a plain-HTTP URL: %s", name, args[name])
		}
	}
}

func TestRenderedConfigs(t *testing.T) {
	c := DefaultConfig(state.Dir{Root: "/s"})
	c.CPUManager = "static"
	cd := c.ContainerdConfig()
	for _, want := range []string{"restrict_oom_score_adj = true", "SystemdCgroup = false", `address = "/s/cluster/run/containerd/containerd.sock"`, `sandbox_image = "` + PauseImage + `"`, "netns_mounts_under_state_dir = true"} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %q", want)
		}
	}
	kl := c.KubeletConfig()
	for _, want := range []string{"cgroupDriver: cgroupfs", "cpuManagerPolicy: static", `reservedSystemCPUs: "0"`, "address: 10.244.0.1", "imageGCHighThresholdPercent: 100", "failSwapOn: false"} {
		if !strings.Contains(kl, want) {
			t.Errorf("kubelet config lacks %q", want)
		}
	}
	kp := c.KubeProxyConfig()
	for _, want := range []string{"mode: iptables", "localhostNodePorts: false", "maxPerCore: 0", `nodePortAddresses: ["10.244.0.1/32"]`} {
		if !strings.Contains(kp, want) {
			t.Errorf("kube-proxy config lacks %q", want)
		}
	}
	var cni map[string]any
	b, err := c.CNIConfig()
	if err != nil || json.Unmarshal(b, &cni) != nil {
		t.Fatalf("CNI config: %v %s", err, b)
	}
	if !strings.Contains(string(b), `"dst": "10.96.0.0/24"`) || !strings.Contains(string(b), `"bridge": "nn-k8s0"`) || !strings.Contains(string(b), `"type": "portmap"`) {
		t.Errorf("CNI config: %s", b)
	}
	// The routes a running cluster's pods have are read back from the
	// file: the service range and the client hosts' links.
	c.Home.Root = t.TempDir()
	if err := os.MkdirAll(c.path("cni", "net.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.path("cni", "net.d", "10-nearnative.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	routes, err := c.PodRoutes()
	if want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/24"), host.Pool}; err != nil || !slices.Equal(routes, want) {
		t.Errorf("PodRoutes = %v, %v; want %v", routes, err, want)
	}
}
