package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/topology"
)

// fakeCluster is client-go's fake clientset behaving like a one-node
// cluster: pods run as soon as they are created (or wait with the reason a
// test gives), Services get addresses, access reviews answer as told.
type fakeCluster struct {
	cs         *fake.Clientset
	conn       *Conn
	cpuManager string
	// nodeCPUManager overrides cpuManager for a node by name.
	nodeCPUManager map[string]string
	denied         map[string]bool // "verb resource" refused by RBAC
	waiting        string          // container waiting reason for new pods
	podIPs         atomic.Int32
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"kubernetes.io/hostname": "node-a"}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.250"}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.31.4", ContainerRuntimeVersion: "containerd://1.6.20"},
		},
	}
	f := &fakeCluster{cs: fake.NewSimpleClientset(node), cpuManager: "static", nodeCPUManager: map[string]string{}, denied: map[string]bool{}}
	f.cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.31.4"}
	f.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.UID = types.UID("uid-" + p.Name)
		// The scheduler: the node the pod's affinity names, else node-a.
		p.Spec.NodeName = "node-a"
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			p.Spec.NodeName = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0]
		}
		n, err := f.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", p.Spec.NodeName)
		if err != nil {
			return true, nil, fmt.Errorf("fake scheduler: %w", err)
		}
		p.Status.HostIP = n.(*corev1.Node).Status.Addresses[0].Address
		p.Status.QOSClass = qosOf(p)
		if f.waiting != "" {
			p.Status.Phase = corev1.PodPending
			for _, c := range p.Spec.Containers {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: f.waiting, Message: "image not present with pull policy Never"}}})
			}
			return false, nil, nil
		}
		p.Status.Phase = corev1.PodRunning
		if !p.Spec.HostNetwork {
			p.Status.PodIP = fmt.Sprintf("10.244.0.%d", 10+f.podIPs.Add(1))
		}
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, ContainerID: "containerd://cid-" + c.Name,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
		}
		return false, nil, nil
	})
	var svcIPs atomic.Int32
	f.cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		s.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", 10+svcIPs.Add(1))
		for i := range s.Spec.Ports {
			if s.Spec.Type == corev1.ServiceTypeNodePort {
				s.Spec.Ports[i].NodePort = 30000 + int32(i)
			}
		}
		return false, nil, nil
	})
	// The endpoint slice controller: every Service's pods are ready endpoints.
	f.cs.PrependReactor("list", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ns := a.GetNamespace()
		pods, _ := f.cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), ns)
		sl := discoveryv1.EndpointSlice{}
		// The typed fake filters by the selector: label the slice with it.
		if req, ok := a.(k8stesting.ListAction).GetListRestrictions().Labels.RequiresExactMatch(discoveryv1.LabelServiceName); ok {
			sl.Labels = map[string]string{discoveryv1.LabelServiceName: req}
		}
		for _, p := range pods.(*corev1.PodList).Items {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.Status.PodIP}})
		}
		return true, &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{sl}}, nil
	})
	f.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = !f.denied[ra.Verb+" "+ra.Resource]
		return true, r, nil
	})
	f.conn = NewConn(f.cs, func(_ context.Context, path string) ([]byte, error) {
		if strings.HasSuffix(path, "/configz") {
			policy := f.cpuManager
			if p, ok := f.nodeCPUManager[strings.Split(path, "/")[4]]; ok {
				policy = p
			}
			return []byte(`{"kubeletconfig":{"cpuManagerPolicy":"` + policy + `"}}`), nil
		}
		return nil, fmt.Errorf("no %s", path)
	})
	return f
}

// qosOf is the QoS class as the API server computes it, for the cases here.
func qosOf(p *corev1.Pod) corev1.PodQOSClass {
	all, any := true, false
	for _, c := range p.Spec.Containers {
		if len(c.Resources.Limits) > 0 {
			any = true
		}
		if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			all = false
		}
	}
	switch {
	case all && any:
		return corev1.PodQOSGuaranteed
	case any:
		return corev1.PodQOSBurstable
	}
	return corev1.PodQOSBestEffort
}

var testRun = runid.ID("20260101-000000-abcd")

