package htmlreport

import (
	"math"
	"testing"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
)

func TestNiceStep(t *testing.T) {
	tests := []struct{ raw, want float64 }{
		{0.22, 0.25}, {0.3, 0.5}, {0.19, 0.2}, {1, 1}, {1.01, 2}, {7, 10}, {0.0004, 0.0005}, {0, 0.2}, {math.NaN(), 0.2},
	}
	for _, tc := range tests {
		if got := niceStep(tc.raw); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

func TestTrimFloat(t *testing.T) {
	tests := []struct {
		v, step float64
		want    string
	}{
		{0.75, 0.25, "0.75"}, {1, 0.5, "1.0"}, {2, 1, "2"}, {0.4, 0.2, "0.4"}, {20, 10, "20"},
	}
	for _, tc := range tests {
		if got := trimFloat(tc.v, tc.step); got != tc.want {
			t.Errorf("trimFloat(%v, %v) = %q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
}

func cell(p string, base bool, ratio, lo, hi float64, verdict string, values ...float64) analysis.Cell {
	return analysis.Cell{Platform: p, IsBaseline: base, Verdict: verdict, Values: values, Summary: stats.Summarize(values),
		Ratio: stats.Ratio{Ratio: ratio, Lo: lo, Hi: hi}}
}

// TestLayout checks the geometry: bars stand on the axis with heights
// proportional to their ratios, the reference line sits at 1.0, whiskers
// span the CI, dots sit at value / baseline mean, and odd cases degrade.
func TestLayout(t *testing.T) {
	nan := math.NaN()
	tab := analysis.Table{Workload: "w", Metric: "m", Unit: "u", HigherIsBetter: true, Cells: []analysis.Cell{
		cell("native", true, 1, 1, 1, "baseline", 90, 110),
		cell("fast", false, 1.5, 1.4, 1.6, "better", 150),
		cell("wild", false, 0.5, 0.1, 40, "~", 50),
		cell("none", false, nan, nan, nan, "n/a"),
	}}
	c := layout("chart-1", tab, "native")
	if len(c.Bars) != 4 {
		t.Fatalf("%d bars, want 4", len(c.Bars))
	}
	axisY := c.Top + c.PlotH
	baseH := c.Bars[0].H
	// The scale reaches past 1.6 (fast's CI) but ignores wild's far-out 40.
	if top := c.Ticks[len(c.Ticks)-1].Label; top != "1.75" && top != "2.0" {
		t.Errorf("axis top %s, want a nice number just above 1.6", top)
	}
	if math.Abs(c.RefY-(axisY-baseH)) > 0.2 {
		t.Errorf("reference line at %v, baseline bar top at %v", c.RefY, axisY-baseH)
	}
	tests := []struct {
		i       int
		class   string
		ratio   float64
		hasCI   bool
		clipped bool
		dots    int
	}{
		{0, "bar baseline", 1, false, false, 2},
		{1, "bar better", 1.5, true, false, 1},
		{2, "bar same", 0.5, true, true, 1},
		{3, "bar same", nan, false, false, 0},
	}
	for _, tc := range tests {
		b := c.Bars[tc.i]
		if b.Class != tc.class || b.HasCI != tc.hasCI || b.Clipped != tc.clipped || len(b.Dots) != tc.dots {
			t.Errorf("bar %s: class %q CI %v clipped %v dots %d, want %q %v %v %d", b.Platform, b.Class, b.HasCI, b.Clipped, len(b.Dots), tc.class, tc.hasCI, tc.clipped, tc.dots)
		}
		if math.IsNaN(tc.ratio) {
			if !b.NoBar || b.Value != "n/a" {
				t.Errorf("bar %s: NoBar %v value %q, want no bar and n/a", b.Platform, b.NoBar, b.Value)
			}
			continue
		}
		if math.Abs(b.H-baseH*tc.ratio) > 0.2 || math.Abs(b.Y+b.H-axisY) > 0.2 {
			t.Errorf("bar %s: y %v h %v, want height %v on the axis %v", b.Platform, b.Y, b.H, baseH*tc.ratio, axisY)
		}
	}
	// fast's whisker spans 1.4..1.6; its single dot is at 150/100 = 1.5.
	fast := c.Bars[1]
	if math.Abs((axisY-fast.CILo)-1.4*baseH) > 0.3 || math.Abs((axisY-fast.CIHi)-1.6*baseH) > 0.3 {
		t.Errorf("fast's whisker %v..%v, want 1.4..1.6 of %v above %v", fast.CILo, fast.CIHi, baseH, axisY)
	}
	if math.Abs(fast.Dots[0].Y-fast.Y) > 0.2 {
		t.Errorf("fast's dot at y %v, want its bar top %v", fast.Dots[0].Y, fast.Y)
	}
	if c.Bars[2].CIHi != c.Top {
		t.Errorf("wild's clipped whisker ends at %v, want the plot top %v", c.Bars[2].CIHi, c.Top)
	}
	if c.Subtitle != "u, higher is better ↑" {
		t.Errorf("subtitle %q", c.Subtitle)
	}
}
