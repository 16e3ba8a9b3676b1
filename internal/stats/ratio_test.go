package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// noisyPairs returns n rounds whose values are 100 (baseline) and 100*ratio
// (other platform), each times independent mean-1 lognormal noise with
// coefficient of variation cv, and both times a shared mean-1 lognormal
// round effect with coefficient of variation roundCV (the machine being
// busier in some rounds than others).
func noisyPairs(rng *rand.Rand, n int, ratio, cv, roundCV float64) []Pair {
	ln := func(cv float64) float64 {
		s := math.Sqrt(math.Log1p(cv * cv))
		return math.Exp(s*rng.NormFloat64() - s*s/2)
	}
	pairs := make([]Pair, n)
	for i := range pairs {
		round := ln(roundCV)
		pairs[i] = Pair{Base: 100 * round * ln(cv), X: 100 * ratio * round * ln(cv)}
	}
	return pairs
}

// TestChoose pins the measured choice (bench/intervals, BENCH.md): delta-t
// for every statistic, paired and unpaired.
func TestChoose(t *testing.T) {
	for _, s := range []Statistic{MeanStatistic, TailStatistic} {
		for _, paired := range []bool{true, false} {
			if got := Choose(s, paired); got != DeltaT {
				t.Errorf("Choose(%v, paired %v) = %v, want delta-t", s, paired, got)
			}
		}
	}
	if r := PairedRatio([]Pair{{1, 2}, {2, 3}, {3, 5}}, Options{}); r.Method != DeltaT {
		t.Errorf("default paired method %v, want delta-t", r.Method)
	}
}

// knownPairs are five rounds with per-round ratios 1.0, 1.1, 0.9, 1.05,
// 0.95 on baselines 100, 200, 150, 120, 80.
func knownPairs() []Pair {
	ratios := []float64{1.0, 1.1, 0.9, 1.05, 0.95}
	bases := []float64{100, 200, 150, 120, 80}
	var pairs []Pair
	for i, r := range ratios {
		pairs = append(pairs, Pair{Base: bases[i], X: bases[i] * r})
	}
	return pairs
}

// TestPairedDeltaTKnownValues checks the default interval against values
// computed by hand for knownPairs: θ = log(mean X / mean Base) =
// log(1.0107692), se from the linearised differences X_i/mean X -
// Base_i/mean Base (sample variance over n), t_{0.975,4} =
// 2.7764451051977987 (R's qt(0.975, 4)): exp(θ ± t·se) = [0.89677, 1.13926].
func TestPairedDeltaTKnownValues(t *testing.T) {
	r := PairedRatio(knownPairs(), Options{})
	const tol = 1e-9
	if !eq(r.Lo, 0.8967687274537617, tol) || !eq(r.Hi, 1.1392618928301113, tol) || !eq(r.Ratio, 1.0107692307692309, tol) {
		t.Errorf("got %.12f [%.12f, %.12f], want 1.010769230769 [0.896768727454, 1.139261892830]", r.Ratio, r.Lo, r.Hi)
	}
	if r.N != 5 || r.Significant || r.Verdict(true) != "~" || r.Method != DeltaT {
		t.Errorf("%+v: want N 5, not significant, delta-t", r)
	}
}

// TestPairedLogTKnownValues: log-t on knownPairs is Student's t on the logs
// of the per-round ratios alone: exp(mean ± t·sd/√5) = [0.90394, 1.10073],
// whatever the baselines and the order.
func TestPairedLogTKnownValues(t *testing.T) {
	pairs := knownPairs()
	r := PairedRatio(pairs, Options{Method: LogT})
	const tol = 1e-9
	if !eq(r.Lo, 0.9039367148894651, tol) || !eq(r.Hi, 1.1007310393167389, tol) || r.Method != LogT {
		t.Errorf("got [%.12f, %.12f] by %v, want [0.903936714889, 1.100731039317] by log-t", r.Lo, r.Hi, r.Method)
	}
	slices.Reverse(pairs)
	for i := range pairs {
		pairs[i].Base *= 3
		pairs[i].X *= 3
	}
	if r2 := PairedRatio(pairs, Options{Method: LogT}); !eq(r2.Lo, r.Lo, tol) || !eq(r2.Hi, r.Hi, tol) {
		t.Errorf("reordered and scaled: [%v, %v], want [%v, %v]", r2.Lo, r2.Hi, r.Lo, r.Hi)
	}
}

