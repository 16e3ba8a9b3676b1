package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Pair is one round's trials of one metric: the baseline platform's value and
// the other platform's value, measured in the same round.
type Pair struct {
	Base, X float64
}

// Options controls the intervals of PairedRatio and UnpairedRatio. The zero
// value is usable.
type Options struct {
	// Resamples is the number of bootstrap resamples; <= 0 means 10000.
	Resamples int
	// Confidence is the confidence level of the interval; outside (0,1) means 0.95.
	Confidence float64
	// Seed seeds the PCG generator, so the same input and Seed always give the
	// same interval. 0 is an ordinary seed.
	Seed uint64
	// Method selects the interval; Auto (the zero value) means Choose(Statistic, paired).
	Method Method
	// Statistic is what kind of value the samples are; it decides Auto.
	Statistic Statistic
}

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

// method returns the concrete method o asks for.
func (o Options) method(paired bool) Method {
	if o.Method == Auto {
		return Choose(o.Statistic, paired)
	}
	return o.Method
}

// Ratio is a platform's metric relative to the baseline, with a confidence
// interval.
type Ratio struct {
	// N is the number of pairs used (pairs with a NaN or infinite value are
	// dropped); for an unpaired ratio, the smaller sample's size.
	N int
	// Ratio is mean(X)/mean(Base).
	Ratio float64
	// Lo and Hi bound the confidence interval of Ratio; NaN when N < 2.
	Lo, Hi float64
	// HalfWidthPct is (Hi-Lo)/2/Ratio*100: the interval's half-width in percent.
	HalfWidthPct float64
	// Significant reports whether the interval excludes 1.
	Significant bool
	// Method is the interval method used (never Auto once computed).
	Method Method
}

// PairedRatio estimates mean(X)/mean(Base) over the rounds in pairs, with a
// confidence interval that keeps rounds paired (a bootstrap resample draws
// whole rounds, so a round's two trials always travel together; the t
// methods work on per-round quantities).
//
// opt.Method chooses the interval; Auto uses Choose(opt.Statistic, true),
// the method the simulation benchmark found narrowest among those that keep
// their coverage (BENCH.md). Every method is computed on the log ratio and
// needs positive values; with a value that is 0 or negative the interval is
// the bootstrap percentile interval of mean(X*)/mean(Base*) instead, and
// Method says Percentile. When every round has the same ratio (up to
// rounding), the interval is [Ratio, Ratio].
//
// With fewer than 2 usable pairs Lo, Hi and HalfWidthPct are NaN and the
// result is not significant. When mean(Base) is 0 the ratio is undefined:
// Ratio, Lo, Hi and HalfWidthPct are NaN and the result is not significant.
// No verdict should rest on fewer pairs than MinPairs: see Judge. Callers that
// encode a Ratio as JSON must handle NaN, which encoding/json rejects.
func PairedRatio(pairs []Pair, opt Options) Ratio {
	opt = opt.withDefaults()
	ps := finitePairs(pairs)
	m := opt.method(true)
	r := newRatio(len(ps), m)
	if r.N == 0 {
		return r
	}
	r.Ratio = meanRatio(ps)
	if r.N < 2 || math.IsNaN(r.Ratio) {
		return r
	}
	if !allPositive(ps) {
		r.Method = Percentile
		r.Lo, r.Hi = percentileRatio(ps, opt)
	} else {
		r.Lo, r.Hi = pairedInterval(ps, opt, m).exp()
	}
	return r.finish()
}

// newRatio is a Ratio of n values with nothing computed yet.
func newRatio(n int, m Method) Ratio {
	nan := math.NaN()
	return Ratio{N: n, Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan, Method: m}
}

// finish fills in the half-width and significance from Lo and Hi.
func (r Ratio) finish() Ratio {
	r.HalfWidthPct = (r.Hi - r.Lo) / 2 / r.Ratio * 100
	r.Significant = r.Lo > 1 || r.Hi < 1
	return r
}

// PairedIntervals returns the interval of every method in Methods() for the
// same positive pairs, the bootstrap ones from one set of resamples: what the
// simulation benchmark compares. Pairs with a value that is not finite and
// positive are dropped; with fewer than 2 left every interval is NaN.
func PairedIntervals(pairs []Pair, opt Options) map[Method][2]float64 {
	opt = opt.withDefaults()
	var ps []Pair
	for _, p := range finitePairs(pairs) {
		if p.Base > 0 && p.X > 0 {
			ps = append(ps, p)
		}
	}
	out := map[Method][2]float64{}
	var boot *bootDist
	for _, m := range Methods() {
		var iv interval
		if len(ps) < 2 {
			iv = nanInterval()
		} else {
			iv, boot = pairedIntervalWith(ps, opt, m, boot)
		}
		lo, hi := iv.exp()
		out[m] = [2]float64{lo, hi}
	}
	return out
}

