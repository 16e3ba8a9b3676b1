// Package bench measures how far nearnative's statistics can be trusted on
// this machine, with real runs of the real binary (slow: `make bench`).
// The interval methods themselves are chosen by the pure simulation in
// bench/intervals.
//
//   - BenchmarkAA runs the A/A study (native against an identical native-b)
//     for many rounds and cuts the counted rounds into independent blocks of
//     BlockRounds, each analysed as its own study. For every metric of the
//     study (results and diagnostics alike) it reports the share of blocks
//     whose interval excludes 1 (the false-positive rate) with its 95%
//     Clopper-Pearson interval, and the rate pooled over the result
//     metrics. NEARNATIVE_BENCH_AA_BLOCKS (20) sets the number of blocks,
//     NEARNATIVE_BENCH_TRIAL (2s) the trial.
//   - BenchmarkPower runs redis SET on native and docker-nat for
//     NEARNATIVE_BENCH_POWER_ROUNDS (30) counted rounds and estimates, by
//     resampling those rounds, how many rounds (and minutes) this machine
//     needs to call docker-nat's effect significant with 80% probability,
//     on throughput and on CPU per operation (the whole machine's and the
//     run's own), and how many a 7% effect needs at the noise measured.
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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

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
		rounds := countedRounds(trials)
		type tally struct {
			blocks, significant int
			diagnostic          bool
		}
		byMetric := map[string]*tally{}
		var metrics []string
		total := 0
		for start := 0; start+BlockRounds <= len(rounds); start += BlockRounds {
			block := inRounds(trials, rounds[start:start+BlockRounds])
			res := analysis.Analyse(block, analysis.Options{Baseline: "native"})
			total++
			// Every metric, diagnostics too: the interval each would get.
			for _, tab := range append(append([]analysis.Table{}, res.Tables...), res.Diagnostics...) {
				so := stats.Options{}
				if tab.Quantile > 0 {
					so.Statistic = stats.TailStatistic
				}
				r := stats.PairedRatio(analysis.Pairs(block, tab.Workload, tab.Metric, "native", "native-b"), so)
				t := byMetric[tab.Metric]
				if t == nil {
					t = &tally{diagnostic: tab.Diagnostic}
					byMetric[tab.Metric] = t
					metrics = append(metrics, tab.Metric)
				}
				t.blocks++
				if r.Significant {
					t.significant++
				}
			}
		}
		if total == 0 {
			b.Fatal("A/A: no complete block of rounds")
		}
		fmt.Printf("A/A: %d blocks of %d counted rounds (trial %s), %v of machine time for %d rounds\n",
			total, BlockRounds, trial, elapsed.Round(time.Second), len(rounds))
		fmt.Printf("| metric | kind | blocks significant | false-positive rate | 95%% CI (Clopper-Pearson) |\n|---|---|---|---|---|\n")
		pooledN, pooledK := 0, 0
		for _, m := range metrics {
			t := byMetric[m]
			lo, hi := clopperPearson(t.significant, t.blocks, 0.95)
			kind := "result"
			if t.diagnostic {
				kind = "diagnostic"
			} else {
				pooledN += t.blocks
				pooledK += t.significant
			}
			fmt.Printf("| %s | %s | %d / %d | %.1f%% | [%.1f%%, %.1f%%] |\n", m, kind, t.significant, t.blocks,
				100*float64(t.significant)/float64(t.blocks), 100*lo, 100*hi)
			b.ReportMetric(100*float64(t.significant)/float64(t.blocks), "pct_fp_"+m)
		}
		lo, hi := clopperPearson(pooledK, pooledN, 0.95)
		fmt.Printf("| all result metrics | pooled | %d / %d | %.1f%% | [%.1f%%, %.1f%%] |\n", pooledK, pooledN,
			100*float64(pooledK)/float64(max(1, pooledN)), 100*lo, 100*hi)
		fmt.Println("(metrics of one block share its rounds, so the pooled interval is too narrow; each metric's own is exact)")
		b.ReportMetric(elapsed.Minutes(), "minutes")
		// Even an engine whose false-positive rate is exactly 5% shows two or
		// more significant blocks out of 20 about a quarter of the time, so
		// the gate asks whether the count observed is plausible at a rate of
		// at most 5%: P(X >= observed | Bin(blocks, 0.05)) must be >= 0.05,
		// for every result metric.
		for _, m := range metrics {
			t := byMetric[m]
			if t.diagnostic {
				continue
			}
			if p := binomialTail(t.blocks, t.significant, 0.05); p < 0.05 {
				b.Errorf("A/A %s: %d of %d blocks significant: a false-positive rate of 5%% would give that with p = %.3f", m, t.significant, t.blocks, p)
			}
		}
	}
}

