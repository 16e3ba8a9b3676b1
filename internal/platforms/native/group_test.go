package native

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// idleBusy is an instance of two servers: an idle one and, after it, one
// that burns a CPU; neither listens.
func idleBusy(layout string) topology.Topology {
	spec := func(script string) func(topology.ServerID, topology.Peers) (platform.Spec, error) {
		return func(topology.ServerID, topology.Peers) (platform.Spec, error) {
			return platform.Spec{Command: func(platform.Listen) []string { return []string{"/bin/sh", "-c", script} }}, nil
		}
	}
	return topology.Topology{Layout: layout, Roles: []topology.Role{
		{Name: "idle", Spec: spec("exec sleep 600")},
		{Name: "busy", After: []string{"idle"}, Spec: spec("while :; do :; done")},
	}}
}

func cpuCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) == 3 && (parts[1] == "cpu" || strings.Contains(parts[1], "cpu,") || (cgroup.IsV2() && parts[0] == "0")) {
			return parts[2]
		}
	}
	t.Fatalf("pid %d has no cpu cgroup:\n%s", pid, b)
	return ""
}

// The servers of one group (what Docker runs in one container) share one
// cgroup natively, each measured by its own process tree, and the cgroup
// goes when the deployment stops; under container-per-server each has its
// own.
func TestGroupSharesACgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	p, run, _ := newPlatform(t, platform.Options{})
	for _, c := range []struct {
		layout string
		shared bool
	}{{topology.ContainerPerInstance, true}, {topology.ContainerPerServer, false}} {
		t.Run(c.layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			trial := "g-" + c.layout
			d, err := deploy.Deploy(ctx, p, trial, idleBusy(c.layout), deploy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					d.Stop(ctx)
				}
			}()
			srv := map[string]*server{}
			for _, r := range d.Servers() {
				srv[r.ID.Role] = r.Srv.(*server)
			}
			idle, busy := cpuCgroup(t, srv["idle"].cmd.Process.Pid), cpuCgroup(t, srv["busy"].cmd.Process.Pid)
			groupDir := "/" + cgroup.Parent + "/" + string(run) + "/" + trial + "-i0"
			if c.shared && (idle != groupDir || busy != groupDir) {
				t.Fatalf("cpu cgroups %s and %s, want both %s", idle, busy, groupDir)
			}
			if !c.shared && (idle == busy || !strings.HasSuffix(idle, "-idle-0")) {
				t.Fatalf("cpu cgroups %s and %s, want one per server", idle, busy)
			}
			// Wait until the busy server has burnt 100ms (slow on a busy
			// machine), then read the idle one.
			var cb time.Duration
			for end := time.Now().Add(20 * time.Second); cb < 100*time.Millisecond && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
				if cb, err = srv["busy"].CPUTime(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ci, err := srv["idle"].CPUTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Each server's own time, not the group's.
			if ci > 50*time.Millisecond || cb < 100*time.Millisecond {
				t.Errorf("CPU time idle %v, busy %v: want the idle server near 0 and the busy one above 100ms", ci, cb)
			}
			if _, err := srv["busy"].Migrations(ctx); err != nil {
				t.Errorf("Migrations: %v", err)
			}
			if c.shared && !strings.Contains(srv["idle"].CPUSource(), "process tree") {
				t.Errorf("CPUSource = %q, want the process tree", srv["idle"].CPUSource())
			}
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			stopped = true
			if _, err := os.Stat(filepath.Join(cgroup.Root, "cpu", groupDir)); c.shared && !cgroup.IsV2() && !os.IsNotExist(err) {
				t.Errorf("the group's cgroup is left after Stop: %v", err)
			}
		})
	}
	p.Close()
	if left := cgroup.Leftovers(run); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}
