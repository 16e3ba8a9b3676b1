package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Pair is one round's trials of one metric: the baseline platform's value and
// the other platform's value, measured in the same round.
type Pair struct {
	Base, X float64
}

// Options controls PairedRatio's bootstrap. The zero value is usable.
type Options struct {
	// Resamples is the number of bootstrap resamples; <= 0 means 10000.
	Resamples int
	// Confidence is the confidence level of the interval; outside (0,1) means 0.95.
	Confidence float64
	// Seed seeds the PCG generator, so the same input and Seed always give the
	// same interval. 0 is an ordinary seed.
	Seed uint64
	// Method selects the kind of bootstrap interval; the zero value is
	// BootstrapT.
	Method Method
}

// Method is the kind of bootstrap confidence interval PairedRatio computes;
// its doc comment compares the two.
type Method int

const (
	// BootstrapT is the studentized bootstrap (bootstrap-t) on the log ratio,
	// the default: about 95% coverage from 5 rounds on.
	BootstrapT Method = iota
	// ExpandedPercentile is Hesterberg's expanded percentile interval:
	// narrower, but about 92-94% coverage at 5-6 rounds.
	ExpandedPercentile
)

// Default option values used when Options fields are left zero.
const (
	DefaultResamples  = 10000
	DefaultConfidence = 0.95
)

func (o Options) withDefaults() Options {
	if o.Resamples <= 0 {
		o.Resamples = DefaultResamples
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		o.Confidence = DefaultConfidence
	}
	return o
}

// Ratio is a platform's metric relative to the baseline, with a confidence
// interval.
type Ratio struct {
	// N is the number of pairs used (pairs with a NaN or infinite value are dropped).
	N int
	// Ratio is mean(X)/mean(Base).
	Ratio float64
	// Lo and Hi bound the confidence interval of Ratio; NaN when N < 2.
	Lo, Hi float64
	// HalfWidthPct is (Hi-Lo)/2/Ratio*100: the interval's half-width in percent.
	HalfWidthPct float64
	// Significant reports whether the interval excludes 1.
	Significant bool
}

