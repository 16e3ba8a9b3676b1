package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/htmlreport"
	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
)

// storedRun is a run read back from the store with its parsed study (nil
// when the stored spec no longer parses) and its notes.
type storedRun struct {
	run    store.Run
	trials []store.Trial
	study  *study.Study
	notes  []store.RunNote
	// layouts are the topology trials' layouts (nil when the store keeps
	// none).
	layouts map[store.TrialKey]placement.Record
}

// loadRun reads the run ref names. A stored study that no longer parses
// (written by another version) is reported on stderr: the run is still
// shown, with its stored platform order and settings missing.
func (a *app) loadRun(ctx context.Context, db store.Store, ref string) (storedRun, error) {
	r, err := db.Run(ctx, ref)
	if err != nil {
		return storedRun{}, err
	}
	trials, err := db.Trials(ctx, r.ID)
	if err != nil {
		return storedRun{}, fmt.Errorf("run %s: %w", r.ID, err)
	}
	notes, err := db.RunNotes(ctx, r.ID)
	if err != nil {
		return storedRun{}, fmt.Errorf("run %s: %w", r.ID, err)
	}
	st, err := study.Parse(r.Spec, "run "+string(r.ID), a.reg)
	if err != nil {
		fmt.Fprintf(a.stderr, "warning: the stored study of run %s does not parse here (%v): its settings, platform order and verdict rules fall back to defaults\n", r.ID, err)
		st = nil
	}
	var lays map[store.TrialKey]placement.Record
	if ls, ok := db.(store.LayoutStore); ok {
		if lays, err = ls.Layouts(ctx, r.ID); err != nil {
			return storedRun{}, fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	return storedRun{run: r, trials: trials, study: st, notes: notes, layouts: lays}, nil
}

// analyse analyses a stored run the way every report does, with the
// study's verdict rules (defaults when the study did not parse); diag says
// which metrics are diagnostic for trials stored before metrics recorded it.
func (s storedRun) analyse(diag func(workload, metric string) bool) analysis.Result {
	o := analysis.Options{Baseline: s.run.Baseline, Stats: stats.Options{Seed: uint64(s.run.Seed)}, Diagnostic: diag}
	if s.study != nil {
		o.Platforms = s.study.PlatformNames()
		for _, w := range s.study.Workloads {
			o.Workloads = append(o.Workloads, w.Name)
		}
		o.MinPairs, o.OutsideCPUMax = s.study.MinPairs, s.study.OutsideCPUMax
	}
	return analysis.Analyse(s.trials, o)
}

// diagnostic returns whether a workload's metric is diagnostic, from the
// workloads' declarations in the stored studies, falling back to the metric's
// name for workloads the registry does not know. Trials stored since
// metrics record it carry their own answer, which wins.
func (a *app) diagnostic(runs []storedRun) func(workload, metric string) bool {
	known := map[[2]string]bool{}
	declared := map[string]bool{}
	for _, r := range runs {
		if r.study == nil {
			continue
		}
		for _, w := range r.study.Workloads {
			kind, ok := a.reg.Get(w.Kind)
			if !ok {
				continue
			}
			in, err := kind.New(w.Values)
			if err != nil {
				continue
			}
			declared[w.Name] = true
			for _, m := range in.Metrics() {
				known[[2]string{w.Name, m.Name}] = known[[2]string{w.Name, m.Name}] || m.Diagnostic
			}
		}
	}
	return func(w, m string) bool {
		if declared[w] {
			return known[[2]string{w, m}]
		}
		return analysis.IsDiagnosticName(m)
	}
}

// Stdout is the file name that means standard output for every file flag.
const Stdout = "-"

// checkWritable fails, as bad input, when path cannot be written: checked
// before the work that produces it, so that a typo does not cost a run.
// "-" (standard output) can always be written.
func checkWritable(flag, path string) error {
	if path == Stdout {
		return nil
	}
	_, statErr := os.Stat(path)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return withCode(ExitBadInput, fmt.Errorf("%s %s: %w", flag, path, err))
	}
	fh.Close()
	if errors.Is(statErr, os.ErrNotExist) {
		os.Remove(path)
	}
	return nil
}

// writeOutputs writes every file or none: each destination is checked
// first, and files this call created are removed again when a later one
// fails. A path of "-" is standard output, written last, once every file
// is written; only one output may go there. Each file written is said on
// stderr with what (a "(12 trials)"), standard output is not.
func (a *app) writeOutputs(files []outFile, what string) error {
	var toStdout *outFile
	var onDisk []outFile
	for i, f := range files {
		if f.path != Stdout {
			onDisk = append(onDisk, f)
			continue
		}
		if toStdout != nil {
			return withCode(ExitBadInput, fmt.Errorf("%s - and %s -: only one output can go to standard output", toStdout.flag, f.flag))
		}
		toStdout = &files[i]
	}
	var created []string
	undo := func() {
		for _, p := range created {
			os.Remove(p)
		}
	}
	// A destination that cannot be opened is the user's path: bad input.
	for _, f := range onDisk {
		_, statErr := os.Stat(f.path)
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			undo()
			return withCode(ExitBadInput, fmt.Errorf("%s %s: %w", f.flag, f.path, err))
		}
		fh.Close()
		if errors.Is(statErr, os.ErrNotExist) {
			created = append(created, f.path)
		}
	}
	// A write that fails once open (a full disk) is an I/O error: exit 1.
	for _, f := range onDisk {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			undo()
			return fmt.Errorf("writing %s %s: %w", f.flag, f.path, err)
		}
	}
	if toStdout != nil {
		if _, err := a.stdout.Write(toStdout.data); err != nil {
			return fmt.Errorf("writing %s to standard output: %w", toStdout.flag, err)
		}
	}
	for _, f := range onDisk {
		fmt.Fprintf(a.stderr, "wrote %s%s\n", f.path, what)
	}
	return nil
}

