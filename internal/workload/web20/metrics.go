package web20

import (
	"math"

	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names. Per-operation metrics are named OPERATION.STAT
// ("HomePage.p90_ms"): the terminal report draws them as one grid per
// statistic, a row per operation, and the HTML report as the seed's
// grouped bars.
const (
	MetricOpsPerSec    = "ops_per_sec"
	MetricQoSPass      = "qos_pass"
	MetricCyclePass    = "cycle_pass"
	MetricFailuresPass = "failures_pass"
	MetricCycle        = "cycle_ms"
	MetricCycleTarget  = "cycle_target_ms"
	MetricLateCycles   = "late_cycles_pct"
	MetricFailed       = "failed_pct"
	MetricHostBusy     = "host_busy_pct"
	MetricDBCPU        = "db_cpu_pct"
	MetricWebCPU       = "web_cpu_pct"
	MetricDriverMsOp   = "driver_cpu_ms_per_op"
	MetricSaturated    = "driver_saturated"
	// Find-max.
	MetricMaxUsers = "max_users"
	MetricMinFail  = "min_fail_users"
	MetricSteps    = "search_steps"
)

// Per-operation statistics (OPERATION.STAT).
const (
	StatMean    = "mean_ms"
	StatP90     = "p90_ms"
	StatP99     = "p99_ms"
	StatMix     = "mix_pct"
	StatCount   = "count"
	StatFailed  = "failed"
	StatP90Pass = "p90_pass"
	StatMixPass = "mix_pass"
	StatLimit   = "p90_limit_ms"
)

// OpMetric is the name of operation op's statistic stat.
func OpMetric(op Op, stat string) string { return op.String() + "." + stat }

// CPUCost is what the CPU account charges: milliseconds per operation (all
// of an operation's HTTP requests).
var CPUCost = workload.CPUCost{Metric: "cpu_ms_per_op", Unit: "ms", Scale: 1e3, Op: "operation (a page with its statics and images, or a form post)"}

// findMaxKeeps are the figures of the step at the maximum a find-max trial
// reports besides the maximum.
var findMaxKeeps = map[string]bool{MetricOpsPerSec: true, MetricHostBusy: true, MetricDBCPU: true, MetricWebCPU: true,
	MetricDriverMsOp: true, MetricSaturated: true}

func init() {
	for _, m := range CPUCost.Metrics() {
		findMaxKeeps[m.Name] = true
	}
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	if in.s.Mode == ModeFindMax {
		return in.findMaxMetrics()
	}
	ms := []workload.Metric{
		{Name: MetricOpsPerSec, Unit: "ops/s", HigherIsBetter: true, Help: "successful operations per second of the steady state, all instances (closed loop: about users / cycle time while the site keeps up)"},
	}
	for _, op := range Ops {
		ms = append(ms,
			workload.Metric{Name: OpMetric(op, StatMean), Unit: "ms", Help: op.String() + "'s mean latency in the steady state (first request sent to last answer read), the seed's Figures 2-4"},
			workload.Metric{Name: OpMetric(op, StatP90), Unit: "ms", Quantile: 0.9, Help: op.String() + "'s 90th percentile latency, Faban's p90 rule and the seed's Figure 5"})
	}
	ms = append(ms, CPUCost.Metrics()...)
	for _, op := range Ops {
		ms = append(ms,
			workload.Metric{Name: OpMetric(op, StatP99), Unit: "ms", Quantile: 0.99, Diagnostic: true, Help: op.String() + "'s 99th percentile latency"},
			workload.Metric{Name: OpMetric(op, StatMix), Unit: "%", Diagnostic: true, Help: op.String() + "'s share of the successful operations (Faban's mix rule: within 2 points of the target)"},
			workload.Metric{Name: OpMetric(op, StatCount), Unit: "ops", Diagnostic: true, Help: op.String() + "'s successful operations in the steady state"},
			workload.Metric{Name: OpMetric(op, StatFailed), Unit: "ops", Diagnostic: true, Help: op.String() + "'s failed operations in the steady state (by cause in the notes)"},
			workload.Metric{Name: OpMetric(op, StatP90Pass), Unit: "0/1", Diagnostic: true, Help: "1 when " + op.String() + "'s p90 met its limit (the mean over trials is the share that passed)"},
			workload.Metric{Name: OpMetric(op, StatMixPass), Unit: "0/1", Diagnostic: true, Help: "1 when " + op.String() + "'s share was within 2 points of its target"},
			workload.Metric{Name: OpMetric(op, StatLimit), Unit: "ms", Diagnostic: true, Help: op.String() + "'s p90 limit: a setting, not a measurement (the report draws it as the QoS line)"})
	}
	return append(ms,
		workload.Metric{Name: MetricQoSPass, Unit: "0/1", Diagnostic: true, Help: "1 when every rule passed (Faban's mix, p90 and cycle rules, and the failure rule)"},
		workload.Metric{Name: MetricCyclePass, Unit: "0/1", Diagnostic: true, Help: "1 when the mean cycle time as run was within 2% of the mean of the cycles drawn"},
		workload.Metric{Name: MetricFailuresPass, Unit: "0/1", Diagnostic: true, Help: "1 when no operation failed more often than max_failures"},
		workload.Metric{Name: MetricCycle, Unit: "ms", Diagnostic: true, Help: "mean cycle time as run (start to start)"},
		workload.Metric{Name: MetricCycleTarget, Unit: "ms", Diagnostic: true, Help: "mean of the cycle times drawn (the 5x cap and the minimum cycles applied): the cycle rule's target"},
		workload.Metric{Name: MetricLateCycles, Unit: "%", Diagnostic: true, Help: "cycles whose operation ran past the cycle time"},
		workload.Metric{Name: MetricFailed, Unit: "%", Diagnostic: true, Help: "failed operations, a share of all attempted in the steady state"},
		workload.Metric{Name: MetricHostBusy, Unit: "% of all CPUs", Diagnostic: true, Help: "the host's CPU utilisation over the load (/proc/stat busy time over all CPUs; the seed: about 70-75% at 8 instances)"},
		workload.Metric{Name: MetricDBCPU, Unit: "% of a core", Diagnostic: true, Help: "CPU of the database tier (MariaDB) over the load"},
		workload.Metric{Name: MetricWebCPU, Unit: "% of a core", Diagnostic: true, Help: "CPU of the web tier (nginx and PHP-FPM) over the load"},
		workload.Metric{Name: MetricDriverMsOp, Unit: "ms", Diagnostic: true, Help: "the driver's own CPU time per operation"},
		workload.Metric{Name: MetricSaturated, Unit: "0/1", Diagnostic: true, Help: "1 when the driver's own checks found it may have been the bottleneck"},
	)
}

func (in *Instance) findMaxMetrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricMaxUsers, Unit: "users", HigherIsBetter: true, Help: "the most users per instance that passed every rule, verified (unless the search hit its step cap, which the notes say): the metric to pick a platform by"},
	}
	ms = append(ms, CPUCost.Metrics()...)
	return append(ms,
		workload.Metric{Name: MetricMinFail, Unit: "users", Diagnostic: true, Help: "the fewest users per instance that failed a rule above the maximum (NaN: none failed): the search's bracket"},
		workload.Metric{Name: MetricSteps, Unit: "steps", Diagnostic: true, Help: "search steps, resumed ones included"},
		workload.Metric{Name: MetricOpsPerSec, Unit: "ops/s", Diagnostic: true, Help: "successful operations per second at the maximum"},
		workload.Metric{Name: MetricHostBusy, Unit: "% of all CPUs", Diagnostic: true, Help: "the host's CPU utilisation at the maximum"},
		workload.Metric{Name: MetricDBCPU, Unit: "% of a core", Diagnostic: true, Help: "CPU of the database tier at the maximum"},
		workload.Metric{Name: MetricWebCPU, Unit: "% of a core", Diagnostic: true, Help: "CPU of the web tier at the maximum"},
		workload.Metric{Name: MetricDriverMsOp, Unit: "ms", Diagnostic: true, Help: "the driver's own CPU time per operation at the maximum"},
		workload.Metric{Name: MetricSaturated, Unit: "0/1", Diagnostic: true, Help: "1 when the driver may have been the bottleneck at the maximum"},
	)
}

