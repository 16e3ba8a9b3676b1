package stats

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Method is a kind of confidence interval for a ratio of means. Every
// method works on the log ratio θ = log(mean(X)/mean(Base)) and is
// exponentiated back, so intervals are never negative; the bootstrap ones
// resample rounds (paired) or each sample on its own (unpaired).
//
// The zero value, Auto, means the method the simulation benchmark
// (bench/intervals, numbers in BENCH.md) chose for the statistic: see
// Choose.
type Method int

// The interval methods. Their order is the order of the benchmark's tables.
const (
	// Auto is the measured choice for the statistic (see Choose).
	Auto Method = iota
	// LogT is Student's t on the per-round log ratios log(X_i/Base_i),
	// paired; unpaired, Welch's t on the two samples' logs. It estimates a
	// ratio of geometric means, which equals the ratio of means when the two
	// platforms' noise has the same shape.
	LogT
	// DeltaT is Student's t around θ with the delta-method standard error of
	// the log ratio of means (paired: the spread of the linearised per-round
	// differences; unpaired: Welch-Satterthwaite degrees of freedom).
	DeltaT
	// Percentile is the plain bootstrap percentile interval.
	Percentile
	// ExpandedPercentile is Hesterberg's percentile interval with its tails
	// widened for small samples (The American Statistician 69(4), 2015).
	ExpandedPercentile
	// BCa is Efron's bias-corrected and accelerated bootstrap interval, its
	// acceleration from the jackknife.
	BCa
	// BootstrapT is the studentized bootstrap (bootstrap-t) of θ with the
	// delta-method standard error.
	BootstrapT
)

// Methods lists every concrete method (not Auto), in table order.
func Methods() []Method {
	return []Method{LogT, DeltaT, Percentile, ExpandedPercentile, BCa, BootstrapT}
}

