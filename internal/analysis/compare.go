package analysis

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// ErrNothingInCommon means the runs given to Compare share no workload,
// metric and platform.
var ErrNothingInCommon = errors.New("the runs have no workload, metric and platform in common")

// RunData is one stored run and its trials.
type RunData struct {
	Run    store.Run
	Trials []store.Trial
}

// CompareOptions tune Compare.
type CompareOptions struct {
	Stats stats.Options
	// Diagnostic reports whether a workload's metric is diagnostic (explains
	// a result, is not one) for trials stored before metrics recorded it;
	// nil means IsDiagnosticName.
	Diagnostic func(workload, metric string) bool
	// MinPairs is the fewest counted trials each run needs for a verdict;
	// 0 means stats.DefaultMinPairs.
	MinPairs int
	// Platforms and Workloads give the display order (the first run's study
	// order); names absent here follow in the order the first run met them.
	Platforms, Workloads []string
}

// Comparison is the same workloads, metrics and platforms across runs, each
// later run relative to the first.
type Comparison struct {
	Runs []store.Run
	Rows []CompareRow
	// NotInAll lists the workload/platform pairs left out because some run
	// lacks them.
	NotInAll []string
	// MinPairs is the rule applied: counted trials per run a verdict needs.
	MinPairs int
}

// CompareRow is one (workload, metric, platform) across the runs.
type CompareRow struct {
	Workload, Metric, Platform, Unit string
	HigherIsBetter, Diagnostic       bool
	// Summaries has one entry per run, of its counted successful trials.
	Summaries []stats.Summary
	// Ceilings has one entry per run: the limit of a find-max search's
	// own that some of its trials reached ("the data's limit"), their
	// values lower bounds (TrialCeilings); "" for none. A run with one has
	// no ratio to or from it.
	Ceilings []string
	// Below has one entry per run: its bounds are upper bounds (no pass
	// stood when its searches stopped), shown "< value".
	Below []bool
	// Ratios and Verdicts have one entry per later run: its mean over the
	// first run's, with an unpaired CI, and "~", "better", "worse", "n/a",
	// "n<5" (a run with fewer counted trials than the minimum), "p99<1000"
	// (a percentile resting on too few observations in some trial, as in
	// Analyse) or "" for a diagnostic metric.
	Ratios   []stats.Ratio
	Verdicts []string
}

// compareKey names one row of a comparison.
type compareKey struct{ w, m, p string }

// runPoints are one run's counted values, per row.
type runPoints struct {
	vals     map[compareKey][]point
	ceilings map[compareKey]search.Ceiling
	// pairs are the workload/platform pairs the run has counted trials of.
	pairs map[string]bool
}

// Compare lines up the runs: for every workload, metric and platform that
// each run measured, each run's summary and each later run's ratio to the
// first. Rounds of different runs are not paired, so the interval is
// stats.UnpairedRatio over the counted trials; the verdict follows
// Analyse's rules (verdictOf) with each run's trial count as n. It fails
// with ErrNothingInCommon when no row remains.
func Compare(runs []RunData, o CompareOptions) (Comparison, error) {
	if len(runs) < 2 {
		return Comparison{}, errors.New("compare needs at least two runs")
	}
	if o.Diagnostic == nil {
		o.Diagnostic = func(_, m string) bool { return IsDiagnosticName(m) }
	}
	if o.MinPairs <= 0 {
		o.MinPairs = stats.DefaultMinPairs
	}
	points := make([]runPoints, len(runs))
	meta := map[compareKey]store.Metric{}
	var order []compareKey
	var pairOrder []string
	pairSeen := map[string]bool{}
	for i, rd := range runs {
		points[i] = collectRun(rd.Trials)
		for _, t := range rd.Trials {
			if t.Warmup || t.Error != "" {
				continue
			}
			if wp := t.Workload + "/" + t.Platform; !pairSeen[wp] {
				pairSeen[wp] = true
				pairOrder = append(pairOrder, wp)
			}
			if i > 0 {
				continue
			}
			for _, m := range t.Metrics {
				k := compareKey{t.Workload, m.Name, t.Platform}
				md, seen := meta[k]
				if !seen {
					order = append(order, k)
				}
				m.Diagnostic = m.Diagnostic || md.Diagnostic
				meta[k] = m
			}
		}
	}
	c := Comparison{MinPairs: o.MinPairs}
	for _, rd := range runs {
		c.Runs = append(c.Runs, rd.Run)
	}
	for _, wp := range pairOrder {
		for i := range runs {
			if !points[i].pairs[wp] {
				c.NotInAll = append(c.NotInAll, wp)
				break
			}
		}
	}
	for _, k := range compareOrder(order, o) {
		if !inEveryRun(points, k) {
			continue
		}
		c.Rows = append(c.Rows, compareRow(k, meta[k], points, o))
	}
	if len(c.Rows) == 0 {
		return c, ErrNothingInCommon
	}
	return c, nil
}