func (f *fakeCluster) platform(t *testing.T, kind string, opt platform.Options) platform.Platform {
	t.Helper()
	p, err := New(kind, kind, platform.Env{Run: testRun, Image: "nearnative/workload:test", LogDir: t.TempDir()}, f.conn, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", fmt.Sprint(l.Port("redis")), "--dir", l.Dir}
		},
		Files: []platform.File{{Path: "conf/extra.conf", Content: []byte("maxmemory 1mb\n"), Mode: 0o600}},
		User:  "redis",
	}
}

func TestStartEachKind(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		addrHost string // prefix of the client address
		svcType  corev1.ServiceType
		qos      corev1.PodQOSClass
	}{
		{Pod, "10.244.0.", "", corev1.PodQOSBestEffort},
		{Service, "10.96.0.", corev1.ServiceTypeClusterIP, corev1.PodQOSBestEffort},
		{NodePort, "192.0.2.250:3000", corev1.ServiceTypeNodePort, corev1.PodQOSBestEffort},
		{HostNet, "127.0.0.1:", "", corev1.PodQOSBestEffort},
		{Guaranteed, "10.244.0.", "", corev1.PodQOSGuaranteed},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newFakeCluster(t)
			p := f.platform(t, tc.kind, platform.Options{})
			ctx := context.Background()
			srv, err := p.Start(ctx, "r1-redis", redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			ns := NamespaceName(testRun, tc.kind)
			if addr := srv.Addr("redis"); !strings.HasPrefix(addr, tc.addrHost) {
				t.Errorf("Addr = %s, want %s...", addr, tc.addrHost)
			}
			pods, _ := f.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRun + "=" + string(testRun)})
			if len(pods.Items) != 1 {
				t.Fatalf("%d labelled pods in %s, want 1", len(pods.Items), ns)
			}
			pod := pods.Items[0]
			c := pod.Spec.Containers[0]
			nsObj, _ := f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if psa := nsObj.Labels[podSecurityEnforce]; (psa == "privileged") != (tc.kind == HostNet) || nsObj.Labels[LabelRun] != string(testRun) {
				t.Errorf("namespace labels %v", nsObj.Labels)
			}
			if pod.Spec.HostNetwork != (tc.kind == HostNet) {
				t.Errorf("hostNetwork %v", pod.Spec.HostNetwork)
			}
			wantBind := "0.0.0.0"
			if tc.kind == HostNet {
				wantBind = "127.0.0.1"
			}
			if !strings.Contains(strings.Join(c.Command, " "), "--bind "+wantBind) {
				t.Errorf("command %q does not bind %s", c.Command, wantBind)
			}
			if c.Command[0] != "sh" || !strings.Contains(c.Command[2], "setpriv") || c.Command[4] != "redis" {
				t.Errorf("command %q does not switch to user redis", c.Command)
			}
			if c.ImagePullPolicy != corev1.PullIfNotPresent || c.Image != "nearnative/workload:test" {
				t.Errorf("image %s policy %s", c.Image, c.ImagePullPolicy)
			}
			if pod.Status.QOSClass != tc.qos {
				t.Errorf("QoS %s, want %s", pod.Status.QOSClass, tc.qos)
			}
			if tc.kind == Guaranteed {
				if got := c.Resources.Limits.Cpu().String(); got != "1" || !c.Resources.Requests.Cpu().Equal(*c.Resources.Limits.Cpu()) {
					t.Errorf("guaranteed cpu limit %s request %s, want 1 and 1", got, c.Resources.Requests.Cpu())
				}
				init := pod.Spec.InitContainers[0]
				if !init.Resources.Limits.Cpu().Equal(*c.Resources.Limits.Cpu()) {
					t.Error("the init container's resources differ: the pod would not be Guaranteed")
				}
			}
			script := pod.Spec.InitContainers[0].Command[2]
			for _, want := range []string{"install -D -m 600 /nn-files/m0-f0 '/nearnative/conf/extra.conf'", "chown -R 'redis:' '/nearnative'"} {
				if !strings.Contains(script, want) {
					t.Errorf("init script lacks %q:\n%s", want, script)
				}
			}
			cms, _ := f.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if len(cms.Items) != 1 || string(cms.Items[0].BinaryData["m0-f0"]) != "maxmemory 1mb\n" {
				t.Errorf("ConfigMaps %v", cms.Items)
			}
			svcs, _ := f.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if tc.svcType == "" && len(svcs.Items) != 0 {
				t.Errorf("%d Services, want none", len(svcs.Items))
			}
			if tc.svcType != "" && (len(svcs.Items) != 1 || svcs.Items[0].Spec.Type != tc.svcType || svcs.Items[0].Spec.Selector[LabelPod] != pod.Name) {
				t.Errorf("Services %+v, want one %s selecting pod %s", svcs.Items, tc.svcType, pod.Name)
			}
			d := srv.Describe()
			for _, want := range []string{"pod " + ns + "/", "node node-a", "QoS " + string(tc.qos), "Kubernetes v1.31.4", "CPU manager static"} {
				if !strings.Contains(d, want) {
					t.Errorf("Describe lacks %q: %s", want, d)
				}
			}
			if err := srv.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			for what, n := range map[string]int{"pods": len(list(t, f, ns, "pods")), "services": len(list(t, f, ns, "services")), "configmaps": len(list(t, f, ns, "configmaps"))} {
				if n != 0 {
					t.Errorf("%d %s left after Stop", n, what)
				}
			}
			if err := p.(platform.Closer).Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				t.Errorf("namespace %s left after Close", ns)
			}
		})
	}
}

