package driver

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/qos"
	runidpkg "github.com/nearnative/nearnative/internal/runid"
)

// Timing tests run on shared 2-core machines: their tolerances are wide, and
// what they check is the rule (counted in steady only, no catch-up, latency
// from the intended start), not the machine's precision.

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s = %.4g, want %.4g ± %.0f%%", what, got, want, tol*100)
	}
}

// TestCycleCutByTheEnd: cycles that started in the steady phase and were
// still waiting when the run ended count as drawn, so that a short run's
// mean cycle is not biased towards the short cycles that happened to end
// in time (negative exponential, mean 100 ms, capped at 500 ms, in a
// steady phase of 300 ms with no ramp-down).
func TestCycleCutByTheEnd(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "1ms"},
		Mode: Closed, Users: 200, Seed: 3,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: NegExp, Mean: 100 * time.Millisecond}},
		Phases: Phases{RampUp: 100 * time.Millisecond, Steady: 300 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// The capped mean is 100 ms x (1 - e^-5) = 99.3 ms; some 600 cycles
	// give it a standard error of 4%. Without the cut cycles it came out
	// near 60 ms.
	within(t, "mean drawn cycle (ms) of the cycles started in steady", float64(r.Cycle.MeanTarget())/1e6, 99.3, 0.15)
	if r.Cycle.MeanAchieved() < r.Cycle.MeanTarget() {
		t.Errorf("achieved mean %v below the drawn %v", r.Cycle.MeanAchieved(), r.Cycle.MeanTarget())
	}
}

func TestClosedLoopCycleTime(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "2ms", "fail_every": "10"},
		Mode: Closed, Users: 20,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 20 * time.Millisecond}},
		Phases: Phases{RampUp: 200 * time.Millisecond, Steady: time.Second, RampDown: 100 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Ops["work"]
	if w == nil {
		t.Fatalf("no work recorded: %+v", r)
	}
	// The cycle runs from the previous start: it is the 20 ms target plus
	// the timer's wake-up lag (about a millisecond on an idle Go process,
	// more on a loaded machine), never the target plus the 2 ms operation.
	target, achieved := r.Cycle.MeanTarget(), r.Cycle.MeanAchieved()
	within(t, "mean target cycle (ms)", float64(target)/1e6, 20, 0.001)
	if achieved < target {
		t.Errorf("mean achieved cycle %v below the target %v", achieved, target)
	}
	total := float64(w.Count + w.Failed())
	within(t, "failures", float64(w.Failures["synthetic"]), total/10, 0.15)
	if !tooBusyForTiming(t, r) {
		if lagged := target + r.Lag.Mean(); math.Abs(float64(achieved-lagged)) > 0.05*float64(target) {
			t.Errorf("mean achieved cycle %v, want the target %v plus the mean wake-up lag %v", achieved, target, r.Lag.Mean())
		}
		// 20 users x 1 s / the achieved cycle: about 1000 operations
		// started in the steady phase, a tenth of them failed by design.
		within(t, "operations started in steady", total, 20*float64(time.Second)/float64(achieved), 0.1)
	}
	if w.Examples["synthetic"] != "synthetic: synthetic failure" {
		t.Errorf("example %q", w.Examples["synthetic"])
	}
	if p50 := w.Latency.Quantile(0.5); p50 < 2*time.Millisecond || p50 > 10*time.Millisecond {
		t.Errorf("p50 of a 2 ms operation: %v", p50)
	}
	if r.CPU <= 0 || r.CPUs < 1 || r.Wall < time.Second {
		t.Errorf("CPU %v over %v on %d CPUs", r.CPU, r.Wall, r.CPUs)
	}
	// The series covers every phase; only steady operations are counted.
	var steady, all int64
	for _, p := range r.Points() {
		all += p.Count + p.Failures
		if p.Phase == PhaseSteady {
			steady += p.Count + p.Failures
		}
	}
	if all <= steady || all < int64(total) {
		t.Errorf("series: %d operations, %d in steady seconds; %v counted", all, steady, total)
	}
	if ok, failed := r.Ended(); ok+failed != all {
		t.Errorf("Ended: %d ok + %d failed, the series' rows hold %d", ok, failed, all)
	}
	in := r.QoS()
	if in.Ops["work"].Count != w.Count || in.CycleTarget != r.Cycle.MeanTarget() {
		t.Errorf("QoS input %+v", in)
	}
}

