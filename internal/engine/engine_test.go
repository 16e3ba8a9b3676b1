package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload"
)

// ---------------------------------------------------------------------------
// Fakes

// key names one trial: a workload on a platform in a round.
type key struct {
	Round              int
	Workload, Platform string
}

func (k key) String() string { return fmt.Sprintf("r%d %s/%s", k.Round, k.Workload, k.Platform) }

// behaviour configures the fake workload; every hook is optional.
type behaviour struct {
	// base is the mean of a metric on a platform; default 100 on native,
	// 80 elsewhere.
	base func(k key, metric string) float64
	// cv is the coefficient of variation of a metric's deterministic noise.
	cv func(metric string) float64
	// fail makes the trial return an error.
	fail func(k key) bool
	// stop makes the trial return an error marked workload.StopUnit.
	stop func(k key) bool
	// unavailable makes the trial return a platform's refusal
	// (platform.ErrUnavailable: a placement it cannot deploy).
	unavailable func(k key) bool
	// refuse is the instance's answer to RefusePlatform (its label, the
	// platform's kind).
	refuse func(label, base string) error
	// omit names a metric the trial leaves out of its Result.
	omit func(k key) string
	// block makes the trial wait until its context ends.
	block func(k key) bool
	// sleep is how long the trial takes.
	sleep func(k key) time.Duration
}

// fakeKind is a workload.Workload whose instances run nothing.
type fakeKind struct {
	metrics []workload.Metric

	mu      sync.Mutex
	b       behaviour
	calls   []key         // trials run, in order
	blocked chan struct{} // receives once per blocking trial
}

func newFakeKind(metrics ...workload.Metric) *fakeKind {
	if len(metrics) == 0 {
		metrics = []workload.Metric{{Name: "ops", Unit: "ops/s", HigherIsBetter: true}}
	}
	return &fakeKind{metrics: metrics, blocked: make(chan struct{}, 16)}
}

func (f *fakeKind) Name() string        { return "fake" }
func (f *fakeKind) Description() string { return "fake workload for engine tests" }
func (f *fakeKind) Params() []workload.Param {
	return []workload.Param{{Name: "label", Type: workload.String, Default: "x"}}
}
func (f *fakeKind) New(v workload.Values) (workload.Instance, error) {
	return &fakeInstance{kind: f, label: v.String("label")}, nil
}

func (f *fakeKind) setBehaviour(b behaviour) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = b
}

// takeCalls returns the trials run so far and forgets them.
func (f *fakeKind) takeCalls() []key {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

type fakeInstance struct {
	kind  *fakeKind
	label string
}

func (in *fakeInstance) Metrics() []workload.Metric { return in.kind.metrics }

// RefusePlatform implements workload.PlatformRefuser.
func (in *fakeInstance) RefusePlatform(base string, _ platform.Platform) error {
	in.kind.mu.Lock()
	defer in.kind.mu.Unlock()
	if in.kind.b.refuse == nil {
		return nil
	}
	return in.kind.b.refuse(in.label, base)
}

func (in *fakeInstance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	k, err := parseTrialName(t.Name)
	if err != nil {
		return workload.Result{}, err
	}
	if t.Platform == nil || t.Platform.Name() != k.Platform {
		return workload.Result{}, fmt.Errorf("trial %s got platform %v", t.Name, t.Platform)
	}
	f := in.kind
	f.mu.Lock()
	f.calls = append(f.calls, k)
	b := f.b
	f.mu.Unlock()

	srv, err := t.Platform.Start(ctx, t.Name, platform.Spec{Name: "fake", Command: func(platform.Listen) []string { return []string{"fake"} }})
	if err != nil {
		return workload.Result{}, err
	}
	defer srv.Stop(context.WithoutCancel(ctx))
	fmt.Fprintf(t.Log, "fake trial %s\n", t.Name)

	if b.sleep != nil {
		time.Sleep(b.sleep(k))
	}
	if b.block != nil && b.block(k) {
		f.blocked <- struct{}{}
		<-ctx.Done()
		return workload.Result{}, ctx.Err()
	}
	if b.fail != nil && b.fail(k) {
		return workload.Result{}, fmt.Errorf("fake failure in %s", t.Name)
	}
	if b.unavailable != nil && b.unavailable(k) {
		return workload.Result{}, platform.Unavailablef("fake placement refused in %s: place it elsewhere", t.Name)
	}
	if b.stop != nil && b.stop(k) {
		return workload.Result{}, workload.StopUnit(fmt.Errorf("fake servers did not start in %s\nlast log lines: boom", t.Name))
	}
	res := workload.Result{Values: map[string]float64{}, Commands: srv.Command(), Where: []string{srv.Describe()}}
	omit := ""
	if b.omit != nil {
		omit = b.omit(k)
	}
	for _, m := range f.metrics {
		if m.Name == omit {
			continue
		}
		base := 80.0
		if k.Platform == platform.Native {
			base = 100
		}
		if b.base != nil {
			base = b.base(k, m.Name)
		}
		cv := 0.002
		if b.cv != nil {
			cv = b.cv(m.Name)
		}
		res.Values[m.Name] = base * math.Max(0.05, 1+cv*noise(k, m.Name))
	}
	return res, nil
}

// parseTrialName reads "r02-wl-plat" as the engine names trials; test
// workload and platform names contain no '-'.
func parseTrialName(name string) (key, error) {
	parts := strings.Split(name, "-")
	var k key
	if len(parts) != 3 {
		return k, fmt.Errorf("unexpected trial name %q", name)
	}
	if _, err := fmt.Sscanf(parts[0], "r%d", &k.Round); err != nil {
		return k, fmt.Errorf("unexpected trial name %q: %v", name, err)
	}
	k.Workload, k.Platform = parts[1], parts[2]
	return k, nil
}

// noise is a standard normal number fixed by the trial and metric.
func noise(k key, metric string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s", k, metric)
	return rand.New(rand.NewPCG(h.Sum64(), 42)).NormFloat64()
}

// fakePlatform records the servers it is asked to start.
type fakePlatform struct {
	name string
	mu   sync.Mutex
	log  []string // trial names
}

func (p *fakePlatform) Name() string { return p.name }
func (p *fakePlatform) Start(_ context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.log = append(p.log, trial)
	p.mu.Unlock()
	return fakeServer{p.name}, nil
}

func (p *fakePlatform) starts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

type fakeServer struct{ plat string }

func (s fakeServer) Addr(string) string         { return "127.0.0.1:1" }
func (s fakeServer) Command() []string          { return []string{"fake-server"} }
func (s fakeServer) Describe() string           { return "fake server on " + s.plat }
func (s fakeServer) Stop(context.Context) error { return nil }

// fakePlatforms is an engine.PlatformOpener handing out fakePlatforms.
type fakePlatforms struct {
	mu     sync.Mutex
	byName map[string]*fakePlatform
	opens  int
	closes int
	env    platform.Env
}

func (fp *fakePlatforms) open(_ context.Context, env platform.Env, ps []study.Platform) (Opened, error) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.byName == nil {
		fp.byName = map[string]*fakePlatform{}
	}
	fp.opens++
	fp.env = env
	out := map[string]platform.Platform{}
	for _, p := range ps {
		if fp.byName[p.Name] == nil {
			fp.byName[p.Name] = &fakePlatform{name: p.Name}
		}
		out[p.Name] = fp.byName[p.Name]
	}
	return Opened{Platforms: out, Close: func() error {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		fp.closes++
		return nil
	}}, nil
}

