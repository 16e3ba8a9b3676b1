// Package intervals is the simulation benchmark behind nearnative's choice
// of confidence interval (stats.Choose): it draws studies from known
// distributions, so the true ratio is known, and measures for every interval
// method how often its 95% interval covers the truth and how wide it is.
// It is pure CPU and deterministic from its seeds, so it can run on a busy
// machine:
//
//	go test -run '^$' -bench Intervals -benchtime 1x -timeout 2h ./bench/intervals/
//
// (`make bench-sim`; `make bench` runs it with the machine benchmarks).
// NEARNATIVE_SIM_REPS (default 4000) sets the simulated studies per cell,
// NEARNATIVE_SIM_RESAMPLES (default 2000) the bootstrap resamples per
// interval, NEARNATIVE_SIM_NS (default 5,8,12,20,40) the numbers of pairs and
// NEARNATIVE_SIM_OUT a file to write the Markdown tables to, and
// NEARNATIVE_SIM_FAMILY (a substring of a family's title, e.g. "unpaired")
// runs only the matching families.
package intervals

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/nearnative/nearnative/internal/stats"
)

// MinCoverage is the coverage a method must keep in every cell to be chosen.
const MinCoverage = 0.94

// model describes how one trial's value is drawn: the platform's true value
// times a shared round effect, a slow drift over the run, the trial's own
// noise, and now and then an outlier trial.
type model struct {
	name string
	// cv is the coefficient of variation of the trial's own lognormal noise;
	// cvX, when > 0, is the other platform's (a noisier platform: its ratio
	// of means then differs from its ratio of geometric means).
	cv, cvX float64
	// roundCV is the CV of a lognormal effect both trials of a round share
	// (the machine busier in some rounds); unpaired studies have none.
	roundCV float64
	// drift is the relative change of the machine's speed from the first
	// trial to the last (0.2: values grow 20% over the run, linearly).
	drift float64
	// spikeP and spikeXm give a heavy tail: with probability spikeP a trial
	// is slowed by a factor 1+S, S Pareto with scale spikeXm and index 2.5
	// (finite mean and variance, a long tail).
	spikeP, spikeXm float64
	// outlierP is the probability that a round has one outlier trial (either
	// platform's, at random) slowed by outlierF.
	outlierP, outlierF float64
	// tail, when > 0, makes the value a p99: the 99th percentile of tail
	// requests whose latency is lognormal with sigma tailSigma, times the
	// trial's factor above.
	tail      int
	tailSigma float64
}

const paretoAlpha = 2.5

// mean1 is the mean of the trial factor's spike and outlier parts, so that
// values are scaled to mean 1 (the true ratio then is the ratio of the
// platforms' true values).
func (m model) spikeMean() float64 {
	return 1 + m.spikeP*m.spikeXm*paretoAlpha/(paretoAlpha-1)
}

func lnNoise(rng *rand.Rand, cv float64) float64 {
	if cv == 0 {
		return 1
	}
	s := math.Sqrt(math.Log1p(cv * cv))
	return math.Exp(s*rng.NormFloat64() - s*s/2)
}

// trial draws one trial's multiplicative factor at time position pos in
// [0,1] of the run (drift), excluding round effects and outliers; other
// says whether it is the other platform's trial (noise cvX).
func (m model) trial(rng *rand.Rand, pos float64, other bool) float64 {
	cv := m.cv
	if other && m.cvX > 0 {
		cv = m.cvX
	}
	v := lnNoise(rng, cv) * (1 + m.drift*pos)
	if m.spikeP > 0 {
		if rng.Float64() < m.spikeP {
			u := 1 - rng.Float64()
			v *= 1 + m.spikeXm*math.Pow(u, -1/paretoAlpha)
		}
		v /= m.spikeMean()
	}
	if m.tail > 0 {
		v *= m.p99(rng)
	}
	return v
}

// p99 draws the empirical 99th percentile of m.tail lognormal latencies
// (median 1): the k-th order statistic, k = ceil(0.99 n), drawn through a
// Beta(k, n+1-k) uniform order statistic. Its expectation is the same for
// both platforms, so the true ratio stays the ratio of their values.
func (m model) p99(rng *rand.Rand) float64 {
	k := math.Ceil(0.99 * float64(m.tail))
	u := distuv.Beta{Alpha: k, Beta: float64(m.tail) + 1 - k, Src: rng}.Rand()
	return math.Exp(m.tailSigma * distuv.UnitNormal.Quantile(u))
}

