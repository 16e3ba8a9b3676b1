package tcprr

import "testing"

// TestMedianInterval: the order statistics that bound the median at 95%
// for the pair counts TestCrossCheck uses.
func TestMedianInterval(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // reversed: the function sorts
		}
		return xs
	}
	for _, c := range []struct {
		n      int
		lo, hi float64
	}{
		{7, 1, 7},   // k = 1: P(X < 1) = 0.008
		{10, 2, 9},  // k = 2: P(X < 2) = 0.011
		{15, 4, 12}, // k = 4: P(X < 4) = 0.018
		{3, 1, 3},   // too few for 95%: the extremes
	} {
		lo, hi := medianInterval(seq(c.n))
		if lo != c.lo || hi != c.hi {
			t.Errorf("n=%d: [%v, %v], want [%v, %v]", c.n, lo, hi, c.lo, c.hi)
		}
	}
}
