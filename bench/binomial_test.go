package bench

import (
	"math"
	"testing"
)

func TestBinomialTail(t *testing.T) {
	tests := []struct {
		n, k int
		p    float64
		want float64
	}{
		{20, 0, 0.05, 1},
		{20, 1, 0.05, 1 - math.Pow(0.95, 20)}, // 0.6415
		{20, 2, 0.05, 1 - math.Pow(0.95, 20) - 20*0.05*math.Pow(0.95, 19)}, // 0.2642
		{1, 1, 0.5, 0.5},
	}
	for _, tc := range tests {
		if got := binomialTail(tc.n, tc.k, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("binomialTail(%d, %d, %g) = %.6f, want %.6f", tc.n, tc.k, tc.p, got, tc.want)
		}
	}
}
