package stats

import (
	"math"
	"testing"
)

// eq reports whether a and b are within tol, treating two NaNs as equal.
func eq(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= tol
}

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		in   []float64
		want Summary
	}{
		{
			// Sum 40, squared deviations 32, variance 32/7.
			name: "textbook",
			in:   []float64{2, 4, 4, 4, 5, 5, 7, 9},
			want: Summary{N: 8, Mean: 5, Median: 4.5, Min: 2, Max: 9,
				SD: math.Sqrt(32.0 / 7), CV: math.Sqrt(32.0/7) / 5},
		},
		{
			name: "unsorted odd",
			in:   []float64{9, 1, 5},
			want: Summary{N: 3, Mean: 5, Median: 5, Min: 1, Max: 9, SD: 4, CV: 0.8},
		},
		{
			name: "NaNs ignored",
			in:   []float64{nan, 2, 4, nan, 4, 4, 5, 5, 7, 9},
			want: Summary{N: 8, Mean: 5, Median: 4.5, Min: 2, Max: 9,
				SD: math.Sqrt(32.0 / 7), CV: math.Sqrt(32.0/7) / 5},
		},
		{
			name: "negative mean uses |mean|",
			in:   []float64{-1, -3},
			want: Summary{N: 2, Mean: -2, Median: -2, Min: -3, Max: -1,
				SD: math.Sqrt2, CV: math.Sqrt2 / 2},
		},
		{
			name: "constant",
			in:   []float64{3, 3, 3},
			want: Summary{N: 3, Mean: 3, Median: 3, Min: 3, Max: 3},
		},
		{
			name: "zero mean",
			in:   []float64{-1, 1},
			want: Summary{N: 2, Mean: 0, Median: 0, Min: -1, Max: 1,
				SD: math.Sqrt2, CV: math.Inf(1)},
		},
		{
			name: "single value",
			in:   []float64{7},
			want: Summary{N: 1, Mean: 7, Median: 7, Min: 7, Max: 7},
		},
		{
			name: "empty",
			in:   nil,
			want: Summary{Mean: nan, Median: nan, Min: nan, Max: nan},
		},
		{
			name: "only NaN",
			in:   []float64{nan, nan},
			want: Summary{Mean: nan, Median: nan, Min: nan, Max: nan},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.in)
			const tol = 1e-12
			if got.N != tt.want.N || !eq(got.Mean, tt.want.Mean, tol) ||
				!eq(got.Median, tt.want.Median, tol) || !eq(got.Min, tt.want.Min, tol) ||
				!eq(got.Max, tt.want.Max, tol) || !eq(got.SD, tt.want.SD, tol) ||
				!eq(got.CV, tt.want.CV, tol) {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSummarizeDoesNotModifyInput(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input modified: %v", in)
	}
}
