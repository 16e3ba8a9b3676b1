package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Phases are the parts of a driver run. Only operations that start in the
// steady phase are counted; ramp-up and ramp-down are recorded in the
// per-second series only.
type Phases struct {
	RampUp time.Duration `json:"ramp_up"`
	// Warmup follows the ramp-up: every user has started, none of it is
	// counted (the users' sessions settle; a closed-loop user's first
	// operations, a login say, are not its steady mix).
	Warmup   time.Duration `json:"warmup,omitempty"`
	Steady   time.Duration `json:"steady"`
	RampDown time.Duration `json:"ramp_down"`
}

// Validate checks the phase lengths.
func (p Phases) Validate() error {
	if p.Steady <= 0 {
		return fmt.Errorf("phases: the steady phase (%v) must be positive", p.Steady)
	}
	if p.RampUp < 0 || p.Warmup < 0 || p.RampDown < 0 {
		return fmt.Errorf("phases: ramp-up %v, warm-up %v and ramp-down %v must not be negative", p.RampUp, p.Warmup, p.RampDown)
	}
	return nil
}

// Total is the length of all the phases.
func (p Phases) Total() time.Duration { return p.RampUp + p.Warmup + p.Steady + p.RampDown }

// SteadyStart is the offset of the steady phase from the start.
func (p Phases) SteadyStart() time.Duration { return p.RampUp + p.Warmup }

// Phase names, in the series.
const (
	PhaseRampUp   = "ramp-up"
	PhaseWarmup   = "warm-up"
	PhaseSteady   = "steady"
	PhaseRampDown = "ramp-down"
	PhaseDrain    = "drain"
)

// at names the phase at offset t from the start.
func (p Phases) at(t time.Duration) string {
	switch {
	case t < p.RampUp:
		return PhaseRampUp
	case t < p.SteadyStart():
		return PhaseWarmup
	case t < p.SteadyStart()+p.Steady:
		return PhaseSteady
	case t < p.Total():
		return PhaseRampDown
	}
	return PhaseDrain
}

// CycleStats are the closed-loop users' cycles that started in the steady
// phase: how long the pacing meant them to be and how long they were.
type CycleStats struct {
	N        int64         `json:"n"`
	Target   time.Duration `json:"target_sum"`   // sum of the drawn delays (minimum cycles applied)
	Achieved time.Duration `json:"achieved_sum"` // sum of the cycles as run
	// Late counts cycles whose operation ran past the cycle time, so that the
	// next one started at once (no catch-up).
	Late int64 `json:"late"`
}

// MeanTarget is the mean intended cycle (or think) time.
func (c CycleStats) MeanTarget() time.Duration {
	if c.N == 0 {
		return 0
	}
	return c.Target / time.Duration(c.N)
}

// MeanAchieved is the mean cycle (or think) time as run.
func (c CycleStats) MeanAchieved() time.Duration {
	if c.N == 0 {
		return 0
	}
	return c.Achieved / time.Duration(c.N)
}

func (c *CycleStats) add(o CycleStats) {
	c.N += o.N
	c.Target += o.Target
	c.Achieved += o.Achieved
	c.Late += o.Late
}

// OpenStats are an open-loop plan's requests due in the steady phase.
type OpenStats struct {
	// Due is how many requests the plan made due in the steady phase,
	// whether or not they could be sent.
	Due int64 `json:"due"`
	// Sent is how many of them were sent before the driver stopped.
	Sent int64 `json:"sent"`
	// Late counts requests sent more than LateAfter after they were due
	// (every worker busy, or the driver behind its plan), and those never
	// sent. The latency of the sent ones is still timed from the due time.
	Late int64 `json:"late"`
}

func (o *OpenStats) add(p OpenStats) {
	o.Due += p.Due
	o.Sent += p.Sent
	o.Late += p.Late
}

// shard is one lock's worth of the collector; users and workers are spread
// over shards so that recording rarely waits. Each shard keeps a partial
// Result (operations, counters, cycles, open-loop counts, lag), merged into
// the run's as a child process's is.
type shard struct {
	mu sync.Mutex
	r  *Result
}

// collector gathers what one driver process measures.
type collector struct {
	t0                     time.Time
	phases                 Phases
	steadyStart, steadyEnd time.Time
	end                    time.Time // end of the ramp-down: what fails after it for a cancelled context was cut off
	open                   bool
	lateAfter              time.Duration
	stop                   context.Context // done once the driver stops: errors after it are unfinished operations
	shards                 []*shard
	series                 *seriesRec
}

// maxShards bounds the collector's shards (and histograms per operation).
const maxShards = 4

func newCollector(t0 time.Time, p Phases, open bool, lateAfter time.Duration, stop context.Context) *collector {
	c := &collector{t0: t0, phases: p, open: open, lateAfter: lateAfter, stop: stop,
		steadyStart: t0.Add(p.SteadyStart()), steadyEnd: t0.Add(p.SteadyStart() + p.Steady), end: t0.Add(p.Total()),
		series: newSeriesRec(t0, p)}
	for i := 0; i < maxShards; i++ {
		c.shards = append(c.shards, &shard{r: newResult()})
	}
	return c
}

