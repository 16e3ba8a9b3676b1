package engine

import (
	"context"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload"
)

// trialKey names the trial of unit u in round.
func (e *runner) trialKey(round int, u study.Unit) store.TrialKey {
	return store.TrialKey{Run: e.run.ID, Round: round, Workload: u.Workload.Name, Platform: u.Platform.Name}
}

// stepLog is the trial's search log in the store, or nil when the store
// keeps no steps (the workload then keeps them in memory).
func (e *runner) stepLog(round int, u study.Unit) search.StepLog {
	ss, ok := e.cfg.Store.(store.StepStore)
	if !ok {
		return nil
	}
	return stepLog{ss, e.trialKey(round, u)}
}

// seriesSink stores the trial's per-second series, or is nil when the store
// keeps none.
func (e *runner) seriesSink(round int, u study.Unit) workload.SeriesSink {
	ss, ok := e.cfg.Store.(store.SeriesStore)
	if !ok {
		return nil
	}
	return seriesSink{ss, e.trialKey(round, u)}
}

type stepLog struct {
	s   store.StepStore
	key store.TrialKey
}

// Steps implements search.StepLog.
func (l stepLog) Steps(ctx context.Context) ([]search.Step, error) {
	stored, err := l.s.Steps(ctx, l.key)
	if err != nil {
		return nil, err
	}
	out := make([]search.Step, len(stored))
	for i, s := range stored {
		out[i] = search.Step{Seq: s.Seq, Phase: search.Phase(s.Phase), Value: s.Value, Pass: s.Pass,
			Started: s.Started, Duration: s.Duration, Summary: s.Summary, Detail: s.Detail}
	}
	return out, nil
}

// AddStep implements search.StepLog.
func (l stepLog) AddStep(ctx context.Context, s search.Step) error {
	return l.s.AddStep(ctx, l.key, store.Step{Seq: s.Seq, Phase: string(s.Phase), Value: s.Value, Pass: s.Pass,
		Started: s.Started, Duration: s.Duration, Summary: s.Summary, Detail: s.Detail})
}

type seriesSink struct {
	s   store.SeriesStore
	key store.TrialKey
}

// PutSeries implements workload.SeriesSink.
func (k seriesSink) PutSeries(ctx context.Context, step int, points []driver.Point) error {
	out := make([]store.SeriesPoint, len(points))
	for i, p := range points {
		out[i] = store.SeriesPoint{Step: step, Sec: p.Sec, Phase: p.Phase, Op: p.Op, Count: p.Count, Failures: p.Failures,
			MeanUs: p.MeanUs, P50Us: p.P50Us, P90Us: p.P90Us, P99Us: p.P99Us, MaxUs: p.MaxUs}
	}
	return k.s.PutSeries(ctx, k.key, step, out)
}
