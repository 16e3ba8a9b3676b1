package tcprr

import (
	"context"
	"errors"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// testPlatforms returns native, docker-nat and docker-host for one run whose
// leftovers are checked when the test ends (testenv.Platforms: the Docker
// ones use the current workload image and fail the test when it is missing).
func testPlatforms(t *testing.T) (runid.ID, []platform.Platform) {
	t.Helper()
	run := runid.New()
	kinds := []string{platform.Native, platform.DockerNAT, platform.DockerHost}
	byKind := testenv.Platforms(t, run, t.TempDir(), kinds...)
	ps := make([]platform.Platform, 0, len(kinds))
	for _, k := range kinds {
		ps = append(ps, byKind[k])
	}
	return run, ps
}

// TestTrialOnPlatforms runs one short trial per platform and tool and
// checks that the values are plausible.
func TestTrialOnPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nn-rr and sockperf natively and in containers")
	}
	run, ps := testPlatforms(t)
	for _, tool := range []map[string]string{nil, {"tool": "sockperf", "msgsize": "14"}} {
		in := newInstance(t, tool)
		for _, p := range ps {
			t.Run(in.tool+"/"+p.Name(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				raw := t.TempDir()
				res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t1", Platform: p, Duration: 2 * time.Second, RawDir: raw, Log: testenv.Log{T: t}})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				for _, m := range in.Metrics() {
					if _, ok := res.Values[m.Name]; !ok {
						t.Errorf("metric %s missing", m.Name)
					}
				}
				for _, m := range []string{MetricMean, MetricP50, MetricP99} {
					if v := res.Values[m]; v < 1 || v > 100000 {
						t.Errorf("%s = %v us, want 1..100000", m, v)
					}
				}
				if tps := res.Values[MetricTPS]; tps < 10 || tps > 1e6 {
					t.Errorf("%s = %v, want 10..1e6", MetricTPS, tps)
				}
				if c := res.Values[MetricCPUPerTx]; !(c > 0) || c > 100000 {
					t.Errorf("%s = %v us, want 0..100000", MetricCPUPerTx, c)
				}
				if s := res.Values[MetricServerCPU]; !(s > 0 && s < 250) {
					t.Errorf("%s = %v%%, want 0..250", MetricServerCPU, s)
				}
				if _, err := os.ReadFile(raw + "/t1-" + in.tool + ".txt"); err != nil {
					t.Errorf("raw output: %v", err)
				}
				notes := strings.Join(res.Notes, "\n")
				want := []string{"closed loop", "1-byte requests and responses"}
				if in.tool == ToolSockperf {
					want = []string{"closed loop", "--full-rtt", "sockperf --version: sockperf, version 3."}
				}
				for _, w := range want {
					if !strings.Contains(notes, w) {
						t.Errorf("notes lack %q:\n%s", w, notes)
					}
				}
				t.Logf("%s %s: mean %.1f us, p50 %.1f us, p99 %.1f us, %.0f tx/s, %.1f us CPU/tx, server %.0f%%, client %.0f%%; %s",
					in.tool, p.Name(), res.Values[MetricMean], res.Values[MetricP50], res.Values[MetricP99], res.Values[MetricTPS],
					res.Values[MetricCPUPerTx], res.Values[MetricServerCPU], res.Values[MetricClientCPU], res.Where)
			})
		}
	}
}

