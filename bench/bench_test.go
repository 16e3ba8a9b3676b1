// Package bench measures how far nearnative's statistics can be trusted on
// this machine, with real runs of the real binary (slow: `make bench`).
//
//   - BenchmarkAA runs the A/A study (native against an identical native-b)
//     for many rounds and cuts the counted rounds into independent blocks of
//     BlockRounds, each analysed as its own study: the share of blocks whose
//     verdict is "~" should be at least 95%. NEARNATIVE_BENCH_AA_BLOCKS (20)
//     sets the number of blocks, NEARNATIVE_BENCH_TRIAL (2s) the trial.
//   - BenchmarkInjectedCost runs the cost study (the server limited to 0.8
//     CPU) with --until-ci and checks that the ratio is significant and its
//     interval contains the expected effect min(1, 0.8/u), u being the
//     server's measured CPU share on native.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// BlockRounds is the size of one A/A "study" cut from the long run: the
// built-in aa study's own number of counted rounds (8), unless
// NEARNATIVE_BENCH_AA_BLOCK_ROUNDS says otherwise.
var BlockRounds = envInt("NEARNATIVE_BENCH_AA_BLOCK_ROUNDS", 8)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nearnative-bench-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "nearnative")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/nearnative").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building nearnative: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// runStudy runs nearnative and returns the stored run ID and the elapsed time.
func runStudy(b *testing.B, home string, args ...string) (store.Store, string, time.Duration) {
	b.Helper()
	db := filepath.Join(home, "results.db")
	jsonPath := filepath.Join(home, "out.json")
	c := exec.Command(bin, append(append([]string{"run"}, args...), "--json", jsonPath)...)
	c.Env = append(os.Environ(), "NEARNATIVE_HOME="+home, "NEARNATIVE_DB="+db)
	c.Stderr = os.Stderr
	start := time.Now()
	out, err := c.Output()
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("nearnative run %v: %v\n%s", args, err, out)
	}
	fmt.Println(string(out))
	var doc struct {
		RunID string `json:"run_id"`
	}
	raw, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, doc.RunID, elapsed
}

func BenchmarkAA(b *testing.B) {
	blocks := envInt("NEARNATIVE_BENCH_AA_BLOCKS", 20)
	trial := os.Getenv("NEARNATIVE_BENCH_TRIAL")
	if trial == "" {
		trial = "2s"
	}
	for i := 0; i < b.N; i++ {
		home := b.TempDir()
		st, id, elapsed := runStudy(b, home, "aa", "--rounds", strconv.Itoa(blocks*BlockRounds), "--trial", trial)
		trials, err := st.Trials(context.Background(), runid.ID(id))
		if err != nil {
			b.Fatal(err)
		}
		var rounds []int
		seen := map[int]bool{}
		for _, t := range trials {
			if !t.Warmup && !seen[t.Round] {
				seen[t.Round] = true
				rounds = append(rounds, t.Round)
			}
		}
		sort.Ints(rounds)
		tilde := map[string]int{}
		total := 0
		var metrics []string
		for start := 0; start+BlockRounds <= len(rounds); start += BlockRounds {
			in := map[int]bool{}
			for _, r := range rounds[start : start+BlockRounds] {
				in[r] = true
			}
			var block []store.Trial
			for _, t := range trials {
				if in[t.Round] {
					block = append(block, t)
				}
			}
			res := analysis.Analyse(block, analysis.Options{Baseline: "native", Stats: stats.Options{Seed: uint64(start + 1)}})
			total++
			for _, tab := range res.Tables {
				for _, c := range tab.Cells {
					if c.IsBaseline {
						continue
					}
					if total == 1 {
						metrics = append(metrics, tab.Metric)
					}
					if c.Verdict == "~" {
						tilde[tab.Metric]++
					}
				}
			}
		}
		fmt.Printf("A/A: %d blocks of %d counted rounds (trial %s), %v of machine time for %d rounds\n",
			total, BlockRounds, trial, elapsed.Round(time.Second), len(rounds))
		for _, m := range metrics {
			share := float64(tilde[m]) / float64(total)
			fmt.Printf("  %-16s \"~\" in %d/%d blocks (%.0f%%)\n", m, tilde[m], total, share*100)
			b.ReportMetric(share*100, "pct_tilde_"+m)
		}
		b.ReportMetric(elapsed.Minutes(), "minutes")
		if total == 0 {
			b.Fatal("A/A: no complete block of rounds")
		}
		// Even an engine whose false-positive rate is exactly 5% shows two or
		// more significant blocks out of 20 about a quarter of the time, so
		// the gate asks whether the count observed is plausible at a rate of
		// at most 5%: P(X >= observed | Bin(total, 0.05)) must be >= 0.05.
		miss := total - tilde["ops_per_sec"]
		p := binomialTail(total, miss, 0.05)
		fmt.Printf("  ops_per_sec: %d of %d blocks significant; P(>= %d | rate 5%%) = %.3f\n", miss, total, miss, p)
		if p < 0.05 {
			b.Errorf("A/A: %d of %d blocks significant: a false-positive rate of 5%% would give that with p = %.3f", miss, total, p)
		}
	}
}

func BenchmarkInjectedCost(b *testing.B) {
	target := os.Getenv("NEARNATIVE_BENCH_UNTIL_CI")
	if target == "" {
		target = "2"
	}
	for i := 0; i < b.N; i++ {
		home := b.TempDir()
		st, id, elapsed := runStudy(b, home, "cost", "--until-ci", target, "--trial", "3s")
		trials, err := st.Trials(context.Background(), runid.ID(id))
		if err != nil {
			b.Fatal(err)
		}
		res := analysis.Analyse(trials, analysis.Options{Baseline: "native", Stats: stats.Options{Seed: 1}})
		var ratio stats.Ratio
		var u float64
		for _, tab := range res.Tables {
			for _, c := range tab.Cells {
				switch {
				case tab.Metric == "ops_per_sec" && !c.IsBaseline:
					ratio = c.Ratio
				case tab.Metric == "server_cpu_pct" && c.IsBaseline:
					u = c.Summary.Mean / 100
				}
			}
		}
		expected := math.Min(1, 0.8/u)
		r, _ := st.Run(context.Background(), id)
		fmt.Printf("injected cost: %d counted rounds, %v, stopped: %s\n", res.Rounds, elapsed.Round(time.Second), r.StopReason)
		fmt.Printf("  server CPU share on native u = %.2f, expected throughput ratio min(1, 0.8/u) = %.3f\n", u, expected)
		fmt.Printf("  measured ratio %.3f, 95%% CI [%.3f, %.3f], significant %v, contains expected %v\n",
			ratio.Ratio, ratio.Lo, ratio.Hi, ratio.Significant, ratio.Lo <= expected && expected <= ratio.Hi)
		b.ReportMetric(ratio.Ratio, "ratio")
		b.ReportMetric(expected, "expected")
		b.ReportMetric(float64(res.Rounds), "rounds")
		b.ReportMetric(elapsed.Minutes(), "minutes")
		if !ratio.Significant {
			b.Errorf("a 0.8-CPU quota was not found significant (CI [%.3f, %.3f])", ratio.Lo, ratio.Hi)
		}
		if !(ratio.Lo <= expected && expected <= ratio.Hi) {
			b.Errorf("CI [%.3f, %.3f] does not contain the expected effect %.3f", ratio.Lo, ratio.Hi, expected)
		}
	}
}

// binomialTail returns P(X >= k) for X ~ Binomial(n, p).
func binomialTail(n, k int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	sum := 0.0
	for i := k; i <= n; i++ {
		sum += math.Exp(lchoose(n, i) + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