// collectRun gathers a run's counted values (with the observations behind
// each) and the ceilings its find-max trials reached.
func collectRun(trials []store.Trial) runPoints {
	rp := runPoints{vals: map[compareKey][]point{}, ceilings: map[compareKey]search.Ceiling{}, pairs: map[string]bool{}}
	for _, t := range trials {
		if t.Warmup || t.Error != "" {
			continue
		}
		for m, limit := range trialCeilings(t) {
			rp.ceilings[compareKey{t.Workload, m, t.Platform}] = limit
		}
		rp.pairs[t.Workload+"/"+t.Platform] = true
		for _, m := range t.Metrics {
			k := compareKey{t.Workload, m.Name, t.Platform}
			rp.vals[k] = append(rp.vals[k], point{v: m.Value, samples: m.Samples})
		}
	}
	return rp
}

// compareOrder sorts the first run's rows by display order (workload, then
// platform) and groups them by workload and metric.
func compareOrder(order []compareKey, o CompareOptions) []compareKey {
	order = append([]compareKey(nil), order...)
	sort.SliceStable(order, func(i, j int) bool {
		wi, wj := rank(o.Workloads, order[i].w), rank(o.Workloads, order[j].w)
		if wi != wj {
			return wi < wj
		}
		return rank(o.Platforms, order[i].p) < rank(o.Platforms, order[j].p)
	})
	var groups []compareKey
	seen := map[compareKey]bool{}
	for _, k := range order {
		if g := (compareKey{k.w, k.m, ""}); !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	out := make([]compareKey, 0, len(order))
	for _, g := range groups {
		for _, k := range order {
			if k.w == g.w && k.m == g.m {
				out = append(out, k)
			}
		}
	}
	return out
}

// inEveryRun reports whether every run has a counted value for row k.
func inEveryRun(points []runPoints, k compareKey) bool {
	for _, rp := range points {
		if len(rp.vals[k]) == 0 {
			return false
		}
	}
	return true
}

// compareRow computes row k: each run's summary, each later run's ratio to
// the first and its verdict.
func compareRow(k compareKey, md store.Metric, points []runPoints, o CompareOptions) CompareRow {
	row := CompareRow{Workload: k.w, Metric: k.m, Platform: k.p, Unit: md.Unit,
		HigherIsBetter: md.HigherIsBetter, Diagnostic: md.Diagnostic || o.Diagnostic(k.w, k.m)}
	values := make([][]float64, len(points))
	for i, rp := range points {
		for _, p := range rp.vals[k] {
			values[i] = append(values[i], p.v)
		}
		row.Summaries = append(row.Summaries, stats.Summarize(values[i]))
		row.Ceilings = append(row.Ceilings, rp.ceilings[k].Is)
		row.Below = append(row.Below, rp.ceilings[k].Below)
	}
	so := statsFor(o.Stats, md.Quantile)
	for i := 1; i < len(points); i++ {
		r := stats.UnpairedRatio(values[0], values[i], so)
		v := ""
		switch {
		case row.Ceilings[0] != "" || row.Ceilings[i] != "":
			// A lower bound on either side: no ratio.
			nan := math.NaN()
			r = stats.Ratio{N: r.N, Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
			if !row.Diagnostic {
				v = VerdictNA
			}
		case row.Diagnostic:
		default:
			n := min(row.Summaries[0].N, row.Summaries[i].N)
			low := fewestSamples(append(append([]point(nil), points[0].vals[k]...), points[i].vals[k]...))
			v, _ = verdictOf(r, n, o.MinPairs, md.HigherIsBetter, md.Quantile, low)
		}
		row.Ratios, row.Verdicts = append(row.Ratios, r), append(row.Verdicts, v)
	}
	return row
}

// fewestSamples is the fewest known observations behind one of the values,
// as minSamples counts them for Analyse: unknown counts (0: stored before
// samples were recorded) are ignored, and with none known it returns 0.
func fewestSamples(ps []point) int64 {
	var low int64
	for _, p := range ps {
		if p.samples > 0 && (low == 0 || p.samples < low) {
			low = p.samples
		}
	}
	return low
}

// rank is name's position in names, or len(names) when absent.
func rank(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return len(names)
}

// WorsePct returns by how many percent ratio r is worse than 1 in the
// metric's own direction (negative when it is better).
func WorsePct(r float64, higherIsBetter bool) float64 {
	if higherIsBetter {
		return (1 - r) * 100
	}
	return (r - 1) * 100
}

// Slower lists the primary (non-diagnostic) rows where a later run is
// significantly worse than the first (its CI excludes 1) and its ratio is
// worse by more than pct percent, one line each.
func (c Comparison) Slower(pct float64) []string {
	var out []string
	for _, row := range c.Rows {
		if row.Diagnostic {
			continue
		}
		for j, r := range row.Ratios {
			if row.Verdicts[j] != "worse" {
				continue
			}
			if w := WorsePct(r.Ratio, row.HigherIsBetter); w > pct {
				out = append(out, fmt.Sprintf("%s %s on %s: run %s is %.1f%% worse than run %s (ratio %.3f, 95%% CI [%.3f, %.3f])",
					row.Workload, row.Metric, row.Platform, c.Runs[j+1].ID, w, c.Runs[0].ID, r.Ratio, r.Lo, r.Hi))
			}
		}
	}
	return out
}
