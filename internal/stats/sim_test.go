package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// This file holds the coverage and power simulation behind PairedRatio's
// choice of interval. It is slow (minutes), so it only runs when
// NEARNATIVE_STATS_SIM is set:
//
//	NEARNATIVE_STATS_SIM=1 go test -run TestSimulate -v -timeout 1h ./internal/stats/
//
// NEARNATIVE_STATS_SIM_REPS and NEARNATIVE_STATS_SIM_RESAMPLES override the
// 4000 repetitions and 2000 resamples per interval; NEARNATIVE_STATS_SIM_ONLY
// keeps only the coverage cells whose generator name contains it, and
// NEARNATIVE_STATS_SIM_NS (for example "12,20") replaces the round counts.

// simGen draws n pairs whose true ratio mean(X)/mean(Base) is ratio.
type simGen struct {
	name string
	gen  func(rng *rand.Rand, n int, ratio float64) []Pair
}

// lnNoise returns mean-1 lognormal noise with coefficient of variation cv.
func lnNoise(rng *rand.Rand, cv float64) float64 {
	if cv == 0 {
		return 1
	}
	s := math.Sqrt(math.Log1p(cv * cv))
	return math.Exp(s*rng.NormFloat64() - s*s/2)
}

func lognormalGen(cv, roundCV float64) simGen {
	name := fmt.Sprintf("lognormal CV %g%%", cv*100)
	if roundCV > 0 {
		name += fmt.Sprintf(" + %g%% round", roundCV*100)
	}
	return simGen{name, func(rng *rand.Rand, n int, ratio float64) []Pair {
		return noisyPairs(rng, n, ratio, cv, roundCV)
	}}
}

// spikeGen is a skewed generator: each trial has 2% lognormal noise and, with
// probability p, is slowed by the factor f (a latency spike: a GC pause, a
// noisy neighbour), normalised to mean 1. p = 0.1, f = 1.3 gives CV ~9% and
// skewness ~2.4.
func spikeGen(p, f float64) simGen {
	m := 1 + p*(f-1)
	trial := func(rng *rand.Rand) float64 {
		v := lnNoise(rng, 0.02)
		if rng.Float64() < p {
			v *= f
		}
		return v / m
	}
	return simGen{fmt.Sprintf("skewed: %g%% spikes x%g", p*100, f), func(rng *rand.Rand, n int, ratio float64) []Pair {
		ps := make([]Pair, n)
		for i := range ps {
			ps[i] = Pair{Base: 100 * trial(rng), X: 100 * ratio * trial(rng)}
		}
		return ps
	}}
}

// logTInterval is the reference: the Student t interval of the mean per-round
// log ratio, exponentiated (a geometric-mean ratio, which equals the
// ratio of means when both platforms have the same noise distribution).
func logTInterval(ps []Pair, confidence float64) (lo, hi float64) {
	n := len(ps)
	ls := make([]float64, n)
	for i, p := range ps {
		ls[i] = math.Log(p.X / p.Base)
	}
	m, sd := stat.MeanStdDev(ls, nil)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(1 - (1-confidence)/2)
	h := t * sd / math.Sqrt(float64(n))
	return math.Exp(m - h), math.Exp(m + h)
}

type simMethod struct {
	name string
	ci   func(ps []Pair, opt Options) (lo, hi float64)
}

var simMethods = []simMethod{
	{"expanded", func(ps []Pair, opt Options) (float64, float64) {
		return bootstrapInterval(ps, opt, expandedTail(len(ps), opt.Confidence))
	}},
	{"boot-t", bootstrapTInterval},
	{"boot-t-sym", symBootstrapTInterval},
	{"log-t", func(ps []Pair, opt Options) (float64, float64) { return logTInterval(ps, opt.Confidence) }},
}

// simResult is one (generator, n, true ratio) cell: per method the share of
// repetitions whose interval covers the true ratio, misses below (interval
// entirely above the truth) and above, whose interval excludes 1, and the
// median and 90th percentile of the relative half-width in percent (the mean
// is useless: a bootstrap-t interval is now and then enormous).
type simResult struct {
	cover, missLo, missHi, signif, halfWidth, hw90 []float64
}

