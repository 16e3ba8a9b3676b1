package stats

import (
	"math"
	"testing"
)

func TestMeanCI(t *testing.T) {
	tests := []struct {
		name   string
		xs     []float64
		lo, hi float64
	}{
		// mean 3, sd 1.5811, se 0.7071, t(0.975, 4) = 2.7764.
		{"five values", []float64{1, 2, 3, 4, 5}, 3 - 2.7764*0.70711, 3 + 2.7764*0.70711},
		{"constant", []float64{2, 2, 2}, 2, 2},
		{"NaN ignored", []float64{1, math.NaN(), 3}, 2 - 12.706, 2 + 12.706},
		{"one value", []float64{7}, math.NaN(), math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := MeanCI(tt.xs, 0.95)
			same := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-3 }
			if !same(lo, tt.lo) || !same(hi, tt.hi) {
				t.Errorf("MeanCI = [%v, %v], want [%v, %v]", lo, hi, tt.lo, tt.hi)
			}
		})
	}
}
