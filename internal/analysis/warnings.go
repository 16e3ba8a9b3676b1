package analysis

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// WarningKind is a kind of condition a reader must know about. Reports show
// one line per kind (Warnings.Summary); `show RUN --warnings` and the JSON
// list every warning.
type WarningKind string

// The kinds, in the order their summary lines appear.
const (
	KindEmulated    WarningKind = "emulated"
	KindFailed      WarningKind = "failed"
	KindFewPairs    WarningKind = "few-pairs"
	KindFewSamples  WarningKind = "few-samples"
	KindCeiling     WarningKind = "ceiling"
	KindDisturbed   WarningKind = "disturbed"
	KindDriver      WarningKind = "driver"
	KindNoisy       WarningKind = "noisy"
	KindRawNotSaved WarningKind = "raw-not-saved"
)

var kindOrder = []WarningKind{KindEmulated, KindFailed, KindCeiling, KindFewPairs, KindFewSamples, KindDisturbed, KindDriver, KindNoisy, KindRawNotSaved}

// WarningKinds returns every kind in the order reports list them.
func WarningKinds() []WarningKind { return append([]WarningKind{}, kindOrder...) }

// Warning is one condition of one cell, trial or platform.
type Warning struct {
	Kind WarningKind `json:"kind"`
	// Subject is what it concerns: "docker-nat redis-get latency_p99_ms",
	// "round 3 redis-set on docker-nat".
	Subject string `json:"subject"`
	// Severity orders warnings of a kind: the largest is the worst.
	Severity float64 `json:"-"`
	// Shown is the worst case's figure as the summary line shows it.
	Shown string `json:"-"`
	// Text is the full sentence.
	Text string `json:"text"`
}

// Warnings are a run's warnings in the order they were found.
type Warnings []Warning

// Of returns the warnings of one kind.
func (ws Warnings) Of(k WarningKind) Warnings {
	var out Warnings
	for _, w := range ws {
		if w.Kind == k {
			out = append(out, w)
		}
	}
	return out
}

// Texts returns every warning's full sentence.
func (ws Warnings) Texts() []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Text
	}
	return out
}

// Summary returns one line per kind of warning with how many there are and
// the worst case, e.g. "CV > 10% in 12 cells, worst 18.0% (docker-nat
// redis-get latency_p99_ms)". The full list is Texts.
func (ws Warnings) Summary() []string {
	var out []string
	for _, k := range kindOrder {
		of := ws.Of(k)
		if len(of) == 0 {
			continue
		}
		worst := of[0]
		for _, w := range of[1:] {
			if w.Severity > worst.Severity {
				worst = w
			}
		}
		d := describe[k]
		line := fmt.Sprintf("%s in %d %s", d.phrase, len(of), plural(len(of), d.unit))
		if len(of) == 1 {
			line = fmt.Sprintf("%s: %s", d.phrase, worst.Subject)
			if worst.Shown != "" {
				line += " (" + worst.Shown + ")"
			}
		} else {
			line += fmt.Sprintf(", %s %s (%s)", d.worst, worst.Shown, worst.Subject)
		}
		out = append(out, line)
	}
	return out
}

// describe holds each kind's summary wording.
var describe = map[WarningKind]struct{ phrase, unit, worst string }{
	KindEmulated:    {"emulated (TCG), results not comparable", "platform", "e.g."},
	KindFailed:      {"failed trials left out", "workload/platform", "most"},
	KindFewPairs:    {"no verdict: too few pairs", "cell", "fewest"},
	KindFewSamples:  {"no verdict: percentile from too few samples per trial", "cell", "fewest"},
	KindCeiling:     {"no maximum found: a find-max search stopped at a limit of its own (a lower or upper bound, no verdict)", "cell", "e.g."},
	KindDisturbed:   {"disturbed: CPU outside the run above the limit", "trial", "worst"},
	KindDriver:      {"load generator may be the bottleneck", "workload/platform", "worst"},
	KindNoisy:       {fmt.Sprintf("CV > %.0f%%", stats.HighCV*100), "cell", "worst"},
	KindRawNotSaved: {"raw output not saved (measurements kept)", "trial", "e.g."},
}

func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return unit + "s"
}

func (res *Result) add(w Warning) { res.Warnings = append(res.Warnings, w) }

