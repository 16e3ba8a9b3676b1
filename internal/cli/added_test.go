package cli

import (
	"math"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
)

func TestAdded(t *testing.T) {
	cell := func(p string, mean, lo, hi float64, base bool) analysis.Cell {
		return analysis.Cell{Platform: p, IsBaseline: base, Summary: stats.Summary{N: 5, Mean: mean}, Ratio: stats.Ratio{Lo: lo, Hi: hi}}
	}
	res := analysis.Result{Baseline: "native", Tables: []analysis.Table{
		{Workload: "tcp-rr", Metric: "rtt_mean_us", Unit: "us", Cells: []analysis.Cell{
			cell("native", 20, math.NaN(), math.NaN(), true),
			cell("docker-nat", 29.5, 1.4, 1.55, false),
			cell("docker-host", 20.2, math.NaN(), math.NaN(), false),
		}},
		// Not round trips: no line.
		{Workload: "redis", Metric: "cpu_us_per_op", Unit: "us", Cells: []analysis.Cell{cell("native", 27, 1, 1, true), cell("docker-nat", 31, 1.1, 1.2, false)}},
		{Workload: "tcp-rr", Metric: "transactions_per_sec", Unit: "tx/s", HigherIsBetter: true, Cells: []analysis.Cell{cell("native", 5e4, 1, 1, true)}},
	}}
	got := added(res)
	if len(got) != 1 {
		t.Fatalf("added = %q, want one line", got)
	}
	for _, w := range []string{"tcp-rr rtt_mean_us added to native's 20.0 us", "docker-nat +9.5 us [+8.0, +11.0]", "docker-host +0.2 us (95%"} {
		if !strings.Contains(got[0]+",", w) {
			t.Errorf("%q lacks %q", got[0], w)
		}
	}
}
