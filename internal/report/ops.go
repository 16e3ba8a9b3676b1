package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
)

// Per-operation metrics are named OPERATION.STAT ("HomePage.p90_ms"), the
// operation starting with a capital letter, as the application workloads
// name their operations. The text report shows them as grids in the seeds'
// shape, one per workload and statistic: a row per operation, a column per
// platform, instead of a table per metric (seven operations and two
// latencies would otherwise be fourteen tables).

// SplitOpMetric splits an OPERATION.STAT metric name; ok is false for
// other names.
func SplitOpMetric(name string) (op, stat string, ok bool) {
	op, stat, ok = strings.Cut(name, ".")
	if !ok || op == "" || stat == "" || strings.Contains(stat, ".") || op[0] < 'A' || op[0] > 'Z' {
		return "", "", false
	}
	return op, stat, true
}

// OpGrid is one workload's statistic over its operations: its
// OPERATION.STAT tables by operation, the operations in the order their
// tables appear. The text report writes it as a grid, the HTML report as
// a chart.
type OpGrid struct {
	Workload, Stat string
	Ops            []string
	Tables         map[string]analysis.Table // by operation
}

// OpGrids collects the OPERATION.STAT tables of tabs into grids, in the
// order their first metric appears.
func OpGrids(tabs []analysis.Table) []*OpGrid {
	var out []*OpGrid
	byKey := map[[2]string]*OpGrid{}
	for _, t := range tabs {
		op, stat, ok := SplitOpMetric(t.Metric)
		if !ok {
			continue
		}
		k := [2]string{t.Workload, stat}
		g := byKey[k]
		if g == nil {
			g = &OpGrid{Workload: t.Workload, Stat: stat, Tables: map[string]analysis.Table{}}
			byKey[k] = g
			out = append(out, g)
		}
		if _, dup := g.Tables[op]; !dup {
			g.Ops = append(g.Ops, op)
		}
		g.Tables[op] = t
	}
	return out
}

// Platforms returns the grid's platforms in the tables' order.
func (g *OpGrid) Platforms() []string {
	var out []string
	for _, op := range g.Ops {
		for _, c := range g.Tables[op].Cells {
			if !contains(out, c.Platform) {
				out = append(out, c.Platform)
			}
		}
	}
	return out
}

// Cell is operation op's cell on platform, if the grid has one.
func (g *OpGrid) Cell(op, platform string) (analysis.Cell, bool) {
	for _, c := range g.Tables[op].Cells {
		if c.Platform == platform {
			return c, true
		}
	}
	return analysis.Cell{}, false
}

// OpResults writes the result grids: per workload and statistic, each
// operation's mean on every platform and, beside the baseline, the ratio
// with its 95% interval and verdict.
func OpResults(w io.Writer, res analysis.Result) error {
	for _, g := range OpGrids(res.Tables) {
		t := g.Tables[g.Ops[0]]
		dir := "higher is better"
		if !t.HigherIsBetter {
			dir = "lower is better"
		}
		fmt.Fprintf(w, "\n%s  %s by operation (%s): mean; ratio to %s [95%% CI] (+ better, - worse, ~ no difference shown)\n",
			g.Workload, g.Stat, unitDir(t.Unit, dir), res.Baseline)
		platforms := g.Platforms()
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "  operation\t")
		emulated := false
		for _, p := range platforms {
			n := 0
			for _, op := range g.Ops {
				if c, ok := g.Cell(op, p); ok {
					n = max(n, c.N())
					emulated = emulated || c.Emulated
					if c.Emulated && !strings.HasSuffix(p, "*") {
						p += "*"
					}
				}
			}
			fmt.Fprintf(tw, "%s (n=%d)\t", p, n)
		}
		fmt.Fprintln(tw)
		for _, op := range g.Ops {
			fmt.Fprintf(tw, "  %s\t", op)
			for _, p := range platforms {
				c, ok := g.Cell(op, p)
				if !ok {
					fmt.Fprint(tw, "-\t")
					continue
				}
				fmt.Fprintf(tw, "%s\t", opCellText(c))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		if emulated {
			fmt.Fprintf(w, "  * %s\n", analysis.EmulatedMark)
		}
	}
	return nil
}

// opCellText is "mean", or "mean ratio [lo, hi] sign", or "mean ratio
// (why no verdict)".
func opCellText(c analysis.Cell) string {
	s := MeanText(c, num)
	switch {
	case c.IsBaseline:
		return s
	case c.NoVerdict != "":
		return fmt.Sprintf("%s %s (%s)", s, ratio(c.Ratio.Ratio), c.NoVerdict)
	case math.IsNaN(c.Ratio.Lo) || math.IsNaN(c.Ratio.Hi):
		return fmt.Sprintf("%s %s", s, ratio(c.Ratio.Ratio))
	}
	return fmt.Sprintf("%s %s [%.3f, %.3f] %s", s, ratio(c.Ratio.Ratio), c.Ratio.Lo, c.Ratio.Hi, sign(c.Verdict))
}

// OpDiagnostics writes the diagnostic grids: per workload and statistic,
// each operation's mean over the counted trials on every platform.
func OpDiagnostics(w io.Writer, res analysis.Result) error {
	for _, g := range OpGrids(res.Diagnostics) {
		t := g.Tables[g.Ops[0]]
		fmt.Fprintf(w, "\n%s  %s by operation (%s; mean over the counted trials)\n", g.Workload, g.Stat, orDash(t.Unit))
		platforms := g.Platforms()
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "  operation\t")
		for _, p := range platforms {
			fmt.Fprintf(tw, "%s\t", p)
		}
		fmt.Fprintln(tw)
		for _, op := range g.Ops {
			fmt.Fprintf(tw, "  %s\t", op)
			for _, p := range platforms {
				if c, ok := g.Cell(op, p); ok {
					fmt.Fprintf(tw, "%s\t", num(c.Summary.Mean))
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing diagnostics: %w", err)
		}
	}
	return nil
}

// withoutOps returns tabs without the OPERATION.STAT tables.
func withoutOps(tabs []analysis.Table) []analysis.Table {
	var out []analysis.Table
	for _, t := range tabs {
		if _, _, ok := SplitOpMetric(t.Metric); !ok {
			out = append(out, t)
		}
	}
	return out
}