// cellWarnings adds the warnings of a result cell: noise, and why it has no
// verdict.
func (res *Result) cellWarnings(tab Table, c Cell) {
	subject := fmt.Sprintf("%s %s %s", c.Platform, tab.Workload, tab.Metric)
	if c.Summary.N >= 2 && c.Summary.CV > stats.HighCV {
		res.add(Warning{Kind: KindNoisy, Subject: subject, Severity: c.Summary.CV, Shown: fmt.Sprintf("%.1f%%", c.Summary.CV*100),
			Text: fmt.Sprintf("%s: CV %.1f%% > %.0f%%: noisy, results less certain", subject, c.Summary.CV*100, stats.HighCV*100)})
	}
	switch {
	case c.AtCeiling > 0 && c.Below:
		res.add(Warning{Kind: KindCeiling, Subject: subject, Severity: float64(c.AtCeiling), Shown: c.CeilingText(),
			Text: fmt.Sprintf("%s: < %g (%s): no load the search tried passed (or a later step overruled the pass) before it stopped at this limit of its own, so the value, the lowest load that failed, is an upper bound, not a maximum; the trials' notes say why the loads failed", subject, c.Summary.Mean, c.CeilingText())})
	case c.AtCeiling > 0:
		res.add(Warning{Kind: KindCeiling, Subject: subject, Severity: float64(c.AtCeiling), Shown: c.CeilingText(),
			Text: fmt.Sprintf("%s: >= %g (%s): the search found no failing load below this limit of its own, so the value is a lower bound, not a maximum; raise the limit (its workload parameter) to find the maximum", subject, c.Summary.Mean, c.CeilingText())})
	}
	switch {
	case c.NoVerdict == "" || c.IsBaseline:
	case c.AtCeiling > 0 || c.BaseCeiling:
	case c.Ratio.N < res.MinPairs:
		res.add(Warning{Kind: KindFewPairs, Subject: subject, Severity: float64(res.MinPairs - c.Ratio.N), Shown: fmt.Sprintf("n=%d", c.Ratio.N),
			Text: fmt.Sprintf("%s: %d pair(s), fewer than the %d a verdict needs: run more rounds", subject, c.Ratio.N, res.MinPairs)})
	default:
		need := stats.MinTailSamples(tab.Quantile)
		res.add(Warning{Kind: KindFewSamples, Subject: subject, Severity: float64(need - c.MinSamples), Shown: fmt.Sprintf("%d", c.MinSamples),
			Text: fmt.Sprintf("%s: a %s from as few as %d observations per trial; a verdict needs %d (%d beyond the percentile): run longer trials",
				subject, quantileName(tab.Quantile), c.MinSamples, need, stats.MinTailBeyond)})
	}
}

// noteTrial adds the warnings a counted trial's notes carry.
func (res *Result) noteTrial(t store.Trial) {
	for _, n := range t.Notes {
		switch {
		case strings.Contains(n, "bottleneck"):
			res.add(Warning{Kind: KindDriver, Subject: t.Workload + "/" + t.Platform, Shown: "", Text: fmt.Sprintf("round %d %s on %s: %s", t.Round, t.Workload, t.Platform, n)})
		case strings.Contains(n, "not saved (the measurement is kept)"):
			res.add(Warning{Kind: KindRawNotSaved, Subject: fmt.Sprintf("round %d %s on %s", t.Round, t.Workload, t.Platform), Text: fmt.Sprintf("round %d %s on %s: %s", t.Round, t.Workload, t.Platform, n)})
		}
	}
}

// runWarnings adds the warnings about the run as a whole: emulated
// platforms, failed trials, disturbed trials; and folds the driver
// warnings into one per workload/platform.
func (res *Result) runWarnings(platforms []string, emulated map[string]bool) {
	for _, p := range platforms {
		if emulated[p] {
			res.add(Warning{Kind: KindEmulated, Subject: p, Text: fmt.Sprintf("%s: %s (software emulation; KVM was unavailable)", p, EmulatedMark)})
		}
	}
	var failed []string
	for k := range res.Failed {
		failed = append(failed, k)
	}
	sort.Strings(failed)
	for _, k := range failed {
		n := res.Failed[k]
		res.add(Warning{Kind: KindFailed, Subject: k, Severity: float64(n), Shown: fmt.Sprintf("%d", n),
			Text: fmt.Sprintf("%s: %d counted trial(s) failed and are left out", k, n)})
	}
	for _, d := range res.Disturbed {
		subject := fmt.Sprintf("round %d %s on %s", d.Round, d.Workload, d.Platform)
		res.add(Warning{Kind: KindDisturbed, Subject: subject, Severity: d.OutsidePct, Shown: fmt.Sprintf("%.0f%% of a core", d.OutsidePct),
			Text: fmt.Sprintf("%s: processes outside the run used %.1f%% of a core during the load (limit %g%%): the machine was not quiet", subject, d.OutsidePct, res.OutsideCPUMax)})
	}
	// Driver notes: one warning per workload/platform, counting its trials.
	var merged Warnings
	count := map[string]int{}
	last := map[string]Warning{}
	var order []string
	for _, w := range res.Warnings {
		if w.Kind != KindDriver {
			merged = append(merged, w)
			continue
		}
		if count[w.Subject] == 0 {
			order = append(order, w.Subject)
		}
		count[w.Subject]++
		last[w.Subject] = w
	}
	for _, s := range order {
		w := last[s]
		w.Severity = float64(count[s])
		w.Shown = fmt.Sprintf("%d trial(s)", count[s])
		w.Text = fmt.Sprintf("%s: in %d counted trial(s); last: %s", s, count[s], w.Text)
		merged = append(merged, w)
	}
	res.Warnings = merged
}
