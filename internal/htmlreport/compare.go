package htmlreport

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
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
	// nil means analysis.IsDiagnosticName.
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
	// values lower bounds (analysis.TrialCeilings); "" for none. A run
	// with one has no ratio to or from it.
	Ceilings []string
	// Ratios and Verdicts have one entry per later run: its mean over the
	// first run's, with an unpaired CI, and "~", "better", "worse", "n/a",
	// "n<5" (a run with fewer counted trials than the minimum) or "" for a
	// diagnostic metric.
	Ratios   []stats.Ratio
	Verdicts []string
}

// Compare lines up the runs: for every workload, metric and platform that
// each run measured, each run's summary and each later run's ratio to the
// first. Rounds of different runs are not paired, so the interval is
// stats.UnpairedRatio over the counted trials. It fails with
// ErrNothingInCommon when no row remains.
func Compare(runs []RunData, o CompareOptions) (Comparison, error) {
	if len(runs) < 2 {
		return Comparison{}, errors.New("compare needs at least two runs")
	}
	diag := o.Diagnostic
	if diag == nil {
		diag = func(_, m string) bool { return analysis.IsDiagnosticName(m) }
	}
	minPairs := o.MinPairs
	if minPairs <= 0 {
		minPairs = stats.DefaultMinPairs
	}
	type key struct{ w, m, p string }
	vals := make([]map[key][]float64, len(runs))
	ceilings := make([]map[key]string, len(runs))
	pairs := make([]map[string]bool, len(runs))
	meta := map[key]store.Metric{}
	var order []key
	var pairOrder []string
	pairSeen := map[string]bool{}
	for i, rd := range runs {
		vals[i], ceilings[i], pairs[i] = map[key][]float64{}, map[key]string{}, map[string]bool{}
		for _, t := range rd.Trials {
			if t.Warmup || t.Error != "" {
				continue
			}
			for m, limit := range analysis.TrialCeilings(t) {
				ceilings[i][key{t.Workload, m, t.Platform}] = limit
			}
			wp := t.Workload + "/" + t.Platform
			if !pairSeen[wp] {
				pairSeen[wp] = true
				pairOrder = append(pairOrder, wp)
			}
			pairs[i][wp] = true
			for _, m := range t.Metrics {
				k := key{t.Workload, m.Name, t.Platform}
				if i == 0 && vals[0][k] == nil {
					order = append(order, k)
				}
				if i == 0 {
					md := meta[k]
					m.Diagnostic = m.Diagnostic || md.Diagnostic
					meta[k] = m
				}
				vals[i][k] = append(vals[i][k], m.Value)
			}
		}
	}
	c := Comparison{MinPairs: minPairs}
	for _, rd := range runs {
		c.Runs = append(c.Runs, rd.Run)
	}
	for _, wp := range pairOrder {
		for i := range runs {
			if !pairs[i][wp] {
				c.NotInAll = append(c.NotInAll, wp)
				break
			}
		}
	}
	// Rows grouped by workload and metric, in display order.
	sort.SliceStable(order, func(i, j int) bool {
		wi, wj := rank(o.Workloads, order[i].w), rank(o.Workloads, order[j].w)
		if wi != wj {
			return wi < wj
		}
		return rank(o.Platforms, order[i].p) < rank(o.Platforms, order[j].p)
	})
	var groups []key
	seen := map[key]bool{}
	for _, k := range order {
		g := key{k.w, k.m, ""}
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		for _, k := range order {
			if k.w != g.w || k.m != g.m {
				continue
			}
			inAll := true
			for i := range runs {
				if len(vals[i][k]) == 0 {
					inAll = false
				}
			}
			if !inAll {
				continue
			}
			md := meta[k]
			row := CompareRow{Workload: k.w, Metric: k.m, Platform: k.p, Unit: md.Unit,
				HigherIsBetter: md.HigherIsBetter, Diagnostic: md.Diagnostic || diag(k.w, k.m)}
			so := o.Stats
			if md.Quantile > 0 {
				so.Statistic = stats.TailStatistic
			}
			for i := range runs {
				row.Summaries = append(row.Summaries, stats.Summarize(vals[i][k]))
				row.Ceilings = append(row.Ceilings, ceilings[i][k])
			}
			for i := range runs {
				if i == 0 {
					continue
				}
				r := stats.UnpairedRatio(vals[0][k], vals[i][k], so)
				v := ""
				switch {
				case row.Ceilings[0] != "" || row.Ceilings[i] != "":
					// A lower bound on either side: no ratio.
					nan := math.NaN()
					r = stats.Ratio{N: r.N, Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
					if !row.Diagnostic {
						v = "n/a"
					}
				case row.Diagnostic:
				case row.Summaries[0].N < minPairs || row.Summaries[i].N < minPairs:
					v = fmt.Sprintf("n<%d", minPairs)
				case !isFinite(r.Lo) || !isFinite(r.Hi):
					v = "n/a"
				default:
					v = r.Verdict(md.HigherIsBetter)
				}
				row.Ratios, row.Verdicts = append(row.Ratios, r), append(row.Verdicts, v)
			}
			c.Rows = append(c.Rows, row)
		}
	}
	if len(c.Rows) == 0 {
		return c, ErrNothingInCommon
	}
	return c, nil
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

// label names the i-th run in tables: A, B, ... Z, then R27, R28, ...
func label(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return fmt.Sprintf("R%d", i+1)
}

// CompareText writes the comparison as text tables, one per workload and
// metric.
func CompareText(w io.Writer, c Comparison) error {
	fmt.Fprintf(w, "comparing %d runs: ratio = the run's mean / run A's mean; 95%% CI: %s over the trials of the two runs, unpaired (rounds of different runs are not paired); ~ = CI includes 1; no verdict when a run has fewer than %d counted trials (n per run is shown)\n",
		len(c.Runs), stats.Choose(stats.MeanStatistic, false).Describe(false), c.MinPairs)
	for i, r := range c.Runs {
		fmt.Fprintf(w, "  %s  %s  study %s  started %s  status %s  %d trial(s)\n", label(i), r.ID, r.Study, timeText(r.Started), r.Status, r.Trials)
	}
	if len(c.NotInAll) > 0 {
		fmt.Fprintf(w, "not in every run, left out: %s\n", strings.Join(c.NotInAll, ", "))
	}
	for i := 0; i < len(c.Rows); {
		first := c.Rows[i]
		j := i
		for j < len(c.Rows) && c.Rows[j].Workload == first.Workload && c.Rows[j].Metric == first.Metric {
			j++
		}
		dir := "higher is better"
		if !first.HigherIsBetter {
			dir = "lower is better"
		}
		if first.Diagnostic {
			dir += "; diagnostic: no verdict, not checked by --fail-if-slower"
		}
		fmt.Fprintf(w, "\n%s  %s (%s, %s)\n", first.Workload, first.Metric, first.Unit, dir)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		width := len("platform")
		for _, row := range c.Rows[i:j] {
			width = max(width, len(row.Platform))
		}
		hdr := fmt.Sprintf("%-*s\t", width, "platform")
		for k := range c.Runs {
			hdr += label(k) + " mean\tn\t"
		}
		for k := 1; k < len(c.Runs); k++ {
			hdr += label(k) + "/A\t"
			if !first.Diagnostic {
				hdr += "95% CI\tverdict\t"
			}
		}
		fmt.Fprintln(tw, hdr)
		for _, row := range c.Rows[i:j] {
			line := fmt.Sprintf("%-*s\t", width, row.Platform)
			for k, s := range row.Summaries {
				mean := num(s.Mean)
				if row.Ceilings[k] != "" {
					mean = ">= " + mean + " (" + row.Ceilings[k] + ")"
				}
				line += fmt.Sprintf("%s\t%d\t", mean, s.N)
			}
			for k, r := range row.Ratios {
				ci := ""
				if isFinite(r.Lo) && isFinite(r.Hi) && (row.Verdicts[k] == "~" || row.Verdicts[k] == "better" || row.Verdicts[k] == "worse") {
					ci = fmt.Sprintf("[%.3f, %.3f]", r.Lo, r.Hi)
				}
				line += ratioText(r.Ratio) + "\t"
				if !row.Diagnostic {
					line += fmt.Sprintf("%s\t%s\t", ci, row.Verdicts[k])
				}
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing comparison: %w", err)
		}
		i = j
	}
	return nil
}