// TestWarmupPhase: the warm-up after the ramp-up runs every user but counts
// nothing (the series shows it as its own phase).
func TestWarmupPhase(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "1ms"},
		Mode: Closed, Users: 10,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 20 * time.Millisecond}},
		Phases: Phases{RampUp: 0, Warmup: time.Second, Steady: 500 * time.Millisecond},
	}
	if got := c.Phases.Total(); got != 1500*time.Millisecond {
		t.Errorf("total %v, want 1.5s", got)
	}
	if got := c.Phases.at(300 * time.Millisecond); got != PhaseWarmup {
		t.Errorf("phase at 300ms %q, want %q", got, PhaseWarmup)
	}
	if got := c.Phases.at(1200 * time.Millisecond); got != PhaseSteady {
		t.Errorf("phase at 1.2s %q, want %q", got, PhaseSteady)
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// 10 users x 0.5 s / 20 ms: about 250 operations counted, none of the
	// warm-up's about 500 more.
	w := r.Ops["work"]
	if w == nil {
		t.Fatal("nothing counted")
	}
	within(t, "operations counted", float64(w.Count), 10*500.0/21, 0.2)
	var warm int64
	for _, p := range r.Points() {
		if p.Phase == PhaseWarmup {
			warm += p.Count
		}
	}
	if warm == 0 {
		t.Error("the series has no warm-up seconds")
	}
	bad := c
	bad.Phases.Warmup = -time.Second
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "warm-up") {
		t.Errorf("negative warm-up: %v", err)
	}
}

func TestClosedLoopLateNoCatchUp(t *testing.T) {
	// Operations of 30 ms in a 10 ms cycle: every cycle is late, each next
	// operation starts at once, and the achieved cycle is the operation's
	// length, not the target's: the schedule is never caught up.
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "30ms"},
		Mode: Closed, Users: 5,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 10 * time.Millisecond}},
		Phases: Phases{Steady: 600 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cycle.Late != r.Cycle.N || r.Cycle.N == 0 {
		t.Errorf("%d of %d cycles late, want all", r.Cycle.Late, r.Cycle.N)
	}
	// The achieved cycle is the operation's own length, not the target's.
	op := r.Ops["work"].Latency.Mean()
	within(t, "achieved cycle over the operation's length", float64(r.Cycle.MeanAchieved())/float64(op), 1, 0.2)
	within(t, "operations", float64(r.Ops["work"].Count), 5*float64(600*time.Millisecond)/float64(r.Cycle.MeanAchieved()), 0.2)
	v := qos.Set{qos.CycleTime{Tolerance: 0.02}}.Evaluate(r.QoS())
	if v.Pass {
		t.Errorf("a cycle of %v against %v passed Faban's cycle rule", r.Cycle.MeanAchieved(), r.Cycle.MeanTarget())
	}
}

func TestClosedLoopThinkTime(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "10ms"},
		Mode: Closed, Users: 4,
		Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed, Mean: 10 * time.Millisecond}},
		Phases: Phases{Steady: 800 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// Think time counts from the end: one operation per (operation + think)
	// per user, about 20 ms on a quiet machine; the think time as run is the
	// 10 ms plus the wake-up lag.
	// (The users' cycles cannot add up to more than their time in the
	// steady phase; on a loaded machine a starved goroutine loses some.)
	op, think := r.Ops["work"].Latency.Mean(), r.Cycle.MeanAchieved()
	if busy := time.Duration(r.Ops["work"].Count) * (op + think); busy < 4*800*time.Millisecond/2 {
		t.Errorf("%d operations of %v plus %v think: %v of the users' 3.2 s", r.Ops["work"].Count, op, think, busy)
	}
	// A 10 ms sleep that takes much longer says the scheduler, not the
	// pacing, set the times.
	if op > 12*time.Millisecond {
		t.Logf("not checking timing: a 10 ms operation took %v on average, the machine is too busy", op)
	} else if !tooBusyForTiming(t, r) {
		if busy := time.Duration(r.Ops["work"].Count) * (op + think); busy > 4*800*time.Millisecond*21/20 {
			t.Errorf("%d operations of %v plus %v think: %v of the users' 3.2 s", r.Ops["work"].Count, op, think, busy)
		}
		within(t, "achieved think (ms)", float64(think)/1e6, float64(10*time.Millisecond+r.Lag.Mean())/1e6, 0.1)
	}
	if r.Cycle.Late != 0 {
		t.Errorf("%d late cycles in think-time pacing", r.Cycle.Late)
	}
}

