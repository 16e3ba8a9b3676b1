package k8s

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// addNode adds a Ready node at ip to the fake cluster, edited by edit.
func (f *fakeCluster) addNode(t *testing.T, name, ip string, edit func(*corev1.Node)) {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		},
	}
	if edit != nil {
		edit(n)
	}
	if _, err := f.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// threeNodes is a cluster of node-a (the default), node-b and node-c.
func threeNodes(t *testing.T) *fakeCluster {
	f := newFakeCluster(t)
	f.addNode(t, "node-b", "192.0.2.251", nil)
	f.addNode(t, "node-c", "192.0.2.252", nil)
	return f
}

func placeOpt(m map[string]string) platform.Options {
	return platform.Options{Place: platform.FormatPlace(m)}
}

// TestPlaceRolesOnNodes: each role's pods go to the node place: names, the
// others to the default node; a NodePort client is sent to the node its
// pod runs on.
func TestPlaceRolesOnNodes(t *testing.T) {
	f := threeNodes(t)
	p := f.platform(t, NodePort, placeOpt(map[string]string{"db": "node-b", "lb": "node-c"}))
	if err := p.(platform.Checker).Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	ready := func(context.Context, string) error { return nil }
	spec := func(topology.ServerID, topology.Peers) (platform.Spec, error) {
		return platform.Spec{Ports: []string{"p"}, Command: func(platform.Listen) []string { return []string{"true"} }}, nil
	}
	top := topology.Topology{Roles: []topology.Role{
		{Name: "db", Count: 2, Ports: []string{"p"}, Ready: ready, Spec: spec},
		{Name: "cache", Ports: []string{"p"}, Ready: ready, Spec: spec},
		{Name: "lb", After: []string{"db", "cache"}, Entry: true, Ports: []string{"p"}, Ready: ready, Spec: spec},
	}}
	d, err := deploy.Deploy(context.Background(), p, "r1-place", top, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	pods, _ := f.cs.CoreV1().Pods(NamespaceName(testRun, NodePort)).List(context.Background(), metav1.ListOptions{})
	on := map[string][]string{}
	for _, po := range pods.Items {
		on[po.Labels[LabelGroup]] = append(on[po.Labels[LabelGroup]], po.Spec.NodeName)
	}
	want := map[string][]string{"i0-db-0": {"node-b"}, "i0-db-1": {"node-b"}, "i0-cache": {"node-a"}, "i0-lb": {"node-c"}}
	if !reflect.DeepEqual(on, want) {
		t.Errorf("nodes by group %v, want %v", on, want)
	}
	if addr := d.Entries("lb", "p"); len(addr) != 1 || !strings.HasPrefix(addr[0], "192.0.2.252:") {
		t.Errorf("lb's NodePort address %s, want node-c's 192.0.2.252", addr)
	}
}

// TestPlaceSingleServer: a workload's one server is placed by its name.
func TestPlaceSingleServer(t *testing.T) {
	f := threeNodes(t)
	p := f.platform(t, Pod, placeOpt(map[string]string{"redis": "node-c"}))
	srv, err := p.Start(context.Background(), "r1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	if d := srv.Describe(); !strings.Contains(d, "on node node-c") {
		t.Errorf("Describe = %q, want the pod on node-c", d)
	}
}

// TestPlaceOneGroupTwoNodes: roles sharing a pod cannot be on two nodes.
func TestPlaceOneGroupTwoNodes(t *testing.T) {
	f := threeNodes(t)
	p := f.platform(t, Pod, placeOpt(map[string]string{"php": "node-b", "nginx": "node-c"}))
	ready := func(context.Context, string) error { return nil }
	spec := func(topology.ServerID, topology.Peers) (platform.Spec, error) {
		return platform.Spec{Ports: []string{"p"}, Command: func(platform.Listen) []string { return []string{"true"} }}, nil
	}
	top := topology.Topology{Roles: []topology.Role{
		{Name: "php", Group: "web", Ports: []string{"p"}, Ready: ready, Spec: spec},
		{Name: "nginx", Group: "web", After: []string{"php"}, Entry: true, Ports: []string{"p"}, Ready: ready, Spec: spec},
	}}
	d, err := deploy.Deploy(context.Background(), p, "r1-web", top, deploy.Options{})
	if err == nil {
		d.Stop(context.Background())
		t.Fatal("roles of one pod placed on two nodes deployed")
	}
	if !strings.Contains(err.Error(), "roles nginx and php share a pod but are placed on nodes node-c and node-b") &&
		!strings.Contains(err.Error(), "roles php and nginx share a pod but are placed on nodes node-b and node-c") {
		t.Errorf("error %v", err)
	}
	if left := list(t, f, NamespaceName(testRun, Pod), "pods"); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestCheckPlace: a node that cannot take the pods is refused by Check,
// before any trial, naming the roles, the node and the fix.
func TestCheckPlace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  string
		opt   platform.Options
		edit  func(*testing.T, *fakeCluster)
		local bool
		want  string // "" = accepted
	}{
		{"placed on existing nodes", Pod, placeOpt(map[string]string{"db": "node-b", "web": "node-c"}), nil, false, ""},
		{"no such node", Pod, placeOpt(map[string]string{"db": "node-x"}), nil, false,
			"place: db on node node-x: the cluster has no such node (nodes: node-a, node-b, node-c)"},
		{"local cluster, another node", Pod, placeOpt(map[string]string{"db": "node-x"}), nil, true,
			"the local cluster (`nearnative cluster up`) has one node, node-a"},
		{"not ready", Pod, placeOpt(map[string]string{"db": "node-d"}), func(t *testing.T, f *fakeCluster) {
			f.addNode(t, "node-d", "192.0.2.253", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
		}, false, "node node-d: the node is not Ready"},
		{"cordoned", Pod, placeOpt(map[string]string{"db": "node-d", "web": "node-d"}), func(t *testing.T, f *fakeCluster) {
			f.addNode(t, "node-d", "192.0.2.253", func(n *corev1.Node) { n.Spec.Unschedulable = true })
		}, false, "place: db, web on node node-d: the node is cordoned: `kubectl uncordon node-d`"},
		{"tainted", Pod, placeOpt(map[string]string{"db": "node-d"}), func(t *testing.T, f *fakeCluster) {
			f.addNode(t, "node-d", "192.0.2.253", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
			})
		}, false, "the node has taint node-role.kubernetes.io/control-plane:NoSchedule"},
		{"a PreferNoSchedule taint is no refusal", Pod, placeOpt(map[string]string{"db": "node-d"}), func(t *testing.T, f *fakeCluster) {
			f.addNode(t, "node-d", "192.0.2.253", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			})
		}, false, ""},
		{"too little memory for a Guaranteed pod", Guaranteed, placeOpt(map[string]string{"db": "node-d"}), func(t *testing.T, f *fakeCluster) {
			f.addNode(t, "node-d", "192.0.2.253", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("1Gi") })
		}, false, "a server requests memory 2Gi, the node has 1Gi allocatable"},
		{"too few CPUs for the cpus limit", Guaranteed, platform.Options{CPUs: 6, Place: "db=node-b"}, nil, false,
			"a server requests cpu 6, the node has 4 allocatable"},
		{"no static CPU manager on the placed node", Guaranteed, placeOpt(map[string]string{"db": "node-b"}), func(_ *testing.T, f *fakeCluster) {
			f.nodeCPUManager["node-b"] = "none"
		}, false, `needs the static CPU manager, but the node runs policy "none"`},
		{"hostNetwork on a node that is not this machine", HostNet, placeOpt(map[string]string{"db": "node-b"}), nil, false,
			"reaches a hostNetwork pod on an address of this machine, and the node is not this machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := threeNodes(t)
			if tc.edit != nil {
				tc.edit(t, f)
			}
			if tc.local {
				f.conn.local = &cluster.Config{}
			}
			err := f.platform(t, tc.kind, tc.opt).(platform.Checker).Check(context.Background())
			checkOutcome(t, err, tc.want)
		})
	}
}

