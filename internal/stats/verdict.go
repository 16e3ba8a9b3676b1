package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MinReliableRounds is the fewest paired rounds for which PairedRatio's
// interval has close to its nominal coverage (measured: ~0.80 at 3 rounds,
// ~0.945 at 5).
const MinReliableRounds = 5

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
