package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/workload"
)

// searchKind is a find-max workload: each trial searches for the largest
// load under a limit, through the trial's step log, and stores a series per
// step. interruptAt cancels the run during that step of the first trial.
type searchKind struct {
	limit       float64
	execs       int // steps executed, over all trials
	interruptAt int
	cancel      context.CancelFunc
}

func (k *searchKind) Name() string                                   { return "searcher" }
func (k *searchKind) Description() string                            { return "find-max over a fixed limit, for engine tests" }
func (k *searchKind) Params() []workload.Param                       { return nil }
func (k *searchKind) New(workload.Values) (workload.Instance, error) { return k, nil }
func (k *searchKind) Metrics() []workload.Metric {
	return []workload.Metric{{Name: "max_rate", Unit: "req/s", HigherIsBetter: true}}
}

func (k *searchKind) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	if t.Steps == nil || t.Series == nil {
		return workload.Result{}, errors.New("the engine gave no step log or series sink")
	}
	res, err := search.Run(ctx, search.Config{Start: 100}, t.Steps, func(ctx context.Context, s search.Step) (search.Outcome, error) {
		v := s.Value
		k.execs++
		if k.execs == k.interruptAt {
			k.cancel()
		}
		if err := t.Series.PutSeries(ctx, s.Seq, []driver.Point{{Sec: 0, Phase: "steady", Op: "get", Count: int64(v)}}); err != nil {
			return search.Outcome{}, err
		}
		return search.Outcome{Pass: v <= k.limit, Summary: fmt.Sprintf("%g", v)}, nil
	})
	if err != nil {
		return workload.Result{}, err
	}
	return workload.Result{Values: map[string]float64{"max_rate": res.Max}}, nil
}

func TestSearchStepsResume(t *testing.T) {
	e := newEnv(t)
	kind := &searchKind{limit: 5000}
	e.reg = workload.NewRegistry(kind)
	st := e.study(t, "name: find\ntrial: 1s\nrounds: 2\nmin_pairs: 2\nwarmup: 0\norder: fixed\nplatforms: [native]\nworkloads:\n  - {workload: searcher, name: s}\n")

	// Uninterrupted, for reference: how many steps one search takes.
	ref, err := search.Run(context.Background(), search.Config{Start: 100}, nil, func(_ context.Context, s search.Step) (search.Outcome, error) {
		return search.Outcome{Pass: s.Value <= 5000}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := len(ref.Steps)

	ctx, cancel := context.WithCancel(context.Background())
	kind.cancel, kind.interruptAt = cancel, 4
	out, err := Run(ctx, e.config(st, ""))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v, want ErrInterrupted", err)
	}
	id := out.Run.ID
	if n := len(e.trials(t, id)); n != 0 {
		t.Fatalf("%d trials stored after an interrupt in the first", n)
	}
	key := store.TrialKey{Run: id, Round: 0, Workload: "s", Platform: "native"}
	stored, err := e.store.(store.StepStore).Steps(context.Background(), key)
	if err != nil || len(stored) != 3 {
		t.Fatalf("%d steps stored before the interrupt in the fourth (%v), want 3", len(stored), err)
	}

	kind.execs, kind.interruptAt = 0, -1
	if _, err := Run(context.Background(), e.config(nil, id)); err != nil {
		t.Fatal(err)
	}
	// The resumed first trial ran only its remaining steps; the second ran
	// a whole search.
	if want := (steps - 3) + steps; kind.execs != want {
		t.Errorf("resume ran %d steps, want %d (%d left of the first search, %d of the second)", kind.execs, want, steps-3, steps)
	}
	trials := e.trials(t, id)
	if len(trials) != 2 {
		t.Fatalf("%d trials", len(trials))
	}
	for _, tr := range trials {
		if tr.Error != "" || len(tr.Metrics) != 1 || tr.Metrics[0].Value != ref.Max {
			t.Errorf("trial %+v: want max_rate %g", tr, ref.Max)
		}
	}
	all, _ := e.store.(store.StepStore).Steps(context.Background(), key)
	if len(all) != steps {
		t.Errorf("first trial: %d steps stored, want %d", len(all), steps)
	}
	series, err := e.store.(store.SeriesStore).Series(context.Background(), key)
	if err != nil || len(series) == 0 {
		t.Errorf("series of the first trial: %d points, %v", len(series), err)
	}
}
