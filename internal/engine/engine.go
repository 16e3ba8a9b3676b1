// Package engine runs a study: randomised multiple interleaved trials, round
// after round, each trial stored the moment it ends, until the study's rounds
// are done or, with --until-ci, until every ratio is as precise as asked or a
// cap is hit. An interrupted run can be resumed without repeating stored
// trials.
package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload"
)

// ErrConfig marks errors in what the study asks for (found before anything
// runs); the CLI reports them as bad input.
var ErrConfig = errors.New("bad study")

// ErrInterrupted is returned when the context ends the run early; the run is
// stored as "interrupted" and can be resumed.
var ErrInterrupted = errors.New("run interrupted")

// Stop reasons recorded with a finished run.
const (
	ReasonRounds    = "all rounds done"
	ReasonPrecision = "precision reached"
	ReasonMaxRounds = "round cap reached before the precision"
	ReasonMaxTime   = "time cap reached before the precision"
)

// maxConsecutiveFailures aborts a run when one unit keeps failing.
const maxConsecutiveFailures = 3

// finishAfterStoreFailure bounds the write of a run's final status after
// the store failed to take a trial.
const finishAfterStoreFailure = 10 * time.Second

// Opened is what a PlatformOpener returns: the platforms that can run here
// by name, a function that releases them, the platforms skipped as
// unavailable with the reason for each, and each platform's client host
// (where its load runs; nil or missing: the platform's clients run inside
// it).
type Opened struct {
	Platforms map[string]platform.Platform
	Close     func() error
	Skipped   map[string]string
	Clients   map[string]host.Host
}

// PlatformOpener opens the study's platforms for a run.
type PlatformOpener func(ctx context.Context, env platform.Env, ps []study.Platform) (Opened, error)

// Progress receives what the engine does; implementations draw a bar on a
// terminal or print log lines.
type Progress interface {
	// Begin is called once with the run ID, the planned number of trials
	// (at most, with --until-ci), how many are already stored, and the
	// planned number of rounds, warm-up included.
	Begin(run runid.ID, planned, done, rounds int)
	// TrialStart is called before each trial.
	TrialStart(round int, warmup bool, unit study.Unit)
	// TrialEnd is called after each trial with what was stored.
	TrialEnd(t store.Trial)
	// Logf reports an event worth a line.
	Logf(format string, args ...any)
	// End is called once when the run stops.
	End()
}

// Config is everything a run needs.
type Config struct {
	Study     *study.Study
	Registry  *workload.Registry
	Store     store.Store
	Dir       state.Dir
	Platforms PlatformOpener
	// Image is the workload image reference container platforms use.
	Image string
	// Env is the captured environment, stored with a new run.
	Env []byte
	// Version is nearnative's version and commit.
	Version string
	// Resume continues this stored run instead of starting a new one; Study
	// is then ignored and rebuilt from the stored spec.
	Resume runid.ID
	// Planned, when set, is the run as Plan found it (the caller read its
	// study first); nil: Run plans it.
	Planned  *Planned
	Progress Progress
	// Host opens the native platform for the topology roles that run
	// beside the driver, on the client host env.Client (once per client
	// host); nil leaves workload.Trial.Host nil.
	Host func(env platform.Env) (workload.HostPlatform, error)
	// Local opens this machine's native platform on loopback, where
	// workloads build the data templates they cache here (once per run);
	// nil leaves workload.Trial.Local nil.
	Local func(env platform.Env) (workload.HostPlatform, error)
	// NoWait makes the run fail with a *state.BusyError instead of waiting
	// when another run holds the machine's measuring lock.
	NoWait bool
	// Notes are stored with the run when it is created (or resumed): facts
	// the caller found before it started, such as an environment capture
	// that failed in part.
	Notes []store.RunNote
	// Reap, when set, deals with what crashed runs left on the machine
	// (processes, containers, namespaces, ...) before anything of this run
	// starts: it is called once, under the measuring lock, with this run's
	// ID and whether the run is resumed (its own earlier process may have
	// left things too), and says each thing worth a line through log. It
	// returns warnings to store with the run (leftovers it could not
	// remove, or left on purpose); an error stops the run.
	Reap func(ctx context.Context, run runid.ID, resumed bool, log func(format string, args ...any)) (warnings []string, err error)
	// LoadProbe, when set, measures the machine's load once the run holds
	// the measuring lock, before its first trial: a busy machine makes the
	// run say that it will take longer than its estimate (MeasureLoad).
	LoadProbe LoadProbe
}

