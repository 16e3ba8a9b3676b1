package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/engine"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/platformset"
	"github.com/nearnative/nearnative/internal/progress"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/version"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/fio"
)

type runFlags struct {
	platforms       string
	rounds          int
	quick           bool
	untilCI         float64
	ciMetrics       string
	trial           time.Duration
	seed            int64
	jsonOut         string
	resume          string
	skipUnavailable bool
	image           string
	noWait          bool
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run STUDY | run --resume RUN",
		Short: "Run a study (a built-in name or a YAML file) and print the table",
		Long: `Run a study: every round runs each workload on every platform once, in a
fresh random order; the first round is warm-up. Each trial is stored the
moment it ends, so an interrupted run continues with --resume RUN.`,
		Args: func(c *cobra.Command, args []string) error {
			if f.resume != "" && len(args) > 0 {
				return withCode(ExitBadInput, errors.New("give either a study or --resume RUN, not both"))
			}
			if f.resume == "" && len(args) != 1 {
				return withCode(ExitBadInput, errors.New("which study? give a built-in name (see `nearnative studies`) or a YAML file"))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return a.run(c.Context(), args, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.platforms, "platforms", "", "comma-separated platforms to run (a subset of the study's, or built-in ones)")
	fl.IntVar(&f.rounds, "rounds", 0, "counted rounds (overrides the study)")
	fl.BoolVar(&f.quick, "quick", false, "the study's quick settings: fewer, shorter rounds")
	fl.Float64Var(&f.untilCI, "until-ci", 0, "add rounds until every ratio's 95% CI half-width is at most this many percent (capped by the study's max_rounds and max_time)")
	fl.StringVar(&f.ciMetrics, "ci-metrics", "", "comma-separated metrics --until-ci applies to (default: every non-diagnostic metric)")
	fl.DurationVar(&f.trial, "trial", 0, "trial length (overrides the study)")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the random trial order (default: chosen and recorded)")
	fl.StringVar(&f.jsonOut, "json", "", "also write the results as JSON to this file")
	fl.StringVar(&f.resume, "resume", "", "continue an interrupted run without repeating its stored trials")
	fl.BoolVar(&f.skipUnavailable, "skip-unavailable", false, "run the other platforms when some cannot run here")
	fl.StringVar(&f.image, "image", "", "workload image for container platforms (default: the locally built one)")
	fl.BoolVar(&f.noWait, "no-wait", false, "exit (code 3) instead of waiting when another run is measuring on this machine")
	return c
}

func (a *app) run(ctx context.Context, args []string, f runFlags) error {
	var st *study.Study
	if f.resume == "" {
		var err error
		st, err = study.Load(args[0], a.reg)
		if err != nil {
			return withCode(ExitBadInput, err)
		}
		o := study.Overrides{Rounds: f.rounds, Quick: f.quick, UntilCI: f.untilCI, Trial: f.trial, Seed: f.seed}
		if f.platforms != "" {
			o.Platforms = strings.Split(f.platforms, ",")
		}
		if f.ciMetrics != "" {
			o.CIMetrics = strings.Split(f.ciMetrics, ",")
		}
		if err := st.Apply(o, a.reg); err != nil {
			return withCode(ExitBadInput, err)
		}
	} else if _, err := a.checkResumeFlags(f); err != nil {
		return err
	}
	if f.jsonOut != "" {
		// Fail now, not after an hour of measuring.
		if err := checkWritable("--json", f.jsonOut); err != nil {
			return err
		}
	}
	db, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()

	platforms := func(s *study.Study) []study.Platform { return s.Platforms }
	if f.resume != "" {
		// A resumed run keeps the platforms and the image it started with.
		r, err := db.Run(ctx, f.resume)
		if err != nil {
			return err
		}
		stored, err := study.Parse(r.Spec, "run "+string(r.ID), a.reg)
		if err != nil {
			return fmt.Errorf("stored study of run %s: %w", r.ID, err)
		}
		platforms = func(*study.Study) []study.Platform { return stored.Platforms }
		var env struct {
			Extra map[string]string `json:"extra"`
		}
		if err := json.Unmarshal(r.Env, &env); err != nil && len(r.Env) > 0 {
			return fmt.Errorf("run %s: its stored environment does not decode, so the image it ran cannot be known: %w", r.ID, err)
		}
		if env.Extra["image"] != "" {
			if f.image != "" && f.image != env.Extra["image"] {
				return withCode(ExitBadInput, fmt.Errorf("--image %s: run %s was started with %s and resumes with it", f.image, r.ID, env.Extra["image"]))
			}
			f.image = env.Extra["image"]
		}
	}
	needsImage := false
	for _, p := range platforms(st) {
		// VMs are built from the container image too.
		needsImage = needsImage || p.Base != platform.Native
	}
	opener := &platformset.Opener{Dir: a.dir, SkipUnavailable: f.skipUnavailable}
	imageRef := ""
	var envDocker map[string]string
	if needsImage {
		imageRef, envDocker, err = a.dockerFacts(ctx, f.image)
		switch {
		case err != nil && !f.skipUnavailable:
			return withCode(ExitUnavailable, err)
		case err != nil:
			// Every platform that runs the image is skipped, with this
			// reason stored with the run.
			opener.NoImage = err
		}
	}
	env, err := sysinfo.Capture(ctx)
	if err != nil {
		return err // only when interrupted
	}
	env.Docker = envDocker
	env.NearnativeVersion, env.Commit = version.Version, version.CommitID()
	if env.Extra == nil {
		env.Extra = map[string]string{}
	}
	env.Extra["image"] = imageRef
	envJSON, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("recording the environment: %w", err)
	}
	var notes []store.RunNote
	if w := env.Extra["warnings"]; w != "" {
		for _, part := range strings.Split(w, "; ") {
			notes = append(notes, store.RunNote{Kind: store.NoteWarning, Subject: "environment", Text: "not captured: " + part})
		}
	}

	disp := progress.New(a.stderr)
	out, err := engine.Run(ctx, engine.Config{
		Study: st, Registry: a.reg, Store: db, Dir: a.dir, Image: imageRef,
		Platforms: func(ctx context.Context, env platform.Env, ps []study.Platform) (engine.Opened, error) {
			m, closeAll, err := opener.Open(ctx, env, ps)
			return engine.Opened{Platforms: m, Close: closeAll, Skipped: opener.Skipped}, err
		},
		Env: envJSON, Version: version.String(), Resume: runid.ID(f.resume), Progress: disp,
		Host: func(env platform.Env) (platform.Platform, error) {
			return native.New("host", env, a.dir, platform.Options{})
		},
		NoWait: f.noWait, Notes: notes, LoadProbe: engine.MeasureLoad,
	})
	for name, why := range opener.Skipped {
		fmt.Fprintf(a.stderr, "skipped platform %s: %s\n", name, why)
	}
	if !out.Stored {
		return err
	}
	if rerr := a.render(context.WithoutCancel(ctx), string(out.Run.ID), f.jsonOut, false); rerr != nil && err == nil {
		err = rerr
	}
	if errors.Is(err, engine.ErrInterrupted) {
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("run %s interrupted; continue it with `nearnative run --resume %s`", out.Run.ID, out.Run.ID)}
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", out.Run.ID, err)
	}
	return nil
}

