package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/state"
)

// hostSnapshot is what the cluster may touch on the host.
type hostSnapshot struct {
	Host      HostState
	Mounts    []string
	Processes []int
	Cgroups   []string
	Bridge    bool
}

func snapshot(t *testing.T, c Config) hostSnapshot {
	t.Helper()
	h, err := RecordHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, bridgeErr := run(context.Background(), "ip", "link", "show", c.Bridge)
	h.Links = ownLinks(t, c)
	return hostSnapshot{Host: h, Mounts: mountPoints(c.RunDir(), "/var/lib/kubelet"), Processes: c.markedPids(),
		Cgroups: cgroupDirs("kubepods"), Bridge: bridgeErr == nil}
}

// TestUpDownLeavesNothing brings the real cluster up from the cached
// binaries, checks the node, and takes it down again: links, iptables
// chains, nftables tables, sysctls, directories, mounts, processes and
// cgroups must be as before. It runs when asked (NEARNATIVE_CLUSTER_UPDOWN,
// make test-cluster-down), the binaries are built and no cluster is up (it
// must not take down one that other tests use).
func TestUpDownLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the whole cluster")
	}
	if os.Getenv("NEARNATIVE_CLUSTER_UPDOWN") == "" {
		// Not in every `go test ./...`: the k8s platforms' tests in another
		// package could find this test's cluster up and lose it mid-test.
		t.Skip("brings the whole cluster up and down: run with NEARNATIVE_CLUSTER_UPDOWN=1 (make test-cluster-down)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	c := DefaultConfig(state.Home())
	if _, ok, err := c.Cached(); !ok || err != nil {
		t.Skipf("the cluster's binaries are not built (make cluster builds them): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if c.Status(ctx).Running() {
		t.Skip("a cluster is up; this test would take it down under the tests that use it")
	}
	if err := Prerequisites(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, c)
	var log strings.Builder
	err := c.Up(ctx, UpOptions{Log: &log})
	defer func() {
		if c.Status(context.Background()).Running() {
			c.Down(context.Background(), nil)
		}
	}()
	if err != nil {
		t.Fatalf("Up: %v\n%s", err, log.String())
	}
	if st := c.Status(ctx); !st.Up() {
		t.Fatalf("after Up: %s", st)
	}
	// A pod, so that Down has a sandbox, a veth, a netns and shims to
	// remove; it runs the sandbox image, the one image the node has.
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	never := false
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "updown", Namespace: "default"},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &never,
			Containers: []corev1.Container{{Name: "c", Image: PauseImage, ImagePullPolicy: corev1.PullNever}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, nil, time.Minute, func(ctx context.Context) error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "updown", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s", p.Status.Phase)
		}
		return nil
	}); err != nil {
		t.Fatalf("a pod on the fresh node: %v\n%s", err, c.logTail("kubelet", 20))
	}
	during := snapshot(t, c)
	if len(during.Host.Links) <= len(before.Host.Links)+1 {
		t.Errorf("no veth for the pod: links %v", during.Host.Links)
	}
	if !during.Bridge || len(during.Processes) < 7 || len(during.Mounts) == 0 {
		t.Errorf("the running cluster shows no bridge, %d marked processes, %d mounts: the snapshot cannot see what Down must remove", len(during.Processes), len(during.Mounts))
	}
	done, err := c.Down(ctx, nil)
	if err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down removed %d things, e.g. %s", len(done), strings.Join(done[:min(len(done), 8)], "; "))
	after := snapshot(t, c)
	for _, d := range diff(before, after) {
		t.Error(d)
	}
	if _, err := os.Stat(c.RunDir()); err == nil {
		t.Errorf("%s is left", c.RunDir())
	}
	if _, err := os.Stat(filepath.Join(c.LogDir(), "kubelet.log")); err != nil {
		t.Errorf("the components' logs should stay for reading: %v", err)
	}
}

// ownLinks are the links the cluster could have made or left: those on no
// bridge or on the cluster's. Links on other bridges (Docker's veths, which
// other tests add and remove meanwhile) are not the cluster's business.
func ownLinks(t *testing.T, c Config) []string {
	t.Helper()
	out, err := run(context.Background(), "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		master := ""
		for i := range f[:len(f)-1] {
			if f[i] == "master" {
				master = f[i+1]
			}
		}
		if master == "" || master == c.Bridge {
			links = append(links, strings.TrimSuffix(f[1], ":"))
		}
	}
	return links
}

func diff(a, b hostSnapshot) []string {
	var out []string
	if !reflect.DeepEqual(a.Host.Sysctls, b.Host.Sysctls) {
		out = append(out, fmt.Sprintf("sysctls differ: before %v, after %v", a.Host.Sysctls, b.Host.Sysctls))
	}
	if !reflect.DeepEqual(a.Host.Chains, b.Host.Chains) {
		out = append(out, fmt.Sprintf("iptables chains differ: before %v, after %v", a.Host.Chains, b.Host.Chains))
	}
	if !reflect.DeepEqual(a.Host.NFTables, b.Host.NFTables) {
		out = append(out, fmt.Sprintf("nftables tables differ: before %v, after %v", a.Host.NFTables, b.Host.NFTables))
	}
	if !reflect.DeepEqual(a.Host.Dirs, b.Host.Dirs) {
		out = append(out, fmt.Sprintf("directories differ: before %v, after %v", a.Host.Dirs, b.Host.Dirs))
	}
	if !reflect.DeepEqual(a.Host.Links, b.Host.Links) {
		out = append(out, fmt.Sprintf("links differ: before %v, after %v", a.Host.Links, b.Host.Links))
	}
	if len(b.Mounts) > 0 || len(b.Processes) > 0 || len(b.Cgroups) > 0 || b.Bridge {
		out = append(out, fmt.Sprintf("left: mounts %v, processes %v, cgroups %v, bridge %v", b.Mounts, b.Processes, b.Cgroups, b.Bridge))
	}
	return out
}