// recorder is a Progress that records every call.
type recorder struct {
	mu       sync.Mutex
	begins   [][3]any // run, planned, done
	starts   []string // "r<round> w/p warm=<bool>"
	ends     []store.Trial
	logs     []string
	endCalls int
	// onTrialEnd, when set, is called after each TrialEnd is recorded.
	onTrialEnd func(t store.Trial)
}

func (r *recorder) Begin(run runid.ID, planned, done, rounds int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begins = append(r.begins, [3]any{run, planned, done})
}

func (r *recorder) TrialStart(round int, warmup bool, u study.Unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, fmt.Sprintf("r%d %s warm=%v", round, u, warmup))
}

func (r *recorder) TrialEnd(t store.Trial) {
	r.mu.Lock()
	r.ends = append(r.ends, t)
	hook := r.onTrialEnd
	r.mu.Unlock()
	if hook != nil {
		hook(t)
	}
}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) End() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endCalls++
}

func (r *recorder) logged(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Helpers

// env is one test's fakes, store and state directory.
type env struct {
	kind  *fakeKind
	reg   *workload.Registry
	plats *fakePlatforms
	prog  *recorder
	store store.Store
	dir   state.Dir
}

func newEnv(t *testing.T, metrics ...workload.Metric) *env {
	t.Helper()
	t.Setenv(state.EnvLockDir, t.TempDir()) // not the machine-wide lock directory
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kind := newFakeKind(metrics...)
	return &env{kind: kind, reg: workload.NewRegistry(kind), plats: &fakePlatforms{}, prog: &recorder{},
		store: s, dir: state.Dir{Root: t.TempDir()}}
}

// studyYAML is a study of the fake workload on native and a variant "slow".
func studyYAML(extra string, workloads ...string) string {
	if len(workloads) == 0 {
		workloads = []string{"wa", "wb"}
	}
	var b strings.Builder
	b.WriteString("name: engine-test\ntrial: 1s\n")
	if !strings.Contains(extra, "min_pairs:") {
		// The engine's mechanics need few rounds; verdicts are not at stake.
		b.WriteString("min_pairs: 2\n")
	}
	b.WriteString(extra)
	b.WriteString("platforms:\n  - native\n  - {name: slow, base: native, options: {cpus: 0.5}}\nworkloads:\n")
	for _, w := range workloads {
		fmt.Fprintf(&b, "  - {workload: fake, name: %s, params: {label: %s}}\n", w, w)
	}
	return b.String()
}

func (e *env) study(t *testing.T, yamlText string) *study.Study {
	t.Helper()
	st, err := study.Parse([]byte(yamlText), "test.yaml", e.reg)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, yamlText)
	}
	if err := st.Apply(study.Overrides{Seed: 7}, e.reg); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return st
}

func (e *env) config(st *study.Study, resume runid.ID) Config {
	return Config{Study: st, Registry: e.reg, Store: e.store, Dir: e.dir, Platforms: e.plats.open,
		Image: "fake-image", Env: []byte(`{"fake":true}`), Version: "test", Resume: resume, Progress: e.prog}
}

