package htmlreport

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
)

func opTable(metric string, means map[string][]float64, diagnostic bool) analysis.Table {
	t := analysis.Table{Workload: "web20", Metric: metric, Unit: "ms", Diagnostic: diagnostic}
	for _, p := range []string{"native", "docker-nat"} {
		vals := means[p]
		t.Cells = append(t.Cells, analysis.Cell{Workload: "web20", Metric: metric, Platform: p, Unit: "ms",
			Values: vals, Summary: stats.Summarize(vals), IsBaseline: p == "native"})
	}
	return t
}

// TestOpChartLayout: a group per operation, a bar per platform at its
// mean, every trial a dot, and the operation's limit as a line at its
// value; other workloads' and plain metrics are left out.
func TestOpChartLayout(t *testing.T) {
	res := analysis.Result{Baseline: "native", Tables: []analysis.Table{
		opTable("HomePage.p90_ms", map[string][]float64{"native": {100, 120}, "docker-nat": {150, 170}}, false),
		opTable("AddEvent.p90_ms", map[string][]float64{"native": {300, 300}, "docker-nat": {400, 420}}, false),
		opTable("HomePage.mean_ms", map[string][]float64{"native": {40, 40}, "docker-nat": {50, 50}}, false),
		opTable("ops_per_sec", map[string][]float64{"native": {60, 60}, "docker-nat": {60, 60}}, false),
	}, Diagnostics: []analysis.Table{
		opTable("HomePage.p90_limit_ms", map[string][]float64{"native": {250, 250}, "docker-nat": {250, 250}}, true),
		opTable("AddEvent.p90_limit_ms", map[string][]float64{"native": {500, 500}, "docker-nat": {500, 500}}, true),
	}}
	charts := opCharts(res, "web20", 1)
	if len(charts) != 2 || !strings.Contains(charts[0].Title, "p90_ms") || !strings.Contains(charts[1].Title, "mean_ms") {
		t.Fatalf("charts %+v", charts)
	}
	c := charts[0]
	if len(c.Groups) != 2 || c.Groups[0].Op != "HomePage" || c.Groups[1].Op != "AddEvent" || len(c.Bars) != 4 || len(c.Keys) != 2 {
		t.Fatalf("groups %+v, %d bars, keys %+v", c.Groups, len(c.Bars), c.Keys)
	}
	// The y scale: value v at Top + PlotH (1 - v/axisMax); the baseline's
	// HomePage bar (mean 110) and its limit (250) share it.
	bottom := c.Top + c.PlotH
	scale := (bottom - c.Bars[0].Y) / 110
	if g := c.Groups[0]; !g.HasLimit || math.Abs((bottom-g.LimitY)/scale-250) > 1.5 {
		t.Errorf("HomePage limit at %v, want the height of 250 ms", (bottom-g.LimitY)/scale)
	}
	if g := c.Groups[1]; !g.HasLimit || math.Abs((bottom-g.LimitY)/scale-500) > 2 {
		t.Errorf("AddEvent limit at %v, want the height of 500 ms", (bottom-g.LimitY)/scale)
	}
	if b := c.Bars[3]; math.Abs((bottom-b.Y)/scale-410) > 2 || len(b.Dots) != 2 {
		t.Errorf("AddEvent on docker-nat: height %v (want 410), %d dots", (bottom-b.Y)/scale, len(b.Dots))
	}
	if charts[1].Groups[0].HasLimit {
		t.Error("mean_ms has no limit metric, yet a limit line was drawn")
	}
	if got := opCharts(res, "other", 1); len(got) != 0 {
		t.Errorf("charts for a workload without operations: %+v", got)
	}
	var b bytes.Buffer
	if err := page.ExecuteTemplate(&b, "opchart", c); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `class="limit"`); n != 2 || !strings.Contains(b.String(), "AddEvent limit 500.0 ms") {
		t.Errorf("rendered %d limit lines:\n%s", n, b.String())
	}
}
