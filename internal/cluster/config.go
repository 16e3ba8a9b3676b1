package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nearnative/nearnative/internal/host"
)

// APIServerURL is where the API server answers: the node address on the
// cluster's bridge.
func (c Config) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.NodeIP().String(), strconv.Itoa(APIServerPort))
}

func (c Config) pki(name string) string { return c.path("pki", name) }

// writeKubeconfig writes a kubeconfig for the identity whose certificate is
// pki/<identity>.crt.
func (c Config) writeKubeconfig(path, identity string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nearnative"] = &clientcmdapi.Cluster{Server: c.APIServerURL(), CertificateAuthority: c.pki("ca.crt")}
	cfg.AuthInfos[identity] = &clientcmdapi.AuthInfo{ClientCertificate: c.pki(identity + ".crt"), ClientKey: c.pki(identity + ".key")}
	cfg.Contexts["nearnative"] = &clientcmdapi.Context{Cluster: "nearnative", AuthInfo: identity}
	cfg.CurrentContext = "nearnative"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	return nil
}

// ContainerdConfig is the private containerd's configuration: its own root,
// state and socket; CRI with runc on cgroupfs, the locally built pause
// image, and restrict_oom_score_adj (root lacks CAP_SYS_RESOURCE on these
// machines, so runc cannot lower a sandbox's oom_score_adj without it).
func (c Config) ContainerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.ContainerdSocket(), c.ContainerdSocket()+".ttrpc",
		PauseImage, c.path("containerd", "runc"), CNIBinDir, c.path("cni", "net.d"))
}

// CNIBinDir is where Debian's containernetworking-plugins installs.
const CNIBinDir = "/usr/lib/cni"

