// Package analysis turns a run's stored trials into per-platform summaries
// and ratios to the baseline: the numbers every report shows, the verdicts
// they may carry, and the stopping rule of --until-ci. Warm-up and failed
// trials are left out; ratios pair the baseline's and the platform's trials
// of the same round.
//
// The rules that decide whether a cell gets a verdict live here, once, for
// every table, JSON document, HTML report, comparison and --until-ci:
//
//   - a ratio needs at least MinPairs counted pairs (Options.MinPairs,
//     default stats.DefaultMinPairs); below, the cell says "n<5";
//   - a percentile metric (a p99) needs, in every trial behind it, at least
//     stats.MinTailSamples(q) observations; below, the cell says so;
//   - a diagnostic metric (CPU shares, steal, ...) never gets a verdict: it
//     goes to Result.Diagnostics, not Result.Tables;
//   - a find-max result that stopped at a limit of its own making (the
//     trial's search.CeilingPrefix note: the data loaded, the users or the
//     rate the search may try) is a lower bound, not a maximum: its cell
//     says so (Cell.Ceiling) and gets no ratio and no verdict, and neither
//     does any cell of a table whose baseline reached its ceiling.
package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/workload"
)

// Verdicts a cell can carry besides stats' "~", "better" and "worse".
const (
	VerdictBaseline = "baseline"
	// VerdictNA: no ratio could be computed (no baseline value, a zero
	// baseline mean).
	VerdictNA = "n/a"
)

// Cell is one (workload, metric, platform) result.
type Cell struct {
	Workload, Metric, Platform string
	Unit                       string
	HigherIsBetter             bool
	Summary                    stats.Summary
	// Ratio is mean(platform)/mean(baseline) with its CI; Ratio.N is the
	// number of pairs behind it. For the baseline itself it is exactly 1
	// with no interval; for a diagnostic metric it has no interval.
	Ratio      stats.Ratio
	IsBaseline bool
	// Verdict is "~", "better", "worse", "baseline", "n/a", or, when the
	// rules refuse a verdict, NoVerdict's short form ("n<5", "p99<1000").
	// It is "" for diagnostic metrics.
	Verdict string
	// NoVerdict, when not empty, says why the cell has no verdict although
	// it has a ratio: too few pairs, too few samples behind a percentile.
	NoVerdict string
	// Values are the counted values by round.
	Values []float64
	// Emulated is set when the platform ran under software emulation (a VM
	// under TCG): its numbers are not comparable with native ones.
	Emulated bool
	// MinSamples is the fewest observations behind one of the cell's values
	// (and its baseline's) for a percentile metric; 0 otherwise.
	MinSamples int64
	// Ceiling names the limit(s) of the search's own that AtCeiling of the
	// cell's trials reached (their values, and so the mean, are lower
	// bounds: "the data's limit"); empty when none did. BaseCeiling is set
	// on a cell whose baseline reached its ceiling. Either leaves the cell
	// without ratio and verdict.
	Ceiling     string
	AtCeiling   int
	BaseCeiling bool
	// Below is set when the bounds AtCeiling counts are upper bounds: no
	// pass stood when those searches stopped (the mean is then "< value",
	// search.Ceiling.Below).
	Below bool
}

// BoundOp is how the cell's bounded mean relates to the real maximum:
// ">=" for a lower bound, "<" when every bound is an upper one.
func (c Cell) BoundOp() string { return search.BoundOp(c.Below) }

// CeilingText says why the cell's mean is only a lower bound: "the data's
// limit", or "the data's limit in 2 of 5 trials"; "" when it is not.
func (c Cell) CeilingText() string {
	if c.AtCeiling == 0 {
		return ""
	}
	if c.AtCeiling >= c.Summary.N {
		return c.Ceiling
	}
	return fmt.Sprintf("%s in %d of %d trials", c.Ceiling, c.AtCeiling, c.Summary.N)
}

// N is the cell's count: the pairs behind its ratio, or the baseline's
// number of values.
func (c Cell) N() int {
	if c.IsBaseline {
		return c.Summary.N
	}
	return c.Ratio.N
}

// EmulatedMark is the phrase platforms put in their description when they
// run under software emulation, and the mark reports show.
const EmulatedMark = "emulated (TCG), not comparable"

