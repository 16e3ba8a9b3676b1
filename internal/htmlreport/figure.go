package htmlreport

// Figures are a seed's own composite figures, drawn above the per-metric
// charts when a run has the metrics they need. The DVD Store seed's figure
// is the aggregate orders per minute of each platform normalised to native;
// nearnative's version adds, in the same chart, the other OLTP workloads
// of the run (the direct mode, and pgbench's transactions per second, so
// that a reader sees whether the shop's differences track a plain database
// benchmark's), each platform's rollback rate under its name, and a second
// chart with the response time of each transaction type. Both are grouped
// bar charts of ratios to the baseline with their 95% intervals, laid out
// here in plain Go (as chart.go does for the per-metric charts) and written
// as inline SVG by templates/figure.html.tmpl.

import (
	"fmt"
	"math"
	"strings"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/stats"
)

// Figure is one composite figure: a title, what it shows, its charts.
type Figure struct {
	ID, Title, Text string
	Charts          []GroupChart
}

// GroupChart is a grouped bar chart of ratios to the baseline: one group of
// bars per label on the x axis, one bar per series in each group.
type GroupChart struct {
	ID, Title, Subtitle string
	Width, Height       float64
	Left, Top           float64
	PlotW, PlotH        float64
	// PlotRight and PlotBottom are the plot area's right and bottom
	// edges; RefLabelX is where the 1.0 label goes.
	PlotRight, PlotBottom, RefLabelX float64
	Ticks                            []Tick
	// HasRef draws a reference line at RefY labelled RefLabel (1.0 in a
	// chart of ratios).
	HasRef   bool
	RefY     float64
	RefLabel string
	Groups   []Group
	Legend   []LegendItem
	Caption  string
}

// Group is one x-axis label's bars, with an optional second line under
// its label (a platform's rollback rate).
type Group struct {
	Label          string
	LabelX, LabelY float64
	Sub            string
	SubY           float64
	Bars           []GroupBar
}

// GroupBar is one series' bar in a group.
type GroupBar struct {
	Fill       string
	NoBar      bool
	X, Y, W, H float64
	CenterX    float64
	Value      string
	ValueY     float64
	HasCI      bool
	CILo, CIHi float64
	Clipped    bool
	CapL, CapR float64
	Tooltip    string
}

// LegendItem is one series' swatch.
type LegendItem struct {
	Label              string
	Fill               string
	X, Y, TextX, TextY float64
}

// palette colours the series of a grouped chart.
var palette = []string{"#6f8fbf", "#d9a441", "#59a869", "#b07cc6", "#d06a5e", "#4fb0b0", "#8c8c8c", "#c9849f"}

// Metric names of the DVD Store (oltp) and pgbench workloads the figure
// reads; a run without an opm table has no DVD Store figure.
const (
	oltpMetric     = "opm"
	pgbenchMetric  = "tps"
	rollbackMetric = "rollback_pct"
)

// oltpTransactions are the response-time metrics of the second chart, in
// the order DVD Store's order runs them.
var oltpTransactions = []struct{ metric, label string }{
	{"order_ms", "whole order"}, {"login_ms", "login"}, {"newcust_ms", "new customer"}, {"browse_ms", "browse"}, {"purchase_ms", "purchase"},
}

// figures returns the composite figures of a run.
func figures(res analysis.Result) []Figure {
	var fs []Figure
	if f, ok := dvdStoreFigure(res); ok {
		fs = append(fs, f)
	}
	return append(fs, scaleoutFigures(res)...)
}

// scaleGroupW is the scale-out charts' group width: room for a platform
// name such as native-pinned under its bars.
const scaleGroupW = 100