func (e *env) trials(t *testing.T, id runid.ID) []store.Trial {
	t.Helper()
	ts, err := e.store.Trials(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func (e *env) run(t *testing.T, id runid.ID) store.Run {
	t.Helper()
	r, err := e.store.Run(context.Background(), string(id))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func keyOf(tr store.Trial) key { return key{tr.Round, tr.Workload, tr.Platform} }

// checkUnique fails when a (round, workload, platform) is stored twice.
func checkUnique(t *testing.T, ts []store.Trial) map[key]store.Trial {
	t.Helper()
	byKey := map[key]store.Trial{}
	for _, tr := range ts {
		if _, dup := byKey[keyOf(tr)]; dup {
			t.Errorf("trial %s stored twice", keyOf(tr))
		}
		byKey[keyOf(tr)] = tr
	}
	return byKey
}

// scheduled returns the keys of a round in the order study.Schedule gives.
func scheduled(st *study.Study, round int) []key {
	var ks []key
	for _, u := range study.Schedule(st.Units(), round, st.Seed, st.Order) {
		ks = append(ks, key{round, u.Workload.Name, u.Platform.Name})
	}
	return ks
}

func unitNames(st *study.Study) []string {
	var names []string
	for _, u := range st.Units() {
		names = append(names, u.String())
	}
	return names
}

func countedRounds(ts []store.Trial) int {
	rounds := map[int]bool{}
	for _, tr := range ts {
		if !tr.Warmup {
			rounds[tr.Round] = true
		}
	}
	return len(rounds)
}

// ---------------------------------------------------------------------------
// Tests

func TestRunCounts(t *testing.T) {
	tests := []struct {
		name                      string
		extra                     string
		workloads                 []string
		warmup, rounds, wantTotal int
	}{
		{"2x2 warmup1 rounds3", "warmup: 1\nrounds: 3\n", []string{"wa", "wb"}, 1, 3, 16},
		{"1x2 warmup0 rounds2", "warmup: 0\nrounds: 2\n", []string{"wa"}, 0, 2, 4},
		{"3x2 warmup2 rounds4", "warmup: 2\nrounds: 4\n", []string{"wa", "wb", "wc"}, 2, 4, 36},
		{"2x2 fixed order", "warmup: 1\nrounds: 3\norder: fixed\n", []string{"wa", "wb"}, 1, 3, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := e.study(t, studyYAML(tc.extra, tc.workloads...))
			units := len(st.Units())
			out, err := Run(context.Background(), e.config(st, ""))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.Reason != ReasonRounds || out.Run.Status != store.StatusDone {
				t.Errorf("outcome: reason %q status %q, want %q done", out.Reason, out.Run.Status, ReasonRounds)
			}
			stored := e.run(t, out.Run.ID)
			if stored.Status != store.StatusDone || stored.StopReason != ReasonRounds || stored.Finished.IsZero() {
				t.Errorf("stored run: status %q reason %q finished %v", stored.Status, stored.StopReason, stored.Finished)
			}
			if stored.Seed != 7 || stored.Study != "engine-test" || stored.Baseline != platform.Native || stored.Version != "test" {
				t.Errorf("stored run: %+v", stored)
			}
			ts := e.trials(t, out.Run.ID)
			if len(ts) != tc.wantTotal {
				t.Fatalf("%d trials stored, want %d", len(ts), tc.wantTotal)
			}
			byKey := checkUnique(t, ts)
			warm := 0
			for _, tr := range ts {
				if tr.Warmup {
					warm++
				}
				if tr.Warmup != (tr.Round < tc.warmup) {
					t.Errorf("trial %s: Warmup=%v", keyOf(tr), tr.Warmup)
				}
				if tr.Error != "" || len(tr.Metrics) != 1 || tr.Metrics[0].Name != "ops" || !tr.Metrics[0].HigherIsBetter {
					t.Errorf("trial %s: error %q metrics %+v", keyOf(tr), tr.Error, tr.Metrics)
				}
				if len(tr.Where) != 1 || tr.Where[0] != "fake server on "+tr.Platform {
					t.Errorf("trial %s: Where %v", keyOf(tr), tr.Where)
				}
			}
			if want := tc.warmup * units; warm != want {
				t.Errorf("%d warm-up trials, want %d", warm, want)
			}
			for round := 0; round < tc.warmup+tc.rounds; round++ {
				for _, u := range st.Units() {
					if _, ok := byKey[key{round, u.Workload.Name, u.Platform.Name}]; !ok {
						t.Errorf("round %d: %s not stored", round, u)
					}
				}
			}

			// Each round runs every unit once, in study.Schedule's order,
			// and the store returns them in that order.
			calls := e.kind.takeCalls()
			if len(calls) != tc.wantTotal {
				t.Fatalf("%d trials run, want %d", len(calls), tc.wantTotal)
			}
			var orders [][]string
			for round := 0; round < tc.warmup+tc.rounds; round++ {
				want := scheduled(st, round)
				got := calls[round*units : (round+1)*units]
				if !reflect.DeepEqual(got, want) {
					t.Errorf("round %d ran %v, want study.Schedule's %v", round, got, want)
				}
				var storedOrder []key
				for _, tr := range ts {
					if tr.Round == round {
						storedOrder = append(storedOrder, keyOf(tr))
					}
				}
				if !reflect.DeepEqual(storedOrder, want) {
					t.Errorf("round %d stored in order %v, want %v", round, storedOrder, want)
				}
				var names []string
				for _, k := range got {
					names = append(names, k.Workload+"/"+k.Platform)
				}
				orders = append(orders, names)
			}
			differs := false
			for _, o := range orders[1:] {
				if !slices.Equal(o, orders[0]) {
					differs = true
				}
			}
			if st.Order == study.OrderRandom && !differs {
				t.Errorf("every round ran in the same order %v", orders[0])
			}
			if st.Order == study.OrderFixed && differs {
				t.Errorf("fixed order changed across rounds: %v", orders)
			}

			// Platforms: opened and closed once, one server per trial.
			if e.plats.opens != 1 || e.plats.closes != 1 {
				t.Errorf("platforms opened %d closed %d times", e.plats.opens, e.plats.closes)
			}
			if e.plats.env.Run != out.Run.ID || e.plats.env.Image != "fake-image" || e.plats.env.LogDir != filepath.Join(e.dir.RunDir(out.Run.ID), "logs") {
				t.Errorf("platform env %+v", e.plats.env)
			}
			for _, p := range st.Platforms {
				if n := len(e.plats.byName[p.Name].starts()); n != tc.wantTotal/len(st.Platforms) {
					t.Errorf("platform %s started %d servers, want %d", p.Name, n, tc.wantTotal/len(st.Platforms))
				}
			}

			// Progress.
			p := e.prog
			if len(p.begins) != 1 || p.begins[0] != [3]any{out.Run.ID, tc.wantTotal, 0} {
				t.Errorf("Begin calls %v", p.begins)
			}
			if len(p.starts) != tc.wantTotal || len(p.ends) != tc.wantTotal || p.endCalls != 1 {
				t.Errorf("progress: %d TrialStart, %d TrialEnd, %d End", len(p.starts), len(p.ends), p.endCalls)
			}
			if want := fmt.Sprintf("r0 %s/%s warm=%v", calls[0].Workload, calls[0].Platform, tc.warmup > 0); len(p.starts) > 0 && p.starts[0] != want {
				t.Errorf("first TrialStart %q, want %q", p.starts[0], want)
			}
			if !p.logged("fake trial ") {
				t.Errorf("the workload's log lines did not reach Progress.Logf")
			}
			// The lock is released.
			if e.dir.Alive(out.Run.ID) {
				t.Errorf("run still marked alive after Run returned")
			}
		})
	}
}

func TestRunFailures(t *testing.T) {
	slowA := func(rounds ...int) func(k key) bool {
		return func(k key) bool {
			return k.Workload == "wa" && k.Platform == "slow" && slices.Contains(rounds, k.Round)
		}
	}
	tests := []struct {
		name        string
		extra       string
		fail        func(k key) bool
		unavailable func(k key) bool
		omit        func(k key) string
		wantOK      bool
		// wantErr are substrings of the run's error.
		wantErr []string
		// wantFailed are the trials stored with an Error, and the substrings
		// it must hold.
		wantFailed map[key][]string
		// lastRound is the highest round with a stored trial.
		lastRound int
		total     int // trials stored; -1: don't check
	}{
		{
			name: "warm-up failure aborts", extra: "warmup: 1\nrounds: 3\n", fail: slowA(0),
			wantErr:    []string{"r00-wa-slow", "warm-up", "fake failure"},
			wantFailed: map[key][]string{{0, "wa", "slow"}: {"fake failure in r00-wa-slow"}},
			lastRound:  0, total: -1,
		},
		{
			// A platform's refusal (exit 3, as before the first trial).
			name: "warm-up refusal aborts as unavailable", extra: "warmup: 1\nrounds: 3\n", unavailable: slowA(0),
			wantErr:    []string{"r00-wa-slow", "warm-up", "fake placement refused", "place it elsewhere"},
			wantFailed: map[key][]string{{0, "wa", "slow"}: {"fake placement refused in r00-wa-slow"}},
			lastRound:  0, total: -1,
		},
		{
			name: "single counted failure is recorded", extra: "warmup: 1\nrounds: 3\n", fail: slowA(2), wantOK: true,
			wantFailed: map[key][]string{{2, "wa", "slow"}: {"fake failure in r02-wa-slow"}},
			lastRound:  3, total: 16,
		},
		{
			name: "three consecutive failures abort", extra: "warmup: 1\nrounds: 5\n", fail: slowA(1, 2, 3, 4, 5),
			wantErr: []string{"wa/slow", "3 times in a row", "fake failure in r03-wa-slow"},
			wantFailed: map[key][]string{
				{1, "wa", "slow"}: {"fake failure"}, {2, "wa", "slow"}: {"fake failure"}, {3, "wa", "slow"}: {"fake failure"}},
			lastRound: 3, total: -1,
		},
		{
			name: "three consecutive refusals abort as unavailable", extra: "warmup: 0\nrounds: 5\nmin_pairs: 2\n", unavailable: slowA(0, 1, 2),
			wantErr:    []string{"3 times in a row", "fake placement refused"},
			wantFailed: map[key][]string{{0, "wa", "slow"}: {"fake placement refused"}, {1, "wa", "slow"}: {"fake placement refused"}, {2, "wa", "slow"}: {"fake placement refused"}},
			lastRound:  2, total: -1,
		},
		{
			name: "non-consecutive failures go on", extra: "warmup: 1\nrounds: 5\n", fail: slowA(1, 2, 4, 5), wantOK: true,
			wantFailed: map[key][]string{
				{1, "wa", "slow"}: {"fake failure"}, {2, "wa", "slow"}: {"fake failure"},
				{4, "wa", "slow"}: {"fake failure"}, {5, "wa", "slow"}: {"fake failure"}},
			lastRound: 5, total: 24,
		},
		{
			name: "failures of different units are not consecutive", extra: "warmup: 1\nrounds: 3\n", wantOK: true,
			fail: func(k key) bool {
				return k.Round >= 1 && k.Platform == "slow" && (k.Workload == "wa") == (k.Round%2 == 1)
			},
			wantFailed: map[key][]string{
				{1, "wa", "slow"}: {"fake"}, {2, "wb", "slow"}: {"fake"}, {3, "wa", "slow"}: {"fake"}},
			lastRound: 3, total: 16,
		},
		{
			name: "missing metric fails the trial", extra: "warmup: 1\nrounds: 3\n", wantOK: true,
			omit: func(k key) string {
				if k == (key{2, "wb", "slow"}) {
					return "lat"
				}
				return ""
			},
			wantFailed: map[key][]string{{2, "wb", "slow"}: {"did not report metric lat"}},
			lastRound:  3, total: 16,
		},
		{
			name: "missing metric in warm-up aborts", extra: "warmup: 1\nrounds: 3\n",
			omit: func(k key) string {
				if k.Round == 0 && k.Platform == "native" {
					return "ops"
				}
				return ""
			},
			wantErr:    []string{"warm-up", "did not report metric ops"},
			wantFailed: map[key][]string{}, // checked below: the first native warm-up trial
			lastRound:  0, total: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t,
				workload.Metric{Name: "ops", Unit: "ops/s", HigherIsBetter: true},
				workload.Metric{Name: "lat", Unit: "ms"})
			e.kind.setBehaviour(behaviour{fail: tc.fail, unavailable: tc.unavailable, omit: tc.omit})
			st := e.study(t, studyYAML(tc.extra))
			out, err := Run(context.Background(), e.config(st, ""))
			stored := e.run(t, out.Run.ID)
			if tc.wantOK {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if stored.Status != store.StatusDone {
					t.Errorf("status %q, want done", stored.Status)
				}
				if !e.prog.logged("failed (recorded, the run goes on)") {
					t.Errorf("no log line about the recorded failure: %q", e.prog.logs)
				}
			} else {
				if err == nil {
					t.Fatal("Run succeeded, want an error")
				}
				if errors.Is(err, ErrInterrupted) {
					t.Errorf("error %v is ErrInterrupted", err)
				}
				if errors.Is(err, platform.ErrUnavailable) != (tc.unavailable != nil) {
					t.Errorf("error %v: matches platform.ErrUnavailable %v, want %v", err, errors.Is(err, platform.ErrUnavailable), tc.unavailable != nil)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if stored.Status != store.StatusFailed || stored.StopReason != err.Error() || out.Run.Status != store.StatusFailed {
					t.Errorf("stored status %q reason %q (outcome %q), want failed with %q", stored.Status, stored.StopReason, out.Run.Status, err)
				}
			}
			ts := e.trials(t, out.Run.ID)
			checkUnique(t, ts)
			if tc.total >= 0 && len(ts) != tc.total {
				t.Errorf("%d trials stored, want %d", len(ts), tc.total)
			}
			failed := map[key]string{}
			last := -1
			for _, tr := range ts {
				last = max(last, tr.Round)
				if tr.Error != "" {
					failed[keyOf(tr)] = tr.Error
					if len(tr.Metrics) == len(e.kind.metrics) {
						t.Errorf("failed trial %s has all metrics %+v", keyOf(tr), tr.Metrics)
					}
				}
			}
			if last != tc.lastRound {
				t.Errorf("last stored round %d, want %d", last, tc.lastRound)
			}
			wantFailed := tc.wantFailed
			if tc.name == "missing metric in warm-up aborts" {
				first := scheduled(st, 0)
				for _, k := range first {
					if k.Platform == "native" {
						wantFailed = map[key][]string{k: {"workload fake did not report metric ops"}}
						break
					}
				}
			}
			if len(failed) != len(wantFailed) {
				t.Errorf("failed trials %v, want %v", failed, wantFailed)
			}
			for k, subs := range wantFailed {
				msg, ok := failed[k]
				if !ok {
					t.Errorf("trial %s not stored as failed", k)
				}
				for _, s := range subs {
					if !strings.Contains(msg, s) {
						t.Errorf("trial %s error %q does not mention %q", k, msg, s)
					}
				}
			}
			// Stopping right after the failing trial: nothing after it.
			if !tc.wantOK {
				lastTrial := ts[len(ts)-1]
				if lastTrial.Error == "" {
					t.Errorf("the last stored trial %s did not fail: the run went on after the abort", keyOf(lastTrial))
				}
			}
		})
	}
}

// TestStoppedUnit: a trial whose error says its cell cannot give results
// (workload.StopUnit), even in the warm-up round, ends that cell alone: the
// run goes on with the others, and a run note says which cell stopped and
// why.
func TestStoppedUnit(t *testing.T) {
	e := newEnv(t)
	e.kind.setBehaviour(behaviour{stop: func(k key) bool { return k.Workload == "wa" && k.Platform == "slow" }})
	st := e.study(t, studyYAML("warmup: 1\nrounds: 3\n"))
	out, err := Run(context.Background(), e.config(st, ""))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := e.run(t, out.Run.ID); r.Status != store.StatusDone {
		t.Errorf("status %q, want done", r.Status)
	}
	ts := e.trials(t, out.Run.ID)
	byKey := checkUnique(t, ts)
	if len(ts) != 13 { // 4 cells x 4 rounds, less wa/slow's rounds 1-3
		t.Errorf("%d trials stored, want 13", len(ts))
	}
	if tr, ok := byKey[key{0, "wa", "slow"}]; !ok || !strings.Contains(tr.Error, "fake servers did not start") {
		t.Errorf("the stopping trial: %+v", tr)
	}
	for r := 1; r <= 3; r++ {
		if _, ok := byKey[key{r, "wa", "slow"}]; ok {
			t.Errorf("wa/slow ran in round %d after it stopped", r)
		}
		if tr, ok := byKey[key{r, "wb", "slow"}]; !ok || tr.Error != "" {
			t.Errorf("wb/slow in round %d: %+v", r, tr)
		}
	}
	h, err := e.store.RunNotes(context.Background(), out.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range h {
		if n.Kind == store.NoteSkipped && n.Subject == "slow" && strings.Contains(n.Text, "wa: no trials after round 0: fake servers did not start") &&
			!strings.Contains(n.Text, "boom") {
			found = true
		}
	}
	if !found {
		t.Errorf("no one-line run note about the stopped cell: %+v", h)
	}
	if !e.prog.logged("wa stops on slow, the other cells go on") {
		t.Errorf("no log line about the stopped cell: %q", e.prog.logs)
	}
}

// TestRefusedUnit: a workload that refuses a platform's kind gets no trial
// there, the run says why, and the rest runs.
func TestRefusedUnit(t *testing.T) {
	e := newEnv(t)
	e.kind.setBehaviour(behaviour{refuse: func(label, base string) error {
		if label == "wa" && base == platform.DockerRunscBridge {
			return errors.New("no direct I/O under gVisor")
		}
		return nil
	}})
	yaml := strings.Replace(studyYAML("warmup: 1\nrounds: 2\n"), "  - {name: slow, base: native, options: {cpus: 0.5}}\n",
		"  - {name: sandbox, base: docker-runsc-bridge}\n", 1)
	st := e.study(t, yaml)
	out, err := Run(context.Background(), e.config(st, ""))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts := e.trials(t, out.Run.ID)
	byKey := checkUnique(t, ts)
	if len(ts) != 9 { // 4 cells x 3 rounds, less wa/sandbox's
		t.Errorf("%d trials stored, want 9", len(ts))
	}
	for r := 0; r < 3; r++ {
		if _, ok := byKey[key{r, "wa", "sandbox"}]; ok {
			t.Errorf("wa ran on sandbox in round %d", r)
		}
		if tr, ok := byKey[key{r, "wb", "sandbox"}]; !ok || tr.Error != "" {
			t.Errorf("wb/sandbox in round %d: %+v", r, tr)
		}
	}
	notes, err := e.store.RunNotes(context.Background(), out.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range notes {
		found = found || (n.Kind == store.NoteSkipped && n.Subject == "sandbox" && n.Text == "wa: not run on this platform: no direct I/O under gVisor")
	}
	if !found {
		t.Errorf("no run note about the refused cell: %+v", notes)
	}
	if !e.prog.logged("wa does not run on sandbox: no direct I/O under gVisor") {
		t.Errorf("no log line about the refused cell: %q", e.prog.logs)
	}
	if d := Estimate(st, map[string]workload.Instance{"wa": &fakeInstance{kind: e.kind, label: "wa"}, "wb": &fakeInstance{kind: e.kind, label: "wb"}}, 1); d != 3*(st.Trial)+2*startup(platform.Native)+startup(platform.DockerRunscBridge) {
		t.Errorf("Estimate counts %v for one round, want the three cells that run", d)
	}
}

func TestInterruptAndResume(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		// blockAt is the position in round's schedule of the trial that
		// blocks until the context is cancelled.
		round, blockAt int
	}{
		{"round 2 middle", "warmup: 1\nrounds: 3\n", 2, 2},
		{"round 2 first", "warmup: 1\nrounds: 3\n", 2, 0},
		{"warm-up round", "warmup: 1\nrounds: 3\n", 0, 3},
		{"until-ci round 4", "warmup: 1\nrounds: 3\nuntil_ci: 1\nmax_rounds: 6\n", 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := e.study(t, studyYAML(tc.extra))
			units := len(st.Units())
			target := scheduled(st, tc.round)[tc.blockAt]
			if tc.name == "until-ci round 4" {
				// Too noisy for 1%: the run goes on to the round cap.
				e.kind.setBehaviour(behaviour{block: func(k key) bool { return k == target },
					cv: func(string) float64 { return 0.3 }})
			} else {
				e.kind.setBehaviour(behaviour{block: func(k key) bool { return k == target }})
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-e.kind.blocked
				cancel()
			}()
			out, err := Run(ctx, e.config(st, ""))
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("Run: %v, want ErrInterrupted", err)
			}
			id := out.Run.ID
			stored := e.run(t, id)
			if stored.Status != store.StatusInterrupted || !strings.Contains(stored.StopReason, "--resume "+string(id)) {
				t.Errorf("stored status %q reason %q", stored.Status, stored.StopReason)
			}
			if e.dir.Alive(id) {
				t.Errorf("interrupted run still marked alive")
			}
			before := e.trials(t, id)
			beforeByKey := checkUnique(t, before)
			if _, ok := beforeByKey[target]; ok {
				t.Errorf("the trial in flight (%s) was stored", target)
			}
			wantBefore := tc.round*units + tc.blockAt
			if len(before) != wantBefore {
				t.Errorf("%d trials stored before the interrupt, want %d", len(before), wantBefore)
			}
			firstCalls := e.kind.takeCalls()
			if len(firstCalls) != wantBefore+1 || firstCalls[len(firstCalls)-1] != target {
				t.Errorf("first run ran %v, want %d trials ending with %s", firstCalls, wantBefore+1, target)
			}

			// Resume from the stored spec alone.
			e.kind.setBehaviour(behaviour{cv: func(string) float64 {
				if tc.name == "until-ci round 4" {
					return 0.3
				}
				return 0.002
			}})
			e.prog = &recorder{}
			out2, err := Run(context.Background(), e.config(nil, id[:12]))
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if out2.Run.ID != id || out2.Run.Status != store.StatusDone {
				t.Errorf("resume outcome: run %s status %q", out2.Run.ID, out2.Run.Status)
			}
			if out2.Study == nil || out2.Study.Seed != 7 || !slices.Equal(unitNames(out2.Study), unitNames(st)) {
				t.Errorf("resumed study differs from the original")
			}
			planned := (st.Warmup + st.Rounds) * units
			if st.UntilCI > 0 {
				planned = (st.Warmup + st.MaxRounds) * units
				if out2.Reason != ReasonMaxRounds {
					t.Errorf("resume reason %q, want %q", out2.Reason, ReasonMaxRounds)
				}
			}
			if len(e.prog.begins) != 1 || e.prog.begins[0] != [3]any{id, planned, wantBefore} {
				t.Errorf("Begin on resume: %v, want planned %d done %d", e.prog.begins, planned, wantBefore)
			}
			after := e.trials(t, id)
			afterByKey := checkUnique(t, after)
			total := planned
			if len(after) != total {
				t.Errorf("%d trials after resume, want %d", len(after), total)
			}
			for k, tr := range beforeByKey {
				if !reflect.DeepEqual(afterByKey[k], tr) {
					t.Errorf("trial %s changed on resume:\n before %+v\n after  %+v", k, tr, afterByKey[k])
				}
			}
			// The resumed process ran exactly the missing trials, in
			// schedule order.
			var missing []key
			for round := 0; round < total/units; round++ {
				for _, k := range scheduled(st, round) {
					if _, ok := beforeByKey[k]; !ok {
						missing = append(missing, k)
					}
				}
			}
			if got := e.kind.takeCalls(); !reflect.DeepEqual(got, missing) {
				t.Errorf("resume ran %v\nwant the missing %v", got, missing)
			}
			if len(e.prog.ends) != len(missing) {
				t.Errorf("%d TrialEnd on resume, want %d", len(e.prog.ends), len(missing))
			}
			for _, tr := range after {
				if tr.Warmup != (tr.Round < st.Warmup) {
					t.Errorf("trial %s: Warmup=%v", keyOf(tr), tr.Warmup)
				}
			}
			// Index is the position in the round's schedule, the same
			// whether or not the round was interrupted.
			for round := 0; round < total/units; round++ {
				for i, k := range scheduled(st, round) {
					if afterByKey[k].Index != i {
						t.Errorf("trial %s: Index %d, want %d (its place in the round)", k, afterByKey[k].Index, i)
					}
				}
			}
			if r := e.run(t, id); r.Status != store.StatusDone {
				t.Errorf("stored status after resume %q", r.Status)
			}

			// A done run cannot be resumed.
			_, err = Run(context.Background(), e.config(nil, id))
			if err == nil || !strings.Contains(err.Error(), "already complete") {
				t.Errorf("resuming a done run: %v, want an 'already complete' error", err)
			}
			if n := len(e.trials(t, id)); n != total {
				t.Errorf("%d trials after resuming a done run, want %d", n, total)
			}
		})
	}
}

