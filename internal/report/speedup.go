package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Metric names of a scale-out workload (redis-scaleout) that the speedup
// summary reads: the two experiments' throughputs, their ratio in each
// trial, and the diagnostics that explain it.
const (
	SpeedupBaseline   = "baseline_ops_per_sec"
	SpeedupScaleout   = "scaleout_ops_per_sec"
	SpeedupMetric     = "speedup"
	speedupRedisCPU   = "redis_cpu_pct"
	speedupMigrations = "redis_migrations_per_sec"
	speedupBusyMin    = "cpu_busy_min_pct"
	speedupBusyMax    = "cpu_busy_max_pct"
)

// ScaleoutMetrics are all the metric names the speedup summary and figure
// read; a scale-out workload must report each of them under that name.
var ScaleoutMetrics = []string{SpeedupBaseline, SpeedupScaleout, SpeedupMetric, speedupRedisCPU, speedupMigrations, speedupBusyMin, speedupBusyMax}

// NUMANodes reads the NUMA node count from a run's stored environment (0
// when it was not captured or does not decode).
func NUMANodes(env json.RawMessage) int {
	var e sysinfo.Env
	if len(env) == 0 || json.Unmarshal(env, &e) != nil {
		return 0
	}
	return e.NUMANodes
}

// Scaleout is one scale-out workload's results: the speedup's cells in
// its table's platform order, and the two throughputs and the diagnostics
// that explain the speedup by platform (a platform without one has none).
type Scaleout struct {
	Workload                               string
	Speedup                                []analysis.Cell
	Baseline, System                       map[string]analysis.Cell
	RedisCPU, Migrations, BusyMin, BusyMax map[string]analysis.Cell
}

// Scaleouts returns every workload of res with the scale-out metrics (a
// speedup and both throughputs), in the order of their speedup tables. The
// text summary (Speedup) and the HTML report's figures read them.
func Scaleouts(res analysis.Result) []Scaleout {
	byKey := map[[2]string]analysis.Table{}
	var workloads []string
	for _, tabs := range [][]analysis.Table{res.Tables, res.Diagnostics} {
		for _, t := range tabs {
			byKey[[2]string{t.Workload, t.Metric}] = t
			if t.Metric == SpeedupMetric {
				workloads = append(workloads, t.Workload)
			}
		}
	}
	var out []Scaleout
	for _, wl := range workloads {
		get := func(metric string) map[string]analysis.Cell {
			m := map[string]analysis.Cell{}
			for _, c := range byKey[[2]string{wl, metric}].Cells {
				m[c.Platform] = c
			}
			return m
		}
		s := Scaleout{Workload: wl, Speedup: byKey[[2]string{wl, SpeedupMetric}].Cells, Baseline: get(SpeedupBaseline), System: get(SpeedupScaleout),
			RedisCPU: get(speedupRedisCPU), Migrations: get(speedupMigrations), BusyMin: get(speedupBusyMin), BusyMax: get(speedupBusyMax)}
		if len(s.Baseline) > 0 && len(s.System) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Speedup writes, for every workload with the scale-out metrics, one line
// per platform: the baseline's and the scale-out system's throughput and
// the speedup, each its mean over the counted rounds with a 95% interval of
// that mean (a trial's speedup pairs its two experiments, measured one
// after the other on one deployment), and beside them what explains the
// speedup: the Redis shards' CPU, their migrations between CPUs per second
// and the least and most busy host CPU during the scale-out load. It says
// that the seed's NUMA explanation cannot appear when the run's machine had
// one NUMA node (numaNodes, from the run's environment; 0: unknown).
func Speedup(w io.Writer, res analysis.Result, numaNodes int) error {
	for _, s := range Scaleouts(res) {
		fmt.Fprintf(w, "\n%s  scale-out: the baseline (one Redis, one driver process), the scale-out system and speedup = scale-out / baseline of each trial; mean over the counted rounds [95%% CI of that mean]; beside it, what explains it (scale-out load, mean over the rounds)\n", s.Workload)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		width := len("platform")
		for _, c := range s.Speedup {
			width = max(width, len(c.Platform)+1)
		}
		fmt.Fprintf(tw, "%-*s\tn\tbaseline ops/s\tscale-out ops/s\tspeedup\tRedis CPU %%\tRedis migrations/s\tCPU busy min..max %%\t\n", width, "platform")
		for _, c := range s.Speedup {
			p := c.Platform
			name := p
			if c.Emulated {
				name += "*"
			}
			fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t%s\t%s\t%s\t%s..%s\t\n", width, name, c.Summary.N,
				withCI(s.Baseline[p]), withCI(s.System[p]), withCI(c), mean(s.RedisCPU, p), mean(s.Migrations, p), mean(s.BusyMin, p), mean(s.BusyMax, p))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		switch {
		case numaNodes == 1:
			fmt.Fprintln(w, "one NUMA node on this run's machine: the seed's explanation of its speedups (Redis threads migrating, and interrupts landing, across NUMA nodes) cannot appear here; differences between platforms come from the per-core spread and migrations above")
		case numaNodes > 1:
			fmt.Fprintf(w, "%d NUMA nodes on this run's machine: migrations and the per-core spread above are where the seed's cross-node effect would show\n", numaNodes)
		}
	}
	return nil
}

// withCI is a cell's mean with the 95% interval of that mean.
func withCI(c analysis.Cell) string {
	if c.Summary.N == 0 {
		return "–"
	}
	lo, hi := stats.MeanCI(c.Values, 0.95)
	if math.IsNaN(lo) {
		return num(c.Summary.Mean)
	}
	// Throughputs and speedups are not negative: a wide interval is cut at 0.
	return fmt.Sprintf("%s [%s, %s]", num(c.Summary.Mean), num(math.Max(lo, 0)), num(hi))
}

// mean is platform p's mean in cells, "–" when absent.
func mean(cells map[string]analysis.Cell, p string) string {
	c := cells[p]
	if c.Summary.N == 0 {
		return "–"
	}
	return num(c.Summary.Mean)
}
