package pgbench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// TestTrialOnPlatforms runs one short trial natively, on docker-host and on
// docker-nat (the database in a container, pgbench on the host) and checks
// that the values are plausible and the raw output is kept.
func TestTrialOnPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL and pgbench natively and in containers")
	}
	run := runid.New()
	kinds := []string{platform.Native, platform.DockerHost, platform.DockerNAT}
	ps := testenv.Platforms(t, run, t.TempDir(), kinds...)
	in := newInstance(t, map[string]string{"scale": "2", "clients": "4", "memory": "512m"})
	for _, kind := range kinds {
		p := ps[kind]
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			raw := t.TempDir()
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t1", Platform: p, Duration: 3 * time.Second, RawDir: raw, Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, m := range in.Metrics() {
				if _, ok := res.Values[m.Name]; !ok {
					t.Errorf("metric %s missing", m.Name)
				}
			}
			v := res.Values
			if v[MetricTPS] < 10 || v[MetricTPS] > 1e6 {
				t.Errorf("tps %v, want 10..1e6", v[MetricTPS])
			}
			if !(v[MetricLatAvg] > 0 && v[MetricLatAvg] <= v[MetricLatP99]*1.5 && v[MetricLatP95] <= v[MetricLatP99]) {
				t.Errorf("latency avg %v p95 %v p99 %v ms: want 0 < avg, p95 <= p99", v[MetricLatAvg], v[MetricLatP95], v[MetricLatP99])
			}
			if c := v[MetricCPUPerTx]; !(c > 0 && c < 1e6) {
				t.Errorf("cpu per tx %v us", c)
			}
			if s := v[MetricServerCPU]; !(s > 0 && s < 250) {
				t.Errorf("server cpu %v%%, want 0..250", s)
			}
			if s := v[MetricInit]; !(s > 0 && s < 60) {
				t.Errorf("init %v s", s)
			}
			for _, f := range []string{"t1-pgbench.txt", "t1-pgbench-init.txt"} {
				if b, err := os.ReadFile(filepath.Join(raw, f)); err != nil || len(b) == 0 {
					t.Errorf("raw output %s: %v", f, err)
				}
			}
			logs, _ := filepath.Glob(filepath.Join(raw, "t1-pgbench-log.*"))
			if len(logs) != 2 {
				t.Errorf("per-transaction logs %v, want one per thread (2)", logs)
			}
			notes := strings.Join(res.Notes, "\n")
			for _, want := range []string{"closed loop", "pgbench (15", "initialised per trial", "shared_buffers=128MB"} {
				if !strings.Contains(notes, want) {
					t.Errorf("notes lack %q:\n%s", want, notes)
				}
			}
			t.Logf("%s: %.0f tps, latency avg %.2f p95 %.2f p99 %.2f ms, %.0f us CPU/tx, server %.0f%%, client %.0f%%, init %.1f s; %s",
				kind, v[MetricTPS], v[MetricLatAvg], v[MetricLatP95], v[MetricLatP99], v[MetricCPUPerTx], v[MetricServerCPU], v[MetricClientCPU], v[MetricInit], res.Where)
		})
	}
}