func TestResumeErrors(t *testing.T) {
	e := newEnv(t)
	st := e.study(t, studyYAML("warmup: 1\nrounds: 2\n"))
	ctx, cancel := context.WithCancel(context.Background())
	e.kind.setBehaviour(behaviour{block: func(k key) bool { return k.Round == 1 }})
	go func() { <-e.kind.blocked; cancel() }()
	out, err := Run(ctx, e.config(st, ""))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v", err)
	}
	e.kind.setBehaviour(behaviour{})
	e.kind.takeCalls()

	t.Run("unknown run", func(t *testing.T) {
		_, err := Run(context.Background(), e.config(nil, "nosuchrun"))
		if !errors.Is(err, store.ErrNoRun) {
			t.Errorf("resume of an unknown run: %v, want ErrNoRun", err)
		}
	})
	t.Run("run alive elsewhere", func(t *testing.T) {
		lock, err := e.dir.AcquireLock(out.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release()
		_, err = Run(context.Background(), e.config(nil, out.Run.ID))
		if err == nil || !strings.Contains(err.Error(), "still running") {
			t.Errorf("resume of a live run: %v, want a 'still running' error", err)
		}
		if calls := e.kind.takeCalls(); len(calls) != 0 {
			t.Errorf("ran %v while the run was alive elsewhere", calls)
		}
	})
	t.Run("resume after a failure", func(t *testing.T) {
		// A run that failed can be resumed: its failed trials stay stored.
		e.kind.setBehaviour(behaviour{fail: func(k key) bool { return k.Round == 1 && k.Platform == "slow" && k.Workload == "wa" }})
		if _, err := Run(context.Background(), e.config(nil, out.Run.ID)); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if n := len(e.trials(t, out.Run.ID)); n != 12 {
			t.Errorf("%d trials, want 12", n)
		}
	})
}