// PairedRatio estimates mean(X)/mean(Base) over the rounds in pairs, with a
// bootstrap confidence interval that keeps rounds paired: each resample draws
// N pair indices with replacement, so a round's two trials always travel
// together.
//
// The default interval (Method BootstrapT) is the studentized bootstrap, or
// bootstrap-t (Efron and Tibshirani, "An Introduction to the Bootstrap",
// 1993, chapter 12; Hesterberg, "What teachers should know about the
// bootstrap", The American Statistician 69(4), 2015), on the log ratio
//
//	θ = log(mean(X)/mean(Base)),  se² = Var(X_i/mean(X) - Base_i/mean(Base)) / N,
//
// se being the delta-method standard error of θ for paired means (the sample
// variance, divisor N-1, of the linearised per-round differences). Each
// resample gives t* = (θ*-θ)/se*, with θ* and se* computed the same way from
// the resample, and the interval is
//
//	exp(θ - t*_{1-α/2}·se) .. exp(θ - t*_{α/2}·se),
//
// t*_q being the q quantile of the t*. Studentizing lets the interval widen
// at small N the way Student's t does (at N = 6 the 2.5% and 97.5% t*
// quantiles are typically about -2.6 and +2.7, near t_{0.975,5} = 2.57, not
// ±1.96), adapt to the sample's spread and follow the skew of the ratio.
// Resamples whose se* is below 1e-12, which happens only when a resample
// repeats one round N times (probability N^(1-N)), are skipped, as their t*
// would be rounding error over rounding error; when the sample's own se is
// below 1e-12 (every round has the same ratio) the interval is [Ratio, Ratio].
//
// Coverage of the 95% interval, measured in simulated A/A studies (true ratio
// 1; 4000 repetitions per cell, 2000 resamples; lognormal noise with CV 2%,
// 8% and 15%, with and without a shared 10% per-round effect; see
// sim_test.go), as the range over those six generators:
//
//	N                      5            6            8            10
//	bootstrap-t            0.943-0.950  0.941-0.951  0.942-0.950  0.942-0.957
//	expanded percentile    0.916-0.925  0.928-0.939  0.934-0.948  0.940-0.954
//	t on per-round logs    0.947-0.954  0.946-0.957  0.942-0.956  0.941-0.958
//
// so an A/A study reports "~" in about 95% of repetitions from N = 5 on. 10000
// resamples gave the same coverage. The price is width and power at small N:
// the median interval is about 1.5 times as wide as the expanded percentile's
// at N = 5, 1.2 times at N = 6 and 1.08 times at N = 10, and at N = 6 with 2%
// noise a true ratio of 0.95 is significant in 83% of studies (expanded
// percentile: 95%), 0.8 in 99.8% (100%). Now and then the interval is very
// wide: when all rounds but one or two agree closely, resamples without the
// odd ones have a tiny se* and a large |t*|. With outlier-type noise that is
// common: with 5% of trials twice as slow, one study in ten at N = 5-6 gets a
// half-width above 1000%. Such noise also erodes coverage as N grows: with
// 10% of trials 30% slower bootstrap-t covers 0.95-0.98 at N = 5-8 but 0.91
// at N = 10 and 0.88-0.90 at N = 12-20, below the expanded percentile's
// 0.92-0.93; with 5% of trials twice as slow it covers 0.96-0.97 at
// N = 5-12 and 0.91 at N = 20 (expanded percentile 0.92-0.94). Below
// N = 5 no bootstrap is reliable: bootstrap-t covers 0.80 at N = 3 and 0.95 at
// N = 4 with very wide intervals, and at N = 2 it degenerates (every usable
// resample has t* = 0), so N = 2 uses the expanded percentile interval.
//
// Method ExpandedPercentile selects Hesterberg's expanded percentile interval
// (Hesterberg 2015, section 5.3) instead: each resample computes
// mean(X*)/mean(Base*), the tail probability is widened to
//
//	alpha'/2 = Φ(-sqrt(N/(N-1)) * t_{1-alpha/2, N-1})
//
// (at N = 6 and 95% the 0.24% and 99.76% quantiles) and the interval is the
// alpha'/2 and 1-alpha'/2 quantiles of the bootstrap distribution. It is
// narrower and has more power at small N but covers only 0.92-0.94 at
// N = 5-6 (table above). It is also used whenever a value is 0 or negative,
// where the log ratio is undefined. Method values other than
// ExpandedPercentile mean BootstrapT.
//
// Values are expected to be positive (throughput, latency, CPU time). With
// fewer than 2 usable pairs Lo, Hi and HalfWidthPct are NaN and the result is
// not significant. When mean(Base) is 0 the ratio is undefined: Ratio, Lo, Hi
// and HalfWidthPct are NaN and the result is not significant. Callers that
// encode a Ratio as JSON must handle NaN, which encoding/json rejects.
func PairedRatio(pairs []Pair, opt Options) Ratio {
	opt = opt.withDefaults()
	ps := finitePairs(pairs)
	n := len(ps)
	nan := math.NaN()
	r := Ratio{N: n, Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
	if n == 0 {
		return r
	}
	r.Ratio = meanRatio(ps)
	if n < 2 || math.IsNaN(r.Ratio) {
		return r
	}
	if opt.Method == ExpandedPercentile || n < minBootstrapT || !allPositive(ps) {
		r.Lo, r.Hi = bootstrapInterval(ps, opt, expandedTail(n, opt.Confidence))
	} else {
		r.Lo, r.Hi = bootstrapTInterval(ps, opt)
	}
	r.HalfWidthPct = (r.Hi - r.Lo) / 2 / r.Ratio * 100
	r.Significant = r.Lo > 1 || r.Hi < 1
	return r
}

// minBootstrapT is the smallest N for the bootstrap-t interval. With 2 pairs
// every resample either repeats one pair (skipped) or is the sample itself in
// some order (t* = 0), so the interval would have zero width.
const minBootstrapT = 3

// finitePairs returns the pairs whose two values are both finite.
func finitePairs(pairs []Pair) []Pair {
	out := make([]Pair, 0, len(pairs))
	for _, p := range pairs {
		if isFinite(p.Base) && isFinite(p.X) {
			out = append(out, p)
		}
	}
	return out
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// meanRatio returns mean(X)/mean(Base), or NaN when mean(Base) is 0.
func meanRatio(ps []Pair) float64 {
	var sb, sx float64
	for _, p := range ps {
		sb += p.Base
		sx += p.X
	}
	if sb == 0 {
		return math.NaN()
	}
	return sx / sb
}

// expandedTail returns Hesterberg's widened tail probability alpha'/2 for n
// pairs at the given confidence level.
func expandedTail(n int, confidence float64) float64 {
	df := float64(n - 1)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-confidence)/2)
	return distuv.UnitNormal.CDF(-math.Sqrt(float64(n)/df) * t)
}

// plainTail returns the plain percentile interval's tail probability alpha/2.
func plainTail(confidence float64) float64 { return (1 - confidence) / 2 }

