package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
)

// EnvKubeconfig is the usual environment variable naming a kubeconfig.
const EnvKubeconfig = "KUBECONFIG"

// Facts are what the report states for every k8s row.
type Facts struct {
	// Server is the API server's URL; Version its Kubernetes version.
	Server, Version string
	// Node is the node pods go to (the first Ready one); NodeIP its
	// InternalIP; NodeLocal says whether that is this machine.
	Node, NodeIP string
	NodeLocal    bool
	Nodes        []string
	Kubelet      string
	Runtime      string
	CNI          string
	// ProxyMode is kube-proxy's mode ("iptables", "ipvs", "nftables") or
	// "unknown".
	ProxyMode string
	// CPUManager is the node's kubelet CPU manager policy.
	CPUManager string
	// LocalCluster: the cluster is the one `nearnative cluster up` runs.
	LocalCluster bool
}

// String is one line for the record.
func (f Facts) String() string {
	return fmt.Sprintf("Kubernetes %s, node %s (%s, kubelet %s, %s), CNI %s, kube-proxy %s, CPU manager %s",
		f.Version, f.Node, f.NodeIP, f.Kubelet, f.Runtime, f.CNI, f.ProxyMode, f.CPUManager)
}

// Conn is a connection to a cluster shared by a run's k8s platforms.
type Conn struct {
	// Kubeconfig is the file it was made from ("" for tests).
	Kubeconfig string
	cs         kubernetes.Interface
	// raw GETs an API path (node proxy endpoints); tests replace it.
	raw func(ctx context.Context, path string) ([]byte, error)
	// local is the local cluster when the kubeconfig is its own.
	local *cluster.Config
	save  cluster.ImageSaver
	// streams exec into pods and forward ports to them (a driver pod's
	// agent); nil on a test's fake cluster that gives none.
	streams podStreams

	mu       sync.Mutex
	facts    *Facts
	imported map[string]error
}

// KubeconfigPath picks the kubeconfig: the one given, else $KUBECONFIG, else
// the local cluster's when it exists, else ~/.kube/config.
func KubeconfigPath(given string, local cluster.Config) string {
	if given != "" {
		return given
	}
	if env := os.Getenv(EnvKubeconfig); env != "" {
		return env
	}
	if _, err := os.Stat(local.Kubeconfig()); err == nil {
		return local.Kubeconfig()
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := home + "/.kube/config"; fileExists(p) {
			return p
		}
	}
	return local.Kubeconfig()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Connect opens a connection with kubeconfig. When it is the local
// cluster's, save imports the workload image into the node on first use.
func Connect(kubeconfig string, local cluster.Config, save cluster.ImageSaver) (*Conn, error) {
	if !fileExists(kubeconfig) {
		return nil, platform.Unavailablef("no Kubernetes cluster: kubeconfig %s does not exist: start the local cluster with `nearnative cluster up` (or `make cluster`), or name yours with --kubeconfig or KUBECONFIG", kubeconfig)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.Timeout = 15 * time.Second
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	c := &Conn{Kubeconfig: kubeconfig, cs: cs, save: save, imported: map[string]error{}, streams: apiStreams{rc: rc, cs: cs}}
	c.raw = func(ctx context.Context, path string) ([]byte, error) {
		return cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	}
	if kubeconfig == local.Kubeconfig() {
		l := local
		c.local = &l
	}
	return c, nil
}

// NewConn wraps a clientset (client-go's fake one in tests); raw serves
// node proxy paths (nil: none).
func NewConn(cs kubernetes.Interface, raw func(ctx context.Context, path string) ([]byte, error)) *Conn {
	if raw == nil {
		raw = func(context.Context, string) ([]byte, error) { return nil, fmt.Errorf("no API proxy") }
	}
	return &Conn{cs: cs, raw: raw, imported: map[string]error{}}
}

// NodeHasImage reports whether node lists image ref among its images.
func (c *Conn) NodeHasImage(ctx context.Context, node, ref string) bool {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	want := cluster.ContainerdRef(ref)
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			if name == ref || name == want {
				return true
			}
		}
	}
	return false
}

// Reachable returns nil when the API server answers.
func (c *Conn) Reachable(ctx context.Context) error {
	_, err := c.cs.Discovery().ServerVersion()
	return err
}

// Client is the clientset.
func (c *Conn) Client() kubernetes.Interface { return c.cs }

// Facts inspects the cluster once: version, node, CNI, proxy mode, CPU
// manager. An unreachable cluster or one without a Ready node is
// unavailable.
func (c *Conn) Facts(ctx context.Context) (Facts, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.facts != nil {
		return *c.facts, nil
	}
	f, err := c.inspect(ctx)
	if err != nil {
		return f, err
	}
	c.facts = &f
	return f, nil
}

func (c *Conn) where() string {
	if c.Kubeconfig == "" {
		return "the cluster"
	}
	return "the cluster of kubeconfig " + c.Kubeconfig
}

