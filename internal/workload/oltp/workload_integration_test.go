package oltp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/dvdstore/dvdstoretest"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// integrationInstance is a small configuration: 2 instances of 2 threads,
// a second of ramp-up.
func integrationInstance(t *testing.T, over map[string]string) *Instance {
	t.Helper()
	v := map[string]string{"instances": "2", "threads": "2", "web_workers": "4", "ramp_up": "1s", "drivers": "0", "db_memory": "256m"}
	for k, val := range over {
		v[k] = val
	}
	inst, err := Workload{}.New(resolve(t, true, v))
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	c := dvdstoretest.Cache(t)
	in.cache = &c
	return in
}

// TestTrialOnPlatforms runs short DVD Store trials through the real path
// (template, copies, topology, driver, statistics) natively and in Docker
// in both layouts, in http and direct mode and with child driver processes,
// and checks the figures and that nothing is left behind.
func TestTrialOnPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs PostgreSQL and Apache natively and in containers")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (make test runs as root)")
	}
	run := runid.New()
	root := t.TempDir()
	kinds := []string{platform.Native, platform.DockerBridge, platform.DockerNAT, platform.DockerHost}
	ps := testenv.Platforms(t, run, root, kinds...)
	cases := []struct {
		name, kind string
		over       map[string]string
		where      string // a line of the trial's places must contain it
	}{
		{"native http", platform.Native, nil, "the servers of a group (what a Docker platform runs in one container) share one cgroup"},
		{"native http, a cgroup per server (the grouping control)", platform.Native, map[string]string{"per_server_platforms": "native"}, "host host: i0-db-0, i1-db-0, i0-web-0, i1-web-0; processes on 127.0.0.1 with ports of their own, each in its own cgroup"},
		{"native direct, 2 driver processes", platform.Native, map[string]string{"mode": "direct", "drivers": "per-instance"}, "host host: i0-db-0, i1-db-0"},
		{"docker-bridge container-per-instance", platform.DockerBridge, nil, "i0-db-0, i0-web-0"},
		{"docker-nat container-per-server", platform.DockerNAT, map[string]string{"layout": "container-per-server"}, "i1-web-0 at 172."},
		{"docker-host container-per-instance", platform.DockerHost, nil, "i1-db-0, i1-web-0 at 127.0.0.1"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.over["drivers"] != "" {
				testenv.UseTestDrivers(t)
			}
			in := integrationInstance(t, c.over)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: fmt.Sprintf("t%d", i), Platform: ps[c.kind], Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 4 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
			for _, n := range res.Notes {
				t.Log("note: ", n)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, m := range in.Metrics() {
				if _, ok := res.Values[m.Name]; !ok {
					t.Errorf("metric %s missing", m.Name)
				}
			}
			v := res.Values
			if v[MetricOPM] <= 0 || v[MetricOrderMs] <= 0 || v[OpPurchase+MetricP95Suffix] < v[OpPurchase+MetricMeanSuffix]/10 {
				t.Errorf("opm %v, order %v ms, purchase mean %v p95 %v", v[MetricOPM], v[MetricOrderMs], v[OpPurchase+MetricMeanSuffix], v[OpPurchase+MetricP95Suffix])
			}
			if v[MetricRollbackPct] > MaxRollbackPct || v[MetricCommits] <= 0 || v[MetricHitRatio] < 50 || v[MetricHitRatio] > 100 {
				t.Errorf("rollback %v%%, %v commits/s, hit ratio %v%%", v[MetricRollbackPct], v[MetricCommits], v[MetricHitRatio])
			}
			// Every tier's CPU is counted, in a shared container too (its
			// server's whole process tree).
			if v[MetricDBCPU] <= 1 || (in.mode == ModeHTTP) != (v[MetricWebCPU] > 1) {
				t.Errorf("database CPU %v%%, web CPU %v%% (mode %s)", v[MetricDBCPU], v[MetricWebCPU], in.mode)
			}
			if v[CPU.Metric] <= 0 || v["run_"+CPU.Metric] <= 0 || v["run_"+CPU.Metric] > v[CPU.Metric]*1.5 {
				t.Errorf("CPU per order: machine %v us, run %v us", v[CPU.Metric], v["run_"+CPU.Metric])
			}
			where := strings.Join(res.Where, "\n")
			if !strings.Contains(where, c.where) {
				t.Errorf("places do not mention %q:\n%s", c.where, where)
			}
			if dirs, _ := state.TempDirs(run); len(dirs) != 0 {
				t.Errorf("temp dirs left behind: %v", dirs)
			}
		})
	}
}

// TestRollbackMarksTrial runs a trial on a shop of 5 products (scale
// 0.0005) whose data seed 194 loads one of them with no stock: every order
// with a line of it rolls back, the rollback rate is far above DVD Store's,
// and the trial is marked failed with its figures, not averaged. Two users
// (not four) and 10 s (not 3): users buying from the same five rows
// deadlock, and each deadlock costs PostgreSQL's 1 s deadlock_timeout; a 3 s
// trial once completed 2 orders, no purchase of the empty product and no
// login, and was marked for that instead.
func TestRollbackMarksTrial(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs PostgreSQL natively")
	}
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	in := integrationInstance(t, map[string]string{"mode": "direct", "scale": "0.0005", "data_seed": "194", "instances": "1", "threads": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := in.Run(ctx, workload.Trial{Run: run, Name: "tiny", Platform: ps[platform.Native], Host: ps[platform.Native].(workload.HostPlatform),
		Duration: 10 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
	t.Logf("rollback %.1f%%: %v", res.Values[MetricRollbackPct], err)
	if err == nil || !strings.Contains(err.Error(), "of the purchases rolled back") || !strings.Contains(err.Error(), "marked failed, not averaged") {
		t.Fatalf("a trial with %.1f%% rollbacks: err %v, want it marked failed", res.Values[MetricRollbackPct], err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "marked failed, not averaged") {
		t.Errorf("the notes do not say the trial was marked: %q", res.Notes)
	}
}

// TestTrialInGuests runs a DVD Store trial in QEMU guests: on vm each
// server is a process of its guest, on vm-docker each instance a container
// of the guest's engine; the data directory is copied into the guest. It
// takes minutes under emulation (TCG), so it runs only when asked:
// NEARNATIVE_OLTP_VM_TEST=1 (vm), =2 (vm and vm-docker).
func TestTrialInGuests(t *testing.T) {
	kinds := testenv.GuestKinds(t, "NEARNATIVE_OLTP_VM_TEST")
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			p := testenv.Guest(ctx, t, run, root, kind, kind)
			in := integrationInstance(t, map[string]string{"vms": "2", "ramp_up": "5s"})
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "g-" + kind, Platform: p, Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 10 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
			for _, n := range append(res.Where, res.Notes...) {
				t.Log(n)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Values[MetricOPM] <= 0 || res.Values[MetricDBCPU] <= 0 {
				t.Errorf("opm %v, database CPU %v%%", res.Values[MetricOPM], res.Values[MetricDBCPU])
			}
			guests := map[string]bool{}
			for _, w := range res.Where {
				for _, m := range regexp.MustCompile(`guest (\d+)`).FindAllStringSubmatch(w, -1) {
					guests[m[1]] = true
				}
			}
			if len(guests) != 2 {
				t.Errorf("guests %v in the record, want 2 (vms: 2)", guests)
			}
		})
	}
}