func (a *app) checkResumeFlags(f runFlags) (bool, error) {
	if f.platforms != "" || f.rounds != 0 || f.quick || f.untilCI != 0 || f.trial != 0 || f.seed != 0 || f.ciMetrics != "" {
		return false, withCode(ExitBadInput, errors.New("--resume continues a run as it was started: drop --platforms, --rounds, --quick, --until-ci, --ci-metrics, --trial and --seed"))
	}
	return true, nil
}

// dockerFacts connects to Docker, finds the workload image and returns the
// engine facts for the environment record.
func (a *app) dockerFacts(ctx context.Context, override string) (string, map[string]string, error) {
	engine := &platformset.Engine{}
	defer engine.Close()
	eng, err := engine.Get(ctx)
	if err != nil {
		return "", nil, err
	}
	facts := map[string]string{}
	if info, err := eng.Info(ctx); err == nil {
		facts["version"], facts["api_version"], facts["storage_driver"] = info.Version, info.APIVersion, info.StorageDriver
		facts["cgroup_driver"], facts["cgroup_version"] = info.CgroupDriver, info.CgroupVersion
	}
	ref, err := a.imageRef(ctx, engine, override)
	return ref, facts, err
}

// imageRef returns the workload image to use and an error when it is missing.
func (a *app) imageRef(ctx context.Context, engine *platformset.Engine, override string) (string, error) {
	eng, err := engine.Get(ctx)
	if err != nil {
		return "", err
	}
	cfg, err := image.DefaultConfig()
	if err != nil {
		return "", err
	}
	cfg.Ref = override
	ref, present, err := image.Current(ctx, eng.API(), cfg)
	if err != nil {
		return ref, err
	}
	if !present {
		return ref, fmt.Errorf("workload image %s is missing (or the host's packages changed since it was built): run `nearnative image build`", ref)
	}
	return ref, nil
}

