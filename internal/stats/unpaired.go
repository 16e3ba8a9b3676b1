package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// UnpairedRatio estimates mean(x)/mean(base) for two independent samples,
// such as one platform's trials in two different runs, whose values have no
// pairing (round 3 of one run has nothing to do with round 3 of another).
// Each bootstrap resample draws len(base) values from base and, separately,
// len(x) values from x, with replacement.
//
// With at least 3 positive values on each side the interval is the
// studentized bootstrap (bootstrap-t) on the log ratio, as in PairedRatio,
// with the delta-method standard error for independent means
//
//	θ = log(mean(x)/mean(base)),  se² = Var(x)/(n_x·mean(x)²) + Var(base)/(n_b·mean(base)²),
//
// each variance being the sample variance (divisor n-1). Otherwise (2 values
// on a side, or a value that is 0 or negative) it is the plain percentile
// interval of mean(x*)/mean(base*).
//
// The result's N is the smaller sample size. NaN and infinite values are
// dropped. With fewer than 2 values on either side Lo, Hi and HalfWidthPct
// are NaN and the result is not significant; when mean(base) is 0 Ratio is
// NaN too.
func UnpairedRatio(base, x []float64, opt Options) Ratio {
	opt = opt.withDefaults()
	b, xs := finite(base), finite(x)
	nan := math.NaN()
	r := Ratio{N: min(len(b), len(xs)), Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
	if len(b) == 0 || len(xs) == 0 {
		return r
	}
	mb, mx := stat.Mean(b, nil), stat.Mean(xs, nil)
	if mb == 0 {
		return r
	}
	r.Ratio = mx / mb
	if r.N < 2 {
		return r
	}
	if r.N >= minBootstrapT && allPositiveValues(b) && allPositiveValues(xs) {
		r.Lo, r.Hi = unpairedT(b, xs, opt)
	} else {
		r.Lo, r.Hi = unpairedPercentile(b, xs, opt)
	}
	r.HalfWidthPct = (r.Hi - r.Lo) / 2 / r.Ratio * 100
	r.Significant = r.Lo > 1 || r.Hi < 1
	return r
}

// finite returns the finite values of xs.
func finite(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, v := range xs {
		if isFinite(v) {
			out = append(out, v)
		}
	}
	return out
}

func allPositiveValues(xs []float64) bool {
	for _, v := range xs {
		if !(v > 0) {
			return false
		}
	}
	return true
}

// logRatioSEUnpaired returns θ = log(mean(x)/mean(b)) and its delta-method
// standard error for independent samples; ok is false when a mean is not
// positive.
func logRatioSEUnpaired(b, x []float64) (theta, se float64, ok bool) {
	mb, vb := stat.MeanVariance(b, nil)
	mx, vx := stat.MeanVariance(x, nil)
	if !(mb > 0 && mx > 0) {
		return 0, 0, false
	}
	se2 := vb/(float64(len(b))*mb*mb) + vx/(float64(len(x))*mx*mx)
	return math.Log(mx / mb), math.Sqrt(se2), true
}

// unpairedT is the bootstrap-t interval of UnpairedRatio; resamples whose
// se* is below seFloor are skipped, and an original se below it gives the
// zero-width interval [Ratio, Ratio].
func unpairedT(b, x []float64, opt Options) (lo, hi float64) {
	theta, se, ok := logRatioSEUnpaired(b, x)
	if !ok {
		return math.NaN(), math.NaN()
	}
	if se < seFloor {
		return math.Exp(theta), math.Exp(theta)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	rb, rx := make([]float64, len(b)), make([]float64, len(x))
	ts := make([]float64, 0, opt.Resamples)
	for range opt.Resamples {
		resample(rng, b, rb)
		resample(rng, x, rx)
		th, s, ok := logRatioSEUnpaired(rb, rx)
		if ok && s >= seFloor {
			ts = append(ts, (th-theta)/s)
		}
	}
	if len(ts) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ts)
	tail := plainTail(opt.Confidence)
	tlo := stat.Quantile(tail, stat.LinInterp, ts, nil)
	thi := stat.Quantile(1-tail, stat.LinInterp, ts, nil)
	return math.Exp(theta - thi*se), math.Exp(theta - tlo*se)
}

// unpairedPercentile is the percentile interval of mean(x*)/mean(b*);
// resamples whose baseline mean is 0 are skipped.
func unpairedPercentile(b, x []float64, opt Options) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	rb, rx := make([]float64, len(b)), make([]float64, len(x))
	rs := make([]float64, 0, opt.Resamples)
	for range opt.Resamples {
		resample(rng, b, rb)
		resample(rng, x, rx)
		if mb := stat.Mean(rb, nil); mb != 0 {
			rs = append(rs, stat.Mean(rx, nil)/mb)
		}
	}
	if len(rs) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(rs)
	tail := plainTail(opt.Confidence)
	return stat.Quantile(tail, stat.LinInterp, rs, nil), stat.Quantile(1-tail, stat.LinInterp, rs, nil)
}

// resample fills dst with len(dst) values drawn from src with replacement.
func resample(rng *rand.Rand, src, dst []float64) {
	for i := range dst {
		dst[i] = src[rng.IntN(len(src))]
	}
}
