package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// UpOptions tune Up.
type UpOptions struct {
	// Log receives one line per step (nil: none).
	Log io.Writer
	// Images are imported from the local Docker engine into the node
	// through Save (the workload image).
	Images []string
	Save   ImageSaver
}

// Prerequisites returns an error naming what the machine lacks to run the
// cluster, with the command that installs it.
func Prerequisites() error {
	var missing []string
	for _, p := range []string{ContainerdBinary, CtrBinary, CNIBinDir + "/bridge", CNIBinDir + "/host-local", CNIBinDir + "/portmap", CNIBinDir + "/loopback"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, t := range []string{"runc", "iptables", "ip"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster: missing %s: run `make setup` (or: apt-get install -y containerd runc containernetworking-plugins iptables iproute2 nftables)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("cluster: the cluster's components need root: run as root")
	}
	return nil
}

// Up brings the cluster up and returns once the node is Ready and the
// images are on it. A cluster that is already up is left as it is (the
// images are still imported). When a step fails, what was started is torn
// down again and the error shows the failing component's last log lines.
func (c Config) Up(ctx context.Context, o UpOptions) (err error) {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := Prerequisites(); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	if st := c.Status(ctx); st.Up() {
		logf("cluster: already up (node %s Ready)", c.NodeName)
		return c.importImages(ctx, o, logf)
	}
	bins, err := c.EnsureBinaries(ctx, o.Log)
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.RunDir()); err == nil {
		logf("cluster: removing what an earlier cluster left")
		if _, err := c.Down(ctx, nil); err != nil {
			return fmt.Errorf("cluster: removing the earlier cluster first: %w", err)
		}
	}
	if err := c.checkFree(); err != nil {
		return err
	}
	if err := os.MkdirAll(c.path("pids"), 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	host, err := RecordHost(ctx)
	if err != nil {
		return err
	}
	if err := c.saveHost(host); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logf("cluster: bring-up failed; tearing down what was started")
			if _, derr := c.Down(context.WithoutCancel(ctx), nil); derr != nil {
				err = errors.Join(err, fmt.Errorf("tearing down after the failure: %w", derr))
			}
		}
	}()
	start := time.Now()
	logf("cluster: certificates (crypto/x509)")
	if _, err := NewPKI(c.path("pki"), c.Identities()); err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return err
	}
	logf("cluster: bridge %s with node address %s", c.Bridge, c.NodeIP())
	if err := c.makeBridge(ctx); err != nil {
		return err
	}
	procs, err := c.startComponents(ctx, bins, logf)
	if err != nil {
		return err
	}
	if err := c.waitNode(ctx, procs, logf); err != nil {
		return err
	}
	logf("cluster: node %s Ready %v after the first process started", c.NodeName, time.Since(start).Round(100*time.Millisecond))
	return c.importImages(ctx, o, logf)
}

// startComponents starts every component in order, each waited for (by
// its own readiness probe) before the next starts.
func (c Config) startComponents(ctx context.Context, bins Binaries, logf func(string, ...any)) (map[string]*proc, error) {
	procs := map[string]*proc{}
	for _, comp := range c.components(bins) {
		p, err := c.start(comp.name, comp.argv)
		if err != nil {
			return procs, err
		}
		procs[comp.name] = p
		logf("cluster: started %s (pid %d)", comp.name, p.pid)
		if comp.ready == nil {
			continue
		}
		ready, err := comp.ready(c)
		if err != nil {
			return procs, err
		}
		within := comp.readyWithin
		if within == 0 {
			within = 60 * time.Second
		}
		if err := waitFor(ctx, p, within, ready); err != nil {
			return procs, c.failure(comp.name, err)
		}
		if comp.afterReady != nil {
			if err := comp.afterReady(ctx, c, bins); err != nil {
				return procs, err
			}
		}
	}
	return procs, nil
}

// waitNode waits until the node is Ready (while the control plane's
// processes live) and the default service account exists.
func (c Config) waitNode(ctx context.Context, procs map[string]*proc, logf func(string, ...any)) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	logf("cluster: waiting for node %s to be Ready", c.NodeName)
	if err := waitFor(ctx, procs["kubelet"], 120*time.Second, func(ctx context.Context) error {
		for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kube-proxy"} {
			if !procs[name].alive() {
				return fmt.Errorf("%s exited: %v; see %s", name, procs[name].err, c.LogPath(name))
			}
		}
		return NodeReady(ctx, cs, c.NodeName)
	}); err != nil {
		return c.failure("kubelet", err)
	}
	if err := waitFor(ctx, nil, 60*time.Second, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return c.failure("kube-controller-manager", fmt.Errorf("the default service account did not appear: %w", err))
	}
	return nil
}

// containerdReady probes containerd with `ctr version`.
func containerdReady(c Config) (func(context.Context) error, error) {
	return func(ctx context.Context) error {
		_, err := c.ctr(ctx, nil, "version")
		return err
	}, nil
}

// etcdReady probes etcd's /health with the cluster's client certificate.
func etcdReady(c Config) (func(context.Context) error, error) {
	tlsCfg, err := c.etcdClientTLS()
	if err != nil {
		return nil, err
	}
	return httpReady(c.EtcdURL()+"/health", tlsCfg), nil
}

// apiServerReady probes the API server's /readyz as the admin.
func apiServerReady(c Config) (func(context.Context) error, error) {
	tlsCfg, err := c.adminTLS()
	if err != nil {
		return nil, err
	}
	return httpReady(c.APIServerURL()+"/readyz", tlsCfg), nil
}

func (c Config) importImages(ctx context.Context, o UpOptions, logf func(string, ...any)) error {
	for _, ref := range o.Images {
		t := time.Now()
		did, err := c.ImportImage(ctx, ref, o.Save)
		if err != nil {
			return err
		}
		if did {
			logf("cluster: imported %s into the node in %v", ref, time.Since(t).Round(100*time.Millisecond))
		} else {
			logf("cluster: the node has %s already", ref)
		}
	}
	return nil
}

// checkFree refuses to start when the bridge or the ports are taken.
func (c Config) checkFree() error {
	if _, err := net.InterfaceByName(c.Bridge); err == nil {
		return fmt.Errorf("cluster: a link %s exists already: remove it (ip link del %s) or run `nearnative cluster down`", c.Bridge, c.Bridge)
	}
	for _, port := range []int{EtcdClientPort, EtcdPeerPort} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("cluster: port 127.0.0.1:%d, which etcd needs, is taken: %w", port, err)
		}
		l.Close()
	}
	return nil
}

func (c Config) adminTLS() (*tls.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(rc.TLSClientConfig.CertFile, rc.TLSClientConfig.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	pool, err := caPool(rc.TLSClientConfig.CAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// etcdClientTLS is the apiserver's client certificate for etcd, trusting
// the cluster's CA: what etcd's health check presents.
func (c Config) etcdClientTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.pki("apiserver-etcd-client.crt"), c.pki("apiserver-etcd-client.key"))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	pool, err := caPool(c.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func httpReady(url string, tlsCfg *tls.Config) func(context.Context) error {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// Client connects to the cluster with the admin kubeconfig.
func (c Config) Client() (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return cs, nil
}

// NodeReady returns nil when the node reports the Ready condition.
func NodeReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s not Ready: %s", name, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", name)
}

// importPause imports the pause image once containerd is ready.
func importPause(ctx context.Context, c Config, bins Binaries) error { return c.importPause(ctx, bins) }
