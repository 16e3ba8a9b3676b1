// Package k8s runs servers as Kubernetes pods through client-go: one pod per
// server group (a container per server in it, so servers that share a group
// reach each other on 127.0.0.1), in a namespace of the run's own that is
// deleted at the end and found by `nearnative cleanup` after a crash. Five
// platforms differ in how a client reaches the pods:
//
//   - k8s-pod: the pod's IP, through the CNI.
//   - k8s-service: a ClusterIP Service per server, through kube-proxy.
//   - k8s-nodeport: a NodePort Service per server, at the node's address.
//   - k8s-hostnet: a hostNetwork pod, on the client host's server address
//     as on docker-host.
//
// A client host in a namespace of its own (the default) is routed through
// this machine to each pod IP, ClusterIP and node address it is given.
//   - k8s-guaranteed: a Guaranteed pod (requests = limits, integer CPUs) on a
//     node with the static CPU manager: exclusive cores, the Kubernetes form
//     of pinning; reached at its pod IP.
//
// Pods run the workload image. On the local cluster (`nearnative cluster
// up`) the image is imported into the node from Docker; on another cluster
// (--kubeconfig, KUBECONFIG) it must be pullable by the nodes (`--image`
// names it). A server's CPU time is read from its pod's cgroup on the node
// when the node is this machine (exact at any instant), else from the
// kubelet's stats summary through the API server (cAdvisor's counters,
// refreshed every few seconds: coarse for short trials).
package k8s

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/topology"
)

// Names of the platform kinds.
const (
	Pod        = platform.K8sPod
	Service    = platform.K8sService
	NodePort   = platform.K8sNodePort
	HostNet    = platform.K8sHostNet
	Guaranteed = platform.K8sGuaranteed
)

// Kinds lists the kinds in display order.
var Kinds = []string{Pod, Service, NodePort, HostNet, Guaranteed}

// IsKind reports whether name is a k8s platform kind.
func IsKind(name string) bool {
	for _, k := range Kinds {
		if k == name {
			return true
		}
	}
	return false
}

// Labels on everything the platforms create.
const (
	LabelRun      = runid.Label // "nearnative.run": the run ID
	LabelTrial    = "nearnative.trial"
	LabelPod      = "nearnative.pod"      // the pod's own name, for Service selectors
	LabelGroup    = "nearnative.group"    // the server group
	LabelInstance = "nearnative.instance" // the topology instance
	LabelPlatform = "nearnative.platform"
)

// podSecurityEnforce is Pod Security admission's namespace label.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// Timeouts.
const (
	// podReadyTimeout bounds how long a pod may take to run its containers
	// (an image import on the local node happens before it).
	podReadyTimeout = 120 * time.Second
	// stopGrace is the pods' termination grace period, as the Docker
	// platforms' stop timeout.
	stopGrace = 2
	// deleteTimeout bounds waiting for a pod to be gone.
	deleteTimeout = 60 * time.Second
)

// platformImpl is one k8s platform.
type platformImpl struct {
	kind string
	name string
	env  platform.Env
	opt  platform.Options
	conn *Conn
	// place is options.place: role -> node.
	place map[string]string
	// driverNode is the node of place's driver, "" when the load comes
	// from the run's client host; driver is its pod once made.
	driverNode string
	driver     *driverPod

	nsOnce sync.Once
	nsErr  error
	ns     string
}

// New returns the k8s platform kind named name in the study, using the
// cluster connection conn (shared by the run's k8s platforms; the caller
// closes it).
func New(kind, name string, env platform.Env, conn *Conn, opt platform.Options) (platform.Platform, error) {
	if !IsKind(kind) {
		return nil, fmt.Errorf("k8s platform %q: unknown kind %q (want %s)", name, kind, strings.Join(Kinds, ", "))
	}
	if name == "" {
		name = kind
	}
	if conn == nil {
		return nil, fmt.Errorf("k8s platform %s: no cluster connection", name)
	}
	if env.Image == "" {
		return nil, fmt.Errorf("k8s platform %s: no workload image", name)
	}
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("k8s platform %s: %w", name, err)
	}
	if opt.CPUSet != "" {
		return nil, fmt.Errorf("k8s platform %s: cpuset %q is not a Kubernetes setting (the CPU manager places pods): use k8s-guaranteed for exclusive cores, or cpus for a limit", name, opt.CPUSet)
	}
	place, err := platform.ParsePlace(opt.Place)
	if err != nil {
		return nil, fmt.Errorf("k8s platform %s: %w", name, err)
	}
	if place[platform.Driver] != "" && kind == HostNet {
		return nil, fmt.Errorf("k8s platform %s: place: driver: a hostNetwork pod listens on this machine's client link, which a driver pod does not reach; place the driver on k8s-pod, k8s-service, k8s-nodeport or k8s-guaranteed", name)
	}
	return &platformImpl{kind: kind, name: name, env: env, opt: opt, conn: conn, place: place, driverNode: place[platform.Driver]}, nil
}