func TestUntilCI(t *testing.T) {
	ops := workload.Metric{Name: "ops", Unit: "ops/s", HigherIsBetter: true}
	cpu := workload.Metric{Name: "cpu", Unit: "%", Diagnostic: true}
	lat := workload.Metric{Name: "lat", Unit: "ms"}
	tests := []struct {
		name          string
		extra         string
		metrics       []workload.Metric
		cv            map[string]float64
		sleep         time.Duration
		wantReason    string
		wantCounted   int
		wantPrecision bool // a "widest CI half-width" line is logged
	}{
		{
			name: "low noise reaches precision at the minimum", extra: "rounds: 3\nuntil_ci: 5\nmax_rounds: 20\n",
			metrics: []workload.Metric{ops}, cv: map[string]float64{"ops": 0.002},
			wantReason: ReasonPrecision, wantCounted: 3, wantPrecision: true,
		},
		{
			name: "high noise hits the round cap", extra: "rounds: 3\nuntil_ci: 1\nmax_rounds: 6\n",
			metrics: []workload.Metric{ops}, cv: map[string]float64{"ops": 0.3},
			wantReason: ReasonMaxRounds, wantCounted: 6, wantPrecision: true,
		},
		{
			name: "noisy diagnostic metric is ignored", extra: "rounds: 3\nuntil_ci: 5\nmax_rounds: 20\n",
			metrics: []workload.Metric{ops, cpu}, cv: map[string]float64{"ops": 0.002, "cpu": 0.5},
			wantReason: ReasonPrecision, wantCounted: 3, wantPrecision: true,
		},
		{
			name: "noisy non-diagnostic metric counts", extra: "rounds: 3\nuntil_ci: 5\nmax_rounds: 5\n",
			metrics: []workload.Metric{ops, lat}, cv: map[string]float64{"ops": 0.002, "lat": 0.5},
			wantReason: ReasonMaxRounds, wantCounted: 5, wantPrecision: true,
		},
		{
			name: "time cap", extra: "rounds: 3\nuntil_ci: 1\nmax_rounds: 20\nmax_time: 10ms\n",
			metrics: []workload.Metric{ops}, cv: map[string]float64{"ops": 0.3}, sleep: time.Millisecond,
			wantReason: ReasonMaxTime, wantCounted: 3, wantPrecision: true,
		},
		{
			// studyYAML's min_pairs is 2; a study asking for 5 pairs must
			// not stop at 3 rounds however precise they are.
			name: "never stops below min_pairs", extra: "rounds: 3\nmin_pairs: 5\nuntil_ci: 5\nmax_rounds: 20\n",
			metrics: []workload.Metric{ops}, cv: map[string]float64{"ops": 0.002},
			wantReason: ReasonPrecision, wantCounted: 5, wantPrecision: true,
		},
		{
			name: "without until_ci the rounds are fixed", extra: "rounds: 3\n",
			metrics: []workload.Metric{ops}, cv: map[string]float64{"ops": 0.3},
			wantReason: ReasonRounds, wantCounted: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.metrics...)
			e.kind.setBehaviour(behaviour{
				cv:    func(m string) float64 { return tc.cv[m] },
				sleep: func(key) time.Duration { return tc.sleep },
			})
			st := e.study(t, studyYAML("warmup: 1\n"+tc.extra))
			out, err := Run(context.Background(), e.config(st, ""))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q; log:\n%s", out.Reason, tc.wantReason, strings.Join(e.prog.logs, "\n"))
			}
			if r := e.run(t, out.Run.ID); r.Status != store.StatusDone || r.StopReason != tc.wantReason {
				t.Errorf("stored status %q reason %q", r.Status, r.StopReason)
			}
			ts := e.trials(t, out.Run.ID)
			checkUnique(t, ts)
			if got := countedRounds(ts); got != tc.wantCounted {
				t.Errorf("%d counted rounds, want %d", got, tc.wantCounted)
			}
			if want := (1 + tc.wantCounted) * len(st.Units()); len(ts) != want {
				t.Errorf("%d trials, want %d", len(ts), want)
			}
			if got := e.prog.logged("widest CI half-width"); got != tc.wantPrecision {
				t.Errorf("precision logged: %v, want %v; log: %q", got, tc.wantPrecision, e.prog.logs)
			}
			if st.UntilCI > 0 {
				if want := (1 + st.MaxRounds) * len(st.Units()); e.prog.begins[0][1] != want {
					t.Errorf("planned %v, want %d (the round cap)", e.prog.begins[0][1], want)
				}
			}
		})
	}
}