func simCell(g simGen, n int, ratio float64, reps, resamples int, seed uint64) simResult {
	k := len(simMethods)
	res := simResult{make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k)}
	hws := make([][]float64, k)
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	for i := range reps {
		ps := g.gen(rng, n, ratio)
		opt := Options{Resamples: resamples, Seed: uint64(i)}.withDefaults()
		for j, m := range simMethods {
			lo, hi := m.ci(ps, opt)
			switch {
			case lo > ratio:
				res.missLo[j]++
			case hi < ratio:
				res.missHi[j]++
			default:
				res.cover[j]++
			}
			if lo > 1 || hi < 1 {
				res.signif[j]++
			}
			hws[j] = append(hws[j], (hi-lo)/2/meanRatio(ps)*100)
		}
	}
	for j := range k {
		for _, s := range [][]float64{res.cover, res.missLo, res.missHi, res.signif} {
			s[j] /= float64(reps)
		}
		slices.Sort(hws[j])
		res.halfWidth[j] = median(hws[j])
		res.hw90[j] = stat.Quantile(0.9, stat.Empirical, hws[j], nil)
	}
	return res
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestSimulate(t *testing.T) {
	if os.Getenv("NEARNATIVE_STATS_SIM") == "" {
		t.Skip("set NEARNATIVE_STATS_SIM=1 to run the coverage simulation (minutes)")
	}
	reps := envInt("NEARNATIVE_STATS_SIM_REPS", 4000)
	resamples := envInt("NEARNATIVE_STATS_SIM_RESAMPLES", 2000)
	gens := []simGen{
		lognormalGen(0.02, 0), lognormalGen(0.08, 0), lognormalGen(0.15, 0),
		lognormalGen(0.02, 0.10), lognormalGen(0.08, 0.10), lognormalGen(0.15, 0.10),
		spikeGen(0.1, 1.3), spikeGen(0.05, 2), lognormalGen(0.40, 0),
	}
	ns := []int{5, 6, 8, 10}
	if v := os.Getenv("NEARNATIVE_STATS_SIM_NS"); v != "" {
		ns = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil && n >= 2 {
				ns = append(ns, n)
			}
		}
	}

	type job struct {
		g     simGen
		n     int
		ratio float64
		seed  uint64
	}
	var jobs []job
	for gi, g := range gens {
		for _, n := range ns {
			jobs = append(jobs, job{g, n, 1, uint64(1000 + gi)})
		}
	}
	power := []job{
		{lognormalGen(0.02, 0), 6, 0.8, 77},
		{lognormalGen(0.02, 0), 6, 0.95, 78},
		{lognormalGen(0.02, 0), 6, 0.97, 79},
		{lognormalGen(0.02, 0), 6, 0.98, 80},
		{lognormalGen(0.08, 0), 6, 0.8, 81},
		{lognormalGen(0.08, 0), 6, 0.9, 82},
	}
	jobs = append(jobs, power...)
	if only := os.Getenv("NEARNATIVE_STATS_SIM_ONLY"); only != "" {
		var keep []job
		power = nil
		for _, j := range jobs {
			if strings.Contains(j.g.name, only) && j.ratio == 1 {
				keep = append(keep, j)
			}
		}
		jobs = keep
	}

	results := make([]simResult, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = simCell(j.g, j.n, j.ratio, reps, resamples, j.seed)
		}()
	}
	wg.Wait()

	var b strings.Builder
	fmt.Fprintf(&b, "coverage of the 95%% interval, true ratio 1, %d repetitions, %d resamples\n", reps, resamples)
	fmt.Fprintf(&b, "%-34s %3s", "generator", "n")
	for _, m := range simMethods {
		fmt.Fprintf(&b, " %26s", m.name+" cov (lo/hi) hw% med/p90")
	}
	b.WriteString("\n")
	for i, j := range jobs {
		if i == len(jobs)-len(power) {
			fmt.Fprintf(&b, "\npower: share significant (interval excludes 1)\n")
		}
		label := j.g.name
		if j.ratio != 1 {
			label = fmt.Sprintf("%s ratio %g", j.g.name, j.ratio)
		}
		fmt.Fprintf(&b, "%-34s %3d", label, j.n)
		r := results[i]
		for k := range simMethods {
			if j.ratio == 1 {
				fmt.Fprintf(&b, "  %.3f (%.3f/%.3f) %5.2f/%5.1f", r.cover[k], r.missLo[k], r.missHi[k], r.halfWidth[k], r.hw90[k])
			} else {
				fmt.Fprintf(&b, "  signif %.3f cov %.3f %5.2f", r.signif[k], r.cover[k], r.halfWidth[k])
			}
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
}

// symBootstrapTInterval is the symmetric bootstrap-t interval θ ± q·se, q the
// 1-α quantile of |t*| (a variant tried in the simulation, not used).
func symBootstrapTInterval(ps []Pair, opt Options) (lo, hi float64) {
	theta, se, ts := bootstrapT(ps, opt)
	switch {
	case math.IsNaN(se) || (se >= seFloor && len(ts) == 0):
		return math.NaN(), math.NaN()
	case se < seFloor:
		return math.Exp(theta), math.Exp(theta)
	}
	abs := make([]float64, len(ts))
	for i, t := range ts {
		abs[i] = math.Abs(t)
	}
	slices.Sort(abs)
	q := stat.Quantile(opt.Confidence, stat.LinInterp, abs, nil)
	return math.Exp(theta - q*se), math.Exp(theta + q*se)
}