func (c *Conn) inspect(ctx context.Context) (Facts, error) {
	var f Facts
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		hint := "is it up? `nearnative cluster status`"
		return f, platform.Unavailablef("no Kubernetes cluster reachable (%s): %v; %s", c.where(), err, hint)
	}
	f.Version, f.LocalCluster = v.GitVersion, c.local != nil
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, platform.Unavailablef("listing the nodes of %s: %v (the kubeconfig's user needs to list nodes)", c.where(), err)
	}
	for _, n := range nodes.Items {
		f.Nodes = append(f.Nodes, n.Name)
		if f.Node == "" && nodeReady(n) && !n.Spec.Unschedulable {
			f.Node, f.Kubelet, f.Runtime = n.Name, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion
			f.NodeIP = internalIP(n)
		}
	}
	if f.Node == "" {
		return f, platform.Unavailablef("%s has no Ready, schedulable node (nodes: %s)", c.where(), strings.Join(f.Nodes, ", "))
	}
	f.NodeLocal = isLocalAddr(f.NodeIP)
	f.CNI = c.cni(ctx)
	f.ProxyMode = c.proxyMode(ctx)
	f.CPUManager = c.cpuManager(ctx, f.Node)
	return f, nil
}

// internalIP is the node's first InternalIP address, "" without one.
func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func nodeReady(n corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// isLocalAddr reports whether ip is an address of this machine.
func isLocalAddr(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// cni names the pod network: the local cluster's is known; elsewhere it is
// recognised by the kube-system pods of common plugins.
func (c *Conn) cni(ctx context.Context) string {
	if c.local != nil {
		return "bridge " + c.local.Bridge + " + host-local IPAM + portmap (containernetworking-plugins)"
	}
	pods, err := c.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "unknown"
	}
	for _, p := range pods.Items {
		for _, name := range []string{"calico", "cilium", "flannel", "weave", "kindnet", "canal", "antrea", "kube-router", "ovn"} {
			if strings.Contains(p.Name, name) {
				return name
			}
		}
	}
	return "unknown"
}

// proxyMode asks kube-proxy: on the local cluster its /proxyMode endpoint,
// elsewhere the kube-proxy ConfigMap kubeadm writes.
func (c *Conn) proxyMode(ctx context.Context) string {
	if c.local != nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10249/proxyMode", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
			resp.Body.Close()
			if m := strings.TrimSpace(string(b)); m != "" {
				return m
			}
		}
	}
	cm, err := c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(cm.Data["config.conf"], "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "mode:"); ok {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if v == "" {
				v = "iptables"
			}
			return v
		}
	}
	return "unknown"
}

// podsAnswer says whether the local cluster's pods route their answers to
// a client host on the link client (through the node: the pod network
// has no default route). A cluster made by an older nearnative lacks the
// route, and its pods' answers were lost: the trial hung until its
// readiness wait gave up. Other clusters route as their CNI does.
func (c *Conn) podsAnswer(client netip.Prefix) error {
	if c.local == nil || !client.IsValid() || !client.Addr().Is4() || client.Addr().IsLoopback() {
		return nil // on this machine (the node) itself: answered directly
	}
	routes, err := c.local.PodRoutes()
	if err != nil {
		return platform.Unavailablef("the local cluster's pod network: %v: `nearnative cluster status`", err)
	}
	for _, r := range routes {
		if r.Contains(client.Addr()) && r.Bits() <= client.Bits() {
			return nil
		}
	}
	if !host.Pool.Contains(client.Addr()) {
		return platform.Unavailablef("the local cluster's pods route answers only to client links in %s, and the client host's link is %s: drop client_subnet, or run with --client host", host.Pool, client)
	}
	return platform.Unavailablef("the local cluster's pods have no route back to the client host's link %s (a cluster made before nearnative routed %s): `nearnative cluster down && nearnative cluster up`, or run with --client host", client, host.Pool)
}