// toStdout reports whether any of paths is standard output: the command
// then writes nothing else there.
func toStdout(paths ...string) bool {
	for _, p := range paths {
		if p == Stdout {
			return true
		}
	}
	return false
}

type outFile struct {
	flag, path string
	data       []byte
}

// render runs fn into a buffer.
func renderTo(fn func(io.Writer) error) ([]byte, error) {
	var b bytes.Buffer
	err := fn(&b)
	return b.Bytes(), err
}

func (a *app) reportCmd() *cobra.Command {
	var htmlOut string
	c := &cobra.Command{
		Use:   "report RUN --html FILE",
		Short: "Write a stored run's report as one self-contained HTML file with charts",
		Long: `Write a stored run's report (RUN: an ID, a unique prefix, or last) as one HTML
file that needs no network: per workload and metric a chart of each platform
relative to the baseline with its 95% CI and the single trials, the table with
verdicts, warnings, the environment and study settings, the trial order and
the exact commands run. --html - writes it to standard output.`,
		Example: `  nearnative report last --html report.html
  nearnative report 20261126-0912 --html - > run.html`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeRuns(1, true),
		RunE: func(c *cobra.Command, args []string) error {
			if htmlOut == "" {
				return withCode(ExitBadInput, errors.New("where to? give --html FILE"))
			}
			ctx := c.Context()
			db, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := a.loadRun(ctx, db, args[0])
			if err != nil {
				return err
			}
			tr, err := s.traces(ctx, db)
			if err != nil {
				return err
			}
			data, err := renderTo(func(w io.Writer) error {
				return htmlreport.Write(w, htmlreport.Input{Run: s.run, Trials: s.trials, Study: s.study, Result: s.analyse(a.diagnostic([]storedRun{s})), RunNotes: s.notes, Layouts: s.layouts, Traces: tr})
			})
			if err != nil {
				return err
			}
			return a.writeOutputs([]outFile{{"--html", htmlOut, data}}, "")
		},
	}
	c.Flags().StringVar(&htmlOut, "html", "", "write the report as HTML to this `FILE` (- for standard output)")
	return c
}