func list(t *testing.T, f *fakeCluster, ns, what string) []string {
	ctx := context.Background()
	var out []string
	switch what {
	case "pods":
		l, _ := f.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case "services":
		l, _ := f.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case "configmaps":
		l, _ := f.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string
		edit func(*fakeCluster)
		want string // "" = available
	}{
		{"available", Pod, func(*fakeCluster) {}, ""},
		{"guaranteed without the static CPU manager", Guaranteed, func(f *fakeCluster) { f.cpuManager = "none" }, `policy "none"`},
		{"rights missing", Service, func(f *fakeCluster) { f.denied["create services"] = true; f.denied["create pods"] = true }, "may not create pods, create services"},
		{"hostnet on a remote node", HostNet, func(*fakeCluster) {}, "needs the node to be this machine"},
		{"image the node cannot pull", Pod, func(f *fakeCluster) { f.waiting = "ErrImagePull" }, "cannot pull image nearnative/workload:test: ErrImagePull"},
		{"no ready node", Pod, func(f *fakeCluster) {
			n, _ := f.cs.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			f.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		}, "no Ready, schedulable node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			tc.edit(f)
			err := f.platform(t, tc.kind, platform.Options{}).(platform.Checker).Check(context.Background())
			checkOutcome(t, err, tc.want)
		})
	}
}

// checkOutcome fails the test unless Check's err is nil when want is "",
// else an unavailable error containing want.
func checkOutcome(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, platform.ErrUnavailable) {
		t.Fatalf("Check = %v, want an unavailable error containing %q", err, want)
	}
}

func TestNewRejectsCPUSet(t *testing.T) {
	f := newFakeCluster(t)
	_, err := New(Pod, "pinned", platform.Env{Run: testRun, Image: "img"}, f.conn, platform.Options{CPUSet: "1"})
	if err == nil || !strings.Contains(err.Error(), "k8s-guaranteed") {
		t.Fatalf("New with a cpuset = %v", err)
	}
}

func TestPodThatNeverRuns(t *testing.T) {
	f := newFakeCluster(t)
	f.waiting = "ErrImageNeverPull"
	ctx := context.Background()
	f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NamespaceName(testRun, Pod)}}, metav1.CreateOptions{})
	p := f.platform(t, Pod, platform.Options{})
	impl := p.(*platformImpl)
	impl.nsOnce.Do(func() { impl.ns = NamespaceName(testRun, Pod) })
	f.cs.CoreV1().Events(impl.ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: impl.ns},
		InvolvedObject: corev1.ObjectReference{Name: podName("r1", "redis")}, Type: "Warning", Reason: "ErrImageNeverPull", Message: "Container image is not present with pull policy of Never"}, metav1.CreateOptions{})
	_, err := p.Start(ctx, "r1", redisSpec())
	if err == nil {
		t.Fatal("a pod whose image cannot be had started")
	}
	for _, want := range []string{"ErrImageNeverPull", "events:", "Warning ErrImageNeverPull: Container image is not present"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if left := list(t, f, impl.ns, "pods"); len(left) != 0 {
		t.Errorf("pods left after the failed start: %v", left)
	}
}