// CNIConfig is the pod network: a bridge (the cluster's own, which also
// holds the node address) with host-local IPAM and portmap. No masquerade
// and no default route: pods reach the node, each other, and Services
// through the node, where kube-proxy's rules are, and answer a client host
// (host.Pool, the network namespaces' links) through the node too.
func (c Config) CNIConfig() ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "nearnative",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": c.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": c.PodCIDR, "gateway": c.NodeIP().String()}}},
					// Services are reached through the node (kube-proxy's
					// rules), and so are the client hosts' links; nothing
					// else leaves the pod subnet.
					"routes":  []map[string]string{{"dst": c.ServiceCIDR}, {"dst": host.Pool.String()}},
					"dataDir": c.path("cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// KubeletConfig is kubelet's configuration file: cgroupfs, its own
// directories, no image garbage collection, eviction thresholds low enough
// for a small disk, the static CPU manager with CPU 0 reserved, and the
// server on the node address only.
func (c Config) KubeletConfig() string {
	cpu := "cpuManagerPolicy: none\n"
	if c.CPUManager == "static" {
		cpu = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
tlsCertFile: %s
tlsPrivateKeyFile: %s
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
%sresolvConf: /etc/resolv.conf
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
maxPods: 110
`, c.NodeIP(), c.pki("ca.crt"), c.pki("kubelet.crt"), c.pki("kubelet.key"), c.ContainerdSocket(),
		c.path("kubelet", "pod-logs"), cpu)
}

// KubeProxyConfig is kube-proxy's configuration: iptables mode, NodePorts on
// the node address only; route_localnet, nf_conntrack_max and the conntrack
// TCP timeouts left alone (zero means "do not set").
func (c Config) KubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["%s/32"]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.path("kube-proxy.kubeconfig"), c.NodeName, c.PodCIDR, c.NodeIP(), c.NodeIP())
}

// component is one process of the cluster.
type component struct {
	name string
	argv []string
	// ready makes its readiness probe; nil: none is waited for.
	ready func(Config) (func(context.Context) error, error)
	// readyWithin bounds the wait (default 60 s).
	readyWithin time.Duration
	// afterReady runs once it is ready (containerd: importing the pause
	// image).
	afterReady func(context.Context, Config, Binaries) error
}

// components lists the processes in start order with their arguments.
func (c Config) components(bins Binaries) []component {
	node := c.NodeIP().String()
	etcdURL := c.EtcdURL()
	peerURL := "https://127.0.0.1:" + strconv.Itoa(EtcdPeerPort)
	return []component{
		{name: "containerd", argv: []string{ContainerdBinary, "--config", c.path("containerd", "config.toml")},
			ready: containerdReady, afterReady: importPause},
		// Client-certificate TLS on both ports: a local user without the
		// cluster's certificates cannot talk to etcd.
		{name: "etcd", argv: []string{bins["etcd"], "--name", "nearnative", "--data-dir", c.path("etcd"),
			"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
			"--cert-file", c.pki("etcd.crt"), "--key-file", c.pki("etcd.key"),
			"--client-cert-auth", "--trusted-ca-file", c.pki("ca.crt"),
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "nearnative=" + peerURL,
			"--peer-cert-file", c.pki("etcd.crt"), "--peer-key-file", c.pki("etcd.key"),
			"--peer-client-cert-auth", "--peer-trusted-ca-file", c.pki("ca.crt"),
			"--listen-metrics-urls", "", "--log-level", "warn"},
			ready: etcdReady},
		{name: "kube-apiserver", argv: []string{bins["kube-apiserver"],
			"--etcd-servers", etcdURL,
			"--etcd-cafile", c.pki("ca.crt"), "--etcd-certfile", c.pki("apiserver-etcd-client.crt"),
			"--etcd-keyfile", c.pki("apiserver-etcd-client.key"),
			// Every caller authenticates, health probes included
			// (nearnative's readiness check uses the admin certificate).
			"--anonymous-auth=false",
			"--bind-address", node, "--advertise-address", node, "--secure-port", strconv.Itoa(APIServerPort),
			"--service-cluster-ip-range", c.ServiceCIDR,
			"--tls-cert-file", c.pki("apiserver.crt"), "--tls-private-key-file", c.pki("apiserver.key"),
			"--client-ca-file", c.pki("ca.crt"),
			"--kubelet-client-certificate", c.pki("apiserver-kubelet-client.crt"),
			"--kubelet-client-key", c.pki("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority", c.pki("ca.crt"),
			"--kubelet-preferred-address-types", "InternalIP",
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file", c.pki("sa.pub"),
			"--service-account-signing-key-file", c.pki("sa.key"),
			"--authorization-mode", "Node,RBAC",
			"--enable-admission-plugins", "NodeRestriction",
			"--profiling=false", "--v=1"},
			ready: apiServerReady, readyWithin: 120 * time.Second},
		{name: "kube-controller-manager", argv: []string{bins["kube-controller-manager"],
			"--kubeconfig", c.path("controller-manager.kubeconfig"),
			"--authentication-kubeconfig", c.path("controller-manager.kubeconfig"),
			"--authorization-kubeconfig", c.path("controller-manager.kubeconfig"),
			"--bind-address", "127.0.0.1",
			"--service-account-private-key-file", c.pki("sa.key"), "--root-ca-file", c.pki("ca.crt"),
			"--use-service-account-credentials", "--service-cluster-ip-range", c.ServiceCIDR,
			"--leader-elect=false", "--profiling=false", "--v=1"}},
		{name: "kube-scheduler", argv: []string{bins["kube-scheduler"],
			"--kubeconfig", c.path("scheduler.kubeconfig"),
			"--authentication-kubeconfig", c.path("scheduler.kubeconfig"),
			"--authorization-kubeconfig", c.path("scheduler.kubeconfig"),
			"--bind-address", "127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"}},
		{name: "kubelet", argv: []string{bins["kubelet"],
			"--config", c.path("kubelet", "config.yaml"), "--kubeconfig", c.path("kubelet.kubeconfig"),
			"--root-dir", c.path("kubelet", "root"), "--hostname-override", c.NodeName, "--node-ip", node,
			"--v=1"}},
		{name: "kube-proxy", argv: []string{bins["kube-proxy"], "--config", c.path("kube-proxy.yaml"), "--v=1"}},
	}
}

// ContainerdBinary is Debian's containerd (package containerd).
const ContainerdBinary = "/usr/bin/containerd"

// CtrBinary is containerd's command-line client, used to import images.
const CtrBinary = "/usr/bin/ctr"

// writeConfigs writes every configuration file and kubeconfig.
func (c Config) writeConfigs() error {
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pod-logs", "logs", "pids"} {
		if err := os.MkdirAll(c.path(filepath.FromSlash(d)), 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	cni, err := c.CNIConfig()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		c.path("containerd", "config.toml"):              []byte(c.ContainerdConfig()),
		c.path("cni", "net.d", "10-nearnative.conflist"): cni,
		c.path("kubelet", "config.yaml"):                 []byte(c.KubeletConfig()),
		c.path("kube-proxy.yaml"):                        []byte(c.KubeProxyConfig()),
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("cluster: writing %s: %w", path, err)
		}
	}
	for file, id := range map[string]string{
		"admin.kubeconfig": "admin", "controller-manager.kubeconfig": "controller-manager",
		"scheduler.kubeconfig": "scheduler", "kube-proxy.kubeconfig": "kube-proxy", "kubelet.kubeconfig": "kubelet-client",
	} {
		if err := c.writeKubeconfig(c.path(file), id); err != nil {
			return err
		}
	}
	return nil
}

// PodRoutes are the routes the running cluster's CNI configuration gives
// pods (read from its file: a cluster made by an older nearnative may
// lack one CNIConfig now adds).
func (c Config) PodRoutes() ([]netip.Prefix, error) {
	b, err := os.ReadFile(c.path("cni", "net.d", "10-nearnative.conflist"))
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the CNI configuration: %w", err)
	}
	var conf struct {
		Plugins []struct {
			IPAM struct {
				Routes []struct {
					Dst string `json:"dst"`
				} `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		return nil, fmt.Errorf("cluster: the CNI configuration: %w", err)
	}
	var out []netip.Prefix
	for _, p := range conf.Plugins {
		for _, r := range p.IPAM.Routes {
			if pr, err := netip.ParsePrefix(r.Dst); err == nil {
				out = append(out, pr)
			}
		}
	}
	return out, nil
}
