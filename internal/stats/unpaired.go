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
// A bootstrap resample draws len(base) values from base and, separately,
// len(x) values from x, with replacement; the t methods use Welch's degrees
// of freedom.
//
// opt.Method chooses the interval; Auto uses Choose(opt.Statistic, false).
// As in PairedRatio every method works on the log ratio and needs positive
// values: with a value that is 0 or negative the interval is the plain
// percentile interval of mean(x*)/mean(base*) and Method says Percentile.
//
// The result's N is the smaller sample size. NaN and infinite values are
// dropped. With fewer than 2 values on either side Lo, Hi and HalfWidthPct
// are NaN and the result is not significant; when mean(base) is 0 Ratio is
// NaN too. No verdict should rest on fewer than MinPairs values a side: see
// Judge.
func UnpairedRatio(base, x []float64, opt Options) Ratio {
	opt = opt.withDefaults()
	b, xs := finite(base), finite(x)
	m := opt.method(false)
	r := newRatio(min(len(b), len(xs)), m)
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
	if !allPositiveValues(b) || !allPositiveValues(xs) {
		r.Method = Percentile
		r.Lo, r.Hi = unpairedPercentileRatio(b, xs, opt)
	} else {
		iv, _ := unpairedIntervalWith(b, xs, opt, m, nil)
		r.Lo, r.Hi = iv.exp()
	}
	return r.finish()
}

// UnpairedIntervals returns the interval of every method in Methods() for the
// same two positive samples, the bootstrap ones from one set of resamples:
// what the simulation benchmark compares. Values that are not finite and
// positive are dropped; with fewer than 2 left on a side every interval is
// NaN.
func UnpairedIntervals(base, x []float64, opt Options) map[Method][2]float64 {
	opt = opt.withDefaults()
	pos := func(xs []float64) []float64 {
		var out []float64
		for _, v := range finite(xs) {
			if v > 0 {
				out = append(out, v)
			}
		}
		return out
	}
	b, xs := pos(base), pos(x)
	out := map[Method][2]float64{}
	var boot *bootDist
	for _, m := range Methods() {
		iv := nanInterval()
		if len(b) >= 2 && len(xs) >= 2 {
			iv, boot = unpairedIntervalWith(b, xs, opt, m, boot)
		}
		lo, hi := iv.exp()
		out[m] = [2]float64{lo, hi}
	}
	return out
}

// unpairedIntervalWith returns the interval of the log ratio by method m for
// positive samples of at least 2 values each, reusing the bootstrap
// distribution boot when it is not nil (and returning the one it made).
func unpairedIntervalWith(b, x []float64, opt Options, m Method, boot *bootDist) (interval, *bootDist) {
	theta, se, _ := logRatioSEUnpaired(b, x)
	if se < seFloor {
		return interval{theta, theta}, boot
	}
	switch m {
	case LogT:
		lb, lx := logs(b), logs(x)
		mb, vb := stat.MeanVariance(lb, nil)
		mx, vx := stat.MeanVariance(lx, nil)
		sb, sx := vb/float64(len(b)), vx/float64(len(x))
		return tInterval(mx-mb, math.Sqrt(sb+sx), welchDF(sb, sx, len(b), len(x)), opt.Confidence), boot
	case DeltaT:
		sb, sx := relVarOfMean(b), relVarOfMean(x)
		return tInterval(theta, se, welchDF(sb, sx, len(b), len(x)), opt.Confidence), boot
	}
	if boot == nil {
		d := unpairedBoot(b, x, opt, theta, se)
		boot = &d
	}
	switch m {
	case Percentile:
		return boot.percentile(plainTail(opt.Confidence)), boot
	case ExpandedPercentile:
		return boot.percentile(expandedTail(min(len(b), len(x)), opt.Confidence)), boot
	case BCa:
		return boot.bca(opt.Confidence, [][]float64{jackUnpaired(b, x, true), jackUnpaired(b, x, false)}), boot
	}
	return boot.studentized(opt.Confidence), boot
}

// jackUnpaired returns the leave-one-out log ratios, leaving out each value
// of base (ofBase) or of x in turn.
func jackUnpaired(b, x []float64, ofBase bool) []float64 {
	src := x
	if ofBase {
		src = b
	}
	out := make([]float64, len(src))
	rest := make([]float64, 0, len(src)-1)
	for i := range src {
		rest = append(rest[:0], src[:i]...)
		rest = append(rest, src[i+1:]...)
		if ofBase {
			out[i] = math.Log(stat.Mean(x, nil) / stat.Mean(rest, nil))
		} else {
			out[i] = math.Log(stat.Mean(rest, nil) / stat.Mean(b, nil))
		}
	}
	return out
}

// unpairedBoot draws opt.Resamples two-sample resamples and returns the
// bootstrap distribution of θ and of its studentized form.
func unpairedBoot(b, x []float64, opt Options, theta, se float64) bootDist {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	rb, rx := make([]float64, len(b)), make([]float64, len(x))
	return newBootDist(theta, se, opt.Resamples, func() (float64, float64, bool) {
		resample(rng, b, rb)
		resample(rng, x, rx)
		return logRatioSEUnpaired(rb, rx)
	})
}

// welchDF is the Welch-Satterthwaite degrees of freedom for two variance
// components sb and sx (each a variance of a mean) from samples of nb and nx.
func welchDF(sb, sx float64, nb, nx int) float64 {
	den := sb*sb/float64(nb-1) + sx*sx/float64(nx-1)
	if den == 0 {
		return float64(nb + nx - 2)
	}
	return (sb + sx) * (sb + sx) / den
}

// relVarOfMean is Var(xs)/(n·mean²): the delta-method variance of log(mean).
func relVarOfMean(xs []float64) float64 {
	m, v := stat.MeanVariance(xs, nil)
	return v / (float64(len(xs)) * m * m)
}

func logs(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, v := range xs {
		out[i] = math.Log(v)
	}
	return out
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
// standard error for independent samples,
//
//	se² = Var(x)/(n_x·mean(x)²) + Var(b)/(n_b·mean(b)²);
//
// ok is false when a mean is not positive.
func logRatioSEUnpaired(b, x []float64) (theta, se float64, ok bool) {
	mb, mx := stat.Mean(b, nil), stat.Mean(x, nil)
	if !(mb > 0 && mx > 0) {
		return 0, 0, false
	}
	return math.Log(mx / mb), math.Sqrt(relVarOfMean(b) + relVarOfMean(x)), true
}

// unpairedPercentileRatio is the percentile interval of mean(x*)/mean(b*);
// resamples whose baseline mean is 0 are skipped.
func unpairedPercentileRatio(b, x []float64, opt Options) (lo, hi float64) {
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
	return quantile(tail, rs), quantile(1-tail, rs)
}

// resample fills dst with len(dst) values drawn from src with replacement.
func resample(rng *rand.Rand, src, dst []float64) {
	for i := range dst {
		dst[i] = src[rng.IntN(len(src))]
	}
}
