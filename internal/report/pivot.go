package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nearnative/nearnative/internal/analysis"
)

// Pivot writes, for every metric that two or more workloads report, compact
// tables in the seeds' shape: a row per platform, a column per workload, each
// cell the mean and the ratio to the baseline with its verdict sign (+ better,
// - worse, ~ no difference shown). Workloads named GROUP-POINT (the icc
// study's 1-to-4, pairs-20, grp-16x16; fio-randread) share a table per GROUP,
// so the icc study prints one table per topology with a column per count, as
// the seed did. It writes nothing for a single workload.
func Pivot(w io.Writer, res analysis.Result) error {
	type cellKey struct{ metric, workload, platform string }
	cells := map[cellKey]analysis.Cell{}
	var metrics []string
	workloadsOf := map[string][]string{}
	platformsOf := map[string][]string{}
	units := map[string]string{}
	dir := map[string]bool{}
	for _, t := range res.Tables {
		if _, seen := workloadsOf[t.Metric]; !seen {
			metrics = append(metrics, t.Metric)
		}
		workloadsOf[t.Metric] = append(workloadsOf[t.Metric], t.Workload)
		units[t.Metric], dir[t.Metric] = t.Unit, t.HigherIsBetter
		for _, c := range t.Cells {
			cells[cellKey{t.Metric, t.Workload, c.Platform}] = c
			if !contains(platformsOf[t.Metric], c.Platform) {
				platformsOf[t.Metric] = append(platformsOf[t.Metric], c.Platform)
			}
		}
	}
	wrote := false
	for _, m := range metrics {
		if len(workloadsOf[m]) < 2 {
			continue
		}
		if !wrote {
			fmt.Fprintf(w, "\nsummary by workload: mean, then ratio to %s (+ better, - worse, ~ no difference shown, ? no verdict)\n", res.Baseline)
			wrote = true
		}
		d := "higher is better"
		if !dir[m] {
			d = "lower is better"
		}
		groups, members := groupOf(workloadsOf[m])
		for _, g := range groups {
			ws := members[g]
			fmt.Fprintf(w, "\n%s (%s)\n", strings.TrimPrefix(g+" ", " ")+m, unitDir(units[m], d))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			width := len("platform")
			emulated := map[string]bool{}
			for _, p := range platformsOf[m] {
				for _, wl := range ws {
					if c, ok := cells[cellKey{m, wl, p}]; ok && c.Emulated {
						emulated[p] = true
					}
				}
				width = max(width, len(p)+1)
			}
			fmt.Fprintf(tw, "%-*s\t", width, "platform")
			for _, wl := range ws {
				fmt.Fprintf(tw, "%s\t", wl)
			}
			fmt.Fprintln(tw)
			for _, p := range platformsOf[m] {
				name := p
				if emulated[p] {
					name += "*"
				}
				fmt.Fprintf(tw, "%-*s\t", width, name)
				for _, wl := range ws {
					c, ok := cells[cellKey{m, wl, p}]
					switch {
					case !ok:
						fmt.Fprint(tw, "-\t")
					case c.IsBaseline:
						fmt.Fprintf(tw, "%s\t", MeanText(c, num))
					default:
						fmt.Fprintf(tw, "%s %s%s\t", MeanText(c, num), ratio(c.Ratio.Ratio), sign(c.Verdict))
					}
				}
				fmt.Fprintln(tw)
			}
			if err := tw.Flush(); err != nil {
				return fmt.Errorf("writing summary: %w", err)
			}
		}
	}
	return nil
}

// groupOf splits workload names into groups by the part before their last
// "-" (no "-": a group of its own), keeping first-seen order.
func groupOf(names []string) ([]string, map[string][]string) {
	var groups []string
	members := map[string][]string{}
	for _, n := range names {
		g := n
		if i := strings.LastIndexByte(n, '-'); i > 0 {
			g = n[:i]
		}
		if _, ok := members[g]; !ok {
			groups = append(groups, g)
		}
		members[g] = append(members[g], n)
	}
	return groups, members
}

func sign(verdict string) string {
	switch verdict {
	case "better":
		return "+"
	case "worse":
		return "-"
	case "~":
		return "~"
	}
	return "?"
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
