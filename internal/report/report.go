// Package report renders an analysed run: a terminal table per workload and
// metric, and the JSON document of `--json`.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/store"
)

// Header describes the run above the tables.
type Header struct {
	Run        store.Run
	StopReason string
	Notes      []string // e.g. per-platform descriptions, emulation marks
	// RunNotes are the run's stored notes: degraded modes, skipped
	// platforms, environment facts that could not be captured.
	RunNotes []store.RunNote
	// Traces are the find-max searches of the run's trials (workloads that
	// search for a peak load), shown after the diagnostics.
	Traces []Trace
}

// MethodText is the headers' phrase for the interval methods a result used.
func MethodText(res analysis.Result) string {
	if len(res.Methods) == 0 {
		return "no interval computed"
	}
	var parts []string
	for _, m := range res.Methods {
		parts = append(parts, m.Describe(true))
	}
	return strings.Join(parts, "; ")
}

// ClientUse is where some platforms of a run ran their load, and over what.
type ClientUse struct {
	// Where is the client host: "netns veth MTU 1500", "host loopback".
	Where string `json:"where"`
	// Platforms are the platforms whose load ran there; empty means every
	// platform of the run.
	Platforms []string `json:"platforms,omitempty"`
}

// LegacyClient is where the load of a run stored without client notes ran:
// every run before client hosts ran it on this machine over loopback.
const LegacyClient = "host loopback"

