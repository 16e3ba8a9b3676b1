package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
)

// label names the i-th run in tables: A, B, ... Z, then R27, R28, ...
func label(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return fmt.Sprintf("R%d", i+1)
}

// CompareText writes the comparison as text tables, one per workload and
// metric.
func CompareText(w io.Writer, c analysis.Comparison) error {
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
					mean = search.BoundOp(row.Below[k]) + " " + mean + " (" + row.Ceilings[k] + ")"
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

// ratioText is a ratio with three decimals, "n/a" when it is not finite.
func ratioText(v float64) string {
	if !isFinite(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

// timeText is t in UTC to the second, "-" when unknown.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