// render prints the report of a stored run and writes its JSON; with
// allWarnings it prints every warning instead of one line per kind.
func (a *app) render(ctx context.Context, ref string, jsonOut string, allWarnings bool) error {
	db, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	sr, err := a.loadRun(ctx, db, ref)
	if err != nil {
		return err
	}
	res := sr.analyse(a.diagnostic([]storedRun{sr}))
	if allWarnings {
		fmt.Fprintf(a.stdout, "run %s: %d warning(s)\n", sr.run.ID, len(res.Warnings))
		for _, l := range report.RunNoteLines(sr.notes) {
			fmt.Fprintln(a.stdout, l)
		}
		return report.Warnings(a.stdout, res)
	}
	tr, err := sr.traces(ctx, db)
	if err != nil {
		return err
	}
	h := report.Header{Run: sr.run, StopReason: sr.run.StopReason, Notes: append(notes(sr.trials), added(res)...), RunNotes: sr.notes, Traces: tr}
	if err := report.Text(a.stdout, h, res); err != nil {
		return err
	}
	if jsonOut != "" {
		data, err := renderTo(func(w io.Writer) error { return report.JSON(w, h, res) })
		if err != nil {
			return err
		}
		if err := writeFiles([]outFile{{"--json", jsonOut, data}}); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "wrote %s\n", jsonOut)
	}
	return nil
}

// notes collects each platform's description (from its last trial) and the
// trials' own notes about the driver.
func notes(trials []store.Trial) []string {
	where := map[string]string{}
	var order []string
	var driver []string
	seen := map[string]bool{}
	for _, t := range trials {
		if len(t.Where) > 0 {
			if _, ok := where[t.Platform]; !ok {
				order = append(order, t.Platform)
			}
			where[t.Platform] = strings.Join(t.Where, "; ")
		}
		for _, n := range t.Notes {
			switch {
			case strings.Contains(n, "bottleneck") && !seen[t.Workload+t.Platform] && !t.Warmup:
				seen[t.Workload+t.Platform] = true
				driver = append(driver, fmt.Sprintf("%s on %s: %s", t.Workload, t.Platform, n))
			case strings.HasPrefix(n, "closed loop") && !seen[t.Workload+" closed"]:
				seen[t.Workload+" closed"] = true
				driver = append(driver, fmt.Sprintf("%s: %s", t.Workload, n))
			case strings.HasPrefix(n, workload.SizeNote) && !seen[t.Workload+" size"] && !t.Warmup:
				// the size a workload scaled to this machine, once
				seen[t.Workload+" size"] = true
				driver = append(driver, fmt.Sprintf("%s: %s", t.Workload, n))
			}
		}
	}
	var out []string
	for _, p := range order {
		out = append(out, fmt.Sprintf("%s: %s", p, where[p]))
	}
	return append(out, driver...)
}