// cpuManager reads the node's kubelet configuration (/configz through the
// API server's node proxy).
func (c *Conn) cpuManager(ctx context.Context, node string) string {
	b, err := c.raw(ctx, "/api/v1/nodes/"+node+"/proxy/configz")
	if err != nil {
		return "unknown (" + oneLine(err.Error()) + ")"
	}
	var cfg struct {
		KubeletConfig struct {
			CPUManagerPolicy string `json:"cpuManagerPolicy"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "unknown"
	}
	if cfg.KubeletConfig.CPUManagerPolicy == "" {
		return "none"
	}
	return cfg.KubeletConfig.CPUManagerPolicy
}

// Rights lists what a run needs on kind: resource, verb, and whether it is
// cluster-scoped.
type Right struct {
	Group, Resource, Subresource, Verb string
	Cluster                            bool
}

// Rights is the RBAC a run of kind needs: its own namespace (cluster
// scope), and in it pods, their logs and events, ConfigMaps for files, and
// Services for the Service kinds; a driver pod adds exec and port-forward
// into pods. hostNetwork pods need a namespace that
// Pod Security admits at the privileged level; nearnative labels its
// namespace so, which clusters with a restricted default may refuse.
func Rights(kind string, driver bool) []Right {
	r := []Right{
		{Resource: "namespaces", Verb: "create", Cluster: true},
		{Resource: "namespaces", Verb: "delete", Cluster: true},
		{Resource: "pods", Verb: "create"}, {Resource: "pods", Verb: "get"}, {Resource: "pods", Verb: "delete"},
		{Resource: "pods", Subresource: "log", Verb: "get"},
		{Resource: "events", Verb: "list"},
		{Resource: "configmaps", Verb: "create"},
		{Resource: "nodes", Verb: "list", Cluster: true},
	}
	if kind == Service || kind == NodePort {
		r = append(r, Right{Resource: "services", Verb: "create"}, Right{Resource: "services", Verb: "delete"})
	}
	if driver { // the driver pod: the binary copied in, its agent reached
		r = append(r, Right{Resource: "pods", Subresource: "exec", Verb: "create"}, Right{Resource: "pods", Subresource: "portforward", Verb: "create"})
	}
	return r
}

// CheckRBAC asks the API server whether the kubeconfig's user has Rights
// (with a driver pod's when driver).
func (c *Conn) CheckRBAC(ctx context.Context, kind string, driver bool) error {
	var denied []string
	for _, r := range Rights(kind, driver) {
		ra := &authv1.ResourceAttributes{Group: r.Group, Resource: r.Resource, Subresource: r.Subresource, Verb: r.Verb}
		if !r.Cluster {
			ra.Namespace = "nn-rbac-check"
		}
		rev, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
		if err != nil {
			return platform.Unavailablef("asking %s what the kubeconfig's user may do: %v", c.where(), err)
		}
		if !rev.Status.Allowed {
			what := r.Resource
			if r.Subresource != "" {
				what += "/" + r.Subresource
			}
			denied = append(denied, r.Verb+" "+what)
		}
	}
	if len(denied) > 0 {
		return platform.Unavailablef("the kubeconfig's user may not %s in %s: grant it a ClusterRole with those verbs (namespaces are cluster-scoped; the rest is needed in the run's namespace only)",
			strings.Join(denied, ", "), c.where())
	}
	return nil
}

// CheckImage says whether pods can get the image on each of nodes: on the
// local cluster it is imported from Docker when missing (see ensureImage);
// elsewhere a node that lists it will do, else a probe pod in namespace ns
// must pull it there (once per image and node), so that an image a node
// cannot pull is named before the first trial rather than in it.
func (c *Conn) CheckImage(ctx context.Context, ref string, nodes []string, ns func(context.Context) (string, error)) error {
	if c.local != nil {
		if c.save == nil && !c.local.HasImage(ctx, ref) {
			return platform.Unavailablef("image %s is not on the local node and no Docker engine can provide it: `nearnative cluster up --image %s`", ref, ref)
		}
		return nil
	}
	for _, node := range nodes {
		if c.NodeHasImage(ctx, node, ref) {
			continue
		}
		key := ref + "@" + node
		c.mu.Lock()
		err, done := c.imported[key]
		c.mu.Unlock()
		if !done {
			var namespace string
			if namespace, err = ns(ctx); err == nil {
				err = c.probePull(ctx, namespace, node, ref)
			}
			c.mu.Lock()
			c.imported[key] = err
			c.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pullTimeout bounds the image probe (a cold pull of the workload image).
var pullTimeout = 10 * time.Minute

// probePull runs a pod that only pulls ref on node and exits; an image the
// node cannot pull makes the platform unavailable, with the kubelet's reason.
func (c *Conn) probePull(ctx context.Context, ns, node, ref string) error {
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nn-image-probe", Namespace: ns, Labels: map[string]string{LabelRun: "probe"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			Affinity:   nodeAffinity(node),
			Containers: []corev1.Container{{Name: "probe", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"true"}}}},
	}
	pods := c.cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the image probe pod in %s: %w", ns, err)
	}
	defer func() {
		zero := int64(0)
		pods.Delete(context.WithoutCancel(ctx), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	for {
		po, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the image probe pod: %w", err)
		}
		for _, st := range po.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "InvalidImageName") {
				return platform.Unavailablef("node %s cannot pull image %s: %s: %s; push it to a registry the nodes can reach and pass --image REF, or load it on the nodes", node, ref, w.Reason, oneLine(w.Message))
			}
			if st.State.Terminated != nil || st.State.Running != nil {
				return nil // pulled
			}
		}
		if po.Status.Phase == corev1.PodSucceeded || po.Status.Phase == corev1.PodFailed {
			return nil
		}
		select {
		case <-ctx.Done():
			return platform.Unavailablef("node %s did not pull image %s within %v", node, ref, pullTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureImage imports ref into the local node once per connection.
func (c *Conn) ensureImage(ctx context.Context, ref string, log func(string, ...any)) error {
	if c.local == nil || c.save == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err, done := c.imported[ref]; done {
		return err
	}
	start := time.Now()
	did, err := c.local.ImportImage(ctx, ref, c.save)
	if did {
		log("imported %s into the local node in %v", ref, time.Since(start).Round(100*time.Millisecond))
	}
	c.imported[ref] = err
	return err
}

// pullPolicy is Never on the local cluster (the image was imported) and
// IfNotPresent elsewhere.
func (c *Conn) pullPolicy() corev1.PullPolicy {
	if c.local != nil {
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