// Outcome is how a run ended.
type Outcome struct {
	Run    store.Run
	Study  *study.Study
	Reason string
	// Stored is set once the run is in the store (a new run created, or a
	// resumed one reopened); before that nothing was measured or kept.
	Stored bool
}

type unitKey struct {
	round              int
	workload, platform string
}

// Planned is a run about to start or resume, as Plan found it: its record
// and its study (for a resumed run, the stored study, parsed once here) and
// what a resumed run already stored.
type Planned struct {
	Run   store.Run
	Study *study.Study
	done  map[unitKey]bool
	prior stored
}

// Plan returns the run cfg describes without starting it: a new run of
// cfg.Study, or the stored run cfg.Resume (checked: not complete, not
// running in another process; trials its store did not take are stored
// first). Its caller may read the study (which platforms run, where the
// load comes from) before Run, and hands it over as cfg.Planned so that
// nothing is read or parsed twice. Plan needs cfg's Store, Dir, Registry,
// Progress, Study and Resume.
func Plan(ctx context.Context, cfg Config) (*Planned, error) {
	r, st, done, prior, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Planned{Run: r, Study: st, done: done, prior: prior}, nil
}

// Run executes (or resumes) a study: it plans the run unless cfg.Planned
// has, takes the machine, makes the workloads' instances, opens the
// platforms, stores the run with its notes and runs the rounds.
func Run(ctx context.Context, cfg Config) (Outcome, error) {
	var out Outcome
	pl := cfg.Planned
	if pl == nil {
		var err error
		if pl, err = Plan(ctx, cfg); err != nil {
			return out, err
		}
	}
	r, st := pl.Run, pl.Study
	if cfg.Resume == "" {
		// Planned before the caller captured the environment.
		r.Env, r.Version, r.Started = cfg.Env, cfg.Version, time.Now()
	}
	out.Run, out.Study = r, st
	release, reapNotes, err := takeMachine(ctx, cfg, r.ID, st.Name)
	if err != nil {
		return out, err
	}
	defer release()
	instances, err := newInstances(cfg.Registry, st)
	defer closeInstances(instances, cfg.Progress)
	if err != nil {
		return out, err
	}
	runDir := cfg.Dir.RunDir(r.ID)
	env := platform.Env{Run: r.ID, LogDir: filepath.Join(runDir, "logs"), Image: cfg.Image, Log: progressWriter{cfg.Progress}}
	if err := os.MkdirAll(env.LogDir, 0o755); err != nil {
		return out, fmt.Errorf("creating run directory: %w", err)
	}
	opened, err := cfg.Platforms(ctx, env, st.Platforms)
	if err != nil {
		return out, err
	}
	defer func() {
		if cerr := opened.Close(); cerr != nil {
			cfg.Progress.Logf("releasing platforms: %v (`nearnative cleanup %s` removes what is left)", cerr, r.ID)
		}
	}()
	if err := keepOpened(&r, st, opened.Platforms, cfg.Resume == ""); err != nil {
		return out, err
	}
	out.Run = r
	if err := storeRun(ctx, cfg, r, runNotes(cfg.Notes, reapNotes, st, opened)); err != nil {
		return out, err
	}
	out.Stored = true

	hosts := map[host.Host]workload.HostPlatform{}
	e := &runner{cfg: cfg, run: r, st: st, done: pl.done, instances: instances, plats: opened.Platforms, clients: opened.Clients,
		env: env, hosts: hosts, degraded: map[string]bool{},
		rawDir: filepath.Join(runDir, "raw"), failures: map[string]int{}, stopped: map[string]bool{},
		lastStored: pl.prior.lastRound, spent: pl.prior.spent}
	defer func() {
		for _, h := range append(slices.Collect(maps.Values(hosts)), e.local) {
			if c, ok := h.(platform.Closer); ok {
				c.Close()
			}
		}
	}()
	if err := e.storeDegradations(ctx); err != nil {
		return out, err
	}
	reason, runErr := e.loop(ctx)
	out.Reason = reason
	out.Run.Status, out.Run.StopReason, runErr = e.finish(ctx, reason, runErr)
	return out, runErr
}