// powerStudy is redis SET on native and docker-nat, the seed's NAT path.
const powerStudy = `name: power
description: "power: how many rounds to call docker-nat's SET effect significant"
baseline: native
rounds: 30
warmup: 1
trial: 2s
min_pairs: 5
platforms: [native, docker-nat]
workloads:
  - workload: redis
    name: redis-set
    params: {op: set}
`

// powerTarget is the power asked for.
const powerTarget = 0.80

// BenchmarkPower measures how many counted rounds, and minutes, this
// machine needs to find docker-nat's SET effect with 80% probability. It
// runs NEARNATIVE_BENCH_POWER_ROUNDS (30) rounds, then for each study size k
// draws 2000 studies of k rounds from them with replacement (the bootstrap
// estimate of a new study of k rounds on this machine) and counts how many
// call the effect significant in the direction the whole run shows. It
// also gives the normal-theory size from the per-round log ratios' spread.
func BenchmarkPower(b *testing.B) {
	n := envInt("NEARNATIVE_BENCH_POWER_ROUNDS", 30)
	trial := os.Getenv("NEARNATIVE_BENCH_TRIAL")
	if trial == "" {
		trial = "2s"
	}
	for i := 0; i < b.N; i++ {
		home := b.TempDir()
		studyPath := filepath.Join(home, "power.yaml")
		if err := os.WriteFile(studyPath, []byte(powerStudy), 0o644); err != nil {
			b.Fatal(err)
		}
		st, id, elapsed := runStudy(b, home, studyPath, "--rounds", strconv.Itoa(n), "--trial", trial)
		trials, err := st.Trials(context.Background(), runid.ID(id))
		if err != nil {
			b.Fatal(err)
		}
		rounds := countedRounds(trials)
		perRound := elapsed / time.Duration(len(rounds)+1) // the warm-up round too
		fmt.Printf("power: %d counted rounds of redis-set on native and docker-nat (trial %s), %v in all, %v per round\n",
			len(rounds), trial, elapsed.Round(time.Second), perRound.Round(100*time.Millisecond))
		fmt.Printf("| metric | ratio over all rounds | per-round log-ratio SD | rounds for 80%% power (resampled) | (normal theory) | minutes | rounds for a %.0f%% effect at this noise (normal theory) |\n|---|---|---|---|---|---|---|\n", assumedEffect*100)
		for _, m := range []string{"ops_per_sec", "cpu_us_per_op", "run_cpu_us_per_op"} {
			ps := analysis.Pairs(trials, "redis-set", m, "native", "docker-nat")
			if len(ps) < 5 {
				b.Errorf("%s: only %d pairs", m, len(ps))
				continue
			}
			all := stats.PairedRatio(ps, stats.Options{})
			sd := logRatioSD(ps)
			k := roundsForPower(ps, all.Ratio > 1, 2000)
			kN := normalRounds(sd, math.Log(all.Ratio))
			kText := "more than " + strconv.Itoa(maxPowerRounds)
			minutes := "-"
			if k > 0 {
				kText = strconv.Itoa(k)
				minutes = fmt.Sprintf("%.1f", (time.Duration(k+1) * perRound).Minutes())
				b.ReportMetric(float64(k), "rounds_"+m)
			}
			fmt.Printf("| %s | %.3f [%.3f, %.3f] | %.3f | %s | %d | %s | %d |\n", m, all.Ratio, all.Lo, all.Hi, sd, kText, kN, minutes,
				normalRounds(sd, math.Log1p(assumedEffect)))
		}
		b.ReportMetric(elapsed.Minutes(), "minutes")
	}
}

// assumedEffect is docker-nat's SET effect as the seed and earlier quiet
// runs here saw it (5-9%): BenchmarkPower also says how many rounds an
// effect of that size needs at the noise it measured, which stays
// meaningful when the noise swamps the effect in the run itself.
const assumedEffect = 0.07

