package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/store"
)

// failingStore refuses trials once it has taken `after` of them, as a
// database that went away does once its write policy is spent.
type failingStore struct {
	store.Store
	mu    sync.Mutex
	after int
	taken int
	err   error
}

func (f *failingStore) AddTrial(ctx context.Context, t store.Trial) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil && f.taken >= f.after {
		return f.err
	}
	f.taken++
	return f.Store.AddTrial(ctx, t)
}

func (f *failingStore) FinishRun(ctx context.Context, id runid.ID, status, reason string, finished time.Time) error {
	f.mu.Lock()
	down := f.err != nil && f.taken >= f.after
	f.mu.Unlock()
	if down {
		return f.err
	}
	return f.Store.FinishRun(ctx, id, status, reason, finished)
}

// TestStoreFailureKeepsTrial: a trial the store does not take stops the
// run with one error naming the file it is kept in; a resume stores it
// first and completes the run with every trial, as many as a run without
// the fault.
func TestStoreFailureKeepsTrial(t *testing.T) {
	e := newEnv(t)
	st := e.study(t, studyYAML("warmup: 1\nrounds: 2\n"))
	fs := &failingStore{Store: e.store, after: 5, err: &store.WriteError{What: "storing the trial", Attempts: 9, Err: errors.New("database or disk is full")}}
	cfg := e.config(st, "")
	cfg.Store = fs
	out, err := Run(context.Background(), cfg)
	var se *StoreError
	if !errors.Is(err, ErrStore) || !errors.As(err, &se) {
		t.Fatalf("Run: %v, want a *StoreError", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "disk is full") || !strings.Contains(err.Error(), "--resume "+string(out.Run.ID)) || se.Kept == "" {
		t.Errorf("error %q: want one line naming the cause, the file and the resume", err)
	}
	if _, err := os.Stat(se.Kept); err != nil {
		t.Fatalf("kept trial: %v", err)
	}
	if n := len(e.trials(t, out.Run.ID)); n != 5 {
		t.Fatalf("%d trials stored, want the 5 taken", n)
	}
	if r := e.run(t, out.Run.ID); r.Status != store.StatusRunning {
		t.Errorf("status %q: the store was down, so the run reads as crashed (running)", r.Status)
	}

	// The database works again: a resume stores the kept trial, then runs
	// the rest.
	calls := len(e.kind.takeCalls())
	if _, err := Run(context.Background(), e.config(nil, out.Run.ID)); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !e.prog.logged("stored 1 trial(s) of run " + string(out.Run.ID)) {
		t.Error("the resume did not say it stored the kept trial")
	}
	trials := e.trials(t, out.Run.ID)
	checkUnique(t, trials)
	if want := 3 * 2 * 2; len(trials) != want {
		t.Errorf("%d trials after the resume, want %d (3 rounds x 2 workloads x 2 platforms)", len(trials), want)
	}
	if ran := len(e.kind.takeCalls()); calls+ran != 3*2*2 {
		t.Errorf("%d trials run in all, want %d: the kept trial must not run again", calls+ran, 3*2*2)
	}
	if _, err := os.Stat(filepath.Dir(se.Kept)); !os.IsNotExist(err) {
		t.Errorf("spool directory still there after the import: %v", err)
	}
}

// TestSpoolRoundTrip: a kept trial decodes to what was kept, NaN included.
func TestSpoolRoundTrip(t *testing.T) {
	tr := store.Trial{RunID: "20261121-100000-aaaa", Round: 3, Index: 1, Workload: "w", Platform: "p", Error: "",
		Metrics:  []store.Metric{{Name: "a", Unit: "x", Value: math.NaN()}, {Name: "b", Value: 1.5e-9, Quantile: 0.99, Samples: 7}},
		Commands: []string{"c"}, Notes: []string{"n"}}
	b, err := encodeSpooled(tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, l, err := decodeSpooled(b)
	if err != nil || l != nil {
		t.Fatal(err, l)
	}
	if !math.IsNaN(got.Metrics[0].Value) || got.Metrics[1].Value != 1.5e-9 || got.Metrics[1].Samples != 7 || got.Round != 3 || got.Commands[0] != "c" {
		t.Errorf("round trip: %+v", got)
	}
}
