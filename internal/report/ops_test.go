package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
)

func TestSplitOpMetric(t *testing.T) {
	for _, tt := range []struct {
		name, op, stat string
		ok             bool
	}{
		{"HomePage.p90_ms", "HomePage", "p90_ms", true},
		{"AddEvent.mix_pct", "AddEvent", "mix_pct", true},
		{"ops_per_sec", "", "", false},
		{"latency_p99.9_ms", "", "", false}, // lower-case: not an operation
		{"HomePage.", "", "", false},
		{".p90_ms", "", "", false},
		{"A.b.c", "", "", false},
	} {
		op, stat, ok := SplitOpMetric(tt.name)
		if op != tt.op || stat != tt.stat || ok != tt.ok {
			t.Errorf("SplitOpMetric(%q) = %q, %q, %v", tt.name, op, stat, ok)
		}
	}
}

// TestOpGrids: per-operation metrics become one grid per statistic, a row
// per operation, with the ratio, interval and verdict beside the baseline;
// the text report prints no table of their own for them.
func TestOpGrids(t *testing.T) {
	cell := func(metric, p string, mean, ratio, lo, hi float64, verdict, noVerdict string) analysis.Cell {
		return analysis.Cell{Workload: "web20", Metric: metric, Platform: p, Unit: "ms", Summary: stats.Summary{N: 5, Mean: mean},
			IsBaseline: p == "native", Ratio: stats.Ratio{N: 5, Ratio: ratio, Lo: lo, Hi: hi}, Verdict: verdict, NoVerdict: noVerdict}
	}
	nan := math.NaN()
	res := analysis.Result{Baseline: "native", MinPairs: 5, Tables: []analysis.Table{
		{Workload: "web20", Metric: "HomePage.p90_ms", Unit: "ms", Cells: []analysis.Cell{
			cell("HomePage.p90_ms", "native", 120, 1, 1, 1, "baseline", ""),
			cell("HomePage.p90_ms", "docker-nat", 150, 1.25, 1.1, 1.4, "worse", "")}},
		{Workload: "web20", Metric: "AddPerson.p90_ms", Unit: "ms", Cells: []analysis.Cell{
			cell("AddPerson.p90_ms", "native", 80, 1, 1, 1, "baseline", ""),
			cell("AddPerson.p90_ms", "docker-nat", 84, 1.05, nan, nan, "p90<100", "p90<100")}},
		{Workload: "web20", Metric: "ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Cells: []analysis.Cell{
			cell("ops_per_sec", "native", 60, 1, 1, 1, "baseline", "")}},
	}}
	var b bytes.Buffer
	if err := Text(&b, Header{}, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"web20  p90_ms by operation (ms, lower is better): mean; ratio to native [95% CI]",
		"docker-nat (n=5)",
		"HomePage   120.0         150.0 1.250 [1.100, 1.400] -",
		"AddPerson  80.000        84.000 1.050 (p90<100)",
		"web20  ops_per_sec (ops/s, higher is better)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "web20  HomePage.p90_ms") {
		t.Errorf("a per-operation metric got a table of its own:\n%s", out)
	}
}
