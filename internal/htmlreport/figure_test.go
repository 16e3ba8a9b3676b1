package htmlreport

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// oltpTrials are six rounds of a DVD Store run: the oltp workload on three
// platforms (docker-nat 10% slower, its purchases 20% slower), pgbench on
// the same ones, vm without pgbench.
func oltpTrials() []store.Trial {
	var ts []store.Trial
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for round := 0; round < 6; round++ {
		wiggle := 1 + 0.01*float64(round%3)
		for i, p := range []string{"native", "docker-nat", "vm"} {
			slow := map[string]float64{"native": 1, "docker-nat": 1.1, "vm": 1.25}[p]
			ts = append(ts, store.Trial{RunID: "20261123-120000-abcd", Round: round, Index: i, Warmup: round == 0, Workload: "oltp", Platform: p,
				Started: start, Duration: 30 * time.Second, Metrics: []store.Metric{
					{Name: "opm", Unit: "orders/min", HigherIsBetter: true, Value: 10000 / slow * wiggle},
					{Name: "order_ms", Unit: "ms", Value: 40 * slow * wiggle},
					{Name: "login_ms", Unit: "ms", Value: 6 * slow * wiggle},
					{Name: "purchase_ms", Unit: "ms", Value: 15 * slow * slow * wiggle},
					{Name: "rollback_pct", Unit: "%", Value: 1.5 + float64(i)/10, Diagnostic: true},
				}})
			if p != "vm" {
				ts = append(ts, store.Trial{RunID: "20261123-120000-abcd", Round: round, Index: 3 + i, Warmup: round == 0, Workload: "pgbench", Platform: p,
					Started: start, Duration: 20 * time.Second, Metrics: []store.Metric{
						{Name: "tps", Unit: "tx/s", HigherIsBetter: true, Value: 2000 / slow * wiggle},
					}})
			}
		}
	}
	return ts
}

func oltpResult() analysis.Result {
	return analysis.Analyse(oltpTrials(), analysis.Options{Baseline: "native", Platforms: []string{"native", "docker-nat", "vm"},
		Stats: stats.Options{Seed: 1, Resamples: 500}})
}

func TestDVDStoreFigure(t *testing.T) {
	if fs := figures(fixtureInput(t).Result); len(fs) != 0 {
		t.Errorf("a run without opm has %d figure(s)", len(fs))
	}
	fs := figures(oltpResult())
	if len(fs) != 1 || len(fs[0].Charts) != 2 {
		t.Fatalf("figures = %+v, want one with two charts", fs)
	}
	opm, rt := fs[0].Charts[0], fs[0].Charts[1]
	if len(opm.Groups) != 3 || len(opm.Legend) != 2 || opm.Legend[1].Label != "pgbench transactions/s" {
		t.Fatalf("throughput chart: %d groups, legend %+v", len(opm.Groups), opm.Legend)
	}
	for _, g := range opm.Groups {
		if len(g.Bars) != 2 || !strings.HasPrefix(g.Sub, "rollback 1.") {
			t.Errorf("group %s: %d bars, sub %q", g.Label, len(g.Bars), g.Sub)
		}
	}
	nat := opm.Groups[1]
	if nat.Label != "docker-nat" || nat.Bars[0].Value != "0.91" || !nat.Bars[0].HasCI || nat.Bars[0].Y <= opm.RefY {
		t.Errorf("docker-nat's OPM bar: %+v (ref line at y %v)", nat.Bars[0], opm.RefY)
	}
	if vm := opm.Groups[2]; !vm.Bars[1].NoBar || vm.Bars[0].NoBar {
		t.Errorf("vm has no pgbench value: bars %+v", vm.Bars)
	}
	var labels []string
	for _, g := range rt.Groups {
		labels = append(labels, g.Label)
		if len(g.Bars) != 3 {
			t.Errorf("transaction %s: %d bars, want one per platform", g.Label, len(g.Bars))
		}
	}
	if got := strings.Join(labels, ","); got != "whole order,login,purchase" {
		t.Errorf("transactions %s", got)
	}
	if p := rt.Groups[2].Bars[1]; p.Value != "1.21" || !strings.Contains(p.Tooltip, "ms") {
		t.Errorf("docker-nat purchase bar %+v", p)
	}
	// Every bar stays in the plot.
	for _, c := range fs[0].Charts {
		for _, g := range c.Groups {
			for _, b := range g.Bars {
				if !b.NoBar && (b.Y < c.Top || b.Y+b.H > c.PlotBottom+0.1 || b.X < c.Left || b.X+b.W > c.PlotRight) {
					t.Errorf("%s %s: bar %+v outside the plot", c.ID, g.Label, b)
				}
			}
		}
	}
}

