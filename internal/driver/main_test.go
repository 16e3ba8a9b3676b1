package driver

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"errors"
	"fmt"
	runidpkg "github.com/nearnative/nearnative/internal/runid"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// childEnv switches the test binary into a child driver process, so that
// tests of Drivers > 0 need no nearnative binary.
const childEnv = "NEARNATIVE_DRIVER_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func init() {
	Register("test-sleep", newSleepFactory)
	Register("test-markov", newMarkovFactory)
	Register("test-runner", newRunnerFactory)
}

// useTestChildren makes child driver processes this test binary.
func useTestChildren(t *testing.T) {
	t.Helper()
	old := ChildCommand
	ChildCommand = func() ([]string, error) { return []string{os.Args[0], "-test.run=^$"}, nil }
	t.Setenv(childEnv, "1")
	t.Cleanup(func() { ChildCommand = old })
}

// sleepFactory: one operation "work" that sleeps for the "sleep" parameter
// and fails every "fail_every"-th call of a user (0: never).
type sleepFactory struct {
	sleep     time.Duration
	failEvery int
	built     atomic.Int64
	setupFail bool
	// procs > 0: every operation fails (cause "procs") unless the process
	// runs Go code on exactly that many threads (GOMAXPROCS).
	procs int
}

var errSynthetic = errors.New("synthetic failure")

func newSleepFactory(p map[string]string, _ DialFunc) (Factory, error) {
	f := &sleepFactory{}
	if s := p["sleep"]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("sleep %q: %w", s, err)
		}
		f.sleep = d
	}
	if s := p["fail_every"]; s != "" {
		f.failEvery, _ = strconv.Atoi(s)
	}
	f.setupFail = p["setup_fail"] == "true"
	if s := p["procs"]; s != "" {
		f.procs, _ = strconv.Atoi(s)
	}
	return f, nil
}

func (f *sleepFactory) Ops() []string { return []string{"work"} }
func (f *sleepFactory) Close() error  { return nil }
func (f *sleepFactory) NewUser(ctx context.Context, id int, rng *rand.Rand) (User, error) {
	f.built.Add(1)
	if f.setupFail && id%2 == 1 {
		return nil, errors.New("login refused")
	}
	n := 0
	return &Script{Names: []string{"work"}, Ops: []Operation{func(ctx context.Context) error {
		n++
		if f.sleep > 0 {
			if err := sleep(ctx, f.sleep); err != nil {
				return err
			}
		}
		if f.procs > 0 && runtime.GOMAXPROCS(0) != f.procs {
			return Failure("procs", fmt.Errorf("GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), f.procs))
		}
		if f.failEvery > 0 && n%f.failEvery == 0 {
			return Failure("synthetic", errSynthetic)
		}
		return nil
	}}}, nil
}

// markovFactory: instant operations home, browse, buy, walked by a chain
// whose stationary mix is home 1/3, browse 1/2, buy 1/6.
type markovFactory struct{}

func newMarkovFactory(map[string]string, DialFunc) (Factory, error) { return markovFactory{}, nil }

var testChain = MarkovSpec{
	Start: "home",
	Transitions: map[string]map[string]float64{
		"home":   {"browse": 1},
		"browse": {"home": 0.5, "buy": 0.5},
		"buy":    {"home": 1},
	},
	MinCycle: map[string]time.Duration{"buy": 3 * time.Millisecond},
}

func (markovFactory) Ops() []string { return []string{"home", "browse", "buy"} }
func (markovFactory) Close() error  { return nil }
func (markovFactory) NewUser(ctx context.Context, id int, rng *rand.Rand) (User, error) {
	nop := func(context.Context) error { return nil }
	return NewMarkov(testChain, map[string]Operation{"home": nop, "browse": nop, "buy": nop}, rng)
}

// runnerFactory: self-paced users with two parallel loops, each doing
// "poll" (a 2 ms operation) paced by the pacer, as an auction user's
// long-poll loops would.
type runnerFactory struct{}

func newRunnerFactory(map[string]string, DialFunc) (Factory, error) { return runnerFactory{}, nil }

func (runnerFactory) Ops() []string { return []string{"poll"} }
func (runnerFactory) Close() error  { return nil }
func (runnerFactory) NewUser(ctx context.Context, id int, rng *rand.Rand) (User, error) {
	return runnerUser{}, nil
}

type runnerUser struct{}

func (runnerUser) Next() (string, Operation) { panic("Next called on a self-paced user") }
func (runnerUser) Run(ctx context.Context, rec Recorder, p *Pacer) error {
	done := make(chan struct{}, 2)
	for i := 0; i < 2; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				start := time.Now()
				if rec.Do(ctx, "poll", func(ctx context.Context) error { return sleep(ctx, 2*time.Millisecond) }) == nil {
					rec.(Counter).Count("polled", 1)
				}
				if p.Wait(ctx, "poll", start, time.Now()) != nil {
					return
				}
			}
		}()
	}
	<-done
	<-done
	return ctx.Err()
}

// testRunID returns a run ID unique to this test process.
func testRunID() runidpkg.ID {
	return runidpkg.ID(fmt.Sprintf("20260101-000000-%04x", os.Getpid()%0xffff))
}

// startSelf starts this test binary running only the named test, with env
// added.
func startSelf(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// pidsWithEnv lists processes whose environment holds kv, as cleanup finds
// a run's processes.
func pidsWithEnv(kv string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(b), "\x00") {
			if v == kv {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