// Table is one workload and metric across platforms.
type Table struct {
	Workload, Metric, Unit string
	HigherIsBetter         bool
	// Diagnostic tables explain results (CPU shares, steal, ...): no verdicts.
	Diagnostic bool
	// Quantile is q for a percentile metric, else 0.
	Quantile float64
	Cells    []Cell // in the run's platform order
}

// Disturbed is a counted trial during whose load the rest of the machine
// used more CPU than the study allows (outside_cpu_max).
type Disturbed struct {
	Round              int
	Workload, Platform string
	OutsidePct         float64
}

// Result is the analysed run.
type Result struct {
	Baseline string
	// Tables are the results; Diagnostics the metrics that explain them,
	// shown apart and without verdicts.
	Tables      []Table
	Diagnostics []Table
	// Failed counts failed counted trials per "workload/platform".
	Failed map[string]int
	// Warnings are every condition a reader must know, one per cell or
	// trial; Summary() folds them into one line per kind.
	Warnings Warnings
	// Rounds is the number of counted rounds with at least one trial.
	Rounds int
	// MinPairs is the rule applied: no verdict from fewer pairs.
	MinPairs int
	// OutsideCPUMax is the outside CPU (percent of a core) above which a
	// trial counted as disturbed; Disturbed lists those trials, Counted
	// how many counted trials there were.
	OutsideCPUMax float64
	Disturbed     []Disturbed
	Counted       int
	// Methods names the interval methods used, for the header.
	Methods []stats.Method
}

// Options tune the analysis.
type Options struct {
	Baseline  string
	Platforms []string // display order; platforms absent here follow sorted
	Workloads []string // display order
	Stats     stats.Options
	// MinPairs is the fewest pairs a verdict rests on; 0 means
	// stats.DefaultMinPairs.
	MinPairs int
	// OutsideCPUMax is the outside CPU (percent of one core) above which a
	// trial is marked disturbed; 0 means workload.DefaultOutsideCPUMax.
	OutsideCPUMax float64
	// Diagnostic says whether a metric is diagnostic for trials stored
	// before metrics recorded it; nil means IsDiagnosticName.
	Diagnostic func(workload, metric string) bool
}

// OutsideMetric is the per-trial metric that holds the CPU outside the run
// (the CPU account's).
const OutsideMetric = workload.MetricOutsideCPU

// IsDiagnosticName is the fallback test for a diagnostic metric of a trial
// stored before metrics recorded whether they are: the diagnostic metrics
// of the built-in workloads were CPU shares named *_cpu_pct.
func IsDiagnosticName(metric string) bool { return strings.HasSuffix(metric, "_cpu_pct") }

func (o Options) withDefaults() Options {
	if o.MinPairs <= 0 {
		o.MinPairs = stats.DefaultMinPairs
	}
	if o.OutsideCPUMax <= 0 {
		o.OutsideCPUMax = workload.DefaultOutsideCPUMax
	}
	if o.Diagnostic == nil {
		o.Diagnostic = func(_, m string) bool { return IsDiagnosticName(m) }
	}
	return o
}

type key struct{ w, m, p string }

// point is one counted value with the observations behind it, and the
// limit of the search's own it reached when it is a lower bound.
type point struct {
	v       float64
	samples int64
	ceiling string
	below   bool
}

// counted is what Analyse gathers from the trials before it computes the
// tables: every counted value by (workload, metric, platform) and round,
// each metric's description and the platforms that ran emulated.
type counted struct {
	values   map[key]map[int]point // values[key][round]
	meta     map[[2]string]store.Metric
	emulated map[string]bool
}