// TestUnpairedDeltaTKnownValues: two samples spread alike (logs -2d..2d, d =
// 0.03) around 100 and 90, five values each, so that Welch's degrees of
// freedom are exactly 8 and t_{0.975,8} = 2.306004135204166; the default
// (delta-t) interval is exp(log(mean x/mean b) ± t·se) = [0.83986, 0.96445],
// log-t's on the logs [0.83984, 0.96447].
func TestUnpairedDeltaTKnownValues(t *testing.T) {
	d := 0.03
	var b, x []float64
	for _, k := range []float64{-2, -1, 0, 1, 2} {
		b = append(b, 100*math.Exp(k*d))
		x = append(x, 90*math.Exp(k*d))
	}
	r := UnpairedRatio(b, x, Options{})
	if !eq(r.Lo, 0.8398562254731801, 1e-9) || !eq(r.Hi, 0.9644507898285107, 1e-9) || r.Method != DeltaT {
		t.Errorf("CI [%.12f, %.12f] by %v, want [0.839856225473, 0.964450789829] by delta-t", r.Lo, r.Hi, r.Method)
	}
	if !r.Significant || r.Verdict(true) != "worse" || !eq(r.Ratio, 0.9, 1e-12) {
		t.Errorf("%+v: want ratio 0.9, significant, worse", r)
	}
	r = UnpairedRatio(b, x, Options{Method: LogT})
	if !eq(r.Lo, 0.8398427225676555, 1e-9) || !eq(r.Hi, 0.9644662961698148, 1e-9) {
		t.Errorf("log-t CI [%.12f, %.12f], want [0.839842722568, 0.964466296170]", r.Lo, r.Hi)
	}
}

func TestPairedRatioConstantFactor(t *testing.T) {
	var pairs []Pair
	for _, b := range []float64{100, 120, 90, 110, 105, 97} {
		pairs = append(pairs, Pair{Base: b, X: 1.1 * b})
	}
	for _, m := range Methods() {
		r := PairedRatio(pairs, Options{Seed: 1, Method: m})
		const tol = 1e-12
		if r.N != 6 || !eq(r.Ratio, 1.1, tol) || !eq(r.Lo, 1.1, tol) || !eq(r.Hi, 1.1, tol) {
			t.Errorf("%v: got N=%d %v [%v, %v], want 6 and 1.1 with zero width", m, r.N, r.Ratio, r.Lo, r.Hi)
		}
		if !r.Significant || r.Verdict(true) != "better" || !eq(r.HalfWidthPct, 0, 1e-9) {
			t.Errorf("%v: Significant=%v Verdict=%q half-width %v", m, r.Significant, r.Verdict(true), r.HalfWidthPct)
		}
	}
}

