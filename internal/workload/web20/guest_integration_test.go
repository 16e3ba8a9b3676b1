package web20

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio/oliotest"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// TestTrialInGuests runs a short web20 trial in a QEMU guest: on vm every
// server is a process of the guest, on vm-docker the seed's two containers
// in the guest's engine; the data directory and the site are copied into
// the guest. The split cases (vm_split, the seed's two-VM variant) put the
// database in a second guest of 1 vCPU, which the web tier reaches over the
// run's bridge. Under emulation (TCG) it takes minutes, so it runs only
// when asked: NEARNATIVE_WEB20_VM_TEST=1 (vm, whole and split), =2 (vm and
// vm-docker, each whole and split).
func TestTrialInGuests(t *testing.T) {
	kinds := testenv.GuestKinds(t, "NEARNATIVE_WEB20_VM_TEST")
	e := oliotest.Setup(t)
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	for _, kind := range kinds {
		for _, split := range []bool{false, true} {
			name := kind
			if split {
				name += "-split"
			}
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				defer cancel()
				p := testenv.Guest(ctx, t, run, root, kind, name)
				// Few users and short cycles: an emulated guest is slow, and the
				// test checks that every operation works there, not its QoS.
				params := map[string]string{"users": "20", "instances": "1", "ramp_up": "5s", "ramp_down": "1s",
					"cycle": "500ms", "php_children": "4", "nginx_workers": "2", "buffer_pool": "128m", "request_timeout": "60s"}
				if split {
					params[ParamVMSplit], params[ParamDBVCPUs] = name, "1"
				}
				in, err := newInstance(t, params, true)
				if err != nil {
					t.Fatal(err)
				}
				in.cacheDir = filepath.Dir(e.Template.Dir)
				res, err := in.Run(ctx, workload.Trial{Run: run, Name: "g-" + name, Round: 1, Platform: p, Host: ps[platform.Native].(workload.HostPlatform),
					Duration: 30 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
				for _, n := range append(res.Where, res.Notes...) {
					t.Log(n)
				}
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Values[MetricOpsPerSec] <= 0 || res.Values[MetricDBCPU] <= 0 || res.Values[MetricWebCPU] <= 0 {
					t.Errorf("%g operations/s, database CPU %g%%, web CPU %g%%", res.Values[MetricOpsPerSec], res.Values[MetricDBCPU], res.Values[MetricWebCPU])
				}
				checkGuests(t, res, split)
			})
		}
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("the trials left %v", left)
	}
}

// checkGuests checks from the trial's places that the database ran in
// guest 1 (split) or beside the web tier in guest 0, and that no operation
// failed.
func checkGuests(t *testing.T, res workload.Result, split bool) {
	t.Helper()
	where := strings.Join(res.Where, "\n")
	want := map[string]string{"i0-db-0": "guest 0", "i0-fpm-0": "guest 0", "i0-web-0": "guest 0"}
	if split {
		want["i0-db-0"] = "guest 1"
	}
	for server, guest := range want {
		if !placedIn(res.Where, server, guest) {
			t.Errorf("%s is not in %s; places:\n%s", server, guest, where)
		}
	}
	if split && !strings.Contains(where, "1 vCPUs") {
		t.Errorf("no guest of 1 vCPU (db_vcpus: 1); places:\n%s", where)
	}
	if v, ok := res.Values[MetricFailed]; !ok || v != 0 {
		t.Errorf("%s = %g (reported: %v), want 0", MetricFailed, v, ok)
	}
	for _, op := range Ops {
		if v := res.Values[OpMetric(op, StatFailed)]; v != 0 {
			t.Errorf("%s = %g", OpMetric(op, StatFailed), v)
		}
	}
}

// placedIn reports whether the place line of guest lists server: "guest
// guest 1: i0-db-0 at 10.x.y.z; QEMU guest, ...".
func placedIn(where []string, server, guest string) bool {
	for _, w := range where {
		rest, ok := strings.CutPrefix(w, "guest "+guest+": ")
		if !ok {
			continue
		}
		servers, _, _ := strings.Cut(rest, " at ")
		for _, s := range strings.Split(servers, ", ") {
			if s == server {
				return true
			}
		}
	}
	return false
}
