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
	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/engine"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/progress"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/version"
	"github.com/nearnative/nearnative/internal/workload"
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
	client          string
	workloads       string
	set             []string
	quiet, verbose  bool
	noReap          bool
	storeRetry      time.Duration
	hosts           string
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run STUDY | run --resume RUN",
		Short: "Run a study (a built-in name or a YAML file) and print the table",
		Long: `Run a study, a built-in name (see ` + "`nearnative studies`" + `) or a YAML file: every round
runs each workload on every platform once, in a fresh random order (as listed
with order: fixed). The study's warm-up rounds run first and are not counted
(warmup: in the file, 1 unless the study says otherwise; several built-in
studies set 0, --quick ones among them). Each platform is reported relative to
the baseline with a 95% CI over the counted rounds,
` + pairedInterval() + `.
Each trial is stored the moment it ends, so an interrupted run continues with
--resume RUN.

--workloads and --platforms pick from the study; --set changes a workload
parameter as the file's params: would (workload: a name from the study's
workloads, or a workload kind for all of its workloads; see ` + "`nearnative workloads`" + `).

Progress goes to standard error, a line per trial (-v, the default) or
nothing (-q); the table goes to standard output, or to standard error when
--json - puts the results there.`,
		Example: `  nearnative run redis --quick
  nearnative run micro --quick --workloads tcp-rr,tcp-stream-send --platforms native,docker-nat
  nearnative run redis --set redis-get.clients=50 --rounds 10 -q
  nearnative run my-study.yaml --json results.json
  nearnative run redis --quick --json - | jq '.results[0]'
  nearnative run --resume 20261126-0912`,
		Args: func(c *cobra.Command, args []string) error {
			if f.resume != "" && len(args) > 0 {
				return withCode(ExitBadInput, errors.New("give either a study or --resume RUN, not both"))
			}
			if f.resume == "" && len(args) != 1 {
				return withCode(ExitBadInput, errors.New("which study? give a built-in name (see `nearnative studies`) or a YAML file"))
			}
			if f.quiet && f.verbose {
				return withCode(ExitBadInput, errors.New("-q and -v: give one"))
			}
			return nil
		},
		ValidArgsFunction: completeStudy,
		RunE:              func(c *cobra.Command, args []string) error { return a.run(c.Context(), args, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.platforms, "platforms", "", "comma-separated platforms to run (a subset of the study's, or built-in ones)")
	fl.IntVar(&f.rounds, "rounds", 0, "counted rounds (overrides the study)")
	fl.BoolVar(&f.quick, "quick", false, "the study's quick settings: fewer, shorter rounds")
	fl.Float64Var(&f.untilCI, "until-ci", 0, "add rounds until every ratio's 95% CI half-width is at most this many percent (capped by the study's max_rounds and max_time)")
	fl.StringVar(&f.ciMetrics, "ci-metrics", "", "comma-separated metrics --until-ci applies to (default: every non-diagnostic metric)")
	fl.DurationVar(&f.trial, "trial", 0, "trial length (overrides the study)")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the random trial order (default: chosen and recorded)")
	fl.StringVar(&f.jsonOut, "json", "", "also write the results, the document show --json writes, as JSON to this `FILE` (- for standard output)")
	fl.StringVar(&f.resume, "resume", "", "continue an interrupted run without repeating its stored trials")
	fl.StringVar(&f.workloads, "workloads", "", "comma-separated workloads of the study to run (wins over the quick block's)")
	fl.StringArrayVar(&f.set, "set", nil, "set a workload parameter, `workload.param=value` (repeatable; checked as the study file's params)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print the table only: no progress lines")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print a line per trial as it ends (the default)")
	fl.BoolVar(&f.skipUnavailable, "skip-unavailable", false, "run the other platforms when some cannot run here")
	fl.StringVar(&f.image, "image", "", "workload image for container platforms (default: the locally built one)")
	fl.BoolVar(&f.noWait, "no-wait", false, "exit (code 3) instead of waiting when another run is measuring on this machine")
	fl.StringVar(&f.client, "client", "", "where the load runs: netns (a network namespace of its own, over a veth; the default) or host (this machine, over loopback)")
	fl.DurationVar(&f.storeRetry, "store-retry", store.DefaultWritePolicy.Total, fmt.Sprintf("how long a failing write to the result database is retried (each attempt at most %v) before the run stops and keeps the trial in a file that --resume stores", store.DefaultWritePolicy.Attempt))
	fl.StringVar(&f.hosts, "hosts", "", "hosts `FILE` (YAML): run the servers on its sut hosts and the load on its driver hosts, over SSH (see docs/hosts.md); overrides the study's hosts:")
	fl.BoolVar(&f.noReap, "no-reap", false, "leave what crashed runs left on the machine (by default the run removes it before its first trial; trials may be disturbed)")
	c.RegisterFlagCompletionFunc("platforms", a.completePlatforms)
	c.RegisterFlagCompletionFunc("workloads", a.completeWorkloads)
	c.RegisterFlagCompletionFunc("set", a.completeSet)
	c.RegisterFlagCompletionFunc("resume", a.completeRuns(0, true))
	c.RegisterFlagCompletionFunc("json", jsonFileCompletion)
	return c
}