// Analyse computes the result from trials.
func Analyse(trials []store.Trial, o Options) Result {
	o = o.withDefaults()
	res := Result{Baseline: o.Baseline, Failed: map[string]int{}, MinPairs: o.MinPairs, OutsideCPUMax: o.OutsideCPUMax}
	cd := res.count(trials, o)
	workloads := order(o.Workloads, func(yield func(string)) {
		for k := range cd.values {
			yield(k.w)
		}
	})
	platforms := order(o.Platforms, func(yield func(string)) {
		for k := range cd.values {
			yield(k.p)
		}
	})
	methods := map[stats.Method]bool{}
	for _, w := range workloads {
		for _, m := range metricOrder(trials, w) {
			tab := res.table(w, m, platforms, cd, o)
			for _, c := range tab.Cells {
				if !c.IsBaseline && !tab.Diagnostic && c.Verdict != VerdictNA && c.NoVerdict == "" {
					methods[c.Ratio.Method] = true
				}
			}
			// A metric only warm-up or failed trials reported has no
			// counted value: no table.
			switch {
			case len(tab.Cells) == 0:
			case tab.Diagnostic:
				res.Diagnostics = append(res.Diagnostics, tab)
			default:
				res.Tables = append(res.Tables, tab)
			}
		}
	}
	for _, m := range stats.Methods() {
		if methods[m] {
			res.Methods = append(res.Methods, m)
		}
	}
	res.runWarnings(platforms, cd.emulated)
	return res
}

// count gathers the counted trials' values (warm-up and failed trials
// left out; failures counted in res.Failed), the rounds, the disturbed
// trials and each trial's own warnings.
func (res *Result) count(trials []store.Trial, o Options) counted {
	cd := counted{values: map[key]map[int]point{}, meta: map[[2]string]store.Metric{}, emulated: map[string]bool{}}
	rounds := map[int]bool{}
	for _, t := range trials {
		for _, w := range t.Where {
			if strings.Contains(w, EmulatedMark) {
				cd.emulated[t.Platform] = true
			}
		}
		if t.Warmup {
			continue
		}
		if t.Error != "" {
			res.Failed[t.Workload+"/"+t.Platform]++
			continue
		}
		res.Counted++
		rounds[t.Round] = true
		ceilings := trialCeilings(t)
		for _, m := range t.Metrics {
			k := key{t.Workload, m.Name, t.Platform}
			if cd.values[k] == nil {
				cd.values[k] = map[int]point{}
			}
			b := ceilings[m.Name]
			cd.values[k][t.Round] = point{m.Value, m.Samples, b.Is, b.Below}
			md := cd.meta[[2]string{t.Workload, m.Name}]
			m.Diagnostic = m.Diagnostic || md.Diagnostic
			cd.meta[[2]string{t.Workload, m.Name}] = m
			if m.Name == OutsideMetric && m.Value > o.OutsideCPUMax {
				res.Disturbed = append(res.Disturbed, Disturbed{t.Round, t.Workload, t.Platform, m.Value})
			}
		}
		res.noteTrial(t)
	}
	res.Rounds = len(rounds)
	return cd
}

// table is workload w's metric m across the platforms that measured it.
func (res *Result) table(w, m string, platforms []string, cd counted, o Options) Table {
	md := cd.meta[[2]string{w, m}]
	tab := Table{Workload: w, Metric: m, Unit: md.Unit, HigherIsBetter: md.HigherIsBetter, Quantile: md.Quantile,
		Diagnostic: md.Diagnostic || o.Diagnostic(w, m)}
	base := cd.values[key{w, m, o.Baseline}]
	for _, p := range platforms {
		if vals := cd.values[key{w, m, p}]; vals != nil {
			tab.Cells = append(tab.Cells, res.cell(tab, p, base, vals, cd.emulated[p], o))
		}
	}
	return tab
}

// TrialCeilings maps each metric of a trial that a find-max search left at
// a limit of its own (its search.Ceiling note) to that bound: the value is
// a lower bound (or, Below, an upper one), and no ratio may be taken of it.
func TrialCeilings(t store.Trial) map[string]search.Ceiling { return trialCeilings(t) }

// trialCeilings is TrialCeilings.
func trialCeilings(t store.Trial) map[string]search.Ceiling {
	var out map[string]search.Ceiling
	for _, n := range t.Notes {
		if c, ok := search.ParseCeiling(n); ok {
			if out == nil {
				out = map[string]search.Ceiling{}
			}
			out[c.Metric] = c
		}
	}
	return out
}