// values are a run's metrics.
func (r *record) values() map[string]float64 {
	v := map[string]float64{MetricOpsPerSec: r.Throughput}
	var failed, attempted int64
	for _, op := range Ops {
		o := r.Ops[op.String()]
		v[OpMetric(op, StatMean)] = o.MeanMs
		v[OpMetric(op, StatP90)] = o.P90Ms
		v[OpMetric(op, StatP99)] = o.P99Ms
		v[OpMetric(op, StatMix)] = o.MixPct
		v[OpMetric(op, StatCount)] = float64(o.Count)
		v[OpMetric(op, StatFailed)] = float64(o.Failed)
		v[OpMetric(op, StatP90Pass)] = r.rulePass("p90", op.String())
		v[OpMetric(op, StatMixPass)] = r.rulePass("mix", op.String())
		v[OpMetric(op, StatLimit)] = o.LimitMs
		failed += o.Failed
		attempted += o.Count + o.Failed
	}
	for k, x := range r.CPU {
		v[k] = x
	}
	v[MetricQoSPass] = b2f(r.QoS.Pass)
	v[MetricCyclePass] = r.rulePass("cycle", "")
	v[MetricFailuresPass] = r.rulePass("failures", "")
	v[MetricCycle], v[MetricCycleTarget] = r.CycleAchieved, r.CycleTarget
	v[MetricLateCycles] = pct(r.LateCycles, r.Cycles)
	v[MetricFailed] = pct(failed, attempted)
	v[MetricHostBusy] = r.HostBusy
	v[MetricDBCPU], v[MetricWebCPU] = r.Tier["db"], r.Tier["web"]
	v[MetricDriverMsOp] = r.DriverOpMs
	v[MetricSaturated] = b2f(r.Saturation.Saturated)
	return v
}

// samples gives the percentile metrics the number of operations behind
// them.
func (r *record) samples() map[string]int64 {
	s := map[string]int64{}
	for _, op := range Ops {
		n := r.Ops[op.String()].Count
		s[OpMetric(op, StatP90)] = n
		s[OpMetric(op, StatP99)] = n
	}
	return s
}

func pct(n, of int64) float64 {
	if of == 0 {
		return math.NaN()
	}
	return 100 * float64(n) / float64(of)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