// outlier returns outlierF with probability outlierP, else 1, and which of
// the two trials (0 or 1) it hits.
func (m model) outlier(rng *rand.Rand) (float64, int) {
	if m.outlierP > 0 && rng.Float64() < m.outlierP {
		return m.outlierF, rng.IntN(2)
	}
	return 1, 0
}

// paired draws a study of n rounds: the baseline's true value is 100, the
// other platform's 100*ratio, in a random order within each round.
func (m model) paired(rng *rand.Rand, n int, ratio float64) []stats.Pair {
	ps := make([]stats.Pair, n)
	total := float64(2*n - 1)
	for i := range ps {
		round := lnNoise(rng, m.roundCV)
		first := rng.IntN(2) // which platform ran first in this round
		pos := func(p int) float64 {
			if p == first {
				return float64(2*i) / total
			}
			return float64(2*i+1) / total
		}
		f, hit := m.outlier(rng)
		fb, fx := 1.0, 1.0
		if hit == 0 {
			fb = f
		} else {
			fx = f
		}
		ps[i] = stats.Pair{
			Base: 100 * round * fb * m.trial(rng, pos(0), false),
			X:    100 * ratio * round * fx * m.trial(rng, pos(1), true),
		}
	}
	return ps
}

// unpaired draws two independent runs of n trials each (no shared round
// effects; each run drifts on its own).
func (m model) unpaired(rng *rand.Rand, n int, ratio float64) (base, x []float64) {
	draw := func(v float64, other bool) []float64 {
		out := make([]float64, n)
		for i := range out {
			f, _ := m.outlier(rng)
			out[i] = v * f * m.trial(rng, float64(i)/float64(max(1, n-1)), other)
		}
		return out
	}
	return draw(100, false), draw(100*ratio, true)
}

// outlierMean corrects the true ratio for outliers: they hit either side
// with the same probability, so E[X]/E[Base] stays ratio. (Kept as a
// function so the reasoning is in one place.)
func trueRatio(ratio float64) float64 { return ratio }

// Statistic families: each is judged on its own scenarios.
type family struct {
	name   string
	paired bool
	models []model
	ratios []float64
}

func families() []family {
	mean := []model{
		{name: "lognormal CV 3%", cv: 0.03},
		{name: "lognormal CV 10%", cv: 0.10},
		{name: "lognormal CV 20%", cv: 0.20},
		{name: "CV 10% + 10% shared round effect", cv: 0.10, roundCV: 0.10},
		{name: "unequal noise: baseline CV 3%, other 20%", cv: 0.03, cvX: 0.20},
		{name: "heavy tail (10% spikes, Pareto)", cv: 0.03, spikeP: 0.10, spikeXm: 0.10},
		{name: "drift 20% over the run, CV 5%", cv: 0.05, drift: 0.20},
		{name: "outlier rounds (10%: one trial x1.5), CV 5%", cv: 0.05, outlierP: 0.10, outlierF: 1.5},
		{name: "all: CV 10%, round 5%, drift, spikes, outliers", cv: 0.10, roundCV: 0.05, drift: 0.2, spikeP: 0.05, spikeXm: 0.1, outlierP: 0.1, outlierF: 1.5},
	}
	tail := []model{
		{name: "p99 of 1000 requests, sigma 0.5, CV 5%", cv: 0.05, tail: 1000, tailSigma: 0.5},
		{name: "p99 of 10000 requests, sigma 1.0, CV 5%", cv: 0.05, tail: 10000, tailSigma: 1.0},
		{name: "p99 of 1000 requests, sigma 1.0, CV 10% + round 10%", cv: 0.10, roundCV: 0.10, tail: 1000, tailSigma: 1.0},
		{name: "p99 of 1000 requests, sigma 1.0, CV 3% vs 20%", cv: 0.03, cvX: 0.20, tail: 1000, tailSigma: 1.0},
		{name: "p99 of 1000 requests, sigma 1.0, outliers x2", cv: 0.05, tail: 1000, tailSigma: 1.0, outlierP: 0.1, outlierF: 2},
		{name: "p99 of 200 requests (below the rule), sigma 1.0", cv: 0.05, tail: 200, tailSigma: 1.0},
	}
	unpairedMean := []model{
		{name: "lognormal CV 3%", cv: 0.03},
		{name: "lognormal CV 10%", cv: 0.10},
		{name: "lognormal CV 20%", cv: 0.20},
		{name: "unequal noise: run A CV 3%, run B 20%", cv: 0.03, cvX: 0.20},
		{name: "heavy tail (10% spikes, Pareto)", cv: 0.03, spikeP: 0.10, spikeXm: 0.10},
		{name: "drift 20% within each run, CV 5%", cv: 0.05, drift: 0.20},
		{name: "outliers (5% of trials x1.5), CV 5%", cv: 0.05, outlierP: 0.05, outlierF: 1.5},
	}
	unpairedTail := []model{
		{name: "p99 of 1000 requests, sigma 0.5, CV 5%", cv: 0.05, tail: 1000, tailSigma: 0.5},
		{name: "p99 of 1000 requests, sigma 1.0, CV 10%", cv: 0.10, tail: 1000, tailSigma: 1.0},
		{name: "p99 of 1000 requests, sigma 1.0, CV 3% vs 20%", cv: 0.03, cvX: 0.20, tail: 1000, tailSigma: 1.0},
		{name: "p99 of 1000 requests, sigma 1.0, outliers x2", cv: 0.05, tail: 1000, tailSigma: 1.0, outlierP: 0.1, outlierF: 2},
	}
	return []family{
		{"paired, mean-based (throughput, CPU per op, mean latency)", true, mean, []float64{1, 0.93}},
		{"paired, tail percentile (p99 latency)", true, tail, []float64{1}},
		{"unpaired (compare), mean-based", false, unpairedMean, []float64{1}},
		{"unpaired (compare), tail percentile", false, unpairedTail, []float64{1}},
	}
}