func TestMarkovMixAndMinCycle(t *testing.T) {
	c := Config{
		Behaviour: "test-markov", Mode: Closed, Users: 10,
		Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed, Mean: time.Millisecond}},
		Phases: Phases{Steady: time.Second},
		Seed:   42,
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(r.Completed())
	// The chain's stationary mix: home = browse, buy = browse/2, so 40%,
	// 40%, 20%.
	within(t, "home share", float64(r.Ops["home"].Count)/n, 0.4, 0.1)
	within(t, "browse share", float64(r.Ops["browse"].Count)/n, 0.4, 0.1)
	within(t, "buy share", float64(r.Ops["buy"].Count)/n, 0.2, 0.1)
	// After buy the user waits at least its 3 ms minimum cycle instead of
	// the 1 ms think time: mean target = (0.4*1 + 0.4*1 + 0.2*3) ms.
	within(t, "mean target delay (ms)", float64(r.Cycle.MeanTarget())/1e6, 1.4, 0.1)
	v := qos.Faban(qos.FabanSpec{
		Mix:            map[string]float64{"home": 40, "browse": 40, "buy": 20},
		Limits:         map[string]time.Duration{"home": time.Second},
		CycleTolerance: -1,
	}).Evaluate(r.QoS())
	if !v.Pass {
		t.Errorf("Faban rules on the chain's own mix: %s", v.Summary())
	}
}

func TestMarkovValidate(t *testing.T) {
	ops := []string{"a", "b"}
	tests := []struct {
		spec MarkovSpec
		want string
	}{
		{MarkovSpec{Start: "x"}, `start names operation "x"`},
		{MarkovSpec{Start: "a"}, "operation a is reachable but has no transition out of it"},
		{MarkovSpec{Start: "a", Transitions: map[string]map[string]float64{"a": {"c": 1}}}, `the transitions from a names operation "c"`},
		{MarkovSpec{Start: "a", Transitions: map[string]map[string]float64{"a": {"b": 1}, "b": {"a": -1, "b": 1}}}, "weight -1"},
		{MarkovSpec{Start: "a", Transitions: map[string]map[string]float64{"a": {"a": 1}}, MinCycle: map[string]time.Duration{"z": 1}}, `min_cycle names operation "z"`},
	}
	for _, tc := range tests {
		err := tc.spec.Validate(ops)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestSelfPacedUsers(t *testing.T) {
	c := Config{
		Behaviour: "test-runner", Mode: Closed, Users: 3,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 10 * time.Millisecond}},
		Phases: Phases{Steady: 500 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// 3 users x 2 loops x 500 ms / 10 ms: at most 300 polls (the pacing
	// holds them back), fewer on a loaded machine; each loop's cycles are
	// filed when its Wait returns.
	if n := r.Ops["poll"].Count; n > 310 || n < 100 {
		t.Errorf("%d polls, want up to 300", n)
	}
	within(t, "cycles filed", float64(r.Cycle.N), float64(r.Ops["poll"].Count), 0.05)
	if r.Cycle.MeanAchieved() < 10*time.Millisecond || r.Cycle.MeanTarget() != 10*time.Millisecond {
		t.Errorf("cycle %v, target %v", r.Cycle.MeanAchieved(), r.Cycle.MeanTarget())
	}
	if f := r.Ops["poll"].Failed(); f != 0 {
		t.Errorf("%d polls failed (cut-off ones must be unfinished, not failed): %v", f, r.Ops["poll"].Examples)
	}
	// The users count each poll that succeeded when it ends: the counter
	// and the operation count agree but for polls at the phase's edges.
	within(t, "polled counter", float64(r.Counters["polled"]), float64(r.Ops["poll"].Count), 0.05)
}

func TestSetupFailures(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"setup_fail": "true"}, Mode: Closed, Users: 4,
		Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed, Mean: 10 * time.Millisecond}},
		Phases: Phases{Steady: 100 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.SetupFailures != 2 || !strings.Contains(r.SetupExample, "login refused") {
		t.Errorf("setup failures %d (%q), want 2 users that could not log in", r.SetupFailures, r.SetupExample)
	}
}