// bootstrapInterval returns the tail and 1-tail quantiles of the paired
// bootstrap distribution of mean(X*)/mean(Base*). Resamples whose baseline
// mean is 0 are skipped; if all are, both bounds are NaN.
func bootstrapInterval(ps []Pair, opt Options, tail float64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	n := len(ps)
	stats := make([]float64, 0, opt.Resamples)
	for range opt.Resamples {
		var sb, sx float64
		for range n {
			p := ps[rng.IntN(n)]
			sb += p.Base
			sx += p.X
		}
		if sb != 0 {
			stats = append(stats, sx/sb)
		}
	}
	if len(stats) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(stats)
	return stat.Quantile(tail, stat.LinInterp, stats, nil),
		stat.Quantile(1-tail, stat.LinInterp, stats, nil)
}

// allPositive reports whether every value in ps is above 0, which the log
// ratio of the bootstrap-t interval needs.
func allPositive(ps []Pair) bool {
	for _, p := range ps {
		if !(p.Base > 0 && p.X > 0) {
			return false
		}
	}
	return true
}

// seFloor is the smallest standard error of the log ratio that
// bootstrapTInterval treats as real. Below it the spread is floating-point
// rounding (every round has the same ratio, up to a few ulps): the original
// sample then gets the zero-width interval [Ratio, Ratio], and a resample is
// skipped, since its t = (θ*-θ)/se* would be rounding error divided by
// rounding error. For a resample that only happens when it draws a single
// round n times (probability n^(1-n), 0.16% at n = 5), so skipping barely
// changes the bootstrap distribution; a floor instead of skipping would put
// huge |t*| values into both tails and widen every interval.
const seFloor = 1e-12

// logRatioSE returns θ = log(mean(X)/mean(Base)) over ps[idx[0]], ps[idx[1]],
// ... and its delta-method standard error
//
//	se² = Σ (X_i/mean(X) - Base_i/mean(Base))² / (n-1) / n,
//
// the sample variance of the linearised per-round differences over n (their
// mean is 0 by construction). ok is false when a mean is not positive or
// len(idx) < 2.
func logRatioSE(ps []Pair, idx []int) (theta, se float64, ok bool) {
	n := len(idx)
	if n < 2 {
		return 0, 0, false
	}
	var sb, sx float64
	for _, i := range idx {
		sb += ps[i].Base
		sx += ps[i].X
	}
	if !(sb > 0 && sx > 0) {
		return 0, 0, false
	}
	mb, mx := sb/float64(n), sx/float64(n)
	var ss float64
	for _, i := range idx {
		d := ps[i].X/mx - ps[i].Base/mb
		ss += d * d
	}
	return math.Log(sx / sb), math.Sqrt(ss / float64(n-1) / float64(n)), true
}

// bootstrapTInterval returns the studentized (bootstrap-t) interval of
// mean(X)/mean(Base) for positive values: the paired resamples give
// t* = (θ*-θ)/se* for the log ratio θ, and the interval is
// exp(θ - t*_{1-α/2}·se) .. exp(θ - t*_{α/2}·se). If every resample is
// skipped (see seFloor), both bounds are NaN.
func bootstrapTInterval(ps []Pair, opt Options) (lo, hi float64) {
	theta, se, ts := bootstrapT(ps, opt)
	switch {
	case math.IsNaN(se) || (se >= seFloor && len(ts) == 0):
		return math.NaN(), math.NaN()
	case se < seFloor:
		return math.Exp(theta), math.Exp(theta)
	}
	tail := plainTail(opt.Confidence)
	tlo := stat.Quantile(tail, stat.LinInterp, ts, nil)
	thi := stat.Quantile(1-tail, stat.LinInterp, ts, nil)
	return math.Exp(theta - thi*se), math.Exp(theta - tlo*se)
}

// bootstrapT returns the log ratio θ of ps, its standard error se (NaN when
// undefined) and the sorted studentized statistics t* = (θ*-θ)/se* of the
// paired resamples whose se* is at least seFloor. When se < seFloor it does
// not resample and ts is nil.
func bootstrapT(ps []Pair, opt Options) (theta, se float64, ts []float64) {
	n := len(ps)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	theta, se, ok := logRatioSE(ps, idx)
	if !ok {
		return math.NaN(), math.NaN(), nil
	}
	if se < seFloor {
		return theta, se, nil
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	ts = make([]float64, 0, opt.Resamples)
	for range opt.Resamples {
		for j := range idx {
			idx[j] = rng.IntN(n)
		}
		th, s, ok := logRatioSE(ps, idx)
		if ok && s >= seFloor {
			ts = append(ts, (th-theta)/s)
		}
	}
	slices.Sort(ts)
	return theta, se, ts
}

// PerRoundRatios returns X/Base for each pair whose values are finite and
// whose Base is not 0. Its Summary's CV is the input RoundsFor expects.
func PerRoundRatios(pairs []Pair) []float64 {
	out := make([]float64, 0, len(pairs))
	for _, p := range finitePairs(pairs) {
		if p.Base != 0 {
			out = append(out, p.X/p.Base)
		}
	}
	return out
}