func (a *app) exportCmd() *cobra.Command {
	var format, outPath, csvOut, jsonOut string
	c := &cobra.Command{
		Use:   "export RUN [--format csv|json] [-o FILE]",
		Short: "Write a stored run's trials, one row each with every metric, as CSV or JSON",
		Long: `Write every trial of a stored run (warm-up and failed ones included, marked)
as one row: run, study, round, index, warmup, workload, platform, the
platform's options, start, duration, error and one column per metric. The
JSON is an array of flat records (pandas.read_json reads it). The output goes
to standard output unless -o names a file. (--csv FILE and --json FILE, the
old spellings, still work and say so.)

(The run's results, the table's figures with their intervals, are ` + "`show RUN --json -`" + `.)`,
		Example: `  nearnative export last > trials.csv
  nearnative export last --format json | jq '.[0]'
  nearnative export 20261126-0912 --format csv -o trials.csv`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeRuns(1, true),
		RunE: func(c *cobra.Command, args []string) error {
			type output struct {
				flag, path string
				write      func(io.Writer, report.ExportInput) error
			}
			var outs []output
			oldSpelling(a.stderr, c, "csv", "--format csv -o FILE")
			oldSpelling(a.stderr, c, "json", "--format json -o FILE (--json on run and show writes the run's results)")
			switch {
			case (csvOut != "" || jsonOut != "") && (c.Flags().Changed("format") || c.Flags().Changed("output")):
				return withCode(ExitBadInput, errors.New("--csv and --json are the old spellings of --format and -o: give one or the other"))
			case csvOut != "" || jsonOut != "":
				if csvOut != "" {
					outs = append(outs, output{"--csv", csvOut, report.WriteCSV})
				}
				if jsonOut != "" {
					outs = append(outs, output{"--json", jsonOut, report.WriteJSON})
				}
			case format == "csv":
				outs = append(outs, output{"-o", outPath, report.WriteCSV})
			case format == "json":
				outs = append(outs, output{"-o", outPath, report.WriteJSON})
			default:
				return withCode(ExitBadInput, fmt.Errorf("--format %q: want csv or json", format))
			}
			ctx := c.Context()
			db, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := a.loadRun(ctx, db, args[0])
			if err != nil {
				return err
			}
			in := report.ExportInput{Run: s.run, Trials: s.trials, Study: s.study}
			var files []outFile
			for _, o := range outs {
				data, err := renderTo(func(w io.Writer) error { return o.write(w, in) })
				if err != nil {
					return err
				}
				files = append(files, outFile{o.flag, o.path, data})
			}
			return a.writeOutputs(files, fmt.Sprintf(" (%d trials)", len(s.trials)))
		},
	}
	fl := c.Flags()
	fl.StringVar(&format, "format", "csv", "csv or json")
	fl.StringVarP(&outPath, "output", "o", Stdout, "write to this `FILE` (- for standard output)")
	fl.StringVar(&csvOut, "csv", "", "write the trials as CSV to this file")
	fl.StringVar(&jsonOut, "json", "", "write the trials as JSON to this file")
	fl.MarkHidden("csv")
	fl.MarkHidden("json")
	c.RegisterFlagCompletionFunc("format", fixedValues("csv", "json"))
	return c
}

// oldSpelling says, when flag (an old spelling kept as an alias) was
// given, what replaced it.
func oldSpelling(w io.Writer, c *cobra.Command, flag, now string) {
	if c.Flags().Changed(flag) {
		fmt.Fprintf(w, "note: %s --%s is the old spelling, kept as an alias: it is now %s\n", c.Name(), flag, now)
	}
}

// compareInterval says how compare makes its intervals, from what stats
// chooses for unpaired samples (a test holds the help to it).
func compareInterval() string {
	mean, tail := stats.Choose(stats.MeanStatistic, false), stats.Choose(stats.TailStatistic, false)
	if mean == tail {
		return "unpaired: " + mean.Describe(false)
	}
	return "unpaired: " + mean.Describe(false) + " for means, " + tail.Describe(false) + " for tail percentiles"
}

// parsePct reads "5%" or "5" as 5.
func parsePct(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || !(v >= 0) || v > 1e6 {
		return 0, fmt.Errorf("--fail-if-slower %q: want a percentage such as 5%%", s)
	}
	return v, nil
}

func (a *app) compareCmd() *cobra.Command {
	var failIfSlower string
	c := &cobra.Command{
		Use:   "compare RUN_A RUN_B [RUN...]",
		Short: "Compare the same workloads, metrics and platforms across stored runs",
		Long: `Print, for every workload, metric and platform the runs have in common, the
mean in each run and each later run's ratio to the first with a 95% CI over
the two runs' counted trials, and ~, better or worse. The interval is
` + compareInterval() + `
(rounds of different runs are not paired).

With --fail-if-slower X%, exit 1 when any primary (non-diagnostic) metric of a
later run is significantly worse than the first run's (CI excludes 1) by more
than X% in its own direction (lower throughput, higher latency or CPU cost).`,
		Example: `  nearnative compare 20261120-0800 last
  nearnative compare baseline-run last --fail-if-slower 5%`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: a.completeRuns(0, true),
		RunE: func(c *cobra.Command, args []string) error {
			threshold := -1.0
			if failIfSlower != "" {
				v, err := parsePct(failIfSlower)
				if err != nil {
					return withCode(ExitBadInput, err)
				}
				threshold = v
			}
			return a.compare(c.Context(), args, threshold)
		},
	}
	c.Flags().StringVar(&failIfSlower, "fail-if-slower", "", "exit 1 when a primary metric is significantly worse than in the first run by more than this percentage, e.g. 5%")
	return c
}