// takeMachine takes the run's lock and the machine's measuring lock (one
// run measures at a time: a second one waits here, before it starts
// anything, and says for whom), then lets cfg.Reap deal with what crashed
// runs left. It returns what releases both locks and the reaper's warnings
// as run notes.
func takeMachine(ctx context.Context, cfg Config, id runid.ID, studyName string) (release func(), notes []store.RunNote, err error) {
	lock, err := cfg.Dir.AcquireLock(id)
	if err != nil {
		return nil, nil, err
	}
	machine, err := cfg.Dir.AcquireMachine(ctx, state.Holder{Run: id, Study: studyName, PID: os.Getpid(), Since: time.Now()}, !cfg.NoWait,
		func(p state.Place) {
			cfg.Progress.Logf("waiting: the machine is being measured by %s; this run is %s (Ctrl-C stops waiting; --no-wait exits instead)", p.Holder, p)
		})
	if err != nil {
		lock.Release()
		if ctx.Err() != nil {
			return nil, nil, ErrInterrupted
		}
		return nil, nil, err
	}
	release = func() {
		machine.Release()
		lock.Release()
	}
	if cfg.Reap == nil {
		return release, nil, nil
	}
	warnings, err := cfg.Reap(ctx, id, cfg.Resume != "", cfg.Progress.Logf)
	if ctx.Err() != nil {
		err = ErrInterrupted
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	for _, w := range warnings {
		notes = append(notes, store.RunNote{Kind: store.NoteWarning, Subject: "machine", Text: w})
	}
	return release, notes, nil
}

// newInstances makes an instance of every workload of the study and checks
// that the metrics --until-ci watches exist. The instances made are
// returned even with an error, for closeInstances.
func newInstances(reg *workload.Registry, st *study.Study) (map[string]workload.Instance, error) {
	instances := map[string]workload.Instance{}
	for _, w := range st.Workloads {
		kind, ok := reg.Get(w.Kind)
		if !ok {
			return instances, fmt.Errorf("%w: workload %s: unknown kind %q", ErrConfig, w.Name, w.Kind)
		}
		in, err := kind.New(w.Values)
		if err != nil {
			return instances, fmt.Errorf("%w: workload %s: %w", ErrConfig, w.Name, err)
		}
		instances[w.Name] = in
	}
	if err := checkCIMetrics(st, instances); err != nil {
		return instances, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return instances, nil
}

// keepOpened drops from the study the platforms skipped as unavailable
// (--skip-unavailable), so that the study stored is the one that runs; a
// new run's record gets the pruned spec. Without the baseline nothing can
// be compared.
func keepOpened(r *store.Run, st *study.Study, plats map[string]platform.Platform, isNew bool) error {
	if len(plats) >= len(st.Platforms) {
		return nil
	}
	if _, ok := plats[st.Baseline]; !ok {
		return fmt.Errorf("the baseline %s cannot run here, so nothing can be compared", st.Baseline)
	}
	st.KeepPlatforms(func(name string) bool { _, ok := plats[name]; return ok })
	if !isNew {
		return nil
	}
	spec, err := st.YAML()
	if err != nil {
		return err
	}
	r.Spec = spec
	return nil
}

// runNotes are the notes stored with the run: the caller's, the reaper's,
// the platforms skipped (in the study's order, then those the study does
// not name), those --quick left out, and where each platform's load runs.
func runNotes(given, reaped []store.RunNote, st *study.Study, opened Opened) []store.RunNote {
	notes := append(append([]store.RunNote{}, given...), reaped...)
	for _, p := range st.Platforms {
		if why, ok := opened.Skipped[p.Name]; ok {
			notes = append(notes, store.RunNote{Kind: store.NoteSkipped, Subject: p.Name, Text: why})
		}
	}
	for _, name := range st.QuickLeftOut {
		notes = append(notes, store.RunNote{Kind: store.NoteSkipped, Subject: name,
			Text: "left out by --quick (the study's quick.platforms): run without --quick, or name it with --platforms"})
	}
	for name, why := range opened.Skipped {
		if _, inStudy := st.Platform(name); !inStudy {
			notes = append(notes, store.RunNote{Kind: store.NoteSkipped, Subject: name, Text: why})
		}
	}
	for _, u := range host.Uses(opened.Clients) {
		notes = append(notes, store.RunNote{Kind: store.NoteClient, Subject: strings.Join(u.Platforms, ", "), Text: u.Where})
	}
	return notes
}

// storeRun creates a new run in the store (or marks a resumed one running
// again) and adds its notes.
func storeRun(ctx context.Context, cfg Config, r store.Run, notes []store.RunNote) error {
	if cfg.Resume == "" {
		if err := cfg.Store.CreateRun(ctx, r); err != nil {
			return err
		}
	} else if err := cfg.Store.SetRunStatus(ctx, r.ID, "running"); err != nil {
		return err
	}
	for _, n := range notes {
		if err := cfg.Store.AddRunNote(ctx, r.ID, n); err != nil {
			return err
		}
	}
	return nil
}

// finish stores how the run ended (done, interrupted or failed) and
// returns that status, the stop reason and the run's error.
func (e *runner) finish(ctx context.Context, reason string, runErr error) (string, string, error) {
	status := "done"
	switch {
	case errors.Is(runErr, ErrInterrupted):
		status, reason = "interrupted", "interrupted by signal: resume with `nearnative run --resume "+string(e.run.ID)+"`"
	case runErr != nil:
		status, reason = "failed", runErr.Error()
	}
	fctx := context.WithoutCancel(ctx)
	if e.storeFailed {
		// The store has just failed for the policy's whole time: one short
		// try; the run reads as crashed until a resume if it fails.
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(fctx, finishAfterStoreFailure)
		defer cancel()
	}
	if err := e.cfg.Store.FinishRun(fctx, e.run.ID, status, reason, time.Now()); err != nil && runErr == nil {
		runErr = err
	}
	return status, reason, runErr
}

// stored is what a resumed run has already done.
type stored struct {
	lastRound int           // highest round with a stored trial; -1 when none
	spent     time.Duration // machine time of the stored trials
}

// prepare builds the run record and the study, and for a resumed run the set
// of trials already stored.
func prepare(ctx context.Context, cfg Config) (store.Run, *study.Study, map[unitKey]bool, stored, error) {
	done := map[unitKey]bool{}
	prior := stored{lastRound: -1}
	if cfg.Resume == "" {
		st := cfg.Study
		spec, err := st.YAML()
		if err != nil {
			return store.Run{}, nil, nil, prior, err
		}
		r := store.Run{ID: runid.New(), Study: st.Name, Spec: spec, Seed: st.Seed, Baseline: st.Baseline,
			Status: "running", Started: time.Now(), Env: cfg.Env, Version: cfg.Version}
		return r, st, done, prior, nil
	}
	r, err := cfg.Store.Run(ctx, string(cfg.Resume))
	if err != nil {
		return store.Run{}, nil, nil, prior, err
	}
	if r.Status == "done" {
		return store.Run{}, nil, nil, prior, fmt.Errorf("run %s is already complete: nothing to resume (see `nearnative show %s`)", r.ID, r.ID)
	}
	if cfg.Dir.Alive(r.ID) {
		return store.Run{}, nil, nil, prior, fmt.Errorf("run %s is still running in another nearnative process", r.ID)
	}
	// Trials the store did not take when the run stopped are stored first.
	n, err := importSpool(ctx, cfg.Store, cfg.Dir, r.ID)
	if n > 0 {
		cfg.Progress.Logf("stored %d trial(s) of run %s kept in %s when the store failed", n, r.ID, spoolDir(cfg.Dir, r.ID))
	}
	if err != nil {
		return store.Run{}, nil, nil, prior, err
	}
	st, err := study.Parse(r.Spec, "run "+string(r.ID), cfg.Registry)
	if err != nil {
		return store.Run{}, nil, nil, prior, fmt.Errorf("stored study of run %s: %w", r.ID, err)
	}
	if err := st.Apply(study.Overrides{Seed: r.Seed}, cfg.Registry); err != nil {
		return store.Run{}, nil, nil, prior, fmt.Errorf("stored study of run %s: %w", r.ID, err)
	}
	trials, err := cfg.Store.Trials(ctx, r.ID)
	if err != nil {
		return store.Run{}, nil, nil, prior, err
	}
	for _, t := range trials {
		done[unitKey{t.Round, t.Workload, t.Platform}] = true
		prior.lastRound = max(prior.lastRound, t.Round)
		prior.spent += t.Duration
	}
	return r, st, done, prior, nil
}

type runner struct {
	cfg       Config
	run       store.Run
	st        *study.Study
	done      map[unitKey]bool
	instances map[string]workload.Instance
	plats     map[string]platform.Platform
	clients   map[string]host.Host // by platform; nil: clients inside it
	env       platform.Env
	// hosts holds the platform of the roles beside the driver, one per
	// client host, opened on first use.
	hosts map[host.Host]workload.HostPlatform
	// local is this machine's native platform on loopback, opened on
	// first use (Config.Local).
	local    workload.HostPlatform
	rawDir   string
	failures map[string]int  // consecutive failures per unit
	stopped  map[string]bool // units whose trial said no later one can succeed (workload.ErrUnitStopped)
	degraded map[string]bool // degraded modes already stored, "platform\x00text"
	spent    time.Duration   // machine time of the run's trials, stored before a resume included
	// lastStored is the highest round a resumed run had stored trials in
	// (-1 for a new run): the stopping rule was already checked, or never
	// reached, for the rounds before it.
	lastStored int
	// storeFailed is set once the store did not take a trial: the run's
	// last status write then gets a short deadline, not the full policy.
	storeFailed bool
}

func (e *runner) loop(ctx context.Context) (string, error) {
	st := e.st
	units := st.Units()
	rounds := st.Warmup + st.Rounds
	if st.UntilCI > 0 {
		rounds = st.Warmup + st.MaxRounds
	}
	refused, err := e.refuse(ctx, units)
	if err != nil {
		return "", err
	}
	prog := e.cfg.Progress
	prog.Begin(e.run.ID, rounds*(len(units)-refused), len(e.done), rounds)
	defer prog.End()
	prog.Logf("%s", estimateLine(st, e.instances, e.plats, len(e.done)))
	if e.cfg.LoadProbe != nil {
		if l, err := e.cfg.LoadProbe(ctx); err != nil {
			prog.Logf("the machine's load could not be read (%v): the estimate assumes a quiet machine", err)
		} else if line := busyLine(l); line != "" {
			prog.Logf("%s", line)
		}
	}
	if st.UntilCI > 0 {
		prog.Logf("until-ci %.3g%%: at least %d counted rounds, at most %d rounds or %v", st.UntilCI, st.Rounds, st.MaxRounds, st.MaxTime)
	}
	for round := 0; ; round++ {
		counted := round - st.Warmup + 1 // counted rounds complete after this one
		for i, u := range study.Schedule(units, round, st.Seed, st.Order) {
			if ctx.Err() != nil {
				return "", ErrInterrupted
			}
			k := unitKey{round, u.Workload.Name, u.Platform.Name}
			if e.done[k] || e.stopped[u.String()] {
				continue
			}
			if err := e.trial(ctx, round, i, u); err != nil {
				return "", err
			}
		}
		if counted < st.Rounds || round < e.lastStored {
			// A resumed run decides whether to stop only once it has
			// finished the round it was interrupted in.
			continue
		}
		if st.UntilCI <= 0 {
			return ReasonRounds, nil
		}
		if ctx.Err() != nil {
			// Cancelled after the round's last trial: the precision check
			// would fail on the cancelled context.
			return "", ErrInterrupted
		}
		hw, ok, err := e.precision(ctx)
		if err != nil {
			return "", err
		}
		if ok {
			prog.Logf("after %d counted rounds the widest CI half-width is %.2f%% (target %.3g%%)", counted, hw, st.UntilCI)
			if hw <= st.UntilCI {
				return ReasonPrecision, nil
			}
		}
		if counted >= st.MaxRounds {
			return ReasonMaxRounds, nil
		}
		if e.spent >= st.MaxTime {
			return ReasonMaxTime, nil
		}
	}
}

// refuse marks the units whose workload gives no comparable result on
// their platform's kind (workload.PlatformRefuser) as stopped before any
// trial, with a note saying why, and returns how many there are.
func (e *runner) refuse(ctx context.Context, units []study.Unit) (int, error) {
	n := 0
	for _, u := range units {
		why := workload.Refusal(e.instances[u.Workload.Name], u.Platform.Base, e.plats[u.Platform.Name])
		if why == nil {
			continue
		}
		n++
		e.stopped[u.String()] = true
		note := store.RunNote{Kind: store.NoteSkipped, Subject: u.Platform.Name,
			Text: fmt.Sprintf("%s: not run on this platform: %v", u.Workload.Name, why)}
		if err := e.cfg.Store.AddRunNote(context.WithoutCancel(ctx), e.run.ID, note); err != nil {
			return 0, err
		}
		e.cfg.Progress.Logf("%s does not run on %s: %v", u.Workload.Name, u.Platform.Name, why)
	}
	return n, nil
}

// trial runs unit u, the index-th of round's schedule, and stores it.
func (e *runner) trial(ctx context.Context, round, index int, u study.Unit) error {
	warm := round < e.st.Warmup
	name := fmt.Sprintf("r%02d-%s-%s", round, u.Workload.Name, u.Platform.Name)
	e.cfg.Progress.TrialStart(round, warm, u)
	start := time.Now()
	client := e.clients[u.Platform.Name]
	beside, err := e.beside(client)
	if err != nil {
		return err
	}
	local, err := e.localHost()
	if err != nil {
		return err
	}
	res, err := e.instances[u.Workload.Name].Run(ctx, workload.Trial{
		Run: e.run.ID, Name: name, Round: round, Platform: e.plats[u.Platform.Name], Duration: e.st.Trial,
		RawDir: e.rawDir, LogDir: e.env.LogDir, Log: progressWriter{e.cfg.Progress},
		Host: beside, Local: local, Client: client,
		Steps: e.stepLog(round, u), Series: e.seriesSink(round, u),
	})
	if client != nil {
		res.Where = append(res.Where, "client: "+client.Describe()+" ("+client.Detail()+")")
	}
	dur := time.Since(start)
	e.spent += dur
	if ctx.Err() != nil {
		// The trial in flight is not stored: a resume runs it again.
		return ErrInterrupted
	}
	t := store.Trial{RunID: e.run.ID, Round: round, Index: index, Warmup: warm, Workload: u.Workload.Name,
		Platform: u.Platform.Name, Started: start, Duration: dur, Commands: res.Commands, Where: res.Where,
		Notes: res.Notes, RawDir: e.rawDir}
	if err != nil {
		t.Error = err.Error()
	} else {
		t.Metrics, t.Error = storedMetrics(u.Workload.Kind, e.instances[u.Workload.Name].Metrics(), res)
	}
	// The store retries a failing write for a bounded time (its
	// WritePolicy); Ctrl-C ends that at once. A trial it still did not take
	// is kept in a file, which a resume stores first: no measured trial is
	// lost.
	if serr := e.cfg.Store.AddTrial(ctx, t); serr != nil {
		return e.keep(ctx, name, t, res.Layout, serr)
	}
	if ls, ok := e.cfg.Store.(store.LayoutStore); ok && res.Layout != nil {
		key := store.TrialKey{Run: e.run.ID, Round: round, Workload: u.Workload.Name, Platform: u.Platform.Name}
		if serr := ls.PutLayout(ctx, key, *res.Layout); serr != nil {
			return e.keep(ctx, name, t, res.Layout, serr)
		}
	}
	e.done[unitKey{round, u.Workload.Name, u.Platform.Name}] = true
	e.cfg.Progress.TrialEnd(t)
	if err := e.storeDegradations(ctx); err != nil {
		return err
	}
	if t.Error == "" {
		e.failures[u.String()] = 0
		return nil
	}
	if errors.Is(err, workload.ErrUnitStopped) {
		// The cell cannot give results here: the others go on without it.
		e.stopped[u.String()] = true
		reason := t.Error
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i] + " (the trial's error has more: nearnative show " + string(e.run.ID) + ")"
		}
		note := store.RunNote{Kind: store.NoteSkipped, Subject: u.Platform.Name,
			Text: fmt.Sprintf("%s: no trials after round %d: %s", u.Workload.Name, round, reason)}
		if err := e.cfg.Store.AddRunNote(context.WithoutCancel(ctx), e.run.ID, note); err != nil {
			return err
		}
		e.cfg.Progress.Logf("trial %s failed; %s stops on %s, the other cells go on: %s", name, u.Workload.Name, u.Platform.Name, t.Error)
		return nil
	}
	e.failures[u.String()]++
	// A platform's refusal of what the trial asked (a placement it cannot
	// deploy, say) that ends the run keeps its class, and exit code, as a
	// refusal before the first trial.
	abort := func(format string, args ...any) error {
		if errors.Is(err, platform.ErrUnavailable) {
			return platform.Unavailablef(format, args...)
		}
		return fmt.Errorf(format, args...)
	}
	switch {
	case warm:
		return abort("trial %s failed in the warm-up round, so the study cannot run as configured: %s", name, t.Error)
	case e.failures[u.String()] >= maxConsecutiveFailures:
		return abort("%s failed %d times in a row, last: %s", u, maxConsecutiveFailures, t.Error)
	}
	e.cfg.Progress.Logf("trial %s failed (recorded, the run goes on): %s", name, t.Error)
	return nil
}

