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
	return hostSnapshot{Host: h, Mounts: mountPoints(c.RunDir(), "/var/lib/kubelet"), Processes: c.markedPids(),
		Cgroups: cgroupDirs("kubepods"), Bridge: bridgeErr == nil}
}

// TestUpDownLeavesNothing brings the real cluster up from the cached
// binaries, checks the node, and takes it down again: links, iptables
// chains, nftables tables, sysctls, directories, mounts, processes and
// cgroups must be as before. It runs only when the binaries are built and no
// cluster is up (it must not take down one that other tests use).
func TestUpDownLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the whole cluster")
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
	during := snapshot(t, c)
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