func TestOpenLoopRate(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Mode: Open, Plan: Constant(1000), Connections: 8,
		Phases: Phases{RampUp: 100 * time.Millisecond, Steady: time.Second},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "requests due in steady", float64(r.Open.Due), 1000, 0.01)
	within(t, "requests done", float64(r.Ops["work"].Count), 1000, 0.01)
	// The pacer sleeps until each request is due and records how late it
	// woke; a pacer kept behind its plan by a busy machine sends overdue
	// requests without sleeping, so the count is checked only when few
	// were late.
	if late := r.Open.Late; late > r.Open.Due/20 {
		t.Logf("not checking wake-ups: %d of %d requests were sent late, the machine is too busy", late, r.Open.Due)
	} else if r.Lag.Count() < 500 && !tooBusyForTiming(t, r) {
		t.Errorf("only %d wake-ups recorded (%d of %d requests late)", r.Lag.Count(), late, r.Open.Due)
	}
}

// maxTimingLag is the mean wake-up lag above which the machine is too
// busy for a test to check the pacing's timing to the millisecond (an idle
// Go process wakes within about a millisecond; go test runs packages and
// their integration tests in parallel on two cores, and there the lag
// reached 36 ms). It is the wake-up limit past which Saturation blames
// the driver.
const maxTimingLag = 2 * time.Millisecond

// tooBusyForTiming reports, and logs, that the run's own measured
// wake-up lag was too high for timing checks; the checks that do not
// depend on the scheduler still run.
func tooBusyForTiming(t *testing.T, r *Result) bool {
	t.Helper()
	if lag := r.Lag.Mean(); lag > maxTimingLag {
		t.Logf("not checking timing: the driver's mean wake-up lag was %v (> %v), the machine is too busy", lag, maxTimingLag)
		return true
	}
	return false
}

// TestOpenLoopCoordinatedOmission: one connection, 100 requests/s due, each
// taking 20 ms: the server can do 50/s, so requests queue. Latency from the
// due time grows through the run; the time from the actual send stays
// 20 ms. A closed-loop tool would report the 20 ms.
func TestOpenLoopCoordinatedOmission(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "20ms"}, Mode: Open,
		Plan: Constant(100), Connections: 1,
		Phases: Phases{Steady: time.Second},
		Drain:  10 * time.Millisecond,
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Ops["work"]
	if s := w.Service.Quantile(0.5); s < 20*time.Millisecond || s > 60*time.Millisecond {
		t.Errorf("service time p50 %v, want about 20ms", s)
	}
	if l := w.Latency.Quantile(0.99); l < 300*time.Millisecond {
		t.Errorf("latency from the due time p99 %v: the queue is hidden", l)
	}
	// The plan made 100 requests due; about 50 could be sent, and the rest
	// count as late.
	if r.Open.Due != 100 || r.Open.Sent > 60 || r.Open.Late < 90 {
		t.Errorf("%d due, %d sent, %d late; want 100 due, about 50 sent, nearly all late", r.Open.Due, r.Open.Sent, r.Open.Late)
	}
	if v := (qos.Set{qos.Delivered{Min: 0.99}}).Evaluate(r.QoS()); v.Pass {
		t.Errorf("a server at half the rate passed the delivery rule: %s", v.Summary())
	}
	// The driver slept on time whenever it slept: it is not the bottleneck
	// (unless the machine kept it from waking).
	if tooBusyForTiming(t, r) {
		return
	}
	sat := r.Saturation(Limits{})
	for _, why := range sat.Reasons {
		if strings.Contains(why, "woke up") {
			t.Errorf("lag blamed on the driver: %s", why)
		}
	}
}