// jsonFileCompletion completes a JSON output file.
func jsonFileCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
}

// pairedInterval says how run and show make their intervals, from what
// stats chooses for ratios paired by round (a test holds the help to it).
func pairedInterval() string {
	mean, tail := stats.Choose(stats.MeanStatistic, true), stats.Choose(stats.TailStatistic, true)
	if mean == tail {
		return "paired by round: " + mean.Describe(true)
	}
	return "paired by round: " + mean.Describe(true) + " for means, " + tail.Describe(true) + " for tail percentiles"
}

// quietDisplay is -q: the engine's progress goes nowhere.
type quietDisplay struct{}

func (quietDisplay) Begin(runid.ID, int, int, int)    {}
func (quietDisplay) TrialStart(int, bool, study.Unit) {}
func (quietDisplay) TrialEnd(store.Trial)             {}
func (quietDisplay) Logf(string, ...any)              {}
func (quietDisplay) End()                             {}

// run is `nearnative run`: the study from the flags (or the stored run to
// resume), the environment record, the platforms' opener, then the engine;
// the table once it stops.
func (a *app) run(ctx context.Context, args []string, f runFlags) error {
	st, err := a.studyToRun(args, f)
	if err != nil {
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
	if wr, ok := db.(store.WriteRetrier); ok {
		p := store.DefaultWritePolicy
		p.Total = f.storeRetry
		wr.SetWritePolicy(p)
	}
	var disp progress.Display = quietDisplay{}
	if !f.quiet {
		disp = progress.New(a.stderr)
	}
	cfg := engine.Config{Study: st, Registry: a.reg, Store: db, Dir: a.dir, Resume: runid.ID(f.resume), Progress: disp,
		Version: version.String(), NoWait: f.noWait, Reap: a.reaper(f.noReap), LoadProbe: engine.MeasureLoad,
		Host: func(env platform.Env) (workload.HostPlatform, error) {
			if d, ok := env.Client.(remote.Agent); ok {
				return remote.Beside(d, nil, env) // in a driver pod, through its agent
			}
			return native.Beside("host", env, a.dir)
		},
		Local: func(env platform.Env) (workload.HostPlatform, error) {
			return native.Beside("local", env, a.dir)
		}}
	// A resumed run keeps the study, the platforms and the image it started
	// with: the engine reads them once, here.
	if cfg.Planned, err = engine.Plan(ctx, cfg); err != nil {
		return err
	}
	if f.image, err = resumedImage(cfg.Planned.Run, f); err != nil {
		return err
	}
	opener := &catalog.Opener{Dir: a.dir, SkipUnavailable: f.skipUnavailable, Client: cfg.Planned.Study.ClientSetting(), Log: a.stderr}
	hostNotes, closeHosts, err := a.openHosts(ctx, f, cfg.Planned.Study, opener)
	if err != nil {
		return err
	}
	defer closeHosts() // stops every host's agent, and what it still runs
	if opener.Hosts != nil {
		cfg.Host = opener.Beside // roles beside the driver run on the first driver host
	}
	if cfg.Image, cfg.Env, cfg.Notes, err = a.runEnvironment(ctx, cfg.Planned.Study, f, opener); err != nil {
		return err
	}
	cfg.Notes = append(hostNotes, cfg.Notes...)
	cfg.Platforms = func(ctx context.Context, env platform.Env, ps []study.Platform) (engine.Opened, error) {
		m, closeAll, err := opener.Open(ctx, env, ps)
		return engine.Opened{Platforms: m, Close: closeAll, Skipped: opener.Skipped, Clients: opener.Clients}, err
	}
	out, err := engine.Run(ctx, cfg)
	for name, why := range opener.Skipped {
		if !f.quiet { // the report's notes say it too
			fmt.Fprintf(a.stderr, "skipped platform %s: %s\n", name, why)
		}
	}
	return a.afterRun(ctx, out, err, f)
}

// studyToRun loads the study file of a new run and applies the flags that
// override it; a resumed run (nil study) only checks that none is given.
func (a *app) studyToRun(args []string, f runFlags) (*study.Study, error) {
	if f.resume != "" {
		_, err := a.checkResumeFlags(f)
		return nil, err
	}
	st, err := study.Load(args[0], a.reg)
	if err != nil {
		return nil, withCode(ExitBadInput, err)
	}
	o := study.Overrides{Rounds: f.rounds, Quick: f.quick, UntilCI: f.untilCI, Trial: f.trial, Seed: f.seed, Client: f.client}
	if f.platforms != "" {
		o.Platforms = strings.Split(f.platforms, ",")
	}
	if f.ciMetrics != "" {
		o.CIMetrics = strings.Split(f.ciMetrics, ",")
	}
	if f.workloads != "" {
		o.Workloads = strings.Split(f.workloads, ",")
	}
	for _, kv := range f.set {
		ps, err := study.ParseParamSet(kv)
		if err != nil {
			return nil, withCode(ExitBadInput, err)
		}
		o.Params = append(o.Params, ps)
	}
	if err := st.Apply(o, a.reg); err != nil {
		return nil, withCode(ExitBadInput, err)
	}
	return st, nil
}

// resumedImage is the workload image of a run: --image for a new one, the
// image a resumed run was started with (recorded in its environment), which
// --image may only repeat.
func resumedImage(r store.Run, f runFlags) (string, error) {
	if f.resume == "" {
		return f.image, nil
	}
	var env struct {
		Extra map[string]string `json:"extra"`
	}
	if err := json.Unmarshal(r.Env, &env); err != nil && len(r.Env) > 0 {
		return "", fmt.Errorf("run %s: its stored environment does not decode, so the image it ran cannot be known: %w", r.ID, err)
	}
	stored := env.Extra["image"]
	switch {
	case stored == "":
		return f.image, nil
	case f.image != "" && f.image != stored:
		return "", withCode(ExitBadInput, fmt.Errorf("--image %s: run %s was started with %s and resumes with it", f.image, r.ID, stored))
	}
	return stored, nil
}

// runEnvironment finds the workload image (when a platform of st runs it)
// and captures the environment record: the image reference, the record as
// JSON and the run notes of what could not be captured. Without Docker or
// the image, --skip-unavailable tells opener to skip the platforms that
// need it.
func (a *app) runEnvironment(ctx context.Context, st *study.Study, f runFlags, opener *catalog.Opener) (string, []byte, []store.RunNote, error) {
	needsImage := false
	for _, p := range st.Platforms {
		// VMs are built from the container image too; on remote hosts,
		// only Docker's kinds run (the image copied there from here).
		needsImage = needsImage || (p.Base != platform.Native && (opener.Hosts == nil || remote.IsDocker(p.Base)))
	}
	imageRef := ""
	var envDocker map[string]string
	if needsImage {
		var err error
		imageRef, envDocker, err = a.dockerFacts(ctx, f.image)
		switch {
		case err != nil && !f.skipUnavailable:
			return "", nil, nil, withCode(ExitUnavailable, err)
		case err != nil:
			// Every platform that runs the image is skipped, with this
			// reason stored with the run.
			opener.NoImage = err
		}
	}
	env, err := sysinfo.Capture(ctx)
	if err != nil {
		return "", nil, nil, err // only when interrupted
	}
	env.Docker = envDocker
	env.NearnativeVersion, env.Commit = version.Version, version.CommitID()
	if env.Extra == nil {
		env.Extra = map[string]string{}
	}
	env.Extra["image"] = imageRef
	envJSON, err := json.Marshal(env)
	if err != nil {
		return "", nil, nil, fmt.Errorf("recording the environment: %w", err)
	}
	var notes []store.RunNote
	if w := env.Extra["warnings"]; w != "" {
		for _, part := range strings.Split(w, "; ") {
			notes = append(notes, store.RunNote{Kind: store.NoteWarning, Subject: "environment", Text: "not captured: " + part})
		}
	}
	return imageRef, envJSON, notes, nil
}

// openHosts connects to the hosts file's machines (--hosts, else the
// study's hosts:) and gives opener their set; without one it does nothing.
// Only native runs on remote hosts yet, so a study's other platforms are
// skipped with the reason unless --platforms names them. The returned
// function stops every host's agent and what it still runs.
func (a *app) openHosts(ctx context.Context, f runFlags, st *study.Study, opener *catalog.Opener) ([]store.RunNote, func(), error) {
	path := f.hosts
	if path == "" {
		path = st.HostsPath()
	}
	if path == "" {
		return nil, func() {}, nil
	}
	set, notes, err := a.connectHosts(ctx, path, st)
	if err != nil {
		return nil, nil, err
	}
	opener.Hosts = set
	opener.SkipUnavailable = opener.SkipUnavailable || f.platforms == ""
	return notes, func() { set.Close() }, nil
}

// afterRun shows the stored run's table and turns the engine's error into
// the command's: nothing stored, the store failed, interrupted, or failed.
func (a *app) afterRun(ctx context.Context, out engine.Outcome, err error, f runFlags) error {
	if !out.Stored {
		return err
	}
	if errors.Is(err, engine.ErrStore) {
		// The database has just failed: no report to read from it.
		return withCode(ExitUnavailable, fmt.Errorf("run %s stopped: %w", out.Run.ID, err))
	}
	table := a.stdout
	if toStdout(f.jsonOut) {
		table = a.stderr
	}
	if rerr := a.render(context.WithoutCancel(ctx), string(out.Run.ID), f.jsonOut, false, table); rerr != nil && err == nil {
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
	if f.platforms != "" || f.rounds != 0 || f.quick || f.untilCI != 0 || f.trial != 0 || f.seed != 0 || f.ciMetrics != "" || f.workloads != "" || len(f.set) > 0 || f.client != "" {
		return false, withCode(ExitBadInput, errors.New("--resume continues a run as it was started: drop --platforms, --workloads, --set, --rounds, --quick, --until-ci, --ci-metrics, --trial, --seed and --client"))
	}
	return true, nil
}

// dockerFacts connects to Docker, finds the workload image and returns the
// engine facts for the environment record.
func (a *app) dockerFacts(ctx context.Context, override string) (string, map[string]string, error) {
	docker := &catalog.Docker{}
	defer docker.Close()
	eng, err := docker.Get(ctx)
	if err != nil {
		return "", nil, err
	}
	facts := map[string]string{}
	if info, err := eng.Info(ctx); err == nil {
		facts["version"], facts["api_version"], facts["storage_driver"] = info.Version, info.APIVersion, info.StorageDriver
		facts["cgroup_driver"], facts["cgroup_version"] = info.CgroupDriver, info.CgroupVersion
	}
	ref, err := a.imageRef(ctx, docker, override)
	return ref, facts, err
}

// imageRef returns the workload image to use and an error when it is missing.
func (a *app) imageRef(ctx context.Context, docker *catalog.Docker, override string) (string, error) {
	eng, err := docker.Get(ctx)
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

// render prints the report of a stored run to text (nowhere when nil) and
// writes its JSON; with allWarnings it prints every warning instead of one
// line per kind.
func (a *app) render(ctx context.Context, ref string, jsonOut string, allWarnings bool, text io.Writer) error {
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
	if text != nil {
		if err := report.Text(text, h, res); err != nil {
			return err
		}
	}
	if jsonOut == "" {
		return nil
	}
	data, err := renderTo(func(w io.Writer) error { return report.JSON(w, h, res) })
	if err != nil {
		return err
	}
	return a.writeOutputs([]outFile{{"--json", jsonOut, data}}, "")
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
			case strings.HasPrefix(n, workload.CliffNote) && !seen[t.Workload+t.Platform+" cliff"] && !t.Warmup:
				seen[t.Workload+t.Platform+" cliff"] = true
				driver = append(driver, fmt.Sprintf("%s on %s: %s", t.Workload, t.Platform, n))
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
		Example: `  nearnative runs
  nearnative runs --db /srv/results.db`,
		Args: cobra.NoArgs,
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
			if bad, err := db.InvalidRuns(ctx); err == nil {
				for _, id := range bad {
					fmt.Fprintf(a.stderr, "skipped a stored run with ID %q: not a run ID (not written by nearnative); left alone\n", id)
				}
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
		Long: `Print a stored run's report (RUN: an ID, a unique prefix, or last): the table
run printed when it ended, computed again from the stored trials. --json FILE
also writes the run's results as JSON, the document run --json writes; with
--json - the JSON alone goes to standard output.`,
		Example: `  nearnative show last
  nearnative show last --json - | jq .
  nearnative show 20261126-0912 --warnings`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeRuns(1, true),
		RunE: func(c *cobra.Command, args []string) error {
			if warnings && jsonOut != "" {
				return withCode(ExitBadInput, errors.New("--warnings lists the run's warnings, --json writes its results: give one"))
			}
			var text io.Writer = a.stdout
			if toStdout(jsonOut) {
				text = nil
			}
			return a.render(c.Context(), args[0], jsonOut, warnings, text)
		},
	}
	c.Flags().StringVar(&jsonOut, "json", "", "also write the run's results as JSON to this `FILE` (- for standard output, alone)")
	c.RegisterFlagCompletionFunc("json", jsonFileCompletion)
	c.Flags().BoolVar(&warnings, "warnings", false, "list every warning of the run instead of the report (the report has one line per kind)")
	return c
}

func (a *app) workloadsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workloads",
		Short: "List the workloads with their parameters and defaults",
		Long: `List the workload kinds a study's workloads: entries name, with each
parameter's type, default (and --quick default) and meaning. A study file's
params: set them, as does run --set workload.param=value.`,
		Example: `  nearnative workloads
  nearnative run redis --set redis-get.clients=50`,
		Args: cobra.NoArgs,
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
