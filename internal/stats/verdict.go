package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultMinPairs is the fewest pairs (paired rounds; for an unpaired
// comparison, trials a side) a verdict may rest on unless a study says
// otherwise. Below 5 the simulation benchmark (BENCH.md) found no interval
// method that keeps 95% coverage without becoming uselessly wide, and a
// handful of rounds says little about a machine's drift and outliers.
const DefaultMinPairs = 5

// HighCV is the coefficient of variation above which a platform's results are
// called noisy.
const HighCV = 0.10

// Verdict returns "~" when r is not significant, otherwise "better" or
// "worse". higherIsBetter says which direction is good for the metric: for
// throughput a ratio above 1 is better, for latency or CPU cost per operation
// (higherIsBetter false) a ratio above 1 is worse.
func (r Ratio) Verdict(higherIsBetter bool) string {
	if !r.Significant {
		return "~"
	}
	higher := r.Lo > 1 // significant, so the whole interval is on one side of 1
	if higher == higherIsBetter {
		return "better"
	}
	return "worse"
}

// CVWarning returns a warning when s's coefficient of variation exceeds
// HighCV, for example "platform docker-nat: CV 14.2% > 10%: noisy, results
// less certain", and "" otherwise (also when s has fewer than 2 values).
func CVWarning(name string, s Summary) string {
	if s.N < 2 || !(s.CV > HighCV) {
		return ""
	}
	return fmt.Sprintf("platform %s: CV %.1f%% > %.0f%%: noisy, results less certain",
		name, s.CV*100, HighCV*100)
}

// RoundsFor roughly estimates how many paired rounds a 95% confidence
// interval of half-width halfWidthPct percent needs when the per-round ratio
// (see PerRoundRatios) has coefficient of variation cv, a fraction as in
// Summary.CV. It uses the normal approximation n = (z*cv*100/halfWidthPct)^2
// with z = 1.96, rounded up and at least 3; the bootstrap interval at small n
// is wider, so treat it as a lower bound. It returns 0 when an input is NaN,
// infinite or negative or halfWidthPct is 0, and caps the result at
// math.MaxInt32.
func RoundsFor(cv, halfWidthPct float64) int {
	if !isFinite(cv) || !isFinite(halfWidthPct) || cv < 0 || halfWidthPct <= 0 {
		return 0
	}
	z := distuv.UnitNormal.Quantile(0.975)
	n := math.Ceil(math.Pow(z*cv*100/halfWidthPct, 2))
	switch {
	case n < 3:
		return 3
	case n > math.MaxInt32:
		return math.MaxInt32
	}
	return int(n)
}

// MinTailBeyond is how many observations a trial must have beyond a
// q-quantile for that quantile to support a verdict: n·(1-q) >= 10, i.e. at
// least 1000 requests behind a p99 and 10000 behind a p99.9. With fewer, the
// "p99" is one of the few largest values: its sampling error grows (about
// 1/sqrt(n(1-q)) of the tail's spread, 32% at 10) and it says more about a
// single stall than about the tail. See MinTailSamples.
const MinTailBeyond = 10

// MinTailSamples returns the fewest observations per trial behind a
// q-quantile (0 < q < 1) that supports a verdict: ceil(MinTailBeyond/(1-q)).
func MinTailSamples(q float64) int64 {
	if !(q > 0 && q < 1) {
		return 0
	}
	return int64(math.Ceil(MinTailBeyond/(1-q) - 1e-9))
}
