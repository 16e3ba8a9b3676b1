// Package analysis turns a run's stored trials into per-platform summaries
// and ratios to the baseline: the numbers every report shows and the
// stopping rule of --until-ci uses. Warm-up and failed trials are left out;
// ratios pair the baseline's and the platform's trials of the same round.
package analysis

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// Cell is one (workload, metric, platform) result.
type Cell struct {
	Workload, Metric, Platform string
	Unit                       string
	HigherIsBetter             bool
	Summary                    stats.Summary
	// Ratio is mean(platform)/mean(baseline) with its CI; for the baseline
	// itself it is exactly 1 with no interval.
	Ratio      stats.Ratio
	IsBaseline bool
	Verdict    string // "~", "better", "worse", "baseline" or "n/a"
	Values     []float64
	// Emulated is set when the platform ran under software emulation (a VM
	// under TCG): its numbers are not comparable with native ones.
	Emulated bool
}

// EmulatedMark is the phrase platforms put in their description when they
// run under software emulation, and the mark reports show.
const EmulatedMark = "emulated (TCG), not comparable"

// Table is one workload and metric across platforms.
type Table struct {
	Workload, Metric, Unit string
	HigherIsBetter         bool
	Cells                  []Cell // in the run's platform order
}

// Result is the analysed run.
type Result struct {
	Baseline string
	Tables   []Table
	// Failed counts failed counted trials per "workload/platform".
	Failed   map[string]int
	Warnings []string
	// Rounds is the number of counted rounds with at least one trial.
	Rounds int
}

// Options tune the analysis.
type Options struct {
	Baseline  string
	Platforms []string // display order; platforms absent here follow sorted
	Workloads []string // display order
	Stats     stats.Options
}

type key struct{ w, m, p string }

// Analyse computes the result from trials.
func Analyse(trials []store.Trial, o Options) Result {
	res := Result{Baseline: o.Baseline, Failed: map[string]int{}}
	// values[key][round] = value
	values := map[key]map[int]float64{}
	meta := map[[2]string]store.Metric{}
	rounds := map[int]bool{}
	emulated := map[string]bool{}
	for _, t := range trials {
		for _, w := range t.Where {
			if strings.Contains(w, EmulatedMark) {
				emulated[t.Platform] = true
			}
		}
		if t.Warmup {
			continue
		}
		if t.Error != "" {
			res.Failed[t.Workload+"/"+t.Platform]++
			continue
		}
		rounds[t.Round] = true
		for _, m := range t.Metrics {
			k := key{t.Workload, m.Name, t.Platform}
			if values[k] == nil {
				values[k] = map[int]float64{}
			}
			values[k][t.Round] = m.Value
			meta[[2]string{t.Workload, m.Name}] = m
		}
	}
	res.Rounds = len(rounds)
	workloads := order(o.Workloads, func(yield func(string)) {
		for k := range values {
			yield(k.w)
		}
	})
	platforms := order(o.Platforms, func(yield func(string)) {
		for k := range values {
			yield(k.p)
		}
	})
	for _, w := range workloads {
		var metrics []string
		seen := map[string]bool{}
		for _, t := range trials {
			if t.Workload != w {
				continue
			}
			for _, m := range t.Metrics {
				if !seen[m.Name] {
					seen[m.Name] = true
					metrics = append(metrics, m.Name)
				}
			}
		}
		for _, m := range metrics {
			md := meta[[2]string{w, m}]
			tab := Table{Workload: w, Metric: m, Unit: md.Unit, HigherIsBetter: md.HigherIsBetter}
			base := values[key{w, m, o.Baseline}]
			for _, p := range platforms {
				vals := values[key{w, m, p}]
				if vals == nil {
					continue
				}
				c := Cell{Workload: w, Metric: m, Platform: p, Unit: md.Unit, HigherIsBetter: md.HigherIsBetter,
					Values: sortedValues(vals), IsBaseline: p == o.Baseline, Emulated: emulated[p]}
				c.Summary = stats.Summarize(c.Values)
				switch {
				case c.IsBaseline:
					c.Ratio = stats.Ratio{N: c.Summary.N, Ratio: 1, Lo: 1, Hi: 1}
					c.Verdict = "baseline"
				case base == nil:
					c.Ratio = stats.Ratio{Ratio: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), HalfWidthPct: math.NaN()}
					c.Verdict = "n/a"
				default:
					c.Ratio = stats.PairedRatio(pairs(base, vals), o.Stats)
					if math.IsNaN(c.Ratio.Lo) {
						c.Verdict = "n/a"
					} else {
						c.Verdict = c.Ratio.Verdict(md.HigherIsBetter)
					}
				}
				if wmsg := stats.CVWarning(p, c.Summary); wmsg != "" {
					res.Warnings = append(res.Warnings, fmt.Sprintf("%s %s: %s", w, m, wmsg))
				}
				tab.Cells = append(tab.Cells, c)
			}
			// A metric only warm-up or failed trials reported has no
			// counted value: no table.
			if len(tab.Cells) > 0 {
				res.Tables = append(res.Tables, tab)
			}
		}
	}
	for _, p := range platforms {
		if emulated[p] {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %s (software emulation; KVM was unavailable)", p, EmulatedMark))
		}
	}
	if res.Rounds > 0 && res.Rounds < stats.MinReliableRounds {
		res.Warnings = append(res.Warnings, fmt.Sprintf("only %d counted round(s): with fewer than %d the 95%% intervals cover less than 95%% (about 80%% at 3); run more rounds or use --until-ci", res.Rounds, stats.MinReliableRounds))
	}
	var failed []string
	for k := range res.Failed {
		failed = append(failed, k)
	}
	sort.Strings(failed)
	for _, k := range failed {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %d counted trial(s) failed and are left out", k, res.Failed[k]))
	}
	return res
}

// MaxHalfWidth returns the widest CI half-width (percent) over every
// non-baseline ratio of the metrics selected by include (all when nil), and
// false when some ratio has no interval yet.
func (r Result) MaxHalfWidth(include func(Table) bool) (float64, bool) {
	max := 0.0
	for _, t := range r.Tables {
		if include != nil && !include(t) {
			continue
		}
		for _, c := range t.Cells {
			if c.IsBaseline {
				continue
			}
			if math.IsNaN(c.Ratio.HalfWidthPct) {
				return math.NaN(), false
			}
			max = math.Max(max, c.Ratio.HalfWidthPct)
		}
	}
	return max, true
}

func pairs(base, x map[int]float64) []stats.Pair {
	var rounds []int
	for r := range x {
		if _, ok := base[r]; ok {
			rounds = append(rounds, r)
		}
	}
	sort.Ints(rounds)
	out := make([]stats.Pair, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, stats.Pair{Base: base[r], X: x[r]})
	}
	return out
}

func sortedValues(m map[int]float64) []float64 {
	var rounds []int
	for r := range m {
		rounds = append(rounds, r)
	}
	sort.Ints(rounds)
	out := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, m[r])
	}
	return out
}

// order returns the names given first (those present), then the remaining
// ones sorted.
func order(first []string, all func(yield func(string))) []string {
	present := map[string]bool{}
	all(func(s string) { present[s] = true })
	var out []string
	used := map[string]bool{}
	for _, s := range first {
		if present[s] && !used[s] {
			out = append(out, s)
			used[s] = true
		}
	}
	var rest []string
	for s := range present {
		if !used[s] {
			rest = append(rest, s)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