// scaleoutFigures are the Redis scale-out seed's two figures for every
// workload of the run that has its metrics: the throughput of the baseline
// (one Redis, one driver process) and of the scale-out system on each
// platform, and the speedup (scale-out / baseline of each trial) on each
// platform. Both are absolute values, each bar the mean over the counted
// rounds with the 95% interval of that mean.
func scaleoutFigures(res analysis.Result) []Figure {
	var out []Figure
	for _, so := range report.Scaleouts(res) {
		wl := so.Workload
		mean := func(c analysis.Cell, scaleBy float64, format string, unit string) barVal {
			if c.Summary.N == 0 {
				return barVal{v: math.NaN(), lo: math.NaN(), hi: math.NaN()}
			}
			lo, hi := stats.MeanCI(c.Values, 0.95)
			b := barVal{v: c.Summary.Mean / scaleBy, lo: lo / scaleBy, hi: hi / scaleBy, value: fmt.Sprintf(format, c.Summary.Mean/scaleBy),
				tip: fmt.Sprintf("%s %s, mean of %d rounds", num(c.Summary.Mean), unit, c.Summary.N)}
			if isFinite(lo) {
				b.ciTip = fmt.Sprintf(", 95%% CI of the mean %s..%s", num(lo), num(hi))
			}
			if c.Emulated {
				b.tip += ", " + analysis.EmulatedMark
			}
			return b
		}
		var tgroups, sgroups []barGroup
		for _, c := range so.Speedup {
			p := c.Platform
			sub := ""
			if c.Emulated {
				sub = "emulated"
			}
			// A platform missing a throughput gets a cell of no rounds: no bar.
			tgroups = append(tgroups, barGroup{label: p, sub: sub, bars: []barVal{
				mean(so.Baseline[p], 1000, "%.0fk", "commands/s"), mean(so.System[p], 1000, "%.0fk", "commands/s")}})
			sgroups = append(sgroups, barGroup{label: p, sub: sub, bars: []barVal{mean(c, 1, "%.2f", "x")}})
		}
		f := Figure{ID: "figure-scaleout-" + wl, Title: wl + ": the Redis scale-out seed's figures",
			Text: "As the seed's two figures: the throughput of the baseline (one Redis, one driver process, directly) and of the scale-out system (N Redis behind twemproxy behind HAProxy) on each platform, then the speedup, scale-out / baseline of each trial (linear would be N; below 1.0 the scale-out system is slower than one Redis). Absolute values: each bar is the mean over the counted rounds; whiskers are the 95% Student t interval of that mean. The tables below give each platform's ratio to " + res.Baseline + " with its paired interval, and the diagnostics the Redis CPU, migrations and per-CPU spread that explain a speedup."}
		f.Charts = append(f.Charts,
			barLayout("figure-scaleout-tput-"+wl, "Throughput: baseline and scale-out", "thousand commands per second, higher is better ↑",
				[]string{"baseline (1 Redis, 1 driver)", "scale-out (N Redis)"}, tgroups, 0, "", scaleGroupW),
			barLayout("figure-scaleout-speedup-"+wl, "Speedup: scale-out / baseline", "ratio of the two experiments of each trial, higher is better ↑; 1.0: no gain",
				[]string{"speedup"}, sgroups, 1, "1.0", scaleGroupW))
		out = append(out, f)
	}
	return out
}

// series is one bar series: a table's cells by platform.
type series struct {
	label string
	cells map[string]analysis.Cell
	unit  string
}

func cellsOf(t analysis.Table) map[string]analysis.Cell {
	m := map[string]analysis.Cell{}
	for _, c := range t.Cells {
		m[c.Platform] = c
	}
	return m
}

// dvdStoreFigure is the DVD Store seed's figure and the response times.
func dvdStoreFigure(res analysis.Result) (Figure, bool) {
	var opm []analysis.Table
	var platforms []string
	seen := map[string]bool{}
	for _, t := range res.Tables {
		if t.Metric == oltpMetric {
			opm = append(opm, t)
			for _, c := range t.Cells {
				if !seen[c.Platform] {
					seen[c.Platform] = true
					platforms = append(platforms, c.Platform)
				}
			}
		}
	}
	if len(opm) == 0 {
		return Figure{}, false
	}
	var ss []series
	for _, t := range opm {
		ss = append(ss, series{label: t.Workload + " orders/min", cells: cellsOf(t), unit: t.Unit})
	}
	for _, t := range res.Tables {
		if t.Metric == pgbenchMetric {
			ss = append(ss, series{label: t.Workload + " transactions/s", cells: cellsOf(t), unit: t.Unit})
		}
	}
	rollback := map[string]string{}
	for _, t := range res.Diagnostics {
		if t.Metric == rollbackMetric && t.Workload == opm[0].Workload {
			for _, c := range t.Cells {
				rollback[c.Platform] = fmt.Sprintf("rollback %.1f%%", c.Summary.Mean)
			}
		}
	}
	f := Figure{ID: "figure-dvdstore", Title: "DVD Store: the seed's figure",
		Text: fmt.Sprintf("As the seed's Figure 2: aggregate orders per minute of every instance on each platform, normalised to %s (higher is better), with each platform's rollback rate under its name; beside it, the run's other OLTP workloads normalised the same way, so that the shop's differences can be read against a plain database benchmark's. Then the mean response time of each transaction type, normalised to %s (lower is better). Whiskers: 95%% confidence intervals; a bar without one has too few pairs for a verdict.", res.Baseline, res.Baseline)}
	groups := make([]groupSpec, len(platforms))
	for i, p := range platforms {
		groups[i] = groupSpec{label: p, sub: rollback[p]}
		for _, s := range ss {
			groups[i].cells = append(groups[i].cells, cellOrMissing(s.cells, p))
		}
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.label)
	}
	f.Charts = append(f.Charts, groupLayout("figure-dvdstore-opm", "Throughput normalised to "+res.Baseline,
		"ratio to "+res.Baseline+", higher is better ↑", names, groups, res.Baseline))

	for _, w := range opm {
		var groups []groupSpec
		byMetric := map[string]analysis.Table{}
		for _, t := range res.Tables {
			if t.Workload == w.Workload {
				byMetric[t.Metric] = t
			}
		}
		for _, tr := range oltpTransactions {
			t, ok := byMetric[tr.metric]
			if !ok {
				continue
			}
			g := groupSpec{label: tr.label}
			cells := cellsOf(t)
			for _, p := range platforms {
				g.cells = append(g.cells, cellOrMissing(cells, p))
			}
			groups = append(groups, g)
		}
		if len(groups) > 0 {
			f.Charts = append(f.Charts, groupLayout("figure-dvdstore-rt-"+w.Workload, w.Workload+": mean response time per transaction type, normalised to "+res.Baseline,
				"ratio to "+res.Baseline+", lower is better ↓ (hover a bar for the milliseconds)", platforms, groups, res.Baseline))
		}
	}
	return f, true
}

