package htmlreport

// The charts are drawn by this small renderer rather than a chart library.
// Every chart here is the same figure: one bar per platform normalised to the
// baseline, a confidence-interval whisker and the trials as dots around a
// reference line at 1.0. layout computes that geometry in plain Go (tested in
// chart_test.go) and the "chart" template in templates/report.html.tmpl writes
// it as inline SVG through html/template, so every label is escaped. The
// libraries considered do worse at this one job: gonum.org/v1/plot (the
// closest, being gonum) and github.com/wcharczuk/go-chart render SVG whose
// elements cannot carry classes or <title> tooltips (which the browser test
// counts and readers hover), embed or assume their own fonts, draw error bars
// and jittered points only with custom plotters, and would add a module with
// a font and image dependency tree for about 200 lines of geometry.

import (
	"fmt"
	"math"
	"strings"

	"github.com/nearnative/nearnative/internal/analysis"
)

// Chart is the geometry of one workload-and-metric figure, in SVG user units.
type Chart struct {
	ID, Title string
	// Subtitle states the unit and direction; Legend says what the marks are.
	Subtitle, Legend string
	Width, Height    float64
	// The plot area.
	Left, Top, PlotW, PlotH float64
	Ticks                   []Tick
	RefY                    float64 // y of the 1.0 reference line
	Bars                    []Bar
	Caption                 string // for screen readers: what the bars say
}

// Tick is a horizontal grid line with its label.
type Tick struct {
	Y     float64
	Label string
}

// Bar is one platform's bar, whisker and dots.
type Bar struct {
	Platform string
	// Class is "bar" plus the verdict: baseline, better, worse, same; an
	// undefined ratio has no rect (NoBar) but keeps its slot and label.
	Class      string
	NoBar      bool
	X, Y, W, H float64
	CenterX    float64
	LabelY     float64 // platform name below the axis
	Value      string  // ratio printed above the bar
	ValueY     float64
	HasCI      bool
	CILo, CIHi float64 // y of the whisker's ends (CILo is the lower value, larger y)
	Clipped    bool    // the interval runs off the top of the plot
	CapL, CapR float64
	Dots       []Dot
	Tooltip    string
}

// Dot is one trial's value divided by the baseline's mean.
type Dot struct {
	X, Y    float64
	Tooltip string
}

// Chart dimensions.
const (
	chartLeft   = 56.0
	chartTop    = 60.0
	chartRight  = 78.0 // room for the reference line's label
	chartPlotH  = 240.0
	chartBottom = 46.0 // room for platform names
	slotW       = 110.0
	barW        = 56.0
	minPlotW    = 330.0
)

// layout computes the chart of t: each platform's mean over the baseline's
// mean as a bar, its 95% CI as a whisker and its counted trials over the
// baseline's mean as dots.
func layout(id string, t analysis.Table, baseline string) Chart {
	dir := "higher is better ↑"
	if !t.HigherIsBetter {
		dir = "lower is better ↓"
	}
	c := Chart{ID: id, Title: t.Workload + " — " + t.Metric, Subtitle: t.Unit + ", " + dir,
		Legend: fmt.Sprintf("bars: mean ÷ %s mean · whiskers: 95%% CI · dots: trials", baseline)}
	baseMean := math.NaN()
	for _, cell := range t.Cells {
		if cell.IsBaseline {
			baseMean = cell.Summary.Mean
		}
	}
	top := chartTopValue(t.Cells, baseMean)
	step := niceStep(top * 1.08 / 5)
	axisMax := math.Ceil(top*1.08/step) * step
	c.PlotW = math.Max(minPlotW, slotW*float64(len(t.Cells)))
	c.Left, c.Top, c.PlotH = chartLeft, chartTop, chartPlotH
	c.Width = c.Left + c.PlotW + chartRight
	c.Height = c.Top + c.PlotH + chartBottom
	y := func(v float64) float64 { return c.Top + c.PlotH*(1-v/axisMax) }
	for v := 0.0; v <= axisMax+step/2; v += step {
		c.Ticks = append(c.Ticks, Tick{Y: round1(y(v)), Label: trimFloat(v, step)})
	}
	c.RefY = round1(y(1))
	slot := c.PlotW / float64(len(t.Cells))
	var said []string
	for i, cell := range t.Cells {
		b, text := c.bar(cell, c.Left+slot*(float64(i)+0.5), baseline, baseMean, axisMax, y)
		c.Bars = append(c.Bars, b)
		said = append(said, text)
	}
	c.Caption = fmt.Sprintf("%s %s relative to %s: %s", t.Workload, t.Metric, baseline, strings.Join(said, ", "))
	return c
}