func (c *collector) steady(t time.Time) bool {
	return !t.Before(c.steadyStart) && t.Before(c.steadyEnd)
}

func (c *collector) shard(i int) *shard { return c.shards[i%len(c.shards)] }

// record records one operation that was due at intended (its start, in the
// closed loop), sent at sent and done at end.
func (c *collector) record(shardIdx int, op string, intended, sent, end time.Time, err error) {
	unfinished := err != nil && (c.stop.Err() != nil || !end.Before(c.end) && isCancel(err))
	if !unfinished {
		c.series.add(op, end, end.Sub(intended), err != nil)
	}
	if !c.steady(intended) {
		return
	}
	s := c.shard(shardIdx)
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.r.Ops[op]
	if a == nil {
		a = s.r.op(op)
		if c.open {
			a.Service = NewHist()
		}
	}
	switch {
	case unfinished:
		a.Unfinished++
	case err != nil:
		cause := Cause(err)
		a.Failures[cause]++
		if _, ok := a.Examples[cause]; !ok {
			a.Examples[cause] = truncate(err.Error(), 300)
		}
	default:
		a.Count++
		a.Latency.Record(end.Sub(intended))
		if a.Service != nil {
			a.Service.Record(end.Sub(sent))
		}
	}
}

// due records an open-loop request due at intended and sent at sent.
// (The requests due are counted from the plan, sent or not: dueIn.)
func (c *collector) due(shardIdx int, intended, sent time.Time) {
	if !c.steady(intended) {
		return
	}
	s := c.shard(shardIdx)
	s.mu.Lock()
	s.r.Open.Sent++
	if sent.Sub(intended) > c.lateAfter {
		s.r.Open.Late++
	}
	s.mu.Unlock()
}

// lag records how late the driver woke for work planned at a time it had
// slept until (its scheduling lag behind the plan).
func (c *collector) lag(shardIdx int, planned time.Time, lag time.Duration) {
	if !c.steady(planned) {
		return
	}
	s := c.shard(shardIdx)
	s.mu.Lock()
	s.r.Lag.Record(max(lag, 0))
	s.mu.Unlock()
}

// cycle records one closed-loop cycle that started at started.
func (c *collector) cycle(shardIdx int, started time.Time, target, achieved time.Duration, late bool) {
	if !c.steady(started) {
		return
	}
	s := c.shard(shardIdx)
	s.mu.Lock()
	s.r.Cycle.N++
	s.r.Cycle.Target += target
	s.r.Cycle.Achieved += achieved
	if late {
		s.r.Cycle.Late++
	}
	s.mu.Unlock()
}

// count adds n to the counter name when now is in the steady phase.
func (c *collector) count(shardIdx int, name string, n int64) {
	if !c.steady(time.Now()) {
		return
	}
	s := c.shard(shardIdx)
	s.mu.Lock()
	s.r.Counters[name] += n
	s.mu.Unlock()
}

// result merges the shards into a Result.
func (c *collector) result() *Result {
	r := newResult()
	for _, s := range c.shards {
		s.mu.Lock()
		r.merge(s.r)
		s.mu.Unlock()
	}
	r.Series = c.series.close()
	return r
}

// causer is implemented by errors that name their own failure cause
// ("http 503", "rollback"); causes should be few and stable, since failures
// are counted per cause.
type causer interface{ Cause() string }

// Failure wraps err with a cause of the caller's choosing.
func Failure(cause string, err error) error { return &causeError{cause, err} }

type causeError struct {
	cause string
	err   error
}

func (e *causeError) Error() string { return e.cause + ": " + e.err.Error() }
func (e *causeError) Unwrap() error { return e.err }
func (e *causeError) Cause() string { return e.cause }

// Failure causes the driver recognises.
const (
	CauseTimeout = "timeout"
	CauseRefused = "connection refused"
	CauseReset   = "connection reset"
	CauseClosed  = "connection closed"
	CauseNoPort  = "no ephemeral port"
	CauseFiles   = "too many open files"
	CauseOther   = "error"
)

// Cause classifies an operation's error for the failure counts.
func Cause(err error) string {
	var c causer
	if errors.As(err, &c) {
		return c.Cause()
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return CauseTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return CauseReset
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return CauseNoPort
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return CauseFiles
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return CauseClosed
	}
	return CauseOther
}

// isCancel reports whether err comes from a context ending.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// userRecorder is the Recorder of one closed-loop user.
type userRecorder struct {
	c     *collector
	shard int
}

// Count implements Counter.
func (r userRecorder) Count(name string, n int64) { r.c.count(r.shard, name, n) }

// Do implements Recorder.
func (r userRecorder) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	r.c.record(r.shard, op, start, start, time.Now(), err)
	return err
}