// TestFigureGolden renders the figure section of the DVD Store run.
func TestFigureGolden(t *testing.T) {
	var b bytes.Buffer
	for _, f := range figures(oltpResult()) {
		if err := page.ExecuteTemplate(&b, "figure", f); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(regexp.MustCompile(`<rect class="gbar"`).FindAll(b.Bytes(), -1)); n != 5+9 {
		t.Errorf("%d bars drawn, want 5 throughput bars and 9 response-time bars", n)
	}
	golden(t, "figure.html", b.Bytes())
}

// scaleoutResult is five counted rounds of redis-scaleout on native and
// docker-nat: the same baseline, docker-nat's scale-out 20% slower.
func scaleoutResult() analysis.Result {
	var ts []store.Trial
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for round := 0; round < 6; round++ {
		wiggle := 1 + 0.02*float64(round%3)
		for i, p := range []string{"native", "docker-nat"} {
			slow := map[string]float64{"native": 1, "docker-nat": 1.25}[p]
			base, scale := 200000*wiggle, 800000/slow*(1+0.01*float64(round%2))
			ts = append(ts, store.Trial{RunID: "20261123-120000-abcd", Round: round, Index: i, Warmup: round == 0, Workload: "redis-scaleout", Platform: p,
				Started: start, Duration: 20 * time.Second, Metrics: []store.Metric{
					{Name: "baseline_ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: base},
					{Name: "scaleout_ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: scale},
					{Name: "speedup", Unit: "x", HigherIsBetter: true, Value: scale / base},
				}})
		}
	}
	return analysis.Analyse(ts, analysis.Options{Baseline: "native", Platforms: []string{"native", "docker-nat"},
		Stats: stats.Options{Seed: 1, Resamples: 500}})
}

func TestScaleoutFigures(t *testing.T) {
	if fs := scaleoutFigures(oltpResult()); len(fs) != 0 {
		t.Errorf("a DVD Store run has %d scale-out figure(s)", len(fs))
	}
	fs := figures(scaleoutResult())
	if len(fs) != 1 || len(fs[0].Charts) != 2 {
		t.Fatalf("figures = %+v, want one with two charts", fs)
	}
	tput, speed := fs[0].Charts[0], fs[0].Charts[1]
	if tput.HasRef || !speed.HasRef || speed.RefLabel != "1.0" {
		t.Errorf("reference lines: throughput %v, speedup %v %q", tput.HasRef, speed.HasRef, speed.RefLabel)
	}
	if len(tput.Groups) != 2 || len(tput.Groups[0].Bars) != 2 || len(speed.Groups[1].Bars) != 1 {
		t.Fatalf("throughput groups %+v, speedup groups %+v", tput.Groups, speed.Groups)
	}
	nat := tput.Groups[1]
	// The baseline's bars are as high on both platforms; docker-nat's
	// scale-out bar is lower than native's (a larger y).
	if nat.Bars[0].Y != tput.Groups[0].Bars[0].Y || nat.Bars[1].Y <= tput.Groups[0].Bars[1].Y || !nat.Bars[1].HasCI {
		t.Errorf("throughput bars: native %+v, docker-nat %+v", tput.Groups[0].Bars, nat.Bars)
	}
	if v := nat.Bars[1].Value; v != "644k" {
		t.Errorf("docker-nat's scale-out label %q, want 644k", v)
	}
	if v := speed.Groups[0].Bars[0].Value; v != "3.93" || !speed.Groups[0].Bars[0].HasCI {
		t.Errorf("native's speedup bar %+v", speed.Groups[0].Bars[0])
	}
	var b bytes.Buffer
	for _, f := range fs {
		if err := page.ExecuteTemplate(&b, "figure", f); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(regexp.MustCompile(`<rect class="gbar"`).FindAll(b.Bytes(), -1)); n != 4+2 {
		t.Errorf("%d bars drawn, want 4 throughput bars and 2 speedup bars", n)
	}
	if n := strings.Count(b.String(), `<line class="ref"`); n != 1 {
		t.Errorf("%d reference lines, want the speedup chart's", n)
	}
	golden(t, "figure-scaleout.html", b.Bytes())
}
