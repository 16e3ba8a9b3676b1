package search

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// StepLog keeps the steps of one search so that an interrupted search can
// resume: Run reads the stored steps first and adds each new one the moment
// it ends. The engine implements it over the result database, one log per
// trial; MemLog keeps steps in memory.
type StepLog interface {
	// Steps returns the steps stored so far, in order.
	Steps(ctx context.Context) ([]Step, error)
	// AddStep stores one step; its Seq follows the stored ones.
	AddStep(ctx context.Context, s Step) error
}

// Outcome is what one step measured.
type Outcome struct {
	Pass    bool
	Summary string // one line: the figures that decided
	Detail  []byte // the step's full record, JSON
}

// Exec runs one step (its Seq, Phase and Value are set) and judges it.
type Exec func(ctx context.Context, step Step) (Outcome, error)

// Result is how a search ended.
type Result struct {
	Decision
	// Steps is the whole history, resumed steps included.
	Steps []Step
	// Resumed is how many of Steps were read back from the log.
	Resumed int
}

// Run executes a search: it reads log's stored steps, then asks Next for
// each further step, runs it through exec and stores it before deciding
// again. A step cut short by ctx is not stored, so a resume runs it again.
func Run(ctx context.Context, c Config, log StepLog, exec Exec) (Result, error) {
	var res Result
	if err := c.Validate(); err != nil {
		return res, err
	}
	if log == nil {
		log = &MemLog{}
	}
	hist, err := log.Steps(ctx)
	if err != nil {
		return res, fmt.Errorf("reading the stored search steps: %w", err)
	}
	res.Resumed = len(hist)
	for {
		d, err := Next(c, hist)
		if err != nil {
			return res, err
		}
		if d.Done {
			res.Decision, res.Steps = d, hist
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			res.Steps = hist
			return res, err
		}
		st := Step{Seq: len(hist), Phase: d.Phase, Value: d.Value, Started: time.Now()}
		out, err := exec(ctx, st)
		if err != nil {
			res.Steps = hist
			return res, fmt.Errorf("%s step %d at %g: %w", d.Phase, len(hist), d.Value, err)
		}
		if ctx.Err() != nil {
			res.Steps = hist
			return res, ctx.Err()
		}
		st.Pass, st.Duration, st.Summary, st.Detail = out.Pass, time.Since(st.Started), out.Summary, out.Detail
		if err := log.AddStep(context.WithoutCancel(ctx), st); err != nil {
			return res, fmt.Errorf("storing search step %d: %w", st.Seq, err)
		}
		hist = append(hist, st)
	}
}

// MemLog is a StepLog in memory, for searches nothing needs to resume.
type MemLog struct {
	mu    sync.Mutex
	steps []Step
}

// Steps implements StepLog.
func (m *MemLog) Steps(context.Context) ([]Step, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Step(nil), m.steps...), nil
}

// AddStep implements StepLog.
func (m *MemLog) AddStep(_ context.Context, s Step) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.Seq != len(m.steps) {
		return errors.New("search: step out of sequence")
	}
	m.steps = append(m.steps, s)
	return nil
}