// cellOrMissing is platform's cell, or a cell without a value.
func cellOrMissing(m map[string]analysis.Cell, platform string) analysis.Cell {
	if c, ok := m[platform]; ok {
		return c
	}
	return analysis.Cell{Platform: platform, Ratio: stats.Ratio{Ratio: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}}
}

// groupSpec is one group's label and its cells, one per series.
type groupSpec struct {
	label, sub string
	cells      []analysis.Cell
}

// Grouped chart dimensions.
const (
	gBarW    = 22.0
	gGap     = 26.0 // between groups
	gLegendH = 18.0
	gBottom  = 52.0 // group label and its second line
)

// groupLayout lays out a grouped chart of ratios to the baseline: series
// are named by names, in the order of every group's cells; the reference
// line marks 1.0.
func groupLayout(id, title, subtitle string, names []string, groups []groupSpec, baseline string) GroupChart {
	bgs := make([]barGroup, len(groups))
	for gi, g := range groups {
		bgs[gi] = barGroup{label: g.label, sub: g.sub}
		for _, cell := range g.cells {
			r := cell.Ratio.Ratio
			b := barVal{v: r, lo: math.NaN(), hi: math.NaN(), value: fmt.Sprintf("%.2f", r),
				tip: fmt.Sprintf("%s %s, %.3f × %s", num(cell.Summary.Mean), cell.Unit, r, baseline)}
			if !cell.IsBaseline && cell.NoVerdict == "" && isFinite(cell.Ratio.Lo) && isFinite(cell.Ratio.Hi) {
				b.lo, b.hi = cell.Ratio.Lo, cell.Ratio.Hi
				b.ciTip = fmt.Sprintf(", 95%% CI %.3f..%.3f (%s)", cell.Ratio.Lo, cell.Ratio.Hi, cell.Verdict)
			} else if cell.NoVerdict != "" {
				b.ciTip = " (" + cell.NoVerdict + ")"
			}
			bgs[gi].bars = append(bgs[gi].bars, b)
		}
	}
	return barLayout(id, title, subtitle, names, bgs, 1, "1.0", 0)
}

// groupTopValue is the top of a grouped chart's scale before rounding:
// above the reference, every bar and (unless far out) interval.
func groupTopValue(groups []barGroup, ref float64) float64 {
	top := ref
	for _, g := range groups {
		for _, b := range g.bars {
			top = maxFinite(top, b.v)
		}
	}
	if !(top > 0) {
		top = 1
	}
	limit := top * 2
	for _, g := range groups {
		for _, b := range g.bars {
			if isFinite(b.hi) && b.hi <= limit {
				top = maxFinite(top, b.hi)
			}
		}
	}
	return top
}