// cell is one (model, n, ratio) of a family with, per method, the share of
// studies whose interval covered the true ratio and the median relative
// half-width (percent).
type cell struct {
	model model
	n     int
	ratio float64
	cover map[stats.Method]float64
	width map[stats.Method]float64
}

func simulate(f family, m model, n int, ratio float64, reps, resamples int, seed uint64) cell {
	rng := rand.New(rand.NewPCG(seed, uint64(n)*1000+uint64(ratio*1000)))
	cover := map[stats.Method]int{}
	widths := map[stats.Method][]float64{}
	for i := range reps {
		opt := stats.Options{Resamples: resamples, Seed: uint64(i)}
		var ivs map[stats.Method][2]float64
		var est float64
		if f.paired {
			ps := m.paired(rng, n, ratio)
			ivs = stats.PairedIntervals(ps, opt)
			est = stats.PairedRatio(ps, stats.Options{Method: stats.LogT}).Ratio
		} else {
			b, x := m.unpaired(rng, n, ratio)
			ivs = stats.UnpairedIntervals(b, x, opt)
			est = stats.UnpairedRatio(b, x, stats.Options{Method: stats.LogT}).Ratio
		}
		truth := trueRatio(ratio)
		for meth, iv := range ivs {
			if iv[0] <= truth && truth <= iv[1] {
				cover[meth]++
			}
			widths[meth] = append(widths[meth], (iv[1]-iv[0])/2/est*100)
		}
	}
	c := cell{model: m, n: n, ratio: ratio, cover: map[stats.Method]float64{}, width: map[stats.Method]float64{}}
	for _, meth := range stats.Methods() {
		c.cover[meth] = float64(cover[meth]) / float64(reps)
		w := widths[meth]
		slices.SortFunc(w, func(a, b float64) int {
			switch {
			case a < b || math.IsNaN(a) && !math.IsNaN(b):
				return -1
			case a > b || math.IsNaN(b) && !math.IsNaN(a):
				return 1
			}
			return 0
		})
		c.width[meth] = w[len(w)/2]
	}
	return c
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func ns() []int {
	out := []int{5, 8, 12, 20, 40}
	if v := os.Getenv("NEARNATIVE_SIM_NS"); v != "" {
		out = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 2 {
				out = append(out, n)
			}
		}
	}
	return out
}

// choice is the benchmark's verdict for one family.
type choice struct {
	method  stats.Method
	ok      bool    // some method kept MinCoverage in every judged cell
	minCov  float64 // the chosen method's lowest coverage
	relWide float64 // its mean width relative to the narrowest method per cell
}

