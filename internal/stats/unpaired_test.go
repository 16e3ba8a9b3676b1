package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat"
)

func TestUnpairedRatioEdgeCases(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name      string
		base, x   []float64
		wantN     int
		wantRatio float64 // NaN means undefined
		wantCI    bool    // whether Lo and Hi are numbers
		wantSig   bool
	}{
		{"empty", nil, nil, 0, nan, false, false},
		{"one each", []float64{10}, []float64{20}, 1, 2, false, false},
		{"one base", []float64{10}, []float64{20, 22, 21}, 1, 2.1, false, false},
		{"zero base mean", []float64{0, 0, 0}, []float64{1, 2, 3}, 3, nan, false, false},
		{"NaN and Inf dropped", []float64{10, nan, 10, 10}, []float64{math.Inf(1), 11, 11, 11}, 3, 1.1, true, true},
		{"constant, different sizes", []float64{100, 100, 100, 100}, []float64{110, 110, 110}, 3, 1.1, true, true},
		{"two each", []float64{10, 11}, []float64{10, 11}, 2, 1, true, false},
		{"zero value: percentile", []float64{0, 10, 11, 12}, []float64{5, 10, 11, 12}, 4, 38.0 / 33.0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := UnpairedRatio(tc.base, tc.x, Options{Seed: 1, Resamples: 2000})
			if r.N != tc.wantN {
				t.Errorf("N = %d, want %d", r.N, tc.wantN)
			}
			if math.IsNaN(tc.wantRatio) != math.IsNaN(r.Ratio) || (!math.IsNaN(tc.wantRatio) && !eq(r.Ratio, tc.wantRatio, 1e-12)) {
				t.Errorf("Ratio = %v, want %v", r.Ratio, tc.wantRatio)
			}
			if gotCI := !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi); gotCI != tc.wantCI {
				t.Errorf("CI [%v, %v]: defined = %v, want %v", r.Lo, r.Hi, gotCI, tc.wantCI)
			}
			if tc.wantCI && !(r.Lo <= r.Ratio+1e-12 && r.Ratio <= r.Hi+1e-12) {
				t.Errorf("CI [%v, %v] does not contain the ratio %v", r.Lo, r.Hi, r.Ratio)
			}
			if r.Significant != tc.wantSig {
				t.Errorf("Significant = %v, want %v", r.Significant, tc.wantSig)
			}
		})
	}
}

// lognormal returns n values with mean about m and coefficient of variation
// about cv.
func lognormal(rng *rand.Rand, n int, m, cv float64) []float64 {
	s := math.Sqrt(math.Log(1 + cv*cv))
	out := make([]float64, n)
	for i := range out {
		out[i] = m * math.Exp(s*rng.NormFloat64()-s*s/2)
	}
	return out
}

// TestUnpairedRatioLargeSample checks every method of the ratio of means
// against normal theory: with 400 trials a side each interval must agree
// with exp(θ ± 1.96·se) to within 1%. Log-t is left out: it estimates the
// ratio of geometric means, which differs from the ratio of means by about
// (CV_x²-CV_b²)/2 when the two samples' noise differs (about 2% here,
// which is why it is not the default).
func TestUnpairedRatioLargeSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name      string
		cvB, cvX  float64
		trueRatio float64
	}{
		{"equal noise", 0.1, 0.1, 1.05},
		{"noisier x", 0.05, 0.2, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := lognormal(rng, 400, 100, tc.cvB)
			x := lognormal(rng, 400, 100*tc.trueRatio, tc.cvX)
			mb, vb := stat.MeanVariance(b, nil)
			mx, vx := stat.MeanVariance(x, nil)
			se := math.Sqrt(vb/(400*mb*mb) + vx/(400*mx*mx))
			theta := math.Log(mx / mb)
			wantLo, wantHi := math.Exp(theta-1.96*se), math.Exp(theta+1.96*se)
			var r Ratio
			for _, m := range Methods() {
				if m == LogT {
					continue
				}
				r = UnpairedRatio(b, x, Options{Seed: 3, Resamples: 4000, Method: m})
				if !eq(r.Lo, wantLo, 0.01*wantLo) || !eq(r.Hi, wantHi, 0.01*wantHi) {
					t.Errorf("%v: CI [%.4f, %.4f], normal theory [%.4f, %.4f]", m, r.Lo, r.Hi, wantLo, wantHi)
				}
			}
			if !eq(r.Ratio, tc.trueRatio, 4*se*tc.trueRatio) {
				t.Errorf("ratio %.4f is more than 4 standard errors from the true %v", r.Ratio, tc.trueRatio)
			}
		})
	}
}

// TestUnpairedRatioInvariance: scaling both samples leaves the interval
// alone, scaling x scales it, and the same seed gives the same interval.
func TestUnpairedRatioInvariance(t *testing.T) {
	b := []float64{98, 103, 101, 95, 104, 99}
	x := []float64{90, 96, 88, 93, 91}
	r := UnpairedRatio(b, x, Options{Seed: 5})
	scale := func(xs []float64, c float64) []float64 {
		out := make([]float64, len(xs))
		for i, v := range xs {
			out[i] = v * c
		}
		return out
	}
	tests := []struct {
		name   string
		got    Ratio
		factor float64
	}{
		{"same seed", UnpairedRatio(b, x, Options{Seed: 5}), 1},
		{"both scaled", UnpairedRatio(scale(b, 1000), scale(x, 1000), Options{Seed: 5}), 1},
		{"x doubled", UnpairedRatio(b, scale(x, 2), Options{Seed: 5}), 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range [][2]float64{{tc.got.Ratio, r.Ratio}, {tc.got.Lo, r.Lo}, {tc.got.Hi, r.Hi}} {
				if !eq(v[0], v[1]*tc.factor, 1e-9) {
					t.Errorf("got %v, want %v", v[0], v[1]*tc.factor)
				}
			}
		})
	}
	if !r.Significant || r.Verdict(true) != "worse" {
		t.Errorf("x about 8%% below base with little noise: Significant=%v verdict %q, want worse", r.Significant, r.Verdict(true))
	}
}

// TestUnpairedRatioCoverage: in simulated A/A comparisons (true ratio 1, 5
// trials a side, CV 8%) the default 95% interval covers 1 in 93.5-96.5% of
// 4000 repetitions.
func TestUnpairedRatioCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rng := rand.New(rand.NewPCG(11, 13))
	const reps = 4000
	covered := 0
	for range reps {
		r := UnpairedRatio(lognormal(rng, 5, 100, 0.08), lognormal(rng, 5, 100, 0.08), Options{})
		if !r.Significant {
			covered++
		}
	}
	if c := float64(covered) / reps; c < 0.935 || c > 0.965 {
		t.Errorf("coverage %.3f, want 0.935-0.965", c)
	}
}