// beside returns the platform of the topology roles that run beside the
// driver on client host c (on this machine's loopback when c is nil),
// opening it on first use; nil without cfg.Host.
func (e *runner) beside(c host.Host) (workload.HostPlatform, error) {
	if e.cfg.Host == nil {
		return nil, nil
	}
	c = host.Or(c)
	if p, ok := e.hosts[c]; ok {
		return p, nil
	}
	env := e.env
	env.Client = c
	p, err := e.cfg.Host(env)
	if err != nil {
		return nil, fmt.Errorf("the host beside the driver (%s): %w", c.Describe(), err)
	}
	e.hosts[c] = p
	return p, nil
}

// localHost returns this machine's native platform on loopback, opening
// it on first use; nil without cfg.Local.
func (e *runner) localHost() (workload.HostPlatform, error) {
	if e.cfg.Local == nil || e.local != nil {
		return e.local, nil
	}
	env := e.env
	env.Client = nil
	p, err := e.cfg.Local(env)
	if err != nil {
		return nil, fmt.Errorf("this machine's native platform (data templates): %w", err)
	}
	e.local = p
	return p, nil
}

// keep writes trial t, which the store did not take (serr), to the run's
// spool directory and returns the error that stops the run: ErrInterrupted
// when the run was being interrupted, else a *StoreError saying where the
// trial is and how to store it. When even the file cannot be written, the
// trial goes to the log as one line of JSON.
func (e *runner) keep(ctx context.Context, name string, t store.Trial, l *placement.Record, serr error) error {
	e.storeFailed = true
	path, err := spool(e.cfg.Dir, t, l)
	if err != nil {
		b, _ := encodeSpooled(t, l)
		e.cfg.Progress.Logf("trial %s: not stored (%v) and not kept in a file (%v); its data: %s", name, serr, err, b)
		path = ""
	}
	if ctx.Err() != nil {
		if path != "" {
			e.cfg.Progress.Logf("trial %s is kept in %s (interrupted while it was stored): --resume stores it", name, path)
		}
		return ErrInterrupted
	}
	return &StoreError{Run: e.run.ID, Trial: name, Err: serr, Kept: path}
}

