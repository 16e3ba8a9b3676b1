package stats

import (
	"math"
	"testing"
)

func TestVerdict(t *testing.T) {
	tests := []struct {
		name           string
		r              Ratio
		higherIsBetter bool
		want           string
	}{
		{"not significant", Ratio{Ratio: 1.2, Lo: 0.9, Hi: 1.5}, true, "~"},
		{"not significant lower-is-better", Ratio{Ratio: 0.8, Lo: 0.6, Hi: 1.1}, false, "~"},
		{"higher throughput", Ratio{Ratio: 1.2, Lo: 1.1, Hi: 1.3, Significant: true}, true, "better"},
		{"lower throughput", Ratio{Ratio: 0.8, Lo: 0.7, Hi: 0.9, Significant: true}, true, "worse"},
		{"higher latency", Ratio{Ratio: 1.2, Lo: 1.1, Hi: 1.3, Significant: true}, false, "worse"},
		{"lower latency", Ratio{Ratio: 0.8, Lo: 0.7, Hi: 0.9, Significant: true}, false, "better"},
		{"undefined", Ratio{Ratio: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}, true, "~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Verdict(tt.higherIsBetter); got != tt.want {
				t.Errorf("Verdict(%v) = %q, want %q", tt.higherIsBetter, got, tt.want)
			}
		})
	}
}

func TestCVWarning(t *testing.T) {
	tests := []struct {
		name string
		s    Summary
		want string
	}{
		{"noisy", Summary{N: 5, Mean: 100, SD: 14.2, CV: 0.142},
			"platform docker-nat: CV 14.2% > 10%: noisy, results less certain"},
		{"at threshold", Summary{N: 5, CV: HighCV}, ""},
		{"quiet", Summary{N: 5, CV: 0.03}, ""},
		{"too few values", Summary{N: 1, CV: 0.5}, ""},
		{"zero mean", Summary{N: 2, CV: math.Inf(1)},
			"platform docker-nat: CV +Inf% > 10%: noisy, results less certain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CVWarning("docker-nat", tt.s); got != tt.want {
				t.Errorf("CVWarning = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRoundsFor(t *testing.T) {
	tests := []struct {
		name     string
		cv, hwPc float64
		want     int
	}{
		// (1.959964*10/5)^2 = 15.37 -> 16
		{"10% CV, 5% half-width", 0.10, 5, 16},
		// (1.959964*10/2)^2 = 96.04 -> 97
		{"10% CV, 2% half-width", 0.10, 2, 97},
		// (1.959964*2/5)^2 = 0.61 -> floor of 3
		{"quiet", 0.02, 5, 3},
		{"no noise", 0, 1, 3},
		{"zero half-width", 0.1, 0, 0},
		{"negative cv", -0.1, 5, 0},
		{"NaN cv", math.NaN(), 5, 0},
		{"absurd precision is capped", 1, 1e-9, math.MaxInt32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RoundsFor(tt.cv, tt.hwPc); got != tt.want {
				t.Errorf("RoundsFor(%v, %v) = %d, want %d", tt.cv, tt.hwPc, got, tt.want)
			}
		})
	}
}