// TestChildThreads: Threads reaches each child as its GOMAXPROCS (the
// behaviour fails every operation otherwise), and the driver counts the
// CPUs its children can use at once by it; Threads without children is
// refused.
func TestChildThreads(t *testing.T) {
	useTestChildren(t)
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "1ms", "procs": "1"}, Mode: Closed, Users: 4,
		Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed, Mean: 5 * time.Millisecond}},
		Phases: Phases{Steady: 300 * time.Millisecond}, Drivers: 2, Threads: 1,
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Ops["work"]
	if w.Count == 0 || w.Failures["procs"] != 0 {
		t.Errorf("%d operations, %d failed on GOMAXPROCS: %v", w.Count, w.Failures["procs"], w.Examples["procs"])
	}
	if want := min(allowedCPUs(), 2); r.CPUs != want {
		t.Errorf("2 single-threaded children report %d CPUs, want %d", r.CPUs, want)
	}
	c.Drivers = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "threads") {
		t.Errorf("threads without driver processes: %v", err)
	}
}

func TestChildDrivers(t *testing.T) {
	useTestChildren(t)
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "1ms", "fail_every": "5"}, Mode: Open,
		Plan: Constant(600), Connections: 6, Drivers: 3, CPUSets: []string{"0"},
		Phases: Phases{RampUp: 100 * time.Millisecond, Steady: time.Second},
		Run:    "20260101-000000-abcd",
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Ops["work"]
	within(t, "requests due over 3 processes", float64(r.Open.Due), 600, 0.02)
	within(t, "requests done", float64(w.Count+w.Failed()), 600, 0.02)
	within(t, "failures", float64(w.Failures["synthetic"]), 120, 0.1)
	if len(r.Commands) != 3 || !strings.HasPrefix(r.Commands[0], "taskset -c 0 ") {
		t.Errorf("commands %q", r.Commands)
	}
	if r.CPUs != 1 {
		t.Errorf("3 processes pinned to CPU 0 report %d CPUs", r.CPUs)
	}
	if r.ProcessCPU < r.CPU || r.CPU <= 0 {
		t.Errorf("CPU %v, process CPU %v", r.CPU, r.ProcessCPU)
	}
	if w.Latency.Count() != w.Count {
		t.Errorf("merged histogram holds %d of %d", w.Latency.Count(), w.Count)
	}
	var series int64
	for _, p := range r.Points() {
		if p.Phase == PhaseSteady {
			series += p.Count
		}
	}
	if series == 0 {
		t.Error("no merged series")
	}
}

// TestCountersOverChildren checks that the users' counters come back from
// child driver processes and are summed.
func TestCountersOverChildren(t *testing.T) {
	useTestChildren(t)
	c := Config{
		Behaviour: "test-runner", Mode: Closed, Users: 4, Drivers: 2,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 10 * time.Millisecond}},
		Phases: Phases{Steady: 500 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Ops["poll"].Count; n < 50 {
		t.Fatalf("%d polls over 2 processes", n)
	}
	within(t, "polled counter over 2 processes", float64(r.Counters["polled"]), float64(r.Ops["poll"].Count), 0.05)
}

func TestChildFailure(t *testing.T) {
	useTestChildren(t)
	ChildCommand = func() ([]string, error) { return []string{"/bin/sh", "-c", "echo kaput >&2; exit 3"}, nil }
	c := Config{Behaviour: "test-sleep", Mode: Open, Plan: Constant(10), Connections: 1, Drivers: 1,
		Phases: Phases{Steady: 100 * time.Millisecond}}
	_, err := Run(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "driver process 1 of 1") || !strings.Contains(err.Error(), "kaput") {
		t.Errorf("error %v, want the process and its stderr", err)
	}
}