// storedMetrics turns a trial's result into the metrics to store, in the
// order the workload declares them, with what each metric is. A declared
// metric without a value (unless the result names it Unmeasured), or a
// percentile without the number of samples behind it, fails the trial (the
// returned error text).
func storedMetrics(kind string, declared []workload.Metric, res workload.Result) ([]store.Metric, string) {
	var out []store.Metric
	for _, m := range declared {
		v, ok := res.Values[m.Name]
		if !ok && slices.Contains(res.Unmeasured, m.Name) {
			continue
		}
		if !ok {
			return nil, fmt.Sprintf("workload %s did not report metric %s", kind, m.Name)
		}
		sm := store.Metric{Name: m.Name, Unit: m.Unit, HigherIsBetter: m.HigherIsBetter, Value: v,
			Diagnostic: m.Diagnostic, Quantile: m.Quantile, Samples: res.Samples[m.Name]}
		if m.Quantile > 0 && sm.Samples <= 0 {
			return nil, fmt.Sprintf("workload %s did not report how many observations its percentile %s came from", kind, m.Name)
		}
		out = append(out, sm)
	}
	return out, ""
}

// storeDegradations stores the degraded modes the platforms report that are
// not stored yet, so that every report of the run names them.
func (e *runner) storeDegradations(ctx context.Context) error {
	for _, p := range e.st.Platforms {
		d, ok := e.plats[p.Name].(platform.Degrader)
		if !ok {
			continue
		}
		for _, text := range d.Degradations() {
			k := p.Name + "\x00" + text
			if e.degraded[k] {
				continue
			}
			if err := e.cfg.Store.AddRunNote(context.WithoutCancel(ctx), e.run.ID, store.RunNote{Kind: store.NoteDegraded, Subject: p.Name, Text: text}); err != nil {
				return fmt.Errorf("storing a degraded mode of %s: %w", p.Name, err)
			}
			e.degraded[k] = true
			e.cfg.Progress.Logf("%s runs degraded: %s", p.Name, text)
		}
	}
	return nil
}