func TestPairedRatioEdgeCases(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name      string
		pairs     []Pair
		wantN     int
		wantRatio float64 // NaN means undefined
		wantCI    bool    // whether Lo and Hi are numbers
		method    Method
	}{
		{"empty", nil, 0, nan, false, DeltaT},
		{"one pair", []Pair{{2, 3}}, 1, 1.5, false, DeltaT},
		{"zero baseline", []Pair{{0, 3}, {0, 4}, {0, 5}}, 3, nan, false, DeltaT},
		{"baseline mean zero", []Pair{{-1, 3}, {1, 4}}, 2, nan, false, DeltaT},
		{"NaN and Inf pairs dropped", []Pair{{nan, 1}, {2, 3}, {4, math.Inf(1)}, {2, 3}, {4, 6}}, 3, 1.5, true, DeltaT},
		{"dropping leaves one", []Pair{{nan, 1}, {2, 3}}, 1, 1.5, false, DeltaT},
		{"a zero value: percentile", []Pair{{2, 3}, {2, 0}, {4, 6}, {3, 4}}, 4, 13.0 / 11, true, Percentile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := PairedRatio(tt.pairs, Options{Resamples: 500})
			if r.N != tt.wantN || !eq(r.Ratio, tt.wantRatio, 1e-12) {
				t.Errorf("N=%d Ratio=%v, want %d and %v", r.N, r.Ratio, tt.wantN, tt.wantRatio)
			}
			gotCI := !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) && !math.IsNaN(r.HalfWidthPct)
			if gotCI != tt.wantCI {
				t.Errorf("CI [%v, %v] half-width %v: defined=%v, want %v", r.Lo, r.Hi, r.HalfWidthPct, gotCI, tt.wantCI)
			}
			if !tt.wantCI && (r.Significant || r.Verdict(true) != "~") {
				t.Errorf("undefined CI must not be significant: %+v", r)
			}
			if r.Method != tt.method {
				t.Errorf("method %v, want %v", r.Method, tt.method)
			}
		})
	}
}

func TestPairedRatioDeterministic(t *testing.T) {
	pairs := noisyPairs(rand.New(rand.NewPCG(7, 7)), 6, 1.0, 0.08, 0)
	for _, m := range []Method{Percentile, BCa, BootstrapT} {
		a := PairedRatio(pairs, Options{Seed: 42, Method: m})
		b := PairedRatio(pairs, Options{Seed: 42, Method: m})
		c := PairedRatio(pairs, Options{Seed: 43, Method: m})
		if a != b {
			t.Errorf("%v: same seed gave %+v and %+v", m, a, b)
		}
		if a.Lo == c.Lo && a.Hi == c.Hi {
			t.Errorf("%v: different seeds gave the same interval [%v, %v]", m, a.Lo, a.Hi)
		}
		if d := PairedRatio(pairs, Options{Resamples: DefaultResamples, Confidence: DefaultConfidence, Seed: 42, Method: m}); d != a {
			t.Errorf("%v: explicit defaults gave %+v, zero Options %+v", m, d, a)
		}
	}
	a := PairedRatio(pairs, Options{})
	if e := PairedRatio(pairs, Options{Confidence: 0.8}); !(e.Hi-e.Lo < a.Hi-a.Lo) {
		t.Errorf("80%% interval [%v, %v] not narrower than 95%% [%v, %v]", e.Lo, e.Hi, a.Lo, a.Hi)
	}
}

func TestExpandedTail(t *testing.T) {
	tests := []struct {
		n    int
		want float64 // Φ(-sqrt(n/(n-1)) t_{0.975,n-1}), computed with erfc
	}{
		{2, 0},          // t = 12.706205, z' = 17.969: alpha'/2 ~ 1e-72
		{6, 0.0024318},  // t = 2.570582, z' = 2.815931
		{10, 0.0085506}, // t = 2.262157, z' = 2.384523
	}
	for _, tt := range tests {
		if got := expandedTail(tt.n, 0.95); !eq(got, tt.want, 1e-6) {
			t.Errorf("expandedTail(%d) = %.7f, want %.7f", tt.n, got, tt.want)
		}
	}
}