// choose picks, among methods whose coverage is at least MinCoverage in every
// cell that counts (models below the tail rule are shown, not judged), the
// one with the smallest mean width relative to the narrowest method of each
// cell. With no such method it returns the one with the highest lowest
// coverage, ok false.
func choose(cells []cell) choice {
	best := choice{relWide: math.Inf(1)}
	fallback := choice{minCov: -1}
	for _, meth := range stats.Methods() {
		minCov, rel, k := 1.0, 0.0, 0
		for _, c := range cells {
			if !judged(c.model) {
				continue
			}
			minCov = math.Min(minCov, c.cover[meth])
			narrowest := math.Inf(1)
			for _, m := range stats.Methods() {
				narrowest = math.Min(narrowest, c.width[m])
			}
			rel += c.width[meth] / narrowest
			k++
		}
		rel /= float64(k)
		if minCov >= MinCoverage && rel < best.relWide {
			best = choice{meth, true, minCov, rel}
		}
		if minCov > fallback.minCov {
			fallback = choice{meth, false, minCov, rel}
		}
	}
	if best.ok {
		return best
	}
	return fallback
}

// judged reports whether a model's cells count toward the choice: a p99 from
// fewer requests than the tail rule asks is shown but not judged (its
// cells get no verdict in reports).
func judged(m model) bool {
	return m.tail == 0 || float64(m.tail)*(1-0.99) >= stats.MinTailBeyond
}

func BenchmarkIntervals(b *testing.B) {
	reps := envInt("NEARNATIVE_SIM_REPS", 4000)
	resamples := envInt("NEARNATIVE_SIM_RESAMPLES", 2000)
	for range b.N {
		var out strings.Builder
		fmt.Fprintf(&out, "Coverage of the nominal 95%% interval (share of %d simulated studies whose interval holds the true ratio) and median half-width in %% of the ratio, %d bootstrap resamples; a method is eligible with coverage >= %.0f%% in every judged cell.\n", reps, resamples, MinCoverage*100)
		for fi, f := range families() {
			if only := os.Getenv("NEARNATIVE_SIM_FAMILY"); only != "" && !strings.Contains(f.name, only) {
				continue
			}
			type job struct {
				m     model
				n     int
				ratio float64
				seed  uint64
			}
			var jobs []job
			for mi, m := range f.models {
				for _, ratio := range f.ratios {
					for _, n := range ns() {
						jobs = append(jobs, job{m, n, ratio, uint64(1000*fi + 10*mi + 1)})
					}
				}
			}
			cells := make([]cell, len(jobs))
			var wg sync.WaitGroup
			sem := make(chan struct{}, runtime.GOMAXPROCS(0))
			for i, j := range jobs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					cells[i] = simulate(f, j.m, j.n, j.ratio, reps, resamples, j.seed)
				}()
			}
			wg.Wait()
			ch := choose(cells)
			writeTable(&out, f, cells, ch)
			b.ReportMetric(ch.minCov, fmt.Sprintf("mincov_%d", fi))
		}
		fmt.Print(out.String())
		if path := os.Getenv("NEARNATIVE_SIM_OUT"); path != "" {
			if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func writeTable(w *strings.Builder, f family, cells []cell, ch choice) {
	fmt.Fprintf(w, "\n### %s\n\n", f.name)
	fmt.Fprintf(w, "| scenario | true ratio | n |")
	for _, m := range stats.Methods() {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintf(w, "\n|---|---|---|%s\n", strings.Repeat("---|", len(stats.Methods())))
	for _, c := range cells {
		name := c.model.name
		if !judged(c.model) {
			name += " (not judged)"
		}
		fmt.Fprintf(w, "| %s | %g | %d |", name, c.ratio, c.n)
		for _, m := range stats.Methods() {
			mark := ""
			if judged(c.model) && c.cover[m] < MinCoverage {
				mark = "**"
			}
			fmt.Fprintf(w, " %s%.3f%s / %.1f%% |", mark, c.cover[m], mark, c.width[m])
		}
		fmt.Fprintln(w)
	}
	if ch.ok {
		fmt.Fprintf(w, "\nchoice: **%s** (lowest coverage %.3f; mean width %.2fx the narrowest method's per cell)\n", ch.method, ch.minCov, ch.relWide)
	} else {
		fmt.Fprintf(w, "\nno method kept %.0f%% everywhere; highest lowest coverage: %s (%.3f; width %.2fx the narrowest)\n", MinCoverage*100, ch.method, ch.minCov, ch.relWide)
	}
}