// TestChildDiesWithParent runs a parent (this test binary in a helper mode)
// whose child driver runs for a minute, kills the parent with SIGKILL, and
// checks that the child, found by the run ID in its environment as
// `nearnative cleanup` would, is gone.
func TestChildDiesWithParent(t *testing.T) {
	if id := os.Getenv("NEARNATIVE_DRIVER_TEST_PARENT"); id != "" {
		useTestChildren(t)
		c := Config{Behaviour: "test-sleep", Mode: Closed, Users: 1, Drivers: 1,
			Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed, Mean: 100 * time.Millisecond}},
			Phases: Phases{Steady: time.Minute}, Run: runidpkg.ID(id)}
		_, _ = Run(context.Background(), c)
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	id := string(testRunID())
	parent := startSelf(t, "TestChildDiesWithParent", "NEARNATIVE_DRIVER_TEST_PARENT="+id)
	var child int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && child == 0; time.Sleep(50 * time.Millisecond) {
		for _, pid := range pidsWithEnv("NEARNATIVE_RUN=" + id) {
			if pid != parent.Process.Pid {
				child = pid
			}
		}
	}
	if child == 0 {
		parent.Process.Kill()
		parent.Wait()
		t.Fatal("no child driver process carrying the run ID appeared")
	}
	parent.Process.Kill()
	parent.Wait()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(child, 0) != nil {
			return
		}
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(child), "stat")); strings.Contains(string(b), ") Z ") {
			return // a zombie waiting for init to reap it: dead
		}
	}
	syscall.Kill(child, syscall.SIGKILL)
	t.Errorf("child driver %d outlived its parent", child)
}

func TestHistJSON(t *testing.T) {
	h := NewHist()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * 10 * time.Microsecond)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var g Hist
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if g.Count() != 1000 || g.Quantile(0.99) != h.Quantile(0.99) || len(b) > 400 {
		t.Errorf("round trip: %d values, p99 %v vs %v, %d bytes", g.Count(), g.Quantile(0.99), h.Quantile(0.99), len(b))
	}
	// FractionWithin agrees with Quantile at the edges.
	for _, q := range []float64{0.5, 0.9, 0.99} {
		d := h.Quantile(q)
		if f := h.FractionWithin(d); f < q {
			t.Errorf("FractionWithin(p%g = %v) = %g", q*100, d, f)
		}
		if f := h.FractionWithin(d - 20*time.Microsecond); f >= q {
			t.Errorf("FractionWithin(just below p%g) = %g", q*100, f)
		}
	}
}