// ClientUses reads the run's client notes (store.NoteClient); a run without
// any ran its load on this machine over loopback.
func ClientUses(notes []store.RunNote) []ClientUse {
	var out []ClientUse
	for _, n := range notes {
		if n.Kind != store.NoteClient {
			continue
		}
		u := ClientUse{Where: n.Text}
		for _, p := range strings.Split(n.Subject, ",") {
			if p = strings.TrimSpace(p); p != "" {
				u.Platforms = append(u.Platforms, p)
			}
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		out = []ClientUse{{Where: LegacyClient}}
	}
	return out
}

// ClientLine says in one line where the run's load ran and over what:
// "client: netns veth MTU 1500 (native, docker-nat); host loopback
// (docker-proxy)".
func ClientLine(notes []store.RunNote) string {
	var parts []string
	for _, u := range ClientUses(notes) {
		p := u.Where
		if len(u.Platforms) > 0 {
			p += " (" + strings.Join(u.Platforms, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return "client: " + strings.Join(parts, "; ")
}

// RunNoteLines returns one line per stored run note: "degraded: vm: ...";
// the client notes are ClientLine's.
func RunNoteLines(notes []store.RunNote) []string {
	var out []string
	for _, n := range notes {
		if n.Kind == store.NoteClient {
			continue
		}
		line := n.Kind + ": "
		if n.Subject != "" {
			line += n.Subject + ": "
		}
		out = append(out, line+n.Text)
	}
	return out
}

// DisturbedLine says how many counted trials the rest of the machine
// disturbed, or "" when no trial measured its outside CPU.
func DisturbedLine(res analysis.Result) string {
	measured := false
	for _, t := range res.Diagnostics {
		measured = measured || t.Metric == analysis.OutsideMetric
	}
	if !measured {
		return ""
	}
	return fmt.Sprintf("CPU account: %d of %d counted trials disturbed (CPU outside the run above %g%% of a core; see outside_cpu_pct)",
		len(res.Disturbed), res.Counted, res.OutsideCPUMax)
}

// Text writes the human-readable report: the header with the run's
// degraded modes, one table per result metric with n (pairs) in every cell,
// the diagnostics without verdicts, and one line per kind of warning.
func Text(w io.Writer, h Header, res analysis.Result) error {
	r := h.Run
	fmt.Fprintf(w, "run %s  study %s  baseline %s  seed %d  status %s", r.ID, r.Study, res.Baseline, r.Seed, r.Status)
	if h.StopReason != "" {
		fmt.Fprintf(w, " (%s)", h.StopReason)
	}
	fmt.Fprintf(w, "\n%d counted round(s); ratio = platform mean / baseline mean; n = pairs of trials behind it; 95%% CI: %s; ~ = CI includes 1; no verdict from n < %d\n",
		res.Rounds, MethodText(res), res.MinPairs)
	fmt.Fprintln(w, ClientLine(h.RunNotes))
	for _, l := range RunNoteLines(h.RunNotes) {
		fmt.Fprintln(w, l)
	}
	if l := DisturbedLine(res); l != "" {
		fmt.Fprintln(w, l)
	}
	for _, n := range h.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	// Per-operation metrics (OPERATION.STAT) are grids of their own.
	plain := res
	plain.Tables, plain.Diagnostics = withoutOps(res.Tables), withoutOps(res.Diagnostics)
	for _, t := range plain.Tables {
		if err := resultTable(w, t); err != nil {
			return err
		}
	}
	if err := Speedup(w, plain, NUMANodes(r.Env)); err != nil {
		return err
	}
	if err := OpResults(w, res); err != nil {
		return err
	}
	if err := Pivot(w, plain); err != nil {
		return err
	}
	if err := Diagnostics(w, plain); err != nil {
		return err
	}
	if err := OpDiagnostics(w, res); err != nil {
		return err
	}
	if err := Traces(w, h.Traces); err != nil {
		return err
	}
	if sum := res.Warnings.Summary(); len(sum) > 0 {
		fmt.Fprintf(w, "\n%d warning(s), one line per kind (all of them: nearnative show %s --warnings)\n", len(res.Warnings), r.ID)
		for _, l := range sum {
			fmt.Fprintf(w, "warning: %s\n", l)
		}
	}
	return nil
}

// resultTable writes one result metric's table.
func resultTable(w io.Writer, t analysis.Table) error {
	dir := "higher is better"
	if !t.HigherIsBetter {
		dir = "lower is better"
	}
	fmt.Fprintf(w, "\n%s  %s (%s)\n", t.Workload, t.Metric, unitDir(t.Unit, dir))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	width := len("platform")
	emulated := false
	for _, c := range t.Cells {
		width = max(width, len(c.Platform)+1)
		emulated = emulated || c.Emulated
	}
	fmt.Fprintf(tw, "%-*s\tn\tmean\tmin..max\tCV\tratio\t95%% CI\tverdict\t\n", width, "platform")
	for _, c := range t.Cells {
		ci := ""
		if !c.IsBaseline && c.NoVerdict == "" && !math.IsNaN(c.Ratio.Lo) {
			ci = fmt.Sprintf("[%.3f, %.3f]", c.Ratio.Lo, c.Ratio.Hi)
		}
		name := c.Platform
		if c.Emulated {
			name += "*"
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s..%s\t%.1f%%\t%s\t%s\t%s\t\n", width, name, c.N(), MeanText(c, num),
			num(c.Summary.Min), num(c.Summary.Max), c.Summary.CV*100, ratio(c.Ratio.Ratio), ci, c.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if emulated {
		fmt.Fprintf(w, "  * %s\n", analysis.EmulatedMark)
	}
	return nil
}

// MeanText is a cell's mean as format writes it, or, when the mean is a
// lower bound because find-max searches stopped at a limit of their own,
// ">= 3000 (the data's limit)", or an upper bound because every load they
// tried failed, "< 166 (the lowest rate tried)".
func MeanText(c analysis.Cell, format func(float64) string) string {
	if t := c.CeilingText(); t != "" {
		v := format(c.Summary.Mean)
		if m := c.Summary.Mean; m == math.Trunc(m) && math.Abs(m) < 1e15 {
			v = strconv.FormatFloat(m, 'f', 0, 64) // whole users or requests: ">= 3000"
		}
		return fmt.Sprintf("%s %s (%s)", c.BoundOp(), v, t)
	}
	return format(c.Summary.Mean)
}

// Diagnostics writes the diagnostic metrics apart from the results: per
// workload one table, a row per platform, a column per metric with its
// mean over the counted trials, and no verdicts.
func Diagnostics(w io.Writer, res analysis.Result) error {
	if len(res.Diagnostics) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ndiagnostics: they explain the results and get no verdicts (mean over the counted trials)\n")
	for i := 0; i < len(res.Diagnostics); {
		wl := res.Diagnostics[i].Workload
		j := i
		for j < len(res.Diagnostics) && res.Diagnostics[j].Workload == wl {
			j++
		}
		tabs := res.Diagnostics[i:j]
		var units []string
		for _, t := range tabs {
			units = append(units, fmt.Sprintf("%s %s", t.Metric, orDash(t.Unit)))
		}
		fmt.Fprintf(w, "\n%s  (%s)\n", wl, strings.Join(units, "; "))
		var platforms []string
		mean := map[[2]string]string{}
		count := map[string]int{}
		for _, t := range tabs {
			for _, c := range t.Cells {
				if _, ok := count[c.Platform]; !ok {
					platforms = append(platforms, c.Platform)
				}
				count[c.Platform] = max(count[c.Platform], c.Summary.N)
				mean[[2]string{t.Metric, c.Platform}] = num(c.Summary.Mean)
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		width := len("platform")
		for _, p := range platforms {
			width = max(width, len(p))
		}
		fmt.Fprintf(tw, "%-*s\tn\t", width, "platform")
		for _, t := range tabs {
			fmt.Fprintf(tw, "%s\t", t.Metric)
		}
		fmt.Fprintln(tw)
		for _, p := range platforms {
			fmt.Fprintf(tw, "%-*s\t%d\t", width, p, count[p])
			for _, t := range tabs {
				v, ok := mean[[2]string{t.Metric, p}]
				if !ok {
					v = "-"
				}
				fmt.Fprintf(tw, "%s\t", v)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing diagnostics: %w", err)
		}
		i = j
	}
	return nil
}

// Warnings writes every warning of the run, one per line, grouped by kind in
// the summary's order (`show RUN --warnings`).
func Warnings(w io.Writer, res analysis.Result) error {
	if len(res.Warnings) == 0 {
		_, err := fmt.Fprintln(w, "no warnings")
		return err
	}
	for _, k := range analysis.WarningKinds() {
		for _, l := range res.Warnings.Of(k).Texts() {
			if _, err := fmt.Fprintf(w, "warning: %s\n", l); err != nil {
				return fmt.Errorf("writing warnings: %w", err)
			}
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// unitDir is "unit, direction", or the direction alone for a unitless metric.
func unitDir(unit, dir string) string {
	if unit == "" {
		return dir
	}
	return unit + ", " + dir
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

// num formats a value with about four significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == 0:
		return "0"
	case a >= 1e4:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.3f", v)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4g", v), "0"), ".")
	}
}

// JSONRow is one (workload, metric, platform) entry of the JSON report.
type JSONRow struct {
	Platform       string   `json:"platform"`
	Workload       string   `json:"workload"`
	Metric         string   `json:"metric"`
	Unit           string   `json:"unit"`
	HigherIsBetter bool     `json:"higher_is_better"`
	N              int      `json:"n"`
	Pairs          int      `json:"pairs"`
	Mean           float64  `json:"mean"`
	Median         float64  `json:"median"`
	Min            float64  `json:"min"`
	Max            float64  `json:"max"`
	CV             float64  `json:"cv"`
	Ratio          *float64 `json:"ratio"`
	RatioCILow     *float64 `json:"ratio_ci_low"`
	RatioCIHigh    *float64 `json:"ratio_ci_high"`
	IntervalMethod string   `json:"interval_method,omitempty"`
	Significant    bool     `json:"significant"`
	Verdict        string   `json:"verdict"`
	// NoVerdict says why a ratio has no verdict ("n<5", "p99<1000").
	NoVerdict string `json:"no_verdict,omitempty"`
	// Quantile and MinSamples: a percentile metric and the fewest
	// observations behind one of its values.
	Quantile   float64 `json:"quantile,omitempty"`
	MinSamples int64   `json:"min_samples,omitempty"`
	Emulated   bool    `json:"emulated,omitempty"`
	// Ceiling names the limit of a find-max search's own that AtCeiling of
	// the values reached: they, and the mean, are lower bounds, and the row
	// has no ratio. BaseCeiling: the baseline's did.
	Ceiling     string `json:"ceiling,omitempty"`
	AtCeiling   int    `json:"at_ceiling,omitempty"`
	BaseCeiling bool   `json:"baseline_at_ceiling,omitempty"`
	// Below: the bounds AtCeiling counts are upper bounds ("< value").
	Below  bool      `json:"below,omitempty"`
	Note   string    `json:"note,omitempty"`
	Values []float64 `json:"values"`
}

// JSONDoc is the document `--json` writes.
type JSONDoc struct {
	RunID       string          `json:"run_id"`
	Study       string          `json:"study"`
	Baseline    string          `json:"baseline"`
	Status      string          `json:"status"`
	StopReason  string          `json:"stop_reason,omitempty"`
	Seed        int64           `json:"seed"`
	Rounds      int             `json:"rounds"`
	MinPairs    int             `json:"min_pairs"`
	Environment json.RawMessage `json:"environment"`
	// Client says where the load ran and over what, per platform.
	Client []ClientUse `json:"client"`
	// Degraded and Skipped are the run's stored notes of those kinds,
	// RunWarnings the others.
	Degraded    []string `json:"degraded"`
	Skipped     []string `json:"skipped"`
	RunWarnings []string `json:"run_warnings,omitempty"`
	// Warnings has one line per kind; AllWarnings every warning.
	Warnings    []string           `json:"warnings"`
	AllWarnings []analysis.Warning `json:"all_warnings"`
	// CountedTrials, DisturbedTrials and OutsideCPUMax: the CPU account's
	// summary (trials whose outside CPU exceeded the limit).
	CountedTrials   int       `json:"counted_trials"`
	DisturbedTrials int       `json:"disturbed_trials"`
	OutsideCPUMax   float64   `json:"outside_cpu_max_pct"`
	Results         []JSONRow `json:"results"`
	// Diagnostics are the metrics that explain results: no verdicts.
	Diagnostics []JSONRow `json:"diagnostics"`
}

// finite rounds a ratio-like value to 5 significant digits (the last bits of
// a bootstrap percentile are noise) and maps NaN to null.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	v = sig(v, 5)
	return &v
}

func sig(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	return f
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// BuildJSON assembles the JSON document; values that do not exist (a ratio
// with one round) are null, never NaN.
func BuildJSON(h Header, res analysis.Result) JSONDoc {
	env := h.Run.Env
	if len(env) == 0 {
		env = json.RawMessage("{}")
	}
	doc := JSONDoc{RunID: string(h.Run.ID), Study: h.Run.Study, Baseline: res.Baseline, Status: h.Run.Status,
		StopReason: h.StopReason, Seed: h.Run.Seed, Rounds: res.Rounds, MinPairs: res.MinPairs, Environment: env,
		Client: ClientUses(h.RunNotes), Degraded: []string{}, Skipped: []string{},
		Warnings: append([]string{}, res.Warnings.Summary()...), AllWarnings: append(analysis.Warnings{}, res.Warnings...),
		CountedTrials: res.Counted, DisturbedTrials: len(res.Disturbed), OutsideCPUMax: res.OutsideCPUMax,
		Results: []JSONRow{}, Diagnostics: []JSONRow{}}
	for _, n := range h.RunNotes {
		text := n.Text
		if n.Subject != "" {
			text = n.Subject + ": " + text
		}
		switch n.Kind {
		case store.NoteClient:
		case store.NoteDegraded:
			doc.Degraded = append(doc.Degraded, text)
		case store.NoteSkipped:
			doc.Skipped = append(doc.Skipped, text)
		default:
			doc.RunWarnings = append(doc.RunWarnings, text)
		}
	}
	for _, t := range res.Tables {
		for _, c := range t.Cells {
			doc.Results = append(doc.Results, jsonRow(t, c))
		}
	}
	for _, t := range res.Diagnostics {
		for _, c := range t.Cells {
			row := jsonRow(t, c)
			row.RatioCILow, row.RatioCIHigh, row.Significant = nil, nil, false
			doc.Diagnostics = append(doc.Diagnostics, row)
		}
	}
	return doc
}

// jsonRow is one cell's row.
func jsonRow(t analysis.Table, c analysis.Cell) JSONRow {
	row := JSONRow{Platform: c.Platform, Workload: c.Workload, Metric: c.Metric, Unit: c.Unit,
		HigherIsBetter: c.HigherIsBetter, N: c.Summary.N, Pairs: c.N(), Mean: zeroNaN(c.Summary.Mean),
		Median: zeroNaN(c.Summary.Median), Min: zeroNaN(c.Summary.Min), Max: zeroNaN(c.Summary.Max),
		CV: sig(zeroNaN(c.Summary.CV), 5), Ratio: finite(c.Ratio.Ratio), Significant: c.Ratio.Significant && c.NoVerdict == "",
		Verdict: c.Verdict, NoVerdict: c.NoVerdict, Quantile: t.Quantile, MinSamples: c.MinSamples,
		Values: c.Values, Emulated: c.Emulated, Ceiling: c.Ceiling, AtCeiling: c.AtCeiling, BaseCeiling: c.BaseCeiling, Below: c.Below}
	if c.Emulated {
		row.Note = analysis.EmulatedMark
	}
	if !c.IsBaseline && c.NoVerdict == "" && !t.Diagnostic {
		row.RatioCILow, row.RatioCIHigh = finite(c.Ratio.Lo), finite(c.Ratio.Hi)
		if row.RatioCILow != nil {
			row.IntervalMethod = c.Ratio.Method.String()
		}
	}
	return row
}

// JSON writes the JSON document.
func JSON(w io.Writer, h Header, res analysis.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(BuildJSON(h, res)); err != nil {
		return fmt.Errorf("writing JSON report: %w", err)
	}
	return nil
}