// TestCancelBetweenRounds cancels the context right after a round's last
// trial is stored, before the --until-ci precision check reads the store:
// the run must be interrupted (and resumable), not failed.
func TestCancelBetweenRounds(t *testing.T) {
	e := newEnv(t)
	e.kind.setBehaviour(behaviour{cv: func(string) float64 { return 0.3 }})
	st := e.study(t, studyYAML("warmup: 1\nrounds: 3\nuntil_ci: 1\nmax_rounds: 5\n", "wa"))
	units := len(st.Units())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	e.prog.onTrialEnd = func(store.Trial) {
		n++
		if n == (1+3)*units { // the last trial of the third counted round
			cancel()
		}
	}
	out, err := Run(ctx, e.config(st, ""))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v, want ErrInterrupted", err)
	}
	if r := e.run(t, out.Run.ID); r.Status != store.StatusInterrupted {
		t.Errorf("status %q, want interrupted", r.Status)
	}
	e.prog = &recorder{}
	out, err = Run(context.Background(), e.config(nil, out.Run.ID))
	if err != nil || out.Reason != ReasonMaxRounds {
		t.Fatalf("resume: %v, reason %q", err, out.Reason)
	}
	if got := len(e.trials(t, out.Run.ID)); got != (1+5)*units {
		t.Errorf("%d trials, want %d", got, (1+5)*units)
	}
}

// TestResumeUntilCIFinishesRound resumes an --until-ci run interrupted in
// the middle of a round past the minimum. The stored trials of that partial
// round already make the precision good enough; the resumed run must still
// finish the round before stopping, not stop at an earlier round's check.
func TestResumeUntilCIFinishesRound(t *testing.T) {
	const warmup, minRounds = 1, 3
	// wb's ratio is noisy in counted rounds 1..4 and exact in round 5; wa's
	// is nearly exact. Order fixed: wb's trials come first in each round.
	wbRatio := map[int]float64{1: 1.06, 2: 0.94, 3: 1.05, 4: 0.95, 5: 1}
	base := func(k key, _ string) float64 {
		if k.Platform == platform.Native {
			return 100
		}
		if k.Workload == "wb" && k.Round >= 1 {
			return 80 * wbRatio[k.Round]
		}
		return 80
	}
	cv := func(string) float64 { return 0.0005 }
	// The widest half-width after n counted rounds, from the values the
	// fake produces.
	hwAfter := func(n int, seed int64) float64 {
		var ts []store.Trial
		for round := warmup; round < warmup+n; round++ {
			for _, w := range []string{"wb", "wa"} {
				for _, p := range []string{"native", "slow"} {
					k := key{round, w, p}
					v := base(k, "ops") * math.Max(0.05, 1+cv("ops")*noise(k, "ops"))
					ts = append(ts, store.Trial{Round: round, Workload: w, Platform: p,
						Metrics: []store.Metric{{Name: "ops", HigherIsBetter: true, Value: v}}})
				}
			}
		}
		res := analysis.Analyse(ts, analysis.Options{Baseline: platform.Native, Stats: stats.Options{Seed: uint64(seed)}, MinPairs: 2})
		hw, ok := res.MaxHalfWidth(nil)
		if !ok {
			t.Fatalf("no half-width after %d rounds", n)
		}
		return hw
	}
	hw3, hw4, hw5 := hwAfter(3, 7), hwAfter(4, 7), hwAfter(5, 7)
	if !(hw5 < hw4 && hw5 < hw3) {
		t.Fatalf("test data: half-widths %.3g, %.3g, %.3g after 3, 4, 5 rounds: want the 5th round to narrow them", hw3, hw4, hw5)
	}
	target := (hw5 + min(hw3, hw4)) / 2

	e := newEnv(t)
	e.kind.setBehaviour(behaviour{base: base, cv: cv, block: func(k key) bool { return k == key{5, "wa", "slow"} }})
	st := e.study(t, studyYAML(fmt.Sprintf("warmup: %d\nrounds: %d\norder: fixed\nuntil_ci: %.6f\nmax_rounds: 10\n", warmup, minRounds, target), "wb", "wa"))
	units := len(st.Units())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-e.kind.blocked; cancel() }()
	out, err := Run(ctx, e.config(st, ""))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v, want ErrInterrupted (half-widths %.3g %.3g %.3g, target %.3g)", err, hw3, hw4, hw5, target)
	}
	if got := len(e.trials(t, out.Run.ID)); got != 5*units+3 {
		t.Fatalf("%d trials before the interrupt, want %d", got, 5*units+3)
	}
	e.kind.takeCalls()
	e.kind.setBehaviour(behaviour{base: base, cv: cv})
	e.prog = &recorder{}
	out, err = Run(context.Background(), e.config(nil, out.Run.ID))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if out.Reason != ReasonPrecision {
		t.Errorf("reason %q, want %q", out.Reason, ReasonPrecision)
	}
	ts := e.trials(t, out.Run.ID)
	checkUnique(t, ts)
	if want := (warmup + 5) * units; len(ts) != want {
		t.Errorf("%d trials after resume, want %d: the interrupted round was left unfinished", len(ts), want)
	}
	if got := e.kind.takeCalls(); len(got) != 1 || got[0] != (key{5, "wa", "slow"}) {
		t.Errorf("resume ran %v, want only the missing r5 wa/slow", got)
	}
	if e.prog.logged("after 3 counted rounds") || e.prog.logged("after 4 counted rounds") {
		t.Errorf("resume re-checked the precision of rounds already checked: %q", e.prog.logs)
	}
}