// pairedInterval returns the interval of the log ratio by method m; ps has at
// least 2 pairs, all positive.
func pairedInterval(ps []Pair, opt Options, m Method) interval {
	iv, _ := pairedIntervalWith(ps, opt, m, nil)
	return iv
}

// pairedIntervalWith is pairedInterval reusing the bootstrap distribution
// boot when it is not nil (and returning the one it made).
func pairedIntervalWith(ps []Pair, opt Options, m Method, boot *bootDist) (interval, *bootDist) {
	n := len(ps)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	theta, se, _ := logRatioSE(ps, idx)
	if se < seFloor {
		return interval{theta, theta}, boot
	}
	df := float64(n - 1)
	switch m {
	case LogT:
		ls := make([]float64, n)
		for i, p := range ps {
			ls[i] = math.Log(p.X / p.Base)
		}
		mean, sd := stat.MeanStdDev(ls, nil)
		return tInterval(mean, sd/math.Sqrt(float64(n)), df, opt.Confidence), boot
	case DeltaT:
		return tInterval(theta, se, df, opt.Confidence), boot
	}
	if boot == nil {
		b := pairedBoot(ps, opt, theta, se)
		boot = &b
	}
	switch m {
	case Percentile:
		return boot.percentile(plainTail(opt.Confidence)), boot
	case ExpandedPercentile:
		return boot.percentile(expandedTail(n, opt.Confidence)), boot
	case BCa:
		jack := make([]float64, n)
		rest := make([]int, 0, n-1)
		for i := range ps {
			rest = rest[:0]
			for j := range ps {
				if j != i {
					rest = append(rest, j)
				}
			}
			jack[i], _, _ = logRatioSE(ps, rest)
		}
		return boot.bca(opt.Confidence, [][]float64{jack}), boot
	}
	return boot.studentized(opt.Confidence), boot
}

// pairedBoot draws opt.Resamples paired resamples and returns the bootstrap
// distribution of θ and of its studentized form.
func pairedBoot(ps []Pair, opt Options, theta, se float64) bootDist {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	idx := make([]int, len(ps))
	return newBootDist(theta, se, opt.Resamples, func() (float64, float64, bool) {
		for j := range idx {
			idx[j] = rng.IntN(len(ps))
		}
		return logRatioSE(ps, idx)
	})
}

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

// MeanRatio returns mean(X)/mean(Base) over the pairs whose values are both
// finite, or NaN when there are none or mean(Base) is 0: the point estimate
// of PairedRatio, without an interval.
func MeanRatio(pairs []Pair) float64 { return meanRatio(finitePairs(pairs)) }

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

// percentileRatio returns the plain percentile interval of the paired
// bootstrap distribution of mean(X*)/mean(Base*), for values that may be 0
// or negative. Resamples whose baseline mean is 0 are skipped; if all are,
// both bounds are NaN.
func percentileRatio(ps []Pair, opt Options) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	n := len(ps)
	rs := make([]float64, 0, opt.Resamples)
	for range opt.Resamples {
		var sb, sx float64
		for range n {
			p := ps[rng.IntN(n)]
			sb += p.Base
			sx += p.X
		}
		if sb != 0 {
			rs = append(rs, sx/sb)
		}
	}
	if len(rs) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(rs)
	tail := plainTail(opt.Confidence)
	return quantile(tail, rs), quantile(1-tail, rs)
}

// allPositive reports whether every value in ps is above 0, which the log
// ratio needs.
func allPositive(ps []Pair) bool {
	for _, p := range ps {
		if !(p.Base > 0 && p.X > 0) {
			return false
		}
	}
	return true
}

// seFloor is the smallest standard error of the log ratio treated as real.
// Below it the spread is floating-point rounding (every round has the same
// ratio, up to a few ulps): the sample then gets the zero-width interval
// [Ratio, Ratio], and a bootstrap resample is left out of the studentized
// distribution, since its t = (θ*-θ)/se* would be rounding error divided by
// rounding error. For a resample that only happens when it draws a single
// round n times (probability n^(1-n), 0.16% at n = 5).
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
