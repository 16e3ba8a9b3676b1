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
}

// Text writes the human-readable report.
func Text(w io.Writer, h Header, res analysis.Result) error {
	r := h.Run
	fmt.Fprintf(w, "run %s  study %s  baseline %s  seed %d  status %s", r.ID, r.Study, res.Baseline, r.Seed, r.Status)
	if h.StopReason != "" {
		fmt.Fprintf(w, " (%s)", h.StopReason)
	}
	fmt.Fprintf(w, "\n%d counted round(s); ratio = platform mean / baseline mean, 95%% CI by paired bootstrap over rounds; ~ = CI includes 1\n", res.Rounds)
	for _, n := range h.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, t := range res.Tables {
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
			if !c.IsBaseline && !math.IsNaN(c.Ratio.Lo) {
				ci = fmt.Sprintf("[%.3f, %.3f]", c.Ratio.Lo, c.Ratio.Hi)
			}
			name := c.Platform
			if c.Emulated {
				name += "*"
			}
			fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s..%s\t%.1f%%\t%s\t%s\t%s\t\n", width, name, c.Summary.N, num(c.Summary.Mean),
				num(c.Summary.Min), num(c.Summary.Max), c.Summary.CV*100, ratio(c.Ratio.Ratio), ci, c.Verdict)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		if emulated {
			fmt.Fprintf(w, "  * %s\n", analysis.EmulatedMark)
		}
	}
	if err := Pivot(w, res); err != nil {
		return err
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintln(w)
		for _, wmsg := range res.Warnings {
			fmt.Fprintf(w, "warning: %s\n", wmsg)
		}
	}
	return nil
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
	Platform       string    `json:"platform"`
	Workload       string    `json:"workload"`
	Metric         string    `json:"metric"`
	Unit           string    `json:"unit"`
	HigherIsBetter bool      `json:"higher_is_better"`
	N              int       `json:"n"`
	Mean           float64   `json:"mean"`
	Median         float64   `json:"median"`
	Min            float64   `json:"min"`
	Max            float64   `json:"max"`
	CV             float64   `json:"cv"`
	Ratio          *float64  `json:"ratio"`
	RatioCILow     *float64  `json:"ratio_ci_low"`
	RatioCIHigh    *float64  `json:"ratio_ci_high"`
	Significant    bool      `json:"significant"`
	Verdict        string    `json:"verdict"`
	Emulated       bool      `json:"emulated,omitempty"`
	Note           string    `json:"note,omitempty"`
	Values         []float64 `json:"values"`
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
	Environment json.RawMessage `json:"environment"`
	Warnings    []string        `json:"warnings"`
	Results     []JSONRow       `json:"results"`
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
		StopReason: h.StopReason, Seed: h.Run.Seed, Rounds: res.Rounds, Environment: env,
		Warnings: append([]string{}, res.Warnings...), Results: []JSONRow{}}
	for _, t := range res.Tables {
		for _, c := range t.Cells {
			row := JSONRow{Platform: c.Platform, Workload: c.Workload, Metric: c.Metric, Unit: c.Unit,
				HigherIsBetter: c.HigherIsBetter, N: c.Summary.N, Mean: zeroNaN(c.Summary.Mean),
				Median: zeroNaN(c.Summary.Median), Min: zeroNaN(c.Summary.Min), Max: zeroNaN(c.Summary.Max),
				CV: sig(zeroNaN(c.Summary.CV), 5), Ratio: finite(c.Ratio.Ratio), Significant: c.Ratio.Significant,
				Verdict: c.Verdict, Values: c.Values, Emulated: c.Emulated}
			if c.Emulated {
				row.Note = analysis.EmulatedMark
			}
			if !c.IsBaseline {
				row.RatioCILow, row.RatioCIHigh = finite(c.Ratio.Lo), finite(c.Ratio.Hi)
			}
			doc.Results = append(doc.Results, row)
		}
	}
	return doc
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
