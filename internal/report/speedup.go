package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
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

// NUMANodes reads the NUMA node count from a run's stored environment (0
// when it was not captured).
func NUMANodes(env json.RawMessage) int {
	var e struct {
		NUMANodes int `json:"numa_nodes"`
	}
	if len(env) == 0 || json.Unmarshal(env, &e) != nil {
		return 0
	}
	return e.NUMANodes
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
	byKey := map[string]analysis.Table{}
	var workloads []string
	for _, t := range append(append([]analysis.Table(nil), res.Tables...), res.Diagnostics...) {
		byKey[t.Workload+"\x00"+t.Metric] = t
		if t.Metric == SpeedupMetric {
			workloads = append(workloads, t.Workload)
		}
	}
	for _, wl := range workloads {
		get := func(metric string) map[string]analysis.Cell {
			m := map[string]analysis.Cell{}
			for _, c := range byKey[wl+"\x00"+metric].Cells {
				m[c.Platform] = c
			}
			return m
		}
		base, scale := get(SpeedupBaseline), get(SpeedupScaleout)
		if len(base) == 0 || len(scale) == 0 {
			continue
		}
		cpu, mig, lo, hi := get(speedupRedisCPU), get(speedupMigrations), get(speedupBusyMin), get(speedupBusyMax)
		fmt.Fprintf(w, "\n%s  scale-out: the baseline (one Redis, one driver process), the scale-out system and speedup = scale-out / baseline of each trial; mean over the counted rounds [95%% CI of that mean]; beside it, what explains it (scale-out load, mean over the rounds)\n", wl)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		width := len("platform")
		for _, c := range byKey[wl+"\x00"+SpeedupMetric].Cells {
			width = max(width, len(c.Platform)+1)
		}
		fmt.Fprintf(tw, "%-*s\tn\tbaseline ops/s\tscale-out ops/s\tspeedup\tRedis CPU %%\tRedis migrations/s\tCPU busy min..max %%\t\n", width, "platform")
		for _, c := range byKey[wl+"\x00"+SpeedupMetric].Cells {
			p := c.Platform
			name := p
			if c.Emulated {
				name += "*"
			}
			fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t%s\t%s\t%s\t%s..%s\t\n", width, name, c.Summary.N,
				withCI(base[p]), withCI(scale[p]), withCI(c), mean(cpu, p), mean(mig, p), mean(lo, p), mean(hi, p))
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
	c, ok := cells[p]
	if !ok || c.Summary.N == 0 {
		return "–"
	}
	return strings.TrimSpace(num(c.Summary.Mean))
}