// maxPowerRounds is the largest study size BenchmarkPower tries.
const maxPowerRounds = 200

// roundsForPower returns the smallest study size k (5 at least) at which
// draws studies of k rounds from ps with replacement call the effect
// significant in the direction given (higher: ratio above 1) at least
// powerTarget of the time; 0 when none up to maxPowerRounds does.
func roundsForPower(ps []stats.Pair, higher bool, draws int) int {
	rng := rand.New(rand.NewPCG(1, 2))
	power := func(k int) float64 {
		hit := 0
		sample := make([]stats.Pair, k)
		for range draws {
			for j := range sample {
				sample[j] = ps[rng.IntN(len(ps))]
			}
			r := stats.PairedRatio(sample, stats.Options{})
			if r.Significant && (r.Lo > 1) == higher {
				hit++
			}
		}
		return float64(hit) / float64(draws)
	}
	for k := stats.DefaultMinPairs; k <= maxPowerRounds; k = next(k) {
		if power(k) >= powerTarget {
			// Step back to the smallest size that makes it.
			for j := prev(k) + 1; j < k; j++ {
				if power(j) >= powerTarget {
					return j
				}
			}
			return k
		}
	}
	return 0
}

// next and prev step study sizes: by 1 to 12, then by about 25%.
func next(k int) int {
	if k < 12 {
		return k + 1
	}
	return k + k/4
}

func prev(k int) int {
	for j := stats.DefaultMinPairs; ; j = next(j) {
		if next(j) >= k {
			return j
		}
	}
}

// normalRounds is the normal-theory study size for a paired t test at 5%
// two-sided and 80% power on per-round log ratios with spread sd and mean
// effect: the smallest n with n >= ((t_{0.975,n-1} + t_{0.80,n-1})·sd/effect)².
func normalRounds(sd, effect float64) int {
	if effect == 0 {
		return 0
	}
	for n := 2; n < 100000; n++ {
		df := float64(n - 1)
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
		need := math.Pow((t.Quantile(0.975)+t.Quantile(powerTarget))*sd/math.Abs(effect), 2)
		if float64(n) >= need {
			return n
		}
	}
	return 0
}

// logRatioSD is the standard deviation of the per-round log ratios.
func logRatioSD(ps []stats.Pair) float64 {
	var ls []float64
	for _, p := range ps {
		ls = append(ls, math.Log(p.X/p.Base))
	}
	var m, ss float64
	for _, l := range ls {
		m += l
	}
	m /= float64(len(ls))
	for _, l := range ls {
		ss += (l - m) * (l - m)
	}
	return math.Sqrt(ss / float64(len(ls)-1))
}

// countedRounds returns the counted rounds with a trial, sorted.
func countedRounds(trials []store.Trial) []int {
	var rounds []int
	seen := map[int]bool{}
	for _, t := range trials {
		if !t.Warmup && !seen[t.Round] {
			seen[t.Round] = true
			rounds = append(rounds, t.Round)
		}
	}
	sort.Ints(rounds)
	return rounds
}

// inRounds returns the trials of the given rounds.
func inRounds(trials []store.Trial, rounds []int) []store.Trial {
	in := map[int]bool{}
	for _, r := range rounds {
		in[r] = true
	}
	var out []store.Trial
	for _, t := range trials {
		if in[t.Round] {
			out = append(out, t)
		}
	}
	return out
}

// clopperPearson is the exact binomial confidence interval of k successes
// in n trials.
func clopperPearson(k, n int, conf float64) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	a := (1 - conf) / 2
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(a)
	}
	hi = 1
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - a)
	}
	return lo, hi
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
		res := analysis.Analyse(trials, analysis.Options{Baseline: "native"})
		var ratio stats.Ratio
		var u float64
		for _, tab := range res.Tables {
			for _, c := range tab.Cells {
				switch {
				case tab.Metric == "ops_per_sec" && !c.IsBaseline:
					ratio = c.Ratio
				}
			}
		}
		for _, tab := range res.Diagnostics {
			for _, c := range tab.Cells {
				if tab.Metric == "server_cpu_pct" && c.IsBaseline {
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