// TestResumeKeepsTimeCap checks that max_time counts the trials of the run
// before it was interrupted, not only those of the resuming process.
func TestResumeKeepsTimeCap(t *testing.T) {
	e := newEnv(t)
	slowUntil := 2 // trials of rounds before this one take 20 ms
	e.kind.setBehaviour(behaviour{
		cv: func(string) float64 { return 0.3 },
		sleep: func(k key) time.Duration {
			return map[bool]time.Duration{true: 20 * time.Millisecond}[k.Round < slowUntil]
		},
		block: func(k key) bool { return k.Round == 2 },
	})
	st := e.study(t, studyYAML("warmup: 1\nrounds: 3\nuntil_ci: 1\nmax_rounds: 20\nmax_time: 50ms\n", "wa"))
	units := len(st.Units())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-e.kind.blocked; cancel() }()
	out, err := Run(ctx, e.config(st, ""))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v", err)
	}
	var spent time.Duration
	for _, tr := range e.trials(t, out.Run.ID) {
		spent += tr.Duration
	}
	if spent < 80*time.Millisecond {
		t.Fatalf("stored trials took %v, want >= 80ms", spent)
	}
	e.kind.setBehaviour(behaviour{cv: func(string) float64 { return 0.3 }})
	out, err = Run(context.Background(), e.config(nil, out.Run.ID))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if out.Reason != ReasonMaxTime {
		t.Errorf("reason %q, want %q: the %v spent before the interrupt already exceed max_time", out.Reason, ReasonMaxTime, spent)
	}
	if got := len(e.trials(t, out.Run.ID)); got != (1+3)*units {
		t.Errorf("%d trials, want %d (stop at the first check)", got, (1+3)*units)
	}
}

// TestUntilCIMetricsChecked: --until-ci may only aim at metrics that get a
// verdict; a diagnostic or unknown metric is bad input before anything runs.
func TestUntilCIMetricsChecked(t *testing.T) {
	for _, tt := range []struct{ metric, want string }{
		{"cpu", `"cpu" is a diagnostic metric`},
		{"nope", `no workload of study engine-test reports "nope"`},
	} {
		e := newEnv(t, workload.Metric{Name: "ops", HigherIsBetter: true}, workload.Metric{Name: "cpu", Diagnostic: true})
		st := e.study(t, studyYAML("rounds: 2\nuntil_ci: 5\nuntil_ci_metrics: ["+tt.metric+"]\n", "wa"))
		out, err := Run(context.Background(), e.config(st, ""))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) || out.Stored {
			t.Errorf("until_ci_metrics [%s]: %v (stored %v), want ErrConfig with %q and nothing stored", tt.metric, err, out.Stored, tt.want)
		}
	}
}

// TestStoredMetricAttributes: what a metric is (diagnostic, a percentile)
// and the samples behind it are stored with every trial; a percentile
// without its samples fails the trial, a metric missing unannounced fails
// it, one the result names Unmeasured is left out.
func TestStoredMetricAttributes(t *testing.T) {
	decl := []workload.Metric{
		{Name: "ops", HigherIsBetter: true},
		{Name: "p99", Quantile: 0.99},
		{Name: "cpu_pct", Diagnostic: true},
	}
	res := workload.Result{Values: map[string]float64{"ops": 1, "p99": 2, "cpu_pct": 3}, Samples: map[string]int64{"p99": 5000}}
	got, errText := storedMetrics("fake", decl, res)
	want := []store.Metric{
		{Name: "ops", HigherIsBetter: true, Value: 1},
		{Name: "p99", Value: 2, Quantile: 0.99, Samples: 5000},
		{Name: "cpu_pct", Value: 3, Diagnostic: true},
	}
	if errText != "" || !reflect.DeepEqual(got, want) {
		t.Errorf("storedMetrics = %+v, %q; want %+v", got, errText, want)
	}
	res.Samples = nil
	if _, errText := storedMetrics("fake", decl, res); !strings.Contains(errText, "did not report how many observations its percentile p99 came from") {
		t.Errorf("percentile without samples: %q", errText)
	}
	delete(res.Values, "ops")
	if _, errText := storedMetrics("fake", decl, res); !strings.Contains(errText, "did not report metric ops") {
		t.Errorf("missing metric: %q", errText)
	}
	// A metric the trial says it could not measure is left out, not failed.
	res = workload.Result{Values: map[string]float64{"ops": 1}, Unmeasured: []string{"p99", "cpu_pct"}}
	got, errText = storedMetrics("fake", decl, res)
	if errText != "" || len(got) != 1 || got[0].Name != "ops" {
		t.Errorf("unmeasured metrics: %+v, %q; want ops alone", got, errText)
	}
}

// degradingPlatform is a fakePlatform that falls back to a degraded mode
// once it has started a server.
type degradingPlatform struct{ *fakePlatform }

func (p degradingPlatform) Degradations() []string {
	if len(p.starts()) == 0 {
		return nil
	}
	return []string{"fell back to slow mode"}
}

