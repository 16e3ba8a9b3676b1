package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platform"
)

// server is one server in a pod.
type server struct {
	pd *pod
	m  member
	// own: stopping this server deletes the pod (a pod of one server;
	// topology pods are deleted by the site).
	own bool
}

// listenHost is where servers bind: on the host network the client host's
// server address (as on docker-host: 127.0.0.1, or the host side of the
// client's link), every address of the pod's own network namespace
// otherwise.
func (p *platformImpl) listenHost() string {
	if p.kind == HostNet {
		return p.env.ClientHost().ServerAddr()
	}
	return "0.0.0.0"
}

// pickOn is where free port numbers are looked for: loopback (any number
// is free in a pod's own namespace, numbers free here keep them distinct;
// a hostNetwork pod's node may be another machine's view of this one, so
// its client link's address is not asked).
func (p *platformImpl) pickOn() string { return "127.0.0.1" }

// Start implements platform.Platform: a pod of one server from the
// workload image (with a Service on the Service kinds), returned once its
// container runs.
func (p *platformImpl) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	ports, err := platform.AssignPorts(spec, p.pickOn())
	if err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", p.name, spec.Name, err)
	}
	l := platform.Listen{Host: p.listenHost(), Ports: ports, Dir: listenDir(spec, false)}
	argv := spec.Command(l)
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: starting %s: empty command", p.name, spec.Name)
	}
	m := member{spec: spec, listen: l, argv: argv, entry: true, instance: -1, role: spec.Name}
	pd, err := p.createPod(ctx, trial, spec.Name, []member{m}, p.kind == Service || p.kind == NodePort)
	if err != nil {
		return nil, err
	}
	return &server{pd: pd, m: m, own: true}, nil
}

// Addr implements platform.Server: the entry address of the platform kind.
func (s *server) Addr(port string) string {
	n, ok := s.m.listen.Ports[port]
	if !ok {
		panic(fmt.Sprintf("k8s: port %q not declared in the spec of %s", port, s.m.spec.Name))
	}
	host, p := s.pd.ip, n
	s.pd.mu.Lock()
	svc := s.pd.services[s.m.spec.Name]
	s.pd.mu.Unlock()
	switch s.pd.p.kind {
	case HostNet:
		host = s.pd.p.listenHost()
	case Service:
		if svc != nil {
			host = svc.Spec.ClusterIP
		}
	case NodePort:
		if svc != nil {
			host = s.pd.hostIP
			for _, sp := range svc.Spec.Ports {
				if sp.Name == portName(port) && sp.NodePort != 0 {
					p = int(sp.NodePort)
				}
			}
			if svc.Spec.Type != corev1.ServiceTypeNodePort {
				host, p = svc.Spec.ClusterIP, n
			}
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(p))
}

// Command implements platform.Server.
func (s *server) Command() []string { return append([]string(nil), s.m.argv...) }

// Describe implements platform.Server: the pod, its node and QoS class, the
// client's path, and the cluster's facts (version, CNI, proxy mode).
func (s *server) Describe() string {
	pd := s.pd
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s container %s on node %s, QoS %s", pd.ns, pd.name, s.m.container(), pd.nodeName, pd.qos)
	if pd.p.kind == HostNet {
		b.WriteString(", host network")
	} else {
		b.WriteString(", pod IP " + pd.ip)
	}
	var ports []string
	for _, pn := range s.m.spec.Ports {
		ports = append(ports, pn)
	}
	sort.Strings(ports)
	var paths []string
	for _, pn := range ports {
		addr := s.Addr(pn)
		switch pd.p.kind {
		case Pod, Guaranteed:
			paths = append(paths, fmt.Sprintf("client to pod IP %s through the CNI", addr))
		case Service:
			paths = append(paths, fmt.Sprintf("client to ClusterIP %s through kube-proxy", addr))
		case NodePort:
			paths = append(paths, fmt.Sprintf("client to node port %s through kube-proxy", addr))
		case HostNet:
			paths = append(paths, fmt.Sprintf("listening %s", addr))
		}
	}
	if len(paths) > 0 {
		b.WriteString("; " + strings.Join(paths, ", "))
	}
	if c := pd.cpuset(s.m.container()); c != "" && pd.p.kind == Guaranteed {
		b.WriteString("; exclusive CPUs " + c + " (static CPU manager)")
	}
	if o := pd.p.opt.String(); o != "" {
		b.WriteString("; " + o)
	}
	if f, err := pd.p.conn.Facts(context.Background()); err == nil {
		b.WriteString("; " + f.String())
	}
	return b.String()
}

// Stop implements platform.Server: a pod of one server is deleted (logs
// saved first); a server of a topology pod leaves that to the site.
func (s *server) Stop(ctx context.Context) error {
	if !s.own {
		return nil
	}
	return s.pd.delete(ctx)
}

// LogTail implements deploy.LogTailer from the API.
func (s *server) LogTail(ctx context.Context, lines int) string {
	return strings.TrimRight(s.pd.logs(ctx, s.m.container(), lines), "\n")
}

// Exited implements deploy.Exiter: the container has terminated.
func (s *server) Exited(ctx context.Context) error {
	po, err := s.pd.p.conn.cs.CoreV1().Pods(s.pd.ns).Get(ctx, s.pd.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", s.pd.ns, s.pd.name, err)
	}
	for _, st := range po.Status.ContainerStatuses {
		if st.Name == s.m.container() && st.State.Terminated != nil {
			return fmt.Errorf("container %s of pod %s/%s exited with code %d (%s)", st.Name, s.pd.ns, s.pd.name, st.State.Terminated.ExitCode, st.State.Terminated.Reason)
		}
	}
	return nil
}

// CPUTime implements platform.CPUReporter: the container's cgroup CPU
// accounting on the node when the node is this machine (exact at any
// moment); elsewhere the kubelet's stats summary through the API server,
// whose cAdvisor counters are refreshed every few seconds.
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	f, err := s.pd.p.conn.Facts(ctx)
	if err != nil {
		return 0, err
	}
	s.pd.mu.Lock()
	cid, uid, node := s.pd.cids[s.m.container()], s.pd.uid, s.pd.nodeName
	s.pd.mu.Unlock()
	if f.NodeLocal && node == f.Node {
		return cgroupCPU(cgroup.Root, uid, cid)
	}
	return s.summaryCPU(ctx, node)
}