// Name implements platform.Platform.
func (p *platformImpl) Name() string { return p.name }

// Check implements platform.Checker: the cluster answers with a Ready node,
// the kubeconfig's user has the rights the run needs, every node of
// options.place can take the pods, the image can reach the nodes, and
// k8s-guaranteed finds the static CPU manager.
func (p *platformImpl) Check(ctx context.Context) error {
	f, err := p.conn.Facts(ctx)
	if err != nil {
		return err
	}
	if err := p.conn.CheckRBAC(ctx, p.kind, p.driverNode != ""); err != nil {
		return err
	}
	if err := p.checkPlaced(ctx, f); err != nil {
		return err
	}
	if err := p.conn.CheckImage(ctx, p.env.Image, p.nodes(f), p.namespace); err != nil {
		return err
	}
	if p.kind == Guaranteed {
		if f.CPUManager != "static" {
			return platform.Unavailablef("%s needs a node with the static CPU manager, but node %s runs policy %q: set cpuManagerPolicy: static (and reservedSystemCPUs) in its kubelet configuration; `nearnative cluster up` does on machines with two or more CPUs",
				p.name, f.Node, f.CPUManager)
		}
	}
	if p.kind != HostNet && p.driverNode == "" {
		if err := p.env.ClientHost().CanRoute(); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := p.conn.podsAnswer(p.env.ClientHost().Subnet()); err != nil {
			return err
		}
	}
	if p.kind == HostNet && !f.NodeLocal {
		return platform.Unavailablef("%s reaches a hostNetwork pod on an address of this machine (%s), which needs the node to be this machine; node %s (%s) is not", p.name, p.env.ClientHost().ServerAddr(), f.Node, f.NodeIP)
	}
	return nil
}

// Namespace creates the run's namespace of this platform on first use.
func (p *platformImpl) namespace(ctx context.Context) (string, error) {
	p.nsOnce.Do(func() {
		p.ns = NamespaceName(p.env.Run, p.name)
		labels := map[string]string{LabelRun: string(p.env.Run), LabelPlatform: dnsLabel(p.name)}
		if p.kind == HostNet {
			// hostNetwork pods pass Pod Security admission only at the
			// privileged level; say so where a cluster enforces a lower one.
			labels[podSecurityEnforce] = "privileged"
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns, Labels: labels}}
		_, err := p.conn.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			p.nsErr = fmt.Errorf("%s: creating namespace %s: %w", p.name, p.ns, err)
		}
	})
	return p.ns, p.nsErr
}

// Close implements platform.Closer: it deletes the platform's namespace
// (and with it anything left in it) and waits until it is gone.
func (p *platformImpl) Close() error {
	if p.driver != nil {
		p.driver.Close(context.Background())
	}
	if p.ns == "" || p.nsErr != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*deleteTimeout)
	defer cancel()
	return DeleteNamespace(ctx, p.conn.cs, p.ns)
}

var unsafeDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel turns s into a DNS-1123 label (lower case, digits, '-', at most
// 63 characters, alphanumeric at both ends).
func dnsLabel(s string) string {
	s = unsafeDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > 63 {
		s = s[:63]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		return "x"
	}
	return s
}

// NamespaceName is the namespace of platform name in run.
func NamespaceName(run runid.ID, name string) string {
	return dnsLabel(runid.Prefix + string(run) + "-" + name)
}

// Machine implements deploy.Backend: the CPUs of the node pods go to, when
// it is this machine (placement by CPU set does not apply to pods).
func (p *platformImpl) Machine() topology.Machine {
	return topology.Machine{CPUs: deploy.HostCPUs()}
}

// errUnavailable wraps an error as "platform unavailable".
func errUnavailable(err error) error {
	if errors.Is(err, platform.ErrUnavailable) {
		return err
	}
	return platform.Unavailablef("%w", err)
}
