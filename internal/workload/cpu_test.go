package workload

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

var testCost = CPUCost{Metric: "cpu_us_per_op", Unit: "us", Scale: 1e6, Op: "request"}

func TestCPUAccountRecord(t *testing.T) {
	tests := []struct {
		name string
		acct CPUAccount
		ops  float64
		want map[string]float64
	}{
		{
			name: "every part",
			acct: CPUAccount{
				Machine: sysinfo.CPUDelta{Interval: 2 * time.Second, BusySeconds: 3.0, StealSeconds: 0.2, IRQSeconds: 0.1, SoftIRQSeconds: 0.3},
				Servers: time.Second, Overhead: 200 * time.Millisecond, Clients: 600 * time.Millisecond,
			},
			ops: 1e6,
			// machine 2.8 s, own 1.8 s, outside 2.8-0.4-1.8 = 0.6 s over 2 s.
			want: map[string]float64{"cpu_us_per_op": 2.8, "run_cpu_us_per_op": 1.8, MetricServerCPU: 60,
				MetricClientCPU: 30, MetricStealCPU: 10, MetricOutsideCPU: 30},
		},
		{
			name: "outside never negative",
			acct: CPUAccount{
				Machine: sysinfo.CPUDelta{Interval: time.Second, BusySeconds: 1.0},
				Servers: 900 * time.Millisecond, Clients: 300 * time.Millisecond,
			},
			ops:  1000,
			want: map[string]float64{"cpu_us_per_op": 1000, "run_cpu_us_per_op": 1200, MetricServerCPU: 90, MetricClientCPU: 30, MetricStealCPU: 0, MetricOutsideCPU: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res Result
			tt.acct.Sources = []string{"cgroup v1 cpuacct x"}
			tt.acct.Record(testCost, tt.ops, &res)
			for k, v := range tt.want {
				if got := res.Values[k]; math.Abs(got-v) > 1e-9 {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
			if len(res.Values) != len(testCost.Metrics()) {
				t.Errorf("%d values for %d metrics: %v", len(res.Values), len(testCost.Metrics()), res.Values)
			}
			if len(res.Where) != 1 || res.Where[0] != "server CPU: cgroup v1 cpuacct x" || len(res.Notes) != 1 {
				t.Errorf("Where %q, Notes %q: want the source once and one note", res.Where, res.Notes)
			}
		})
	}
}

func TestCPUCostMetrics(t *testing.T) {
	ms := testCost.Metrics()
	names := map[string]bool{}
	for _, m := range ms {
		names[m.Name] = true
		primary := m.Name == "cpu_us_per_op" || m.Name == "run_cpu_us_per_op"
		if m.Diagnostic == primary {
			t.Errorf("%s: Diagnostic %v", m.Name, m.Diagnostic)
		}
		if m.HigherIsBetter {
			t.Errorf("%s: higher is better", m.Name)
		}
	}
	// Both costs say which CPU they count.
	if !strings.Contains(ms[0].Help, "whole machine") || !strings.Contains(ms[1].Help, "run's own processes") {
		t.Errorf("helps do not name what they count: %q, %q", ms[0].Help, ms[1].Help)
	}
	for _, n := range []string{MetricServerCPU, MetricClientCPU, MetricStealCPU, MetricOutsideCPU} {
		if !names[n] {
			t.Errorf("no metric %s", n)
		}
	}
}

// counter is a server (or client source) whose CPU time advances by step at
// each reading.
type counter struct {
	cpu, step, overhead, ovStep time.Duration
	reads                       int
}

func (c *counter) CPUTime(context.Context) (time.Duration, error) {
	c.reads++
	c.cpu += c.step
	return c.cpu, nil
}
func (c *counter) OverheadCPUTime(context.Context) (time.Duration, error) {
	c.overhead += c.ovStep
	return c.overhead, nil
}
func (c *counter) CPUSource() string          { return "test counter" }
func (c *counter) Addr(string) string         { return "" }
func (c *counter) Command() []string          { return []string{"counter"} }
func (c *counter) Describe() string           { return "a counter" }
func (c *counter) Stop(context.Context) error { return nil }

// plain is a server without CPU reporting.
type plain struct{}

func (plain) Addr(string) string         { return "" }
func (plain) Command() []string          { return []string{"plain-server"} }
func (plain) Describe() string           { return "somewhere" }
func (plain) Stop(context.Context) error { return nil }

func TestCPUMeter(t *testing.T) {
	ctx := context.Background()
	a := &counter{step: 300 * time.Millisecond, ovStep: 50 * time.Millisecond}
	b := &counter{step: 100 * time.Millisecond}
	driver := &counter{step: 20 * time.Millisecond}
	trial := Trial{Run: runid.New(), Name: "t", RawDir: t.TempDir()}
	var run ClientRun
	acct, err := MeasureCPU(ctx, []platform.Server{a, b}, []platform.CPUReporter{driver}, func(m *CPUMeter) error {
		m.AddClient(5 * time.Millisecond)
		var err error
		run, err = m.RunClient(ctx, trial, "client.txt", []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done"}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if acct.Servers != 400*time.Millisecond || acct.Overhead != 50*time.Millisecond {
		t.Errorf("servers %v overhead %v, want one step of each server (400ms) and a's helper step (50ms)", acct.Servers, acct.Overhead)
	}
	if len(acct.PerServer) != 2 || acct.PerServer[0] != 300*time.Millisecond || acct.PerServer[1] != 100*time.Millisecond {
		t.Errorf("per server %v, want [300ms 100ms] in the order given", acct.PerServer)
	}
	if want := 20*time.Millisecond + 5*time.Millisecond + run.CPU; acct.Clients != want {
		t.Errorf("clients %v, want driver step + added + the client's %v = %v", acct.Clients, run.CPU, want)
	}
	if !(acct.Machine.Interval > 0) || len(acct.Sources) != 1 || acct.Sources[0] != "test counter" {
		t.Errorf("machine interval %v, sources %q", acct.Machine.Interval, acct.Sources)
	}
	if run.RawPath == "" || run.RawNote != "" {
		t.Errorf("raw output %q, note %q", run.RawPath, run.RawNote)
	}

	if _, err := StartCPU(ctx, []platform.Server{plain{}}); err == nil || !strings.Contains(err.Error(), "plain-server cannot report its CPU time") {
		t.Errorf("StartCPU with a server without CPU time: %v", err)
	}
	m, err := StartCPU(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stop(ctx); err == nil {
		t.Error("second Stop succeeded")
	}
}

// slow is a server whose CPU time takes a while to read, as a container's
// does through the engine's stats API.
type slow struct{ plain }

func (slow) CPUTime(ctx context.Context) (time.Duration, error) {
	time.Sleep(200 * time.Millisecond)
	return time.Second, nil
}

// TestCPUMeterReadsInParallel: five servers that take 200 ms each to read
// are read at once, not one after the other.
func TestCPUMeterReadsInParallel(t *testing.T) {
	servers := []platform.Server{slow{}, slow{}, slow{}, slow{}, slow{}}
	start := time.Now()
	m, err := StartCPU(context.Background(), servers)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Errorf("StartCPU took %v for five 200 ms readings: not in parallel", d)
	}
	if _, err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRunClientRawNotSaved: a raw directory that cannot be made keeps the
// measurement and says so.
func TestRunClientRawNotSaved(t *testing.T) {
	dir := t.TempDir() + "/file"
	if err := writeFile(dir); err != nil {
		t.Fatal(err)
	}
	run, err := RunClientOn(context.Background(), nil, runid.New(), dir+"/raw", "x.txt", []string{"echo", "42"}, nil)
	if err != nil {
		t.Fatalf("RunClient failed because its output could not be saved: %v", err)
	}
	if strings.TrimSpace(string(run.Output)) != "42" || run.RawPath != "" || !strings.Contains(run.RawNote, "not saved (the measurement is kept)") {
		t.Errorf("output %q, raw path %q, note %q", run.Output, run.RawPath, run.RawNote)
	}
}

func TestSelfCPU(t *testing.T) {
	ctx := context.Background()
	before, err := SelfCPU{}.CPUTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x := 0.0
	for i := range 20_000_000 {
		x += math.Sqrt(float64(i))
	}
	after, err := SelfCPU{}.CPUTime(ctx)
	if err != nil || !(after > before) || x == 0 {
		t.Errorf("SelfCPU %v -> %v (%v) over a busy loop", before, after, err)
	}
}

func writeFile(path string) error { return os.WriteFile(path, []byte("x"), 0o644) }