// groupBar is series si's bar of group label at bx, on the scale y
// (0..axisMax), and what the caption says of it ("" for no value).
func (c GroupChart) groupBar(bv barVal, bx float64, si int, label, name string, axisMax float64, y func(float64) float64) (GroupBar, string) {
	b := GroupBar{Fill: palette[si%len(palette)], CenterX: round1(bx + gBarW/2)}
	r := bv.v
	if !isFinite(r) {
		b.NoBar, b.Value, b.ValueY = true, "–", round1(c.Top+c.PlotH-4)
		b.Tooltip = fmt.Sprintf("%s, %s: no value", label, name)
		return b, ""
	}
	b.X, b.W = round1(bx+1), gBarW-2
	b.Y, b.H = round1(y(r)), round1(y(0)-y(r))
	b.Value = bv.value
	b.Tooltip = fmt.Sprintf("%s, %s: %s", label, name, bv.tip)
	valueTop := r
	if isFinite(bv.lo) && isFinite(bv.hi) {
		b.HasCI = true
		hi := bv.hi
		if hi > axisMax {
			hi, b.Clipped = axisMax, true
		}
		b.CILo, b.CIHi = round1(y(math.Max(bv.lo, 0))), round1(y(hi))
		b.CapL, b.CapR = round1(bx+gBarW/2-5), round1(bx+gBarW/2+5)
		valueTop = math.Max(valueTop, hi)
	}
	b.Tooltip += bv.ciTip
	b.ValueY = round1(math.Max(c.Top-2, y(valueTop)-4))
	return b, fmt.Sprintf("%s %s %s", label, name, bv.value)
}

// barVal is one bar: its value, its interval (NaN bounds: none), the
// label above it and its tooltip's text.
type barVal struct {
	v, lo, hi float64
	value     string
	tip       string // after "group, series: "
	ciTip     string // appended when the bar has an interval, or why not
}

// barGroup is one x-axis label's bars, one per series.
type barGroup struct {
	label, sub string
	bars       []barVal
}

// barLayout lays out a grouped bar chart of any values; ref > 0 draws a
// reference line there labelled refLabel (the axis always starts at 0,
// and an interval reaching below it is cut there); each group is at least
// minGroupW wide, room for its label.
func barLayout(id, title, subtitle string, names []string, groups []barGroup, ref float64, refLabel string, minGroupW float64) GroupChart {
	c := GroupChart{ID: id, Title: title, Subtitle: subtitle, HasRef: ref > 0, RefLabel: refLabel}
	rows := (len(names) + 2) / 3
	c.Left, c.Top = chartLeft, chartTop+gLegendH*float64(rows)
	c.PlotH = chartPlotH
	groupW := math.Max(gBarW*float64(len(names))+gGap, minGroupW)
	c.PlotW = math.Max(minPlotW, groupW*float64(len(groups)))
	c.Width = c.Left + c.PlotW + chartRight
	c.Height = c.Top + c.PlotH + gBottom
	c.PlotRight, c.PlotBottom = round1(c.Left+c.PlotW), round1(c.Top+c.PlotH)
	c.RefLabelX = round1(c.PlotRight + 4)
	top := groupTopValue(groups, ref)
	step := niceStep(top * 1.1 / 5)
	axisMax := math.Ceil(top*1.1/step) * step
	y := func(v float64) float64 { return c.Top + c.PlotH*(1-v/axisMax) }
	for v := 0.0; v <= axisMax+step/2; v += step {
		c.Ticks = append(c.Ticks, Tick{Y: round1(y(v)), Label: trimFloat(v, step)})
	}
	if c.HasRef {
		c.RefY = round1(y(ref))
	}
	for i, n := range names {
		col, row := i%3, i/3
		x := c.Left + float64(col)*190
		ly := chartTop - 6 + gLegendH*float64(row)
		c.Legend = append(c.Legend, LegendItem{Label: n, Fill: palette[i%len(palette)], X: round1(x), Y: round1(ly - 10), TextX: round1(x + 16), TextY: round1(ly)})
	}
	slot := c.PlotW / float64(len(groups))
	var said []string
	for gi, g := range groups {
		cx := c.Left + slot*(float64(gi)+0.5)
		grp := Group{Label: g.label, LabelX: round1(cx), LabelY: round1(c.Top + c.PlotH + 18), Sub: g.sub, SubY: round1(c.Top + c.PlotH + 34)}
		x0 := cx - gBarW*float64(len(g.bars))/2
		for si, bv := range g.bars {
			b, text := c.groupBar(bv, x0+gBarW*float64(si), si, g.label, names[si], axisMax, y)
			grp.Bars = append(grp.Bars, b)
			if text != "" {
				said = append(said, text)
			}
		}
		c.Groups = append(c.Groups, grp)
	}
	c.Caption = title + ": " + strings.Join(said, ", ")
	return c
}