// TestPairedIntervals: every method gives an interval around the ratio for
// the same data; the percentile interval is the narrowest bootstrap one and
// the expanded one contains it (wider tails of the same resamples).
func TestPairedIntervals(t *testing.T) {
	pairs := noisyPairs(rand.New(rand.NewPCG(3, 3)), 8, 1.05, 0.08, 0)
	ivs := PairedIntervals(pairs, Options{Seed: 9, Resamples: 4000})
	ratio := meanRatio(pairs)
	for _, m := range Methods() {
		iv, ok := ivs[m]
		if !ok || !(iv[0] < ratio && ratio < iv[1]) {
			t.Errorf("%v: interval %v does not hold the ratio %v", m, iv, ratio)
		}
		if r := PairedRatio(pairs, Options{Seed: 9, Resamples: 4000, Method: m}); !eq(r.Lo, iv[0], 1e-12) || !eq(r.Hi, iv[1], 1e-12) {
			t.Errorf("%v: PairedRatio [%v, %v], PairedIntervals %v", m, r.Lo, r.Hi, iv)
		}
	}
	p, e := ivs[Percentile], ivs[ExpandedPercentile]
	if !(e[0] <= p[0] && p[1] <= e[1]) {
		t.Errorf("expanded %v does not contain percentile %v", e, p)
	}
	if ivs := PairedIntervals(pairs[:1], Options{}); !math.IsNaN(ivs[LogT][0]) {
		t.Errorf("one pair: %v, want NaN", ivs)
	}
}

// TestPairedRatioCoverage checks that the default 95% interval contains
// the true ratio about 95% of the time with 5 rounds (an A/A study says "~"
// in about 95% of repetitions). The simulation benchmark measured delta-t at
// 0.94-0.98 over its mean-based scenarios at 5 to 40 pairs (BENCH.md); with
// 4000 repetitions the binomial standard error is 0.0034.
func TestPairedRatioCoverage(t *testing.T) {
	for _, roundCV := range []float64{0, 0.05} {
		rng := rand.New(rand.NewPCG(2015, 1))
		const reps, n = 4000, 5
		covered, tilde := 0, 0
		for range reps {
			r := PairedRatio(noisyPairs(rng, n, 1.0, 0.08, roundCV), Options{})
			if r.Lo <= 1 && 1 <= r.Hi {
				covered++
			}
			if r.Verdict(true) == "~" {
				tilde++
			}
		}
		c := float64(covered) / reps
		if c < 0.935 || c > 0.965 {
			t.Errorf("round CV %v: coverage %.3f outside [0.935, 0.965]", roundCV, c)
		}
		if tilde != covered {
			t.Errorf("%d \"~\" verdicts, want one per covering interval (%d)", tilde, covered)
		}
	}
}

func TestLogRatioSE(t *testing.T) {
	// mean(Base) = 2, mean(X) = 3; the linearised differences X_i/3 - Base_i/2
	// are 1/6, -1/3, 1/6, with sample variance (1/36+1/9+1/36)/2 = 1/12, so
	// se = sqrt(1/12/3) = 1/6.
	ps := []Pair{{1, 2}, {2, 2}, {3, 5}}
	theta, se, ok := logRatioSE(ps, []int{0, 1, 2})
	if !ok || !eq(theta, math.Log(1.5), 1e-15) || !eq(se, 1.0/6, 1e-15) {
		t.Errorf("logRatioSE = %v, %v, %v; want log(1.5), 1/6, true", theta, se, ok)
	}
	for _, bad := range [][]Pair{{{1, 2}}, {{-1, 2}, {-1, 3}}, {{1, 0}, {2, 0}}} {
		idx := make([]int, len(bad))
		for i := range idx {
			idx[i] = i
		}
		if _, _, ok := logRatioSE(bad, idx); ok {
			t.Errorf("logRatioSE(%v) ok, want not ok", bad)
		}
	}
}

func TestPairedRatioDetectsRealDifference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewPCG(seed, 99))
		pairs := noisyPairs(rng, 6, 0.8, 0.02, 0)
		r := PairedRatio(pairs, Options{})
		if !r.Significant || !(r.Lo <= 0.8 && 0.8 <= r.Hi) || r.Verdict(true) != "worse" || r.Verdict(false) != "better" {
			t.Errorf("seed %d: got %+v (verdict %q), want significant with 0.8 in the CI", seed, r, r.Verdict(true))
		}
	}
}

func TestPerRoundRatios(t *testing.T) {
	got := PerRoundRatios([]Pair{{2, 3}, {0, 1}, {math.NaN(), 1}, {4, 2}})
	want := []float64{1.5, 0.5}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("PerRoundRatios = %v, want %v", got, want)
	}
}