// compare prints the comparison of the runs refs name and, with a
// threshold (>= 0, --fail-if-slower), fails when a later run is
// significantly worse by more than it.
func (a *app) compare(ctx context.Context, refs []string, threshold float64) error {
	db, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var runs []storedRun
	var data []analysis.RunData
	seen := map[string]string{}
	for _, ref := range refs {
		s, err := a.loadRun(ctx, db, ref)
		if err != nil {
			return err
		}
		if prev, ok := seen[string(s.run.ID)]; ok {
			return withCode(ExitBadInput, fmt.Errorf("%q and %q are the same run %s", prev, ref, s.run.ID))
		}
		seen[string(s.run.ID)] = ref
		runs = append(runs, s)
		data = append(data, analysis.RunData{Run: s.run, Trials: s.trials})
	}
	o := analysis.CompareOptions{Stats: stats.Options{Seed: uint64(runs[0].run.Seed)}, Diagnostic: a.diagnostic(runs)}
	if st := runs[0].study; st != nil {
		o.MinPairs = st.MinPairs
		o.Platforms = st.PlatformNames()
		for _, w := range st.Workloads {
			o.Workloads = append(o.Workloads, w.Name)
		}
	}
	cmp, err := analysis.Compare(data, o)
	if err != nil {
		if errors.Is(err, analysis.ErrNothingInCommon) {
			return withCode(ExitBadInput, fmt.Errorf("%w: nothing to compare", err))
		}
		return err
	}
	if err := report.CompareText(a.stdout, cmp); err != nil {
		return err
	}
	if threshold < 0 {
		return nil
	}
	slower := cmp.Slower(threshold)
	if len(slower) == 0 {
		fmt.Fprintf(a.stdout, "\nno primary metric is significantly worse by more than %g%%\n", threshold)
		return nil
	}
	fmt.Fprintf(a.stdout, "\nsignificantly worse by more than %g%%:\n", threshold)
	for _, s := range slower {
		fmt.Fprintf(a.stdout, "  %s\n", s)
	}
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%d primary metric(s) significantly worse by more than %g%% (--fail-if-slower)", len(slower), threshold)}
}

// traces reads the find-max steps of every trial of s that searched (none
// when the store keeps no steps), ordered by workload and platform (the
// study's orders) and round. Only the reports that show them (show, report
// --html) read them: a query per trial.
func (s storedRun) traces(ctx context.Context, db store.Store) ([]report.Trace, error) {
	ss, ok := db.(store.StepStore)
	if !ok {
		return nil, nil
	}
	order, wOrder := map[string]int{}, map[string]int{}
	if s.study != nil {
		for i, p := range s.study.Platforms {
			order[p.Name] = i
		}
		for i, w := range s.study.Workloads {
			wOrder[w.Name] = i
		}
	}
	var out []report.Trace
	for _, t := range s.trials {
		key := store.TrialKey{Run: s.run.ID, Round: t.Round, Workload: t.Workload, Platform: t.Platform}
		steps, err := ss.Steps(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", s.run.ID, err)
		}
		if len(steps) == 0 {
			continue
		}
		if _, ok := order[t.Platform]; !ok {
			order[t.Platform] = len(order)
		}
		if _, ok := wOrder[t.Workload]; !ok {
			wOrder[t.Workload] = len(wOrder)
		}
		out = append(out, report.Trace{Workload: t.Workload, Platform: t.Platform, Round: t.Round, Warmup: t.Warmup, Error: t.Error, Steps: steps})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if wOrder[a.Workload] != wOrder[b.Workload] {
			return wOrder[a.Workload] < wOrder[b.Workload]
		}
		if order[a.Platform] != order[b.Platform] {
			return order[a.Platform] < order[b.Platform]
		}
		return a.Round < b.Round
	})
	return out, nil
}