// linkHost is a client host on the link subnet, which routes anything.
type linkHost struct {
	host.Host
	subnet netip.Prefix
}

func (l linkHost) Subnet() netip.Prefix { return l.subnet }
func (l linkHost) CanRoute() error      { return nil }

// TestLocalPodsAnswerTheClient: the local cluster's pods have no default
// route; a cluster whose CNI configuration does not route the client
// host's link back through the node is refused before the first trial,
// naming the fix, where its pods' answers were lost and the trial hung.
func TestLocalPodsAnswerTheClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		routes string // the ipam routes of the cluster's CNI file
		client string
		want   string // "" = accepted
	}{
		{"routed", `[{"dst": "10.96.0.0/24"}, {"dst": "10.214.0.0/16"}]`, "10.214.9.0/30", ""},
		{"a cluster made before the route", `[{"dst": "10.96.0.0/24"}]`, "10.214.9.0/30", "`nearnative cluster down && nearnative cluster up`"},
		{"a client on this machine's loopback", `[{"dst": "10.96.0.0/24"}]`, "127.0.0.0/8", ""},
		{"a client link outside the pool", `[{"dst": "10.96.0.0/24"}, {"dst": "10.214.0.0/16"}]`, "192.168.77.0/30", "drop client_subnet, or run with --client host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			local := &cluster.Config{}
			local.Home.Root = t.TempDir()
			dir := filepath.Join(local.RunDir(), "cni", "net.d")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			conf := `{"plugins": [{"type": "bridge", "ipam": {"routes": ` + tc.routes + `}}]}`
			if err := os.WriteFile(filepath.Join(dir, "10-nearnative.conflist"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			f.conn.local = local
			f.conn.save = func(context.Context, string) (io.ReadCloser, error) { return nil, errors.New("not used") }
			env := platform.Env{Run: testRun, Image: "nearnative/workload:test", LogDir: t.TempDir(),
				Client: linkHost{Host: host.LoopbackHost(), subnet: netip.MustParsePrefix(tc.client)}}
			p, err := New(Pod, Pod, env, f.conn, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = p.(platform.Checker).Check(context.Background())
			checkOutcome(t, err, tc.want)
		})
	}
}