// chartTopValue is the top of a chart's scale before rounding: above every
// bar, dot and (unless far out) CI.
func chartTopValue(cells []analysis.Cell, baseMean float64) float64 {
	top := 1.0
	for _, cell := range cells {
		top = maxFinite(top, cell.Ratio.Ratio)
		for _, v := range cell.Values {
			top = maxFinite(top, v/baseMean)
		}
	}
	limit := top * 2
	for _, cell := range cells {
		if !cell.IsBaseline && cell.Ratio.Hi <= limit {
			top = maxFinite(top, cell.Ratio.Hi)
		}
	}
	return top
}

// bar is one cell's bar centred at cx, with its whisker and dots on the
// scale y (0..axisMax), and what the caption says of it.
func (c Chart) bar(cell analysis.Cell, cx float64, baseline string, baseMean, axisMax float64, y func(float64) float64) (Bar, string) {
	b := Bar{Platform: cell.Platform, CenterX: round1(cx), LabelY: round1(c.Top + c.PlotH + 18)}
	r := cell.Ratio.Ratio
	switch {
	case cell.IsBaseline:
		b.Class = "bar baseline"
	case cell.Verdict == "better":
		b.Class = "bar better"
	case cell.Verdict == "worse":
		b.Class = "bar worse"
	default:
		b.Class = "bar same"
	}
	said := cell.Platform + " n/a"
	if !isFinite(r) {
		b.NoBar, b.Value, b.ValueY = true, "n/a", round1(c.Top+c.PlotH-6)
		b.Tooltip = cell.Platform + ": no ratio (the baseline has no values)"
	} else {
		b.X, b.W = round1(cx-barW/2), barW
		b.Y, b.H = round1(y(r)), round1(y(0)-y(r))
		b.Value = fmt.Sprintf("%.3f", r)
		b.Tooltip = fmt.Sprintf("%s: %.3f × %s (%s)", cell.Platform, r, baseline, cell.Verdict)
		valueTop := r
		if !cell.IsBaseline && cell.NoVerdict == "" && isFinite(cell.Ratio.Lo) && isFinite(cell.Ratio.Hi) {
			b.HasCI = true
			hi := cell.Ratio.Hi
			if hi > axisMax {
				hi, b.Clipped = axisMax, true
			}
			b.CILo, b.CIHi = round1(y(cell.Ratio.Lo)), round1(y(hi))
			b.CapL, b.CapR = round1(cx-9), round1(cx+9)
			b.Tooltip += fmt.Sprintf(", 95%% CI %.3f..%.3f", cell.Ratio.Lo, cell.Ratio.Hi)
			valueTop = math.Max(valueTop, hi)
		}
		for _, v := range cell.Values {
			valueTop = maxFinite(valueTop, v/baseMean)
		}
		b.ValueY = round1(math.Max(c.Top-4, y(valueTop)-7))
		said = fmt.Sprintf("%s %.3f", cell.Platform, r)
	}
	if isFinite(baseMean) && baseMean != 0 {
		n := len(cell.Values)
		spread := math.Min(barW*0.7, 7*float64(n-1))
		for j, v := range cell.Values {
			dx := 0.0
			if n > 1 {
				dx = spread * (float64(j)/float64(n-1) - 0.5)
			}
			b.Dots = append(b.Dots, Dot{X: round1(cx + dx), Y: round1(y(math.Min(v/baseMean, axisMax))),
				Tooltip: fmt.Sprintf("%s trial %d: %s %s (%.3f)", cell.Platform, j+1, num(v), cell.Unit, v/baseMean)})
		}
	}
	return b, said
}

// niceStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least raw.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 0.2
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// trimFloat prints a tick value with as many decimals as step needs.
func trimFloat(v, step float64) string {
	dec := 0
	for s := step; dec < 4 && math.Abs(s-math.Round(s)) > 1e-9; s *= 10 {
		dec++
	}
	return fmt.Sprintf("%.*f", dec, v)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func maxFinite(a, b float64) float64 {
	if isFinite(b) && b > a {
		return b
	}
	return a
}
