package scaleout

import (
	"context"

	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

func TestMain(m *testing.M) {
	// The test binary is the guest's agent on the vm platforms and a child
	// driver process (testenv.UseTestDrivers).
	testenv.Main(m)
}

// integrationSettings are small sizes for machine-independent tests.
func integrationSettings(t *testing.T, over map[string]string) Settings {
	t.Helper()
	v := map[string]string{"redis": "2", "drivers": "2", "clients": "8", "keyspace": "20000", "warmup": "300ms"}
	for k, val := range over {
		v[k] = val
	}
	vals, err := workload.Resolve(Workload{}.Params(), v, true)
	if err != nil {
		t.Fatal(err)
	}
	m := ThisMachine()
	s := Resolve(vals, m)
	if err := s.Validate(m); err != nil {
		t.Fatal(err)
	}
	return s
}

// cacheDir is a cache root of the test's own that the redis user can reach
// (t.TempDir and its parent are private to root).
func cacheDir(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs redis-server, nutcracker and haproxy")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (make test runs as root)")
	}
}

// TestKeySpread loads key spaces through real nutcracker (ketama over
// fnv1a_64) into real redis-server shards and checks that every shard holds
// between 0.5/N and 2/N of the keys, counted twice: by the loader right
// after loading, and by DBSIZE of fresh servers started from a trial's copy
// of the cached AOF directories (what every trial starts from).
func TestKeySpread(t *testing.T) {
	needRoot(t)
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	host := ps[platform.Native].(hostPlatform)
	for _, n := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			const keys = 40000
			s := integrationSettings(t, map[string]string{"redis": strconv.Itoa(n), "drivers": "1", "keyspace": strconv.Itoa(keys)})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cache, err := Loader{Host: host, Run: run, Root: cacheDir(t, root), Log: testenv.Log{T: t}}.Ensure(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			checkSpread(t, "loader", cache.Meta.ShardKeys, n, keys)
			if cache.Meta.BaseKeys != keys {
				t.Errorf("the baseline holds %d keys, want %d", cache.Meta.BaseKeys, keys)
			}

			data, remove, err := cache.Copy(run, fmt.Sprintf("spread%d", n))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := remove(); err != nil {
					t.Error(err)
				}
			}()
			d, err := deploy.Deploy(ctx, host, fmt.Sprintf("spread%d", n), s.Topology(data, ""), deploy.Options{Host: host})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Stop(context.WithoutCancel(ctx)); err != nil {
					t.Error(err)
				}
			}()
			var got []int64
			for _, r := range d.Role(RoleRedis) {
				k, err := dbsize(ctx, r.Srv.Addr(PortRedis))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, k)
			}
			checkSpread(t, "restarted from the cache", got, n, keys)
			if k, err := dbsize(ctx, d.Entries(RoleBase, PortRedis)[0]); err != nil || k != keys {
				t.Errorf("the baseline restarted from the cache holds %d keys (%v), want %d", k, err, keys)
			}
			// A key read through HAProxy and twemproxy is the one loaded.
			c, err := redisproto.Dial(ctx, d.Entries(RoleLB, PortLB)[0])
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v, err := c.Do(ctx, "GET", "key:000000000123")
			if err != nil || v.Str != "x" {
				t.Errorf("GET of a loaded key through the proxies: %q, %v; want \"x\"", v.Str, err)
			}
		})
	}
	if dirs, _ := state.TempDirs(run); len(dirs) != 0 {
		t.Errorf("temp dirs left behind: %v", dirs)
	}
}

func checkSpread(t *testing.T, what string, shards []int64, n int, keys int64) {
	t.Helper()
	if len(shards) != n {
		t.Fatalf("%s: %d shards counted, want %d", what, len(shards), n)
	}
	var sum int64
	lo, hi := float64(keys)*0.5/float64(n), float64(keys)*2/float64(n)
	for i, k := range shards {
		sum += k
		if float64(k) < lo || float64(k) > hi {
			t.Errorf("%s: shard %s holds %d of %d keys, outside 0.5/N..2/N = %.0f..%.0f", what, ShardName(i), k, keys, lo, hi)
		}
	}
	if sum != keys {
		t.Errorf("%s: the shards hold %d keys together, want %d", what, sum, keys)
	}
	t.Logf("%s: N=%d: %v", what, n, shards)
}

