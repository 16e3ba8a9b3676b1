// Package stats holds the statistics nearnative reports: per-platform
// summaries, each platform's paired ratio to the baseline with a bootstrap
// confidence interval, verdicts ("~", "better", "worse"), noise warnings and a
// sample-size estimate. It is kept small and readable, in the style of
// benchstat: warnings are returned as values, never printed.
package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Summary describes one platform's trials of one metric.
type Summary struct {
	// N is the number of values summarised (NaNs are not counted).
	N int
	// Mean is the arithmetic mean.
	Mean float64
	// Median is the middle value; for an even N the mean of the two middle values.
	Median float64
	// Min and Max are the extremes.
	Min, Max float64
	// SD is the sample standard deviation (denominator N-1); 0 when N < 2.
	SD float64
	// CV is the coefficient of variation SD/|Mean| as a fraction (0.1 = 10%);
	// 0 when N < 2 or SD is 0, +Inf when Mean is 0 but SD is not.
	CV float64
}

// Summarize returns the Summary of xs, ignoring NaNs. xs is not modified.
// With no values left, N is 0, Mean, Median, Min and Max are NaN and SD and
// CV are 0.
func Summarize(xs []float64) Summary {
	vals := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	n := len(vals)
	if n == 0 {
		nan := math.NaN()
		return Summary{Mean: nan, Median: nan, Min: nan, Max: nan}
	}
	slices.Sort(vals)
	s := Summary{
		N:      n,
		Mean:   stat.Mean(vals, nil),
		Median: median(vals),
		Min:    vals[0],
		Max:    vals[n-1],
	}
	if n >= 2 {
		s.SD = stat.StdDev(vals, nil) // unbiased: divides by n-1
		if s.SD != 0 {
			s.CV = s.SD / math.Abs(s.Mean)
		}
	}
	return s
}

// median returns the textbook median of sorted, non-empty xs. (gonum's
// stat.Quantile kinds do not average the two middle values for even n.)
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