// cgroupCPU reads the CPU time of container cid of pod uid from kubelet's
// cgroups (cgroupfs driver) under root, in any QoS class (see
// cgroup.UsageAt).
func cgroupCPU(root, uid, cid string) (time.Duration, error) {
	if uid == "" || cid == "" {
		return 0, errors.New("the pod's container has no ID yet")
	}
	for _, qos := range []string{"", "burstable", "besteffort"} {
		if d, found, err := cgroup.UsageAt(root, filepath.Join("kubepods", qos, "pod"+uid, cid)); found {
			return d, err
		}
	}
	return 0, fmt.Errorf("no cgroup of container %s of pod %s under %s/*/kubepods (is kubelet on the cgroupfs driver?)", shortID(cid), uid, root)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// summaryCPU reads the container's CPU time from the kubelet's stats summary.
func (s *server) summaryCPU(ctx context.Context, node string) (time.Duration, error) {
	b, err := s.pd.p.conn.raw(ctx, "/api/v1/nodes/"+node+"/proxy/stats/summary")
	if err != nil {
		return 0, fmt.Errorf("kubelet stats summary of node %s: %w (the kubeconfig's user needs get on nodes/proxy)", node, err)
	}
	return SummaryCPU(b, s.pd.ns, s.pd.name, s.m.container())
}

// SummaryCPU finds a container's usageCoreNanoSeconds in a kubelet stats
// summary.
func SummaryCPU(summary []byte, ns, pod, container string) (time.Duration, error) {
	var sum struct {
		Pods []struct {
			PodRef struct {
				Name, Namespace string
			} `json:"podRef"`
			Containers []struct {
				Name string `json:"name"`
				CPU  *struct {
					UsageCoreNanoSeconds *uint64 `json:"usageCoreNanoSeconds"`
				} `json:"cpu"`
			} `json:"containers"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(summary, &sum); err != nil {
		return 0, fmt.Errorf("kubelet stats summary: %w", err)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Name != pod || p.PodRef.Namespace != ns {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == container && c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				return time.Duration(*c.CPU.UsageCoreNanoSeconds), nil
			}
		}
	}
	return 0, fmt.Errorf("kubelet stats summary has no CPU figure for container %s of pod %s/%s yet", container, ns, pod)
}

// cpuset is the CPU list of a container's cpuset cgroup on a local node
// ("" when unknown).
func (pd *pod) cpuset(container string) string {
	pd.mu.Lock()
	cid, uid := pd.cids[container], pd.uid
	pd.mu.Unlock()
	if cid == "" {
		return ""
	}
	for _, qos := range []string{"", "burstable", "besteffort"} {
		if b, err := os.ReadFile(filepath.Join(cgroup.Root, "cpuset", "kubepods", qos, "pod"+uid, cid, "cpuset.cpus")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}
