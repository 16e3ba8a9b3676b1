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
	"github.com/nearnative/nearnative/internal/layout"
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
	layouts map[store.TrialKey]layout.Layout
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
	var lays map[store.TrialKey]layout.Layout
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

// checkWritable fails, as bad input, when path cannot be written: checked
// before the work that produces it, so that a typo does not cost a run.
func checkWritable(flag, path string) error {
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

// writeFiles writes every file or none: each destination is checked first,
// and files this call created are removed again when a later one fails.
func writeFiles(files []outFile) error {
	var created []string
	undo := func() {
		for _, p := range created {
			os.Remove(p)
		}
	}
	// A destination that cannot be opened is the user's path: bad input.
	for _, f := range files {
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
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			undo()
			return fmt.Errorf("writing %s %s: %w", f.flag, f.path, err)
		}
	}
	return nil
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
the exact commands run.`,
		Args: cobra.ExactArgs(1),
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
			if err := writeFiles([]outFile{{"--html", htmlOut, data}}); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s\n", htmlOut)
			return nil
		},
	}
	c.Flags().StringVar(&htmlOut, "html", "", "write the report as HTML to this file")
	return c
}

func (a *app) exportCmd() *cobra.Command {
	var csvOut, jsonOut string
	c := &cobra.Command{
		Use:   "export RUN [--csv FILE] [--json FILE]",
		Short: "Write a stored run's trials, one row each with every metric, as CSV or JSON",
		Long: `Write every trial of a stored run (warm-up and failed ones included, marked)
as one row: run, study, round, index, warmup, workload, platform, the
platform's options, start, duration, error and one column per metric. The
JSON is an array of flat records (pandas.read_json reads it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if csvOut == "" && jsonOut == "" {
				return withCode(ExitBadInput, errors.New("where to? give --csv FILE and/or --json FILE"))
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
			in := htmlreport.ExportInput{Run: s.run, Trials: s.trials, Study: s.study}
			var files []outFile
			for _, o := range []struct {
				flag, path string
				write      func(io.Writer, htmlreport.ExportInput) error
			}{{"--csv", csvOut, htmlreport.WriteCSV}, {"--json", jsonOut, htmlreport.WriteJSON}} {
				if o.path == "" {
					continue
				}
				data, err := renderTo(func(w io.Writer) error { return o.write(w, in) })
				if err != nil {
					return err
				}
				files = append(files, outFile{o.flag, o.path, data})
			}
			if err := writeFiles(files); err != nil {
				return err
			}
			for _, f := range files {
				fmt.Fprintf(a.stderr, "wrote %s (%d trials)\n", f.path, len(s.trials))
			}
			return nil
		},
	}
	c.Flags().StringVar(&csvOut, "csv", "", "write the trials as CSV to this file")
	c.Flags().StringVar(&jsonOut, "json", "", "write the trials as JSON to this file")
	return c
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
mean in each run and each later run's ratio to the first with a 95% CI (an
unpaired bootstrap over the two runs' trials: rounds of different runs are not
paired), and ~, better or worse.

With --fail-if-slower X%, exit 1 when any primary (non-diagnostic) metric of a
later run is significantly worse than the first run's (CI excludes 1) by more
than X% in its own direction (lower throughput, higher latency or CPU cost).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			threshold := -1.0
			if failIfSlower != "" {
				v, err := parsePct(failIfSlower)
				if err != nil {
					return withCode(ExitBadInput, err)
				}
				threshold = v
			}
			ctx := c.Context()
			db, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			var runs []storedRun
			var data []htmlreport.RunData
			seen := map[string]string{}
			for _, ref := range args {
				s, err := a.loadRun(ctx, db, ref)
				if err != nil {
					return err
				}
				if prev, ok := seen[string(s.run.ID)]; ok {
					return withCode(ExitBadInput, fmt.Errorf("%q and %q are the same run %s", prev, ref, s.run.ID))
				}
				seen[string(s.run.ID)] = ref
				runs = append(runs, s)
				data = append(data, htmlreport.RunData{Run: s.run, Trials: s.trials})
			}
			o := htmlreport.CompareOptions{Stats: stats.Options{Seed: uint64(runs[0].run.Seed)}, Diagnostic: a.diagnostic(runs)}
			if st := runs[0].study; st != nil {
				o.MinPairs = st.MinPairs
				o.Platforms = st.PlatformNames()
				for _, w := range st.Workloads {
					o.Workloads = append(o.Workloads, w.Name)
				}
			}
			cmp, err := htmlreport.Compare(data, o)
			if err != nil {
				if errors.Is(err, htmlreport.ErrNothingInCommon) {
					return withCode(ExitBadInput, fmt.Errorf("%w: nothing to compare", err))
				}
				return err
			}
			if err := htmlreport.CompareText(a.stdout, cmp); err != nil {
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
		},
	}
	c.Flags().StringVar(&failIfSlower, "fail-if-slower", "", "exit 1 when a primary metric is significantly worse than in the first run by more than this percentage, e.g. 5%")
	return c
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