// added says, for round-trip times (metrics named rtt_*, in us), how many
// microseconds each platform adds to the baseline's mean: the seed's way of
// putting the cost of a network path.
func added(res analysis.Result) []string {
	var out []string
	for _, t := range res.Tables {
		if t.Unit != "us" || t.HigherIsBetter || !strings.HasPrefix(t.Metric, "rtt_") {
			continue
		}
		var base float64
		for _, c := range t.Cells {
			if c.IsBaseline {
				base = c.Summary.Mean
			}
		}
		var parts []string
		for _, c := range t.Cells {
			if c.IsBaseline || c.Summary.N == 0 || base == 0 {
				continue
			}
			p := fmt.Sprintf("%s %+.1f us", c.Platform, c.Summary.Mean-base)
			if !math.IsNaN(c.Ratio.Lo) {
				p += fmt.Sprintf(" [%+.1f, %+.1f]", (c.Ratio.Lo-1)*base, (c.Ratio.Hi-1)*base)
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s %s added to %s's %.1f us per round trip: %s (95%% CI: the ratio's times the baseline mean)",
				t.Workload, t.Metric, res.Baseline, base, strings.Join(parts, ", ")))
		}
	}
	return out
}

func (a *app) runsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "runs",
		Short: "List stored runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			db, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.Runs(ctx)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				fmt.Fprintf(a.stdout, "no runs stored in %s yet: try `nearnative run redis --quick`\n", a.db)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTUDY\tSTARTED\tSTATUS\tTRIALS\tBASELINE")
			for _, r := range runs {
				status := r.Status
				if status == "running" && !a.dir.Alive(r.ID) {
					status = "crashed (resume with --resume)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Study, r.Started.Local().Format("2006-01-02 15:04"), status, r.Trials, r.Baseline)
			}
			return tw.Flush()
		},
	}
}

func (a *app) showCmd() *cobra.Command {
	var jsonOut string
	var warnings bool
	c := &cobra.Command{
		Use:   "show RUN",
		Short: "Print a stored run's report (RUN: an ID, a unique prefix, or last)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.render(c.Context(), args[0], jsonOut, warnings)
		},
	}
	c.Flags().StringVar(&jsonOut, "json", "", "also write the results as JSON to this file")
	c.Flags().BoolVar(&warnings, "warnings", false, "list every warning of the run instead of the report (the report has one line per kind)")
	return c
}

func (a *app) studiesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "studies",
		Short: "List the built-in studies, with how long each takes here, --quick and in full",
		Long: "List the built-in studies. Beside each, the duration a run of it would print before its first trial on this machine, " +
			"--quick and in full (each workload's own estimate and typical start-up costs), or why it cannot run here as it stands.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			infos, err := study.Builtins()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "STUDY\t--QUICK\tFULL\tWHAT\n")
			for _, i := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", i.Name, a.expected(i.Name, true), a.expected(i.Name, false), i.Description)
			}
			return tw.Flush()
		},
	}
}

func (a *app) workloadsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workloads",
		Short: "List the workloads with their parameters and defaults",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			for _, w := range a.reg.All() {
				fmt.Fprintf(a.stdout, "%s: %s\n", w.Name(), w.Description())
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				for _, p := range w.Params() {
					def := p.Default
					if def == "" {
						def = `""`
					}
					if p.Quick != "" {
						def += " (quick: " + p.Quick + ")"
					}
					fmt.Fprintf(tw, "  %s\t%s\tdefault %s\t%s\n", p.Name, p.Type, def, p.Help)
				}
				tw.Flush()
			}
			return nil
		},
	}
}

// expected is the duration a run of built-in study name would print before
// its first trial here ("about 12m"), or in a word why it cannot run here
// ("refused: ...", its reason in `nearnative run`).
func (a *app) expected(name string, quick bool) string {
	st, err := study.Load(name, a.reg)
	if err == nil {
		err = st.Apply(study.Overrides{Quick: quick}, a.reg)
	}
	var d time.Duration
	if err == nil {
		d, err = engine.Expected(st, a.reg)
	}
	switch {
	case errors.Is(err, fio.ErrNoSpace):
		return "too big for this disk"
	case err != nil:
		return "refused here"
	}
	return "about " + d.Round(time.Minute/6).String()
}