// TestCrossCheck compares nn-rr with sockperf natively at sockperf's
// smallest message, 14 bytes: interleaved pairs of short runs, all on one
// core, judged on the median over the pairs of the ratio of their median
// round trips, which must be within the 5% of 1. Pairing cancels
// the machine's drift, medians the single stalls of a shared machine (the
// means are logged too). Measured so: 0.988 quiet, 0.991 beside two
// spinning loops (BENCH.md).
//
// The pairs are sequential: from 7 pairs on, the test stops as soon as the
// order-statistic 95% interval of the median ratio lies inside the 5% band
// (pass) or wholly outside it (fail); a machine busy enough that 15 pairs
// leave the interval across an edge skips the test as inconclusive, saying
// so. Under make test beside four other builds, 7 pairs spread 0.88-1.30
// and their median (1.073) failed although the interval held 1; 15 pairs
// gave [0.915, 1.087].
func TestCrossCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nn-rr and sockperf natively")
	}
	// Both tools' clients and servers run on one core: a round trip
	// between processes on one core and one that wakes an idle second core
	// differ by 2.5x here (17 against 42 us), and which one the scheduler
	// picks changed between pairs under go test's load (nn-rr 42 us,
	// sockperf 17 us in the same pair).
	pinTo(t, 0)
	run := runid.New()
	nat := testenv.Platforms(t, run, t.TempDir(), platform.Native)[platform.Native]
	rr := newInstance(t, map[string]string{"msgsize": "14"})
	sp := newInstance(t, map[string]string{"tool": "sockperf", "msgsize": "14"})
	const minPairs, maxPairs, band = 7, 15, 0.05
	var ratios []float64
	for i := 0; i < maxPairs; i++ {
		order := []*Instance{rr, sp}
		if i%2 == 1 {
			order = []*Instance{sp, rr}
		}
		vals := map[string]map[string]float64{}
		for _, in := range order {
			res, err := in.Run(context.Background(), workload.Trial{Run: run, Name: "x" + strconv.Itoa(i), Platform: nat, Duration: 1500 * time.Millisecond, RawDir: t.TempDir()})
			if err != nil {
				t.Fatalf("%s: %v", in.tool, err)
			}
			vals[in.tool] = res.Values
		}
		r := vals[ToolRR][MetricP50] / vals[ToolSockperf][MetricP50]
		ratios = append(ratios, r)
		t.Logf("pair %d: nn-rr p50 %.2f us (mean %.2f), sockperf p50 %.2f us (mean %.2f): ratio of p50s %.3f", i,
			vals[ToolRR][MetricP50], vals[ToolRR][MetricMean], vals[ToolSockperf][MetricP50], vals[ToolSockperf][MetricMean], r)
		if len(ratios) < minPairs {
			continue
		}
		lo, hi := medianInterval(ratios)
		t.Logf("after %d pairs: 95%% interval of the median ratio [%.3f, %.3f]", len(ratios), lo, hi)
		if lo >= 1-band && hi <= 1+band {
			return
		}
		if hi < 1-band || lo > 1+band {
			t.Fatalf("nn-rr's median round trip is outside 5%% of sockperf's at 14 bytes: interval of the ratio [%.3f, %.3f] over %d pairs", lo, hi, len(ratios))
		}
	}
	lo, hi := medianInterval(ratios)
	t.Skipf("inconclusive: after %d pairs the 95%% interval of the median ratio [%.3f, %.3f] straddles an edge of the 5%% band; the machine is too busy to judge the cross-check (run it on a quiet machine)", len(ratios), lo, hi)
}

// medianInterval is the distribution-free interval of the median of xs at
// 95% or more: the k-th smallest and k-th largest values, k the largest
// with P(Binomial(n, 1/2) < k) <= 0.025.
func medianInterval(xs []float64) (lo, hi float64) {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	k, cum, p := 0, 0.0, math.Pow(0.5, float64(n)) // p = P(X = 0)
	for j := 0; j < n; j++ {
		if cum+p > 0.025 {
			break
		}
		cum += p
		k = j + 1
		p *= float64(n-j) / float64(j+1) // P(X = j+1)
	}
	if k < 1 {
		k = 1
	}
	return s[k-1], s[n-k]
}

// pinTo sets the CPU affinity of every thread of the test process to cpu
// (processes it starts inherit it) and restores it when t ends.
func pinTo(t *testing.T, cpu int) {
	t.Helper()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	one.Set(cpu)
	set := func(s *unix.CPUSet) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			// A thread may have ended since the listing.
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				t.Fatalf("affinity of thread %d: %v", tid, err)
			}
		}
	}
	set(&one)
	t.Cleanup(func() { set(&old) })
}

// TestClientWithoutServer checks that sockperf's exit status 0 after a
// refused connection still fails the trial, pointing to the raw output.
func TestClientWithoutServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sockperf")
	}
	ports, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	raw := t.TempDir()
	in := newInstance(t, map[string]string{"tool": "sockperf", "msgsize": "14"})
	argv := in.clientArgv("127.0.0.1:"+strconv.Itoa(ports[0]), 2*time.Second)
	var lines int
	run, err := workload.RunClientOn(context.Background(), nil, runid.New(), raw, "t1-sockperf.txt", argv, func(string) { lines++ })
	if err != nil {
		t.Fatalf("runClient: %v (sockperf exits 0 after a refused connection)", err)
	}
	if lines == 0 || run.RawPath != raw+"/t1-sockperf.txt" {
		t.Errorf("%d lines seen, raw %s", lines, run.RawPath)
	}
	if _, err := ParseSummary(run.Output); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("ParseSummary = %v, want sockperf's connection refused", err)
	}

	// A cancelled context kills the client and says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := workload.RunClientOn(ctx, nil, runid.New(), raw, "t2-sockperf.txt", argv, func(string) {}); err == nil {
		t.Error("runClient with a cancelled context: no error")
	}
	// A missing tool is a clear error.
	if _, err := workload.RunClientOn(context.Background(), nil, runid.New(), raw, "t3.txt", []string{"no-such-sockperf"}, func(string) {}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing tool: %v", err)
	}
}