// precision returns the widest CI half-width over every ratio so far; ok is
// false while some ratio cannot be judged yet (fewer pairs than the study's
// min_pairs).
func (e *runner) precision(ctx context.Context) (float64, bool, error) {
	trials, err := e.cfg.Store.Trials(ctx, e.run.ID)
	if err != nil {
		return 0, false, err
	}
	diagnostic := map[[2]string]bool{}
	for name, in := range e.instances {
		for _, m := range in.Metrics() {
			diagnostic[[2]string{name, m.Name}] = m.Diagnostic
		}
	}
	res := analysis.Analyse(trials, analysis.Options{Baseline: e.st.Baseline, Stats: stats.Options{Seed: uint64(e.st.Seed)},
		MinPairs: e.st.MinPairs, OutsideCPUMax: e.st.OutsideCPUMax,
		Diagnostic: func(w, m string) bool { return diagnostic[[2]string{w, m}] }})
	named := map[string]bool{}
	for _, m := range e.st.UntilCIMetrics {
		named[m] = true
	}
	hw, ok := res.MaxHalfWidth(func(t analysis.Table) bool { return len(named) == 0 || named[t.Metric] })
	return hw, ok, nil
}

// checkCIMetrics rejects until_ci_metrics that no workload of the study
// reports, before anything starts.
func checkCIMetrics(st *study.Study, instances map[string]workload.Instance) error {
	known := map[string]bool{}
	diagnostic := map[string]bool{}
	var names []string
	for _, in := range instances {
		for _, m := range in.Metrics() {
			if m.Diagnostic {
				diagnostic[m.Name] = true
				continue
			}
			if !known[m.Name] {
				known[m.Name] = true
				names = append(names, m.Name)
			}
		}
	}
	sort.Strings(names)
	for _, m := range st.UntilCIMetrics {
		switch {
		case known[m]:
		case diagnostic[m]:
			return fmt.Errorf("until_ci_metrics: %q is a diagnostic metric, which gets no verdict and no interval to narrow (results: %s)", m, strings.Join(names, ", "))
		default:
			return fmt.Errorf("until_ci_metrics: no workload of study %s reports %q (metrics: %s)", st.Name, m, strings.Join(names, ", "))
		}
	}
	return nil
}

type progressWriter struct{ p Progress }

func (w progressWriter) Write(b []byte) (int, error) {
	w.p.Logf("%s", string(b))
	return len(b), nil
}