func TestCause(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, CauseTimeout},
		{os.ErrDeadlineExceeded, CauseTimeout},
		{&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}, CauseRefused},
		{syscall.ECONNRESET, CauseReset},
		{syscall.EADDRNOTAVAIL, CauseNoPort},
		{syscall.EMFILE, CauseFiles},
		{Failure("http 503", errSynthetic), "http 503"},
		{errSynthetic, CauseOther},
	}
	for _, tc := range tests {
		if got := Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestSaturation(t *testing.T) {
	lag := NewHist()
	for i := 0; i < 100; i++ {
		lag.Record(5 * time.Millisecond)
	}
	quiet := NewHist()
	quiet.Record(50 * time.Microsecond)
	tests := []struct {
		name string
		r    Result
		want []string
	}{
		{"quiet", Result{CPU: time.Second, Wall: 10 * time.Second, CPUs: 2, Lag: quiet, FDs: 10, FDLimit: 1024, Ports: 10, PortRange: 28000}, nil},
		{"cpu", Result{CPU: 19 * time.Second, Wall: 10 * time.Second, CPUs: 2, Lag: quiet}, []string{"used 95% of the 2 CPU(s)"}},
		{"lag and late", Result{CPU: time.Second, Wall: 10 * time.Second, CPUs: 2, Lag: lag, Open: OpenStats{Due: 1000, Late: 50}},
			[]string{"woke up to 5ms late", "5.0% of the requests due were sent late"}},
		{"late but on time", Result{CPU: time.Second, Wall: 10 * time.Second, CPUs: 2, Lag: quiet, Open: OpenStats{Due: 1000, Late: 500}}, nil},
		{"fds", Result{Lag: quiet, FDs: 900, FDLimit: 1024}, []string{"file descriptors peaked at 900 of the limit 1024"}},
		{"ports", Result{Lag: quiet, Ports: 27000, PortRange: 28000}, []string{"peaked at 27000, against 28000 ephemeral ports"}},
	}
	for _, tc := range tests {
		s := tc.r.Saturation(Limits{})
		if s.Saturated != (len(tc.want) > 0) || len(s.Reasons) != len(tc.want) {
			t.Errorf("%s: %+v, want %q", tc.name, s, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(s.Reasons[i], w) {
				t.Errorf("%s: reason %q, want %q", tc.name, s.Reasons[i], w)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Behaviour: "test-sleep", Mode: Open, Plan: Constant(10), Connections: 2, Phases: Phases{Steady: time.Second}}
	tests := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Behaviour = "nope" }, `no driver behaviour named "nope"`},
		{func(c *Config) { c.Plan = Constant(0) }, "rates must be positive"},
		{func(c *Config) { c.Connections = 0 }, "0 connections"},
		{func(c *Config) { c.Phases.Steady = 0 }, "steady phase"},
		{func(c *Config) { c.Mode = "half-open" }, `mode "half-open"`},
		{func(c *Config) { c.Mode, c.Users = Closed, 0 }, "0 users"},
		{func(c *Config) { c.CPUSets = []string{"0"} }, "set drivers to 1 or more"},
		{func(c *Config) { c.Drivers, c.CPUSets = 2, []string{"0", "1", "2"} }, "3 cpusets for 2 driver processes"},
		{func(c *Config) { c.Drivers, c.CPUSets = 1, []string{"x"} }, `cpuset "x"`},
		{func(c *Config) { c.Drivers = 3 }, "2 connections cannot be shared by 3"},
		{func(c *Config) {
			c.Mode, c.Users = Closed, 1
			c.Pacing = Pacing{Mode: Think, Delay: Distribution{Kind: Fixed}, MinCycle: map[string]time.Duration{"play": 1}}
		}, `min_cycle names operation "play"`},
	}
	for _, tc := range tests {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("valid config: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestSockstat(t *testing.T) {
	s := "sockets: used 1091\nTCP: inuse 1048 orphan 0 tw 20417 alloc 1048 mem 139\nUDP: inuse 0 mem 0\n"
	if n := sockstatTCP(s); n != 1048+20417 {
		t.Errorf("sockstat: %d", n)
	}
	if n := sockstatTCP("TCP6: inuse 3\nUDP6: inuse 9\n"); n != 3 {
		t.Errorf("sockstat6: %d", n)
	}
}

// TestOpenLoopStepsPlan: 200 requests/s in the ramp-up, then 800/s in the
// steady phase: the requests due in the steady phase come from the plan.
func TestOpenLoopStepsPlan(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Mode: Open, Plan: Steps(500*time.Millisecond, 200, 800), Connections: 8,
		Phases: Phases{RampUp: 500 * time.Millisecond, Steady: 500 * time.Millisecond},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Open.Due != 400 || r.Ops["work"].Count < 390 {
		t.Errorf("%d due, %d done in the steady phase; want 400 (800/s for 0.5 s)", r.Open.Due, r.Ops["work"].Count)
	}
	// The series (whole seconds from the start of the ramp-up) holds the
	// ramp-up's 100 requests too.
	var all int64
	for _, p := range r.Points() {
		all += p.Count
	}
	if all < 490 || all > 510 {
		t.Errorf("%d requests in the series, want 500 (100 in the ramp-up, 400 steady)", all)
	}
}

// TestClosedLoopAllocs: the closed loop itself allocates nothing per
// operation (its recording, pacing and cycle bookkeeping), so that a cheap
// operation such as a Redis pipeline is not charged for the driver's
// garbage. What the run allocates once or once a second is shared by
// hundreds of thousands of instant operations.
func TestClosedLoopAllocs(t *testing.T) {
	c := Config{
		Behaviour: "test-sleep", Mode: Closed, Users: 2,
		Pacing: Pacing{Mode: Think, Delay: Distribution{Kind: Fixed}},
		Phases: Phases{Steady: 500 * time.Millisecond},
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Run(context.Background(), c)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := r.Ended()
	if ops < 10000 {
		t.Skipf("only %d operations: too few to tell per-operation allocations from per-run ones", ops)
	}
	per := float64(after.Mallocs-before.Mallocs) / float64(ops)
	t.Logf("%d operations, %.4f allocations per operation", ops, per)
	if per > 0.2 {
		t.Errorf("%d allocations for %d operations: %.2f per operation, want none", after.Mallocs-before.Mallocs, ops, per)
	}
}
