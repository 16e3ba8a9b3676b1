package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// scaleoutResult is five counted rounds of redis-scaleout on native and
// docker-nat: docker-nat's scale-out 20% slower, its Redis migrating more.
func scaleoutResult() analysis.Result {
	var ts []store.Trial
	for round := 0; round < 6; round++ {
		wiggle := 1 + 0.02*float64(round%3)
		for i, p := range []string{"native", "docker-nat"} {
			slow := map[string]float64{"native": 1, "docker-nat": 1.25}[p]
			base, scale := 200000*wiggle, 800000*wiggle/slow
			ts = append(ts, store.Trial{RunID: "20261123-120000-abcd", Round: round, Index: i, Warmup: round == 0, Workload: "redis-scaleout", Platform: p,
				Started: time.Unix(0, 0), Metrics: []store.Metric{
					{Name: "baseline_ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: base},
					{Name: "scaleout_ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: scale},
					{Name: "speedup", Unit: "x", HigherIsBetter: true, Value: scale / base},
					{Name: "redis_cpu_pct", Unit: "% of a core", Value: 150, Diagnostic: true},
					{Name: "redis_migrations_per_sec", Unit: "/s", Value: 10 * slow, Diagnostic: true},
					{Name: "cpu_busy_min_pct", Unit: "%", Value: 80, Diagnostic: true},
					{Name: "cpu_busy_max_pct", Unit: "%", Value: 99, Diagnostic: true},
				}})
		}
	}
	return analysis.Analyse(ts, analysis.Options{Baseline: "native", Platforms: []string{"native", "docker-nat"},
		Stats: stats.Options{Seed: 1, Resamples: 500}})
}

func TestSpeedupGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Speedup(&b, scaleoutResult(), 1); err != nil {
		t.Fatal(err)
	}
	golden(t, "speedup.txt", b.Bytes())
	if !strings.Contains(b.String(), "3.200 [3.200, 3.200]") || !strings.Contains(b.String(), "cannot appear here") {
		t.Errorf("summary:\n%s", b.String())
	}
	// A run without the scale-out metrics has no summary.
	_, res := fixture()
	b.Reset()
	if err := Speedup(&b, res, 1); err != nil || b.Len() != 0 {
		t.Errorf("a redis run got a speedup summary: %q, %v", b.String(), err)
	}
}

func TestNUMANodes(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int
	}{{`{"numa_nodes":2,"cpus":64}`, 2}, {`{"cpus":2}`, 0}, {``, 0}, {`{bad`, 0}} {
		if got := NUMANodes(json.RawMessage(tt.env)); got != tt.want {
			t.Errorf("NUMANodes(%s) = %d, want %d", tt.env, got, tt.want)
		}
	}
}