// TestTrial runs a whole trial (both experiments, with child driver
// processes) natively and on docker-bridge and checks its figures, the
// notes a reader needs and that nothing is left behind.
func TestTrial(t *testing.T) {
	needRoot(t)
	testenv.UseTestDrivers(t)
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native, platform.DockerBridge)
	for _, kind := range []string{platform.Native, platform.DockerBridge} {
		t.Run(kind, func(t *testing.T) {
			in := &Instance{s: integrationSettings(t, nil), cacheRoot: cacheDir(t, root)}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			const trial = 2 * time.Second
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t-" + kind, Platform: ps[kind], Host: ps[platform.Native].(workload.HostPlatform),
				Duration: trial, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
			for _, n := range append(res.Where, res.Notes...) {
				t.Log(n)
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
			if v[MetricBaseline] <= 0 || v[MetricScaleout] <= 0 {
				t.Fatalf("baseline %v, scale-out %v commands/s", v[MetricBaseline], v[MetricScaleout])
			}
			if got, want := v[MetricSpeedup], v[MetricScaleout]/v[MetricBaseline]; got != want {
				t.Errorf("speedup %v, want scale-out / baseline = %v", got, want)
			}
			if v[MetricRedisCPU] <= 0 || v[MetricProxyCPU] <= 0 || v[MetricLBCPU] <= 0 {
				t.Errorf("CPU per tier: redis %v%%, twemproxy %v%%, haproxy %v%%", v[MetricRedisCPU], v[MetricProxyCPU], v[MetricLBCPU])
			}
			if v[MetricBusyMax] < v[MetricBusyMin] || v[MetricBusyMax] <= 0 {
				t.Errorf("per-CPU busy %v..%v%%", v[MetricBusyMin], v[MetricBusyMax])
			}
			notes := strings.Join(res.Notes, "\n")
			// Every shard got requests from the twemproxy, each between
			// 0.5/N and 2/N of them (keys are drawn uniformly).
			m := regexp.MustCompile(`twemproxy requests per shard over the trial: (.*)`).FindStringSubmatch(notes)
			if m == nil {
				t.Fatalf("no twemproxy requests note in %q", notes)
			}
			var reqs []int64
			for _, part := range strings.Split(m[1], ", ") {
				f := strings.Fields(part)
				k, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
				reqs = append(reqs, k)
			}
			var sum int64
			for _, k := range reqs {
				sum += k
			}
			// The shards' total is the spread's base (checkSpread's own
			// total check holds by construction here); it must cover at
			// least the commands the scale-out driver completed in its
			// measured interval, which all went through the twemproxies.
			if steady := v[MetricScaleout] * trial.Seconds(); float64(sum) < steady {
				t.Errorf("the twemproxies forwarded %d requests, fewer than the %.0f commands the scale-out completed in its measured %v", sum, steady, trial)
			}
			checkSpread(t, "twemproxy requests", reqs, in.s.Redis, sum)
			for _, want := range []string{"baseline: ", "scale-out: ", "speedup ", "per-CPU busy", "data: the key space loaded once"} {
				if !strings.Contains(notes, want) {
					t.Errorf("the notes do not say %q", want)
				}
			}
			if dirs, _ := state.TempDirs(run); len(dirs) != 0 {
				t.Errorf("temp dirs left behind: %v", dirs)
			}
		})
	}
}

// TestTrialInGuests runs a whole trial on the vm platforms: one guest per
// Redis (the seed's 2-vCPU VMs), the first also holding the baseline's
// Redis, each Redis's AOF directory copied into its guest. It boots QEMU
// guests, so it runs only when asked: NEARNATIVE_SCALEOUT_VM_TEST=1 (vm),
// =2 (vm and vm-docker).
func TestTrialInGuests(t *testing.T) {
	kinds := testenv.GuestKinds(t, "NEARNATIVE_SCALEOUT_VM_TEST")
	testenv.UseTestDrivers(t)
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	cache := cacheDir(t, root)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			p := testenv.Guest(ctx, t, run, root, kind, kind)
			in := &Instance{s: integrationSettings(t, nil), cacheRoot: cache}
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "g-" + kind, Platform: p, Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 3 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
			for _, n := range append(res.Where, res.Notes...) {
				t.Log(n)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Values[MetricBaseline] <= 0 || res.Values[MetricScaleout] <= 0 || res.Values[MetricRedisCPU] <= 0 {
				t.Errorf("baseline %v, scale-out %v commands/s, Redis CPU %v%%", res.Values[MetricBaseline], res.Values[MetricScaleout], res.Values[MetricRedisCPU])
			}
			guests := map[string]bool{}
			for _, w := range res.Where {
				for _, m := range regexp.MustCompile(`guest (\d+)`).FindAllStringSubmatch(w, -1) {
					guests[m[1]] = true
				}
			}
			if len(guests) != in.s.Redis {
				t.Errorf("guests %v in the record, want one per Redis (%d)", guests, in.s.Redis)
			}
			if !strings.Contains(strings.Join(res.Notes, "\n"), "copied into its guest's disk") {
				t.Error("the data note does not say the data was copied into the guests")
			}
		})
	}
}