// TestDeployTopology deploys HAProxy-like lb in front of two backends: the
// lb's peers are pod IPs on k8s-pod and ClusterIPs on k8s-service.
func TestDeployTopology(t *testing.T) {
	for _, tc := range []struct {
		kind, peerPrefix string
	}{{Pod, "10.244.0."}, {Service, "10.96.0."}, {HostNet, "127.0.0.1:"}} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newFakeCluster(t)
			p := f.platform(t, tc.kind, platform.Options{})
			var peers []string
			top := topology.Topology{Roles: []topology.Role{
				{Name: "db", Count: 2, Ports: []string{"redis"}, Ready: func(context.Context, string) error { return nil },
					Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
						return platform.Spec{Ports: []string{"redis"}, Command: func(l platform.Listen) []string { return []string{"redis-server"} }}, nil
					}},
				{Name: "lb", After: []string{"db"}, Entry: true, Ports: []string{"http"}, Ready: func(context.Context, string) error { return nil },
					Spec: func(id topology.ServerID, pr topology.Peers) (platform.Spec, error) {
						peers = pr.All("db", "redis")
						return platform.Spec{Ports: []string{"http"}, Command: func(l platform.Listen) []string { return []string{"haproxy"} }}, nil
					}},
			}}
			d, err := deploy.Deploy(context.Background(), p, "r1-lb", top, deploy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Stop(context.Background())
			if len(peers) != 2 || !strings.HasPrefix(peers[0], tc.peerPrefix) || peers[0] == peers[1] {
				t.Errorf("lb's peers %v, want two distinct %s... addresses", peers, tc.peerPrefix)
			}
			ns := NamespaceName(testRun, tc.kind)
			pods, _ := f.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelInstance + "=0"})
			if len(pods.Items) != 3 {
				t.Errorf("%d pods labelled instance 0, want 3 (two db, one lb)", len(pods.Items))
			}
			places := d.Places()
			if len(places) != 3 || places[0].Kind != "pod" {
				t.Errorf("places %+v", places)
			}
			if err := d.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if left := list(t, f, ns, "pods"); len(left) != 0 {
				t.Errorf("pods left after Stop: %v", left)
			}
		})
	}
}