// ceilingOf returns the distinct limits the values reached, joined, how
// many values reached one, and whether every one of those is an upper
// bound.
func ceilingOf(vals map[int]point) (string, int, bool) {
	var names []string
	n, below := 0, 0
	for _, r := range sortedRounds(vals) {
		c := vals[r].ceiling
		if c == "" {
			continue
		}
		n++
		if vals[r].below {
			below++
		}
		if !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	return strings.Join(names, "; "), n, n > 0 && below == n
}

// metricOrder is the order workload w's metrics first appear in trials.
func metricOrder(trials []store.Trial, w string) []string {
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
	return metrics
}

// cell computes platform p's cell of table tab, applying the verdict rules.
func (res *Result) cell(tab Table, p string, base, vals map[int]point, emulated bool, o Options) Cell {
	c := Cell{Workload: tab.Workload, Metric: tab.Metric, Platform: p, Unit: tab.Unit, HigherIsBetter: tab.HigherIsBetter,
		Values: sortedValues(vals), IsBaseline: p == o.Baseline, Emulated: emulated}
	c.Summary = stats.Summarize(c.Values)
	c.Ceiling, c.AtCeiling, c.Below = ceilingOf(vals)
	if !c.IsBaseline {
		_, atBase, _ := ceilingOf(base)
		c.BaseCeiling = atBase > 0
	}
	nan := math.NaN()
	switch {
	case c.IsBaseline:
		c.Ratio = stats.Ratio{N: c.Summary.N, Ratio: 1, Lo: 1, Hi: 1}
		if !tab.Diagnostic {
			c.Verdict = VerdictBaseline
		}
	case base == nil:
		c.Ratio = stats.Ratio{Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
		if !tab.Diagnostic {
			c.Verdict = VerdictNA
		}
	case tab.Diagnostic:
		ps := pairs(base, vals)
		c.Ratio = stats.Ratio{N: len(ps), Ratio: stats.MeanRatio(ps), Lo: nan, Hi: nan, HalfWidthPct: nan}
	default:
		c.Ratio = stats.PairedRatio(pairs(base, vals), statsFor(o.Stats, tab.Quantile))
		c.Verdict, c.NoVerdict = verdictOf(c.Ratio, c.Ratio.N, o.MinPairs, tab.HigherIsBetter, tab.Quantile, minSamples(vals, base, false))
	}
	if !c.IsBaseline && (c.AtCeiling > 0 || c.BaseCeiling) {
		// A lower bound over a value, or a value over a lower bound, is no
		// ratio: say which side stopped at its ceiling instead.
		c.Ratio = stats.Ratio{N: c.Ratio.N, Ratio: nan, Lo: nan, Hi: nan, HalfWidthPct: nan}
		if !tab.Diagnostic {
			c.Verdict = VerdictNA
			switch {
			case c.AtCeiling > 0:
				c.NoVerdict = boundKind(c.Below) + ": the search stopped at " + c.CeilingText()
			default:
				bc := baseBound(base)
				c.NoVerdict = "the baseline's value is " + boundKind(bc.Below) + ": its search stopped at " + bc.CeilingText()
			}
		}
	}
	if tab.Quantile > 0 {
		c.MinSamples = minSamples(vals, base, c.IsBaseline)
		if tab.Diagnostic && !c.IsBaseline {
			// A diagnostic percentile has no verdict, but still says when
			// too few observations stand behind it.
			if why := tooFewSamples(tab.Quantile, c.MinSamples); why != "" {
				c.Verdict, c.NoVerdict = why, why
			}
		}
	}
	if !tab.Diagnostic {
		res.cellWarnings(tab, c)
	}
	return c
}

// baseBound is the bound part of a baseline's cell.
func baseBound(vals map[int]point) Cell {
	c := Cell{Summary: stats.Summary{N: len(vals)}}
	c.Ceiling, c.AtCeiling, c.Below = ceilingOf(vals)
	return c
}

// boundKind names a bound: "a lower bound", or below, "an upper bound".
func boundKind(below bool) string {
	if below {
		return "an upper bound"
	}
	return "a lower bound"
}

// verdictOf applies the verdict rules to a ratio with n values behind it
// (counted pairs, or for an unpaired comparison the smaller run's counted
// trials): no verdict from fewer than minPairs, none without a finite
// interval, none for a q-quantile (q > 0) some of whose values rest on
// fewer than stats.MinTailSamples(q) observations (minSamples, 0 when
// unknown). It returns the verdict and, when the rules refuse one, why
// ("n<5", "p99<1000"; the verdict is then that short form too).
func verdictOf(r stats.Ratio, n, minPairs int, higherIsBetter bool, q float64, minSamples int64) (verdict, noVerdict string) {
	switch {
	case n < minPairs:
		why := fmt.Sprintf("n<%d", minPairs)
		return why, why
	case !isFinite(r.Lo) || !isFinite(r.Hi):
		return VerdictNA, ""
	}
	if why := tooFewSamples(q, minSamples); why != "" {
		return why, why
	}
	return r.Verdict(higherIsBetter), ""
}

// tooFewSamples is "p99<1000" when a q-quantile rests on fewer than
// stats.MinTailSamples(q) observations in some trial (minSamples > 0),
// else "".
func tooFewSamples(q float64, minSamples int64) string {
	if q <= 0 || minSamples <= 0 || minSamples >= stats.MinTailSamples(q) {
		return ""
	}
	return fmt.Sprintf("%s<%d", quantileName(q), stats.MinTailSamples(q))
}

// statsFor is o for a mean metric, and o with the tail statistic for a
// percentile (q > 0).
func statsFor(o stats.Options, q float64) stats.Options {
	if q > 0 {
		o.Statistic = stats.TailStatistic
	}
	return o
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// quantileName is "p99" for 0.99, "p99.9" for 0.999.
func quantileName(q float64) string {
	return "p" + strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", q*100), "0"), ".")
}

// minSamples is the fewest observations behind the values of a percentile
// cell: its own trials and, for a ratio, the baseline's of the same rounds.
// Unknown counts (0: stored before samples were recorded) are ignored; with
// none known it returns 0.
func minSamples(vals, base map[int]point, isBase bool) int64 {
	var low int64
	take := func(s int64) {
		if s > 0 && (low == 0 || s < low) {
			low = s
		}
	}
	for r, p := range vals {
		take(p.samples)
		if b, ok := base[r]; ok && !isBase {
			take(b.samples)
		}
	}
	return low
}

// MaxHalfWidth returns the widest CI half-width (percent) over every
// non-baseline ratio of the result tables selected by include (all when
// nil), and false while some ratio may not be judged yet: it has fewer pairs
// than the minimum, or no interval. Cells whose percentile rests on too
// few samples per trial never get a verdict however many rounds run, so
// they are left out.
func (r Result) MaxHalfWidth(include func(Table) bool) (float64, bool) {
	max := 0.0
	for _, t := range r.Tables {
		if include != nil && !include(t) {
			continue
		}
		for _, c := range t.Cells {
			switch {
			case c.IsBaseline:
				continue
			case c.AtCeiling > 0 || c.BaseCeiling:
				// A lower bound gets no verdict however many rounds run.
				continue
			case t.Quantile > 0 && c.MinSamples > 0 && c.MinSamples < stats.MinTailSamples(t.Quantile):
				continue
			case c.Ratio.N < r.MinPairs || math.IsNaN(c.Ratio.HalfWidthPct):
				return math.NaN(), false
			}
			max = math.Max(max, c.Ratio.HalfWidthPct)
		}
	}
	return max, true
}

// Pairs returns, in round order, the pairs of a workload's metric on the
// platforms base and x: their counted successful trials of the same round,
// as Analyse pairs them.
func Pairs(trials []store.Trial, workload, metric, base, x string) []stats.Pair {
	vals := map[string]map[int]point{base: {}, x: {}}
	for _, t := range trials {
		if t.Warmup || t.Error != "" || t.Workload != workload || vals[t.Platform] == nil {
			continue
		}
		for _, m := range t.Metrics {
			if m.Name == metric {
				vals[t.Platform][t.Round] = point{v: m.Value, samples: m.Samples}
			}
		}
	}
	return pairs(vals[base], vals[x])
}

func pairs(base, x map[int]point) []stats.Pair {
	var rounds []int
	for r := range x {
		if _, ok := base[r]; ok {
			rounds = append(rounds, r)
		}
	}
	sort.Ints(rounds)
	out := make([]stats.Pair, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, stats.Pair{Base: base[r].v, X: x[r].v})
	}
	return out
}

func sortedValues(m map[int]point) []float64 {
	rounds := sortedRounds(m)
	out := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, m[r].v)
	}
	return out
}

func sortedRounds(m map[int]point) []int {
	var rounds []int
	for r := range m {
		rounds = append(rounds, r)
	}
	sort.Ints(rounds)
	return rounds
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
