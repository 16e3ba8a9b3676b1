package htmlreport

// The seeds' application figures (CloudStone's Figures 2 to 5): one
// statistic of every operation, a group of bars per operation and a bar per
// platform, in the statistic's own unit rather than normalised, with each
// operation's QoS limit as a line across its group. Workloads report such
// statistics as OPERATION.STAT metrics (report.SplitOpMetric); the limit of
// a statistic X_ms is the diagnostic OPERATION.X_limit_ms when reported.

import (
	"fmt"
	"math"
	"strings"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/report"
)

// OpChart is one statistic of a workload's operations on every platform.
type OpChart struct {
	ID, Title, Subtitle, Legend string
	Width, Height               float64
	Left, Top, PlotW, PlotH     float64
	Ticks                       []Tick
	Groups                      []OpGroup
	Bars                        []OpBar
	Keys                        []OpKey // the platforms' colours
	Caption                     string
}

// OpGroup is one operation's group of bars and its limit line.
type OpGroup struct {
	Op             string
	LabelX, LabelY float64
	HasLimit       bool
	LimitY         float64
	X1, X2         float64
	LimitText      string
}

// OpBar is one platform's mean for one operation, with its trials as dots.
type OpBar struct {
	Class      string
	X, Y, W, H float64
	Tooltip    string
	Dots       []Dot
}

// OpKey is one platform's legend entry.
type OpKey struct {
	Platform string
	Class    string
	X, Y     float64
}

// Geometry of the operation charts.
const (
	opGroupGap = 14.0
	opBarW     = 13.0
	opLegendH  = 18.0
	opColours  = 6 // CSS classes op0..op5, cycled
)

// opCharts draws, for workload w, a chart per OPERATION.STAT statistic of
// the result tables (report.OpGrids), in the order the statistics first
// appear.
func opCharts(res analysis.Result, w string, firstID int) []OpChart {
	limits := map[string]float64{} // OPERATION.STAT -> mean of its limit
	for _, t := range res.Diagnostics {
		if t.Workload != w || !strings.Contains(t.Metric, "_limit_") {
			continue
		}
		op, stat, ok := report.SplitOpMetric(t.Metric)
		if !ok || len(t.Cells) == 0 {
			continue
		}
		limits[op+"."+strings.Replace(stat, "_limit_", "_", 1)] = t.Cells[0].Summary.Mean
	}
	var out []OpChart
	for _, g := range report.OpGrids(res.Tables) {
		if g.Workload == w {
			out = append(out, layoutOps(fmt.Sprintf("opchart-%d", firstID+len(out)), g, limits))
		}
	}
	return out
}

// layoutOps computes one operation chart.
func layoutOps(id string, grid *report.OpGrid, limits map[string]float64) OpChart {
	w, stat, ops := grid.Workload, grid.Stat, grid.Ops
	first := grid.Tables[ops[0]]
	platforms := grid.Platforms()
	dir := "lower is better ↓"
	if first.HigherIsBetter {
		dir = "higher is better ↑"
	}
	c := OpChart{ID: id, Title: w + " — " + stat + " by operation", Subtitle: first.Unit + ", " + dir,
		Legend: "bars: mean over the counted trials · dots: trials · dashed: the operation's QoS limit"}
	top := 0.0
	for _, op := range ops {
		for _, cell := range grid.Tables[op].Cells {
			top = maxFinite(top, cell.Summary.Mean)
			for _, v := range cell.Values {
				top = maxFinite(top, v)
			}
		}
		if l, ok := limits[op+"."+stat]; ok {
			top = maxFinite(top, l)
		}
	}
	if !(top > 0) {
		top = 1
	}
	step := niceStep(top * 1.08 / 5)
	axisMax := math.Ceil(top*1.08/step) * step
	groupW := opBarW*float64(len(platforms)) + opGroupGap
	c.Left, c.Top, c.PlotH = chartLeft, chartTop+opLegendH, chartPlotH
	c.PlotW = math.Max(minPlotW, groupW*float64(len(ops)))
	c.Width = c.Left + c.PlotW + 24
	c.Height = c.Top + c.PlotH + chartBottom
	y := func(v float64) float64 { return c.Top + c.PlotH*(1-math.Min(v, axisMax)/axisMax) }
	for v := 0.0; v <= axisMax+step/2; v += step {
		c.Ticks = append(c.Ticks, Tick{Y: round1(y(v)), Label: trimFloat(v, step)})
	}
	for k, p := range platforms {
		c.Keys = append(c.Keys, OpKey{Platform: p, Class: fmt.Sprintf("op%d", k%opColours),
			X: round1(c.Left + 110*float64(k)), Y: round1(chartTop + 4)})
	}
	slot := c.PlotW / float64(len(ops))
	var said []string
	for i, op := range ops {
		x0 := c.Left + slot*float64(i) + (slot-opBarW*float64(len(platforms)))/2
		g := OpGroup{Op: op, LabelX: round1(c.Left + slot*(float64(i)+0.5)), LabelY: round1(c.Top + c.PlotH + 18)}
		if l, ok := limits[op+"."+stat]; ok && isFinite(l) {
			g.HasLimit, g.LimitY = true, round1(y(l))
			g.X1, g.X2 = round1(x0-4), round1(x0+opBarW*float64(len(platforms))+4)
			g.LimitText = fmt.Sprintf("%s limit %s %s", op, num(l), first.Unit)
		}
		c.Groups = append(c.Groups, g)
		for k, p := range platforms {
			cell, found := grid.Cell(op, p)
			if !found || !isFinite(cell.Summary.Mean) {
				continue
			}
			bx := x0 + opBarW*float64(k)
			b := OpBar{Class: fmt.Sprintf("opbar op%d", k%opColours), X: round1(bx), W: opBarW - 2,
				Y: round1(y(cell.Summary.Mean)), H: round1(y(0) - y(cell.Summary.Mean)),
				Tooltip: fmt.Sprintf("%s on %s: mean %s %s over %d trial(s)", op, p, num(cell.Summary.Mean), cell.Unit, cell.Summary.N)}
			if g.HasLimit {
				b.Tooltip += "; limit " + num(limits[op+"."+stat])
			}
			for j, v := range cell.Values {
				b.Dots = append(b.Dots, Dot{X: round1(bx + (opBarW-2)/2), Y: round1(y(v)),
					Tooltip: fmt.Sprintf("%s on %s trial %d: %s %s", op, p, j+1, num(v), cell.Unit)})
			}
			c.Bars = append(c.Bars, b)
			said = append(said, fmt.Sprintf("%s %s %s", op, p, num(cell.Summary.Mean)))
		}
	}
	c.Caption = fmt.Sprintf("%s %s per operation and platform (%s): %s", w, stat, first.Unit, strings.Join(said, ", "))
	return c
}
