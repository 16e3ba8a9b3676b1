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

func TestClopperPearson(t *testing.T) {
	// Values from R's binom.test(k, n)$conf.int.
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 20, 0, 0.1684335},
		{1, 20, 0.001265089, 0.2487327},
		{10, 20, 0.2719578, 0.7280422},
	}
	for _, tc := range tests {
		lo, hi := clopperPearson(tc.k, tc.n, 0.95)
		if math.Abs(lo-tc.lo) > 1e-6 || math.Abs(hi-tc.hi) > 1e-6 {
			t.Errorf("clopperPearson(%d, %d) = [%.7f, %.7f], want [%.7f, %.7f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestNormalRounds(t *testing.T) {
	// A 5% effect with 10% per-round spread: about (2.0+0.86)^2 * 4 = 33.
	if n := normalRounds(0.10, math.Log(0.95)); n < 30 || n > 36 {
		t.Errorf("normalRounds(0.10, log 0.95) = %d, want about 33", n)
	}
	if n := normalRounds(0.01, math.Log(0.8)); n != 2 {
		t.Errorf("normalRounds for a huge effect = %d, want 2 (the smallest with a t quantile)", n)
	}
}