// TestSharedGroupPod: roles that share a group are one pod with a container
// each, reaching each other on 127.0.0.1.
func TestSharedGroupPod(t *testing.T) {
	f := newFakeCluster(t)
	p := f.platform(t, Pod, platform.Options{})
	var phpAddr string
	ready := func(context.Context, string) error { return nil }
	top := topology.Topology{Roles: []topology.Role{
		{Name: "php", Group: "web", Ports: []string{"fpm"}, Ready: ready,
			Spec: func(topology.ServerID, topology.Peers) (platform.Spec, error) {
				return platform.Spec{Ports: []string{"fpm"}, Command: func(l platform.Listen) []string { return []string{"php-fpm8.2"} }}, nil
			}},
		{Name: "nginx", Group: "web", After: []string{"php"}, Entry: true, Ports: []string{"http"}, Ready: ready,
			Spec: func(_ topology.ServerID, pr topology.Peers) (platform.Spec, error) {
				phpAddr = pr.Addr("php", 0, "fpm")
				return platform.Spec{Ports: []string{"http"}, Command: func(l platform.Listen) []string { return []string{"nginx"} }}, nil
			}},
	}}
	d, err := deploy.Deploy(context.Background(), p, "r1-web", top, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	if !strings.HasPrefix(phpAddr, "127.0.0.1:") {
		t.Errorf("nginx reaches php at %s, want 127.0.0.1", phpAddr)
	}
	pods, _ := f.cs.CoreV1().Pods(NamespaceName(testRun, Pod)).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 || len(pods.Items[0].Spec.Containers) != 2 {
		t.Fatalf("want one pod with two containers, got %d pods", len(pods.Items))
	}
	for _, c := range pods.Items[0].Spec.Containers {
		if !strings.HasPrefix(c.WorkingDir, platform.ContainerDir+"/") {
			t.Errorf("container %s works in %s, want a directory of its own", c.Name, c.WorkingDir)
		}
	}
}

func TestCgroupCPU(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "cpuacct", "kubepods", "besteffort", "poduid-1", "cid-1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "cpuacct.usage"), []byte("1500000000\n"), 0o644)
	got, err := cgroupCPU(root, "uid-1", "cid-1")
	if err != nil || got != 1500*time.Millisecond {
		t.Fatalf("cgroupCPU = %v, %v; want 1.5s", got, err)
	}
	v2 := filepath.Join(root, "unified", "kubepods", "poduid-2", "cid-2")
	os.MkdirAll(v2, 0o755)
	os.WriteFile(filepath.Join(v2, "cpu.stat"), []byte("usage_usec 2500\nuser_usec 2000\n"), 0o644)
	if got, err := cgroupCPU(root, "uid-2", "cid-2"); err != nil || got != 2500*time.Microsecond {
		t.Fatalf("cgroupCPU v2 = %v, %v", got, err)
	}
	if _, err := cgroupCPU(root, "uid-3", "cid-3"); err == nil {
		t.Fatal("a missing cgroup gave no error")
	}
}

func TestSummaryCPU(t *testing.T) {
	sum := []byte(`{"pods":[{"podRef":{"name":"p","namespace":"ns"},"containers":[{"name":"redis","cpu":{"usageCoreNanoSeconds":42000}}]}]}`)
	if got, err := SummaryCPU(sum, "ns", "p", "redis"); err != nil || got != 42*time.Microsecond {
		t.Fatalf("SummaryCPU = %v, %v", got, err)
	}
	if _, err := SummaryCPU(sum, "ns", "p", "other"); err == nil {
		t.Fatal("a missing container gave no error")
	}
}

func TestNames(t *testing.T) {
	if got := NamespaceName(testRun, "k8s-Pod_x"); got != "nn-20260101-000000-abcd-k8s-pod-x" {
		t.Errorf("NamespaceName = %s", got)
	}
	long := podName(strings.Repeat("trial", 20), "i0-db-0")
	if len(long) > 63 || long != podName(strings.Repeat("trial", 20), "i0-db-0") || long == podName(strings.Repeat("trial", 20), "i0-db-1") {
		t.Errorf("podName of a long name: %s (%d)", long, len(long))
	}
	if got := portName("a_very_long_port_name"); len(got) > 15 {
		t.Errorf("portName = %s", got)
	}
}

// routeRecorder is a client host in a namespace of its own as the k8s
// platforms see it: it records the routes they ask for.
type routeRecorder struct {
	host.Host
	mu     sync.Mutex
	routes []string
}

func (r *routeRecorder) Route(_ context.Context, p netip.Prefix) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes = append(r.routes, p.String())
	return nil
}
func (r *routeRecorder) ServerAddr() string { return "10.214.9.1" }

// TestClientHostRoutes: with the client in a namespace of its own, each
// k8s platform routes it to the address its client is given (pod IP,
// ClusterIP, node address), and a hostNetwork pod listens on the client
// link's host side instead of 127.0.0.1.
func TestClientHostRoutes(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		addr   string // prefix of the client address
		routes string // the routes asked for, sorted
	}{
		{Pod, "10.244.0.11:", "10.244.0.11/32"},
		{Guaranteed, "10.244.0.11:", "10.244.0.11/32"},
		{Service, "10.96.0.11:", "10.244.0.11/32 10.96.0.11/32"},
		{NodePort, "192.0.2.250:30000", "10.244.0.11/32 10.96.0.11/32 192.0.2.250/32"},
		{HostNet, "10.214.9.1:", ""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newFakeCluster(t)
			rec := &routeRecorder{Host: host.LoopbackHost()}
			env := platform.Env{Run: testRun, Image: "nearnative/workload:test", LogDir: t.TempDir(), Client: rec}
			p, err := New(tc.kind, tc.kind, env, f.conn, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			srv, err := p.Start(ctx, "r1-redis", redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(ctx)
			if a := srv.Addr("redis"); !strings.HasPrefix(a, tc.addr) {
				t.Errorf("Addr = %s, want %s...", a, tc.addr)
			}
			sort.Strings(rec.routes)
			if got := strings.Join(rec.routes, " "); got != tc.routes {
				t.Errorf("routes %q, want %q", got, tc.routes)
			}
			if tc.kind == HostNet {
				pods, _ := f.cs.CoreV1().Pods(NamespaceName(testRun, tc.kind)).List(ctx, metav1.ListOptions{})
				if cmd := strings.Join(pods.Items[0].Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--bind 10.214.9.1") {
					t.Errorf("hostNetwork pod's command %q does not bind the client link's host side", cmd)
				}
			}
		})
	}
}