// TestDegradationsStored: a degraded mode a platform reports during the run
// is stored once with the run, and said in the log.
func TestDegradationsStored(t *testing.T) {
	e := newEnv(t)
	st := e.study(t, studyYAML("rounds: 2\n", "wa"))
	cfg := e.config(st, "")
	cfg.Notes = []store.RunNote{{Kind: store.NoteWarning, Text: "environment: no governor"}}
	cfg.Platforms = func(ctx context.Context, env platform.Env, ps []study.Platform) (Opened, error) {
		o, err := e.plats.open(ctx, env, ps)
		o.Platforms["slow"] = degradingPlatform{o.Platforms["slow"].(*fakePlatform)}
		return o, err
	}
	out, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := e.store.RunNotes(context.Background(), out.Run.ID)
	want := []store.RunNote{{Kind: store.NoteWarning, Text: "environment: no governor"}, {Kind: store.NoteDegraded, Subject: "slow", Text: "fell back to slow mode"}}
	if err != nil || !reflect.DeepEqual(notes, want) {
		t.Errorf("notes %+v (%v), want %+v", notes, err, want)
	}
	if !e.prog.logged("slow runs degraded: fell back to slow mode") {
		t.Errorf("degradation not logged: %q", e.prog.logs)
	}
}

// TestOneRunAtATime: two runs started together measure one after the
// other: the second waits for the machine's measuring lock, says whom it
// waits for, and its trials all come after the first run's. With NoWait it
// fails at once with a *state.BusyError instead.
func TestOneRunAtATime(t *testing.T) {
	e := newEnv(t)
	st := e.study(t, studyYAML("rounds: 2\n", "wa"))
	e.kind.setBehaviour(behaviour{sleep: func(key) time.Duration { return 30 * time.Millisecond }})
	first := e.config(st, "")
	started := make(chan struct{})
	var once sync.Once
	first.Progress = &recorder{onTrialEnd: func(store.Trial) { once.Do(func() { close(started) }) }}
	type result struct {
		out Outcome
		err error
	}
	done1 := make(chan result, 1)
	go func() {
		out, err := Run(context.Background(), first)
		done1 <- result{out, err}
	}()
	<-started // the first run measures

	noWait := e.config(st, "")
	noWait.NoWait = true
	noWait.Progress = &recorder{}
	if _, err := Run(context.Background(), noWait); err == nil {
		t.Error("a --no-wait run started while another measured")
	} else if busy := (*state.BusyError)(nil); !errors.As(err, &busy) {
		t.Errorf("--no-wait run: %v, want a *state.BusyError", err)
	}

	second := e.config(st, "")
	rec2 := &recorder{}
	second.Progress = rec2
	out2, err := Run(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	r1 := <-done1
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	if !rec2.logged("waiting: the machine is being measured by run " + string(r1.out.Run.ID)) {
		t.Errorf("the second run did not say whom it waited for: %q", rec2.logs)
	}
	last1 := time.Time{}
	for _, tr := range e.trials(t, r1.out.Run.ID) {
		if end := tr.Started.Add(tr.Duration); end.After(last1) {
			last1 = end
		}
	}
	for _, tr := range e.trials(t, out2.Run.ID) {
		if tr.Started.Before(last1) {
			t.Errorf("second run's trial %s started at %v, before the first run's last trial ended at %v", keyOf(tr), tr.Started, last1)
		}
	}
}

// TestNewRunErrors covers problems found before anything is stored.
func TestNewRunErrors(t *testing.T) {
	e := newEnv(t)
	st := e.study(t, studyYAML("rounds: 2\n"))
	cfg := e.config(st, "")
	cfg.Platforms = func(context.Context, platform.Env, []study.Platform) (Opened, error) {
		return Opened{}, errors.New("docker is not running")
	}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "docker is not running") {
		t.Errorf("Run with failing platforms: %v", err)
	}
	runs, err := e.store.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Errorf("%d runs stored although the platforms did not open", len(runs))
	}
	cfg = e.config(st, "")
	cfg.Registry = workload.NewRegistry()
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `unknown kind "fake"`) {
		t.Errorf("Run with an empty registry: %v", err)
	}
}

// TestStudyBuiltInCode runs a study built with study.New rather than parsed.
func TestStudyBuiltInCode(t *testing.T) {
	e := newEnv(t)
	st := study.New("coded")
	st.Rounds, st.Warmup, st.MinPairs = 2, 0, 2
	st.Platforms = []study.Platform{{Name: platform.Native, Base: platform.Native}, {Name: "slow", Base: platform.Native}}
	st.Workloads = []study.Workload{{Name: "wa", Kind: "fake"}}
	if err := st.Apply(study.Overrides{Seed: 7}, e.reg); err != nil {
		t.Fatal(err)
	}
	out, err := Run(context.Background(), e.config(st, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.trials(t, out.Run.ID)); got != 4 {
		t.Errorf("%d trials, want 4", got)
	}
	r := e.run(t, out.Run.ID)
	back, err := study.Parse(r.Spec, "stored", e.reg)
	if err != nil {
		t.Fatalf("stored spec does not parse: %v\n%s", err, r.Spec)
	}
	if back.Seed != 7 || back.Rounds != 2 || back.Warmup != 0 || len(back.Platforms) != 2 {
		t.Errorf("stored spec %+v", back)
	}
}

// TestSkippedPlatforms: an opener that leaves a platform out (as
// --skip-unavailable does) takes it out of the study and of the stored spec;
// without the baseline nothing can be compared.
func TestSkippedPlatforms(t *testing.T) {
	tests := []struct {
		name    string
		skip    string
		wantErr string
	}{
		{name: "variant skipped", skip: "slow"},
		{name: "baseline skipped", skip: "native", wantErr: "baseline native cannot run here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := e.study(t, studyYAML("rounds: 2\n", "wa"))
			cfg := e.config(st, "")
			cfg.Platforms = func(ctx context.Context, env platform.Env, ps []study.Platform) (Opened, error) {
				o, err := e.plats.open(ctx, env, ps)
				delete(o.Platforms, tc.skip)
				o.Skipped = map[string]string{tc.skip: "no " + tc.skip + " here"}
				return o, err
			}
			out, err := Run(context.Background(), cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || out.Stored {
					t.Fatalf("err = %v, stored %v; want %q and nothing stored", err, out.Stored, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range e.trials(t, out.Run.ID) {
				if tr.Platform == tc.skip {
					t.Errorf("trial on skipped platform %s: %+v", tc.skip, tr)
				}
			}
			if n := len(e.trials(t, out.Run.ID)); n != 3 {
				t.Errorf("%d trials, want 3 (warm-up + 2 rounds on native)", n)
			}
			if spec := string(e.run(t, out.Run.ID).Spec); strings.Contains(spec, "name: slow") {
				t.Errorf("stored spec still names the skipped platform:\n%s", spec)
			}
			notes, err := e.store.RunNotes(context.Background(), out.Run.ID)
			want := []store.RunNote{{Kind: store.NoteSkipped, Subject: tc.skip, Text: "no " + tc.skip + " here"}}
			if err != nil || !reflect.DeepEqual(notes, want) {
				t.Errorf("run notes %+v (%v), want the skipped platform with its reason %+v", notes, err, want)
			}
		})
	}
}

// TestQuickLeftOutNoted: the platforms --quick leaves out (quick.platforms)
// are stored as skipped run notes, so every report says so.
func TestQuickLeftOutNoted(t *testing.T) {
	e := newEnv(t)
	st, err := study.Parse([]byte(studyYAML("rounds: 2\nwarmup: 0\nquick: {platforms: [native]}\n", "wa")), "test.yaml", e.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(study.Overrides{Seed: 7, Quick: true}, e.reg); err != nil {
		t.Fatal(err)
	}
	out, err := Run(context.Background(), e.config(st, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range e.trials(t, out.Run.ID) {
		if tr.Platform != "native" {
			t.Errorf("trial on %s under --quick", tr.Platform)
		}
	}
	notes, err := e.store.RunNotes(context.Background(), out.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].Kind != store.NoteSkipped || notes[0].Subject != "slow" || !strings.Contains(notes[0].Text, "left out by --quick") {
		t.Errorf("run notes %+v, want slow left out by --quick", notes)
	}
}
