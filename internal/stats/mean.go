package stats

import "math"

// MeanCI is the Student t confidence interval of the mean of xs at level
// conf (0.95): mean ± t(n-1)·sd/√n, NaNs ignored. Both bounds are NaN with
// fewer than two values. It describes one platform's own values (a
// throughput, or a ratio already paired within each trial), not a
// comparison between platforms, which PairedRatio gives.
func MeanCI(xs []float64, conf float64) (lo, hi float64) {
	s := Summarize(xs)
	if s.N < 2 {
		return math.NaN(), math.NaN()
	}
	iv := tInterval(s.Mean, s.SD/math.Sqrt(float64(s.N)), float64(s.N-1), conf)
	return iv.lo, iv.hi
}