// String is the method's short name as the tables and BENCH.md write it.
func (m Method) String() string {
	switch m {
	case Auto:
		return "auto"
	case LogT:
		return "log-t"
	case DeltaT:
		return "delta-t"
	case Percentile:
		return "percentile"
	case ExpandedPercentile:
		return "expanded"
	case BCa:
		return "BCa"
	case BootstrapT:
		return "bootstrap-t"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Describe is a phrase for report headers: how the interval is made.
func (m Method) Describe(paired bool) string {
	switch m {
	case LogT:
		if paired {
			return "Student t on the per-round log ratios"
		}
		return "Welch t on the log values"
	case DeltaT:
		return "Student t on the log ratio of means (delta-method standard error)"
	case Percentile:
		return "bootstrap percentile"
	case ExpandedPercentile:
		return "expanded bootstrap percentile"
	case BCa:
		return "bootstrap BCa"
	case BootstrapT:
		return "studentized bootstrap (bootstrap-t)"
	}
	return m.String()
}

// Statistic says what kind of value a metric is, which decides the interval
// method (Choose).
type Statistic int

const (
	// MeanStatistic is a per-trial mean or total: throughput, CPU per
	// operation, mean latency.
	MeanStatistic Statistic = iota
	// TailStatistic is a per-trial high percentile (p99 latency): skewed and
	// noisier from trial to trial.
	TailStatistic
)

// Choose returns the interval method used for a statistic, paired (ratios
// to the baseline over rounds) or unpaired (compare between runs): the
// narrowest method whose coverage stayed at least 94% in every scenario of
// the simulation benchmark at 5 to 40 pairs (bench/intervals; the table is
// in BENCH.md), or, where none did, the one with the highest lowest
// coverage. That is DeltaT for every statistic: LogT is about as narrow and
// covers as well while both platforms' noise has the same shape, but it
// estimates a ratio of geometric means, so when one platform is much
// noisier than the other (CV 3% against 20%) its coverage of the ratio of
// means falls to 0.91-0.92 at 40 pairs; the bootstrap intervals cover
// 0.80-0.93 at 5 pairs (percentile, BCa, expanded percentile), and
// bootstrap-t, though it covers, is wider and now and then enormous.
func Choose(s Statistic, paired bool) Method {
	return DeltaT
}

// interval is a confidence interval of the log ratio.
type interval struct{ lo, hi float64 }

// exp returns the interval of the ratio itself.
func (iv interval) exp() (lo, hi float64) { return math.Exp(iv.lo), math.Exp(iv.hi) }

func nanInterval() interval { return interval{math.NaN(), math.NaN()} }

// studentQ returns the two-sided Student t quantile t_{1-(1-conf)/2, df}.
func studentQ(conf, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
}

// tInterval is center ± t_{df}·se.
func tInterval(center, se, df, conf float64) interval {
	if !(se >= 0) || !(df > 0) {
		return nanInterval()
	}
	h := studentQ(conf, df) * se
	return interval{center - h, center + h}
}

// expandedTail returns Hesterberg's widened tail probability alpha'/2 for n
// values at the given confidence level.
func expandedTail(n int, confidence float64) float64 {
	df := float64(n - 1)
	t := studentQ(confidence, df)
	return distuv.UnitNormal.CDF(-math.Sqrt(float64(n)/df) * t)
}

// plainTail returns the plain percentile interval's tail probability alpha/2.
func plainTail(confidence float64) float64 { return (1 - confidence) / 2 }

// quantile returns the p quantile of sorted, linearly interpolated.
func quantile(p float64, sorted []float64) float64 {
	p = math.Min(1, math.Max(0, p))
	return stat.Quantile(p, stat.LinInterp, sorted, nil)
}

// bootDist is the bootstrap distribution of θ: the log ratio of the
// resamples (sorted) and their studentized values t* = (θ*-θ)/se* (sorted;
// resamples whose se* is below seFloor are left out of ts only).
type bootDist struct {
	theta, se float64
	thetas    []float64
	ts        []float64
}

// newBootDist draws resamples times with draw, which returns a resample's
// log ratio and standard error (ok false for a resample to skip), and
// returns the sorted distributions of θ* and t* = (θ*-θ)/se*.
func newBootDist(theta, se float64, resamples int, draw func() (th, s float64, ok bool)) bootDist {
	b := bootDist{theta: theta, se: se, thetas: make([]float64, 0, resamples), ts: make([]float64, 0, resamples)}
	for range resamples {
		th, s, ok := draw()
		if !ok {
			continue
		}
		b.thetas = append(b.thetas, th)
		if s >= seFloor {
			b.ts = append(b.ts, (th-theta)/s)
		}
	}
	slices.Sort(b.thetas)
	slices.Sort(b.ts)
	return b
}

// percentile returns the interval between the tail and 1-tail quantiles of θ*.
func (b bootDist) percentile(tail float64) interval {
	if len(b.thetas) == 0 {
		return nanInterval()
	}
	return interval{quantile(tail, b.thetas), quantile(1-tail, b.thetas)}
}

// studentized returns the bootstrap-t interval θ - t*_{1-α/2}·se .. θ - t*_{α/2}·se.
func (b bootDist) studentized(conf float64) interval {
	if len(b.ts) == 0 {
		return nanInterval()
	}
	tail := plainTail(conf)
	return interval{b.theta - quantile(1-tail, b.ts)*b.se, b.theta - quantile(tail, b.ts)*b.se}
}

// bca returns the BCa interval given the jackknife values of θ, each with
// its sample's weight (1/n_k² of Efron's multi-sample acceleration; equal
// weights for one sample).
func (b bootDist) bca(conf float64, jack [][]float64) interval {
	B := len(b.thetas)
	if B == 0 {
		return nanInterval()
	}
	below, equal := 0, 0
	for _, t := range b.thetas {
		switch {
		case t < b.theta:
			below++
		case t == b.theta:
			equal++
		}
	}
	p0 := (float64(below) + float64(equal)/2) / float64(B)
	p0 = math.Min(math.Max(p0, 1/float64(B+1)), float64(B)/float64(B+1))
	z0 := distuv.UnitNormal.Quantile(p0)
	a := acceleration(jack)
	tail := plainTail(conf)
	adj := func(p float64) float64 {
		z := distuv.UnitNormal.Quantile(p)
		d := 1 - a*(z0+z)
		if d <= 0 {
			if p < 0.5 {
				return 0
			}
			return 1
		}
		return distuv.UnitNormal.CDF(z0 + (z0+z)/d)
	}
	return interval{quantile(adj(tail), b.thetas), quantile(adj(1-tail), b.thetas)}
}

// acceleration is the BCa acceleration from jackknife values, one slice per
// independent sample (Efron and Tibshirani 1993, (14.15) and its
// multi-sample form): with U_ki = (n_k-1)(mean_k - θ_(ki)) the empirical
// influence values, a = Σ U³/n_k³ / (6 (Σ U²/n_k²)^1.5).
func acceleration(jack [][]float64) float64 {
	var num, den float64
	for _, js := range jack {
		n := float64(len(js))
		if n < 2 {
			continue
		}
		m := stat.Mean(js, nil)
		for _, j := range js {
			u := (n - 1) * (m - j)
			num += u * u * u / (n * n * n)
			den += u * u / (n * n)
		}
	}
	if den == 0 {
		return 0
	}
	return num / (6 * math.Pow(den, 1.5))
}
