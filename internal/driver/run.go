package driver

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nearnative/nearnative/internal/host"
)

// share is the part of a run one driver process does.
type share struct {
	index, of int
	// t0 is when the ramp-up starts, the same instant for every process.
	t0 time.Time
}

// users returns the ids [lo, hi) of the closed-loop users of this share.
func (s share) users(total int) (lo, hi int) {
	return total * s.index / s.of, total * (s.index + 1) / s.of
}

// Run performs one driver run and returns what it measured. It returns an
// error only when the run could not be made (bad settings, a child process
// that failed); failed operations are counted in the result.
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if r, ok := c.Client.(host.Remote); ok {
		// The load runs on the driver hosts whatever Drivers says: users
		// in this process would reach the servers through the first
		// driver host's SSH connection, their latency timed here with SSH
		// on the path.
		return runRemoteChildren(ctx, c, r.Drivers(), time.Now().Add(childStartDelay))
	}
	if c.Drivers > 0 {
		return runChildren(ctx, c)
	}
	return runLocal(ctx, c, share{index: 0, of: 1, t0: time.Now().Add(localStartDelay)})
}

// localStartDelay leaves time to build the workers before the plan starts.
const localStartDelay = 20 * time.Millisecond

// runLocal runs this process's share of the load.
func runLocal(ctx context.Context, c Config, sh share) (*Result, error) {
	f, err := LookupDial(c.Behaviour, c.Params, c.dial())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	end := sh.t0.Add(c.Phases.Total())
	// Users stop starting operations at end; operations in flight may run
	// until end + Drain, then the context cuts them off.
	stopCtx, stop := context.WithDeadline(ctx, end.Add(c.Drain))
	defer stop()
	col := newCollector(sh.t0, c.Phases, c.Mode == Open, c.LateAfter, stopCtx)
	mon := startMonitor(stopCtx, 500*time.Millisecond)

	if d := time.Until(sh.t0); d > 0 {
		if err := sleep(ctx, d); err != nil {
			mon.stop(newResult())
			return nil, err
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	var setup setupErrors
	startUsers(stopCtx, c, sh, f, col, end, &setup)
	r := col.result()
	if c.Mode == Open {
		// Requests due in the steady phase, from the plan: the ones the
		// driver could not send before it stopped are due too, and late.
		plan := c.Plan.Scale(1 / float64(sh.of))
		start := sh.t0.Add(time.Duration(float64(time.Second) / c.Plan.RateAt(0) * float64(sh.index)))
		r.Open.Due = dueIn(plan, col.steadyStart.Sub(start), col.steadyEnd.Sub(start))
		r.Open.Late += max(0, r.Open.Due-r.Open.Sent)
	}
	mon.stop(r)
	r.CPU = cpuTime() - cpu0
	r.ProcessCPU = r.CPU
	r.Wall = time.Since(wall0)
	r.CPUs = allowedCPUs()
	r.SetupFailures = setup.n.Load()
	if ex, ok := setup.example.Load().(string); ok {
		r.SetupExample = ex
	}
	c.describe(r)
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, nil
}

// setupErrors counts the users or workers that could not start (their
// dial or session setup failed) and keeps the first one's error.
type setupErrors struct {
	n       atomic.Int64
	example atomic.Value
}

func (s *setupErrors) add(err error) {
	if s.n.Add(1) == 1 {
		s.example.Store(truncate(err.Error(), 300))
	}
}

// startUsers runs this process's share of the users (closed loop) or of
// the connections with the pacer feeding them (open loop) until end, and
// waits for them all.
func startUsers(stopCtx context.Context, c Config, sh share, f Factory, col *collector, end time.Time, setup *setupErrors) {
	var wg sync.WaitGroup
	switch c.Mode {
	case Closed:
		lo, hi := sh.users(c.Users)
		for id := lo; id < hi; id++ {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				// Users start spread evenly over the ramp-up, by their global
				// number, so that N processes ramp like one.
				startAt := sh.t0.Add(time.Duration(int64(c.Phases.RampUp) * int64(id) / int64(c.Users)))
				if err := closedUser(stopCtx, c, f, col, id, startAt, end); err != nil {
					setup.add(err)
				}
			}(id)
		}
	case Open:
		plan := c.Plan.Scale(1 / float64(sh.of))
		// Processes interleave their requests: process k of n sends its
		// i-th request at the plan's (i*n+k)-th due time, approximately.
		shift := time.Duration(float64(time.Second) / c.Plan.RateAt(0) * float64(sh.index))
		lo, hi := sh.users(c.Connections)
		tickets := make(chan ticket)
		go pace(stopCtx, col, lo, sh.t0.Add(shift), end, plan, tickets)
		for id := lo; id < hi; id++ {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				if err := openWorker(stopCtx, c, f, col, id, tickets); err != nil {
					setup.add(err)
				}
			}(id)
		}
	}
	wg.Wait()
}

// dueIn is the number of a plan's requests due in [from, to), offsets from
// the plan's start: request i is due at Offset(i), the time the plan's count
// reaches i, so ceil(Count(t)) requests are due before t.
func dueIn(p Plan, from, to time.Duration) int64 {
	count := func(t time.Duration) int64 {
		if t <= 0 {
			return 0
		}
		return int64(math.Ceil(p.Count(t) - 1e-9))
	}
	return count(to) - count(from)
}

// describe fills in what the result says about its settings.
func (c Config) describe(r *Result) {
	r.Mode, r.Behaviour, r.Phases, r.Drivers = c.Mode, c.Behaviour, c.Phases, c.Drivers
	switch c.Mode {
	case Closed:
		r.Users = c.Users
		r.Pacing = c.Pacing.Mode + " " + c.Pacing.Delay.String()
	case Open:
		p := c.Plan
		r.Plan, r.Connections = &p, c.Connections
	}
}

// userRNG is user id's own random source, from the run's seed.
func userRNG(seed int64, id int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(id)*0x9e3779b97f4a7c15+1))
}

// closedUser runs one closed-loop user from startAt until end. It returns an
// error only when the user could not be built.
func closedUser(ctx context.Context, c Config, f Factory, col *collector, id int, startAt, end time.Time) error {
	if err := sleep(ctx, time.Until(startAt)); err != nil {
		return nil
	}
	rng := userRNG(c.Seed, id)
	u, err := f.NewUser(ctx, id, rng)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("user %d: %w", id, err)
	}
	if cl, ok := u.(Closer); ok {
		defer cl.Close()
	}
	p := &Pacer{pacing: c.Pacing, rng: rng, col: col, shard: id}
	if mc, ok := u.(MinCycler); ok {
		p.extra = mc.MinCycle
	}
	rec := userRecorder{c: col, shard: id}
	// The user's own context ends at end; what it has in flight then may
	// finish within the drain.
	userCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if r, ok := u.(Runner); ok {
		// A self-paced user stops everything at the end: what it has in
		// flight then is cut off and counted as unfinished.
		_ = r.Run(userCtx, rec, p)
		return nil
	}
	// A cycle is filed when the next operation starts, so that the achieved
	// cycle is start to start (or end to start), whatever delayed the user.
	// (prev is a value, not a pointer: a pointer taken in the loop escaped,
	// one allocation per operation.)
	type pending struct {
		started, ended time.Time
		delay          time.Duration
		late           bool
	}
	var prev pending
	havePrev := false
	for userCtx.Err() == nil {
		op, fn := u.Next()
		started := time.Now()
		if havePrev {
			p.record(prev.started, prev.ended, started, prev.delay, prev.late)
		}
		err := fn(ctx) // in flight at end: it may finish within the drain
		ended := time.Now()
		col.record(id, op, started, started, ended, err)
		delay, late, werr := p.wait(userCtx, op, started, ended)
		if werr != nil {
			// The run ended while the user waited: its next operation was
			// due after the end, so the cycle ran as drawn. Leaving it out
			// would leave out just the long cycles of the last seconds and
			// bias both the target and the achieved mean low (by a third
			// in a 20 s steady state of 5 s cycles).
			from := started
			if c.Pacing.Mode == Think {
				from = ended
			}
			p.record(started, ended, from.Add(delay), delay, late)
			return nil
		}
		prev, havePrev = pending{started, ended, delay, late}, true
	}
	if havePrev {
		// The wait ended as the run did: the next operation was due now.
		p.record(prev.started, prev.ended, time.Now(), prev.delay, prev.late)
	}
	return nil
}

// openWorker is one open-loop worker: it takes the next request the pacer
// releases, sends it, and records its latency from the due time.
func openWorker(ctx context.Context, c Config, f Factory, col *collector, id int, tickets <-chan ticket) error {
	rng := userRNG(c.Seed, id)
	u, err := f.NewUser(ctx, id, rng)
	if err != nil {
		// Drain this worker's share of nothing: the other workers take the
		// tickets.
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("connection %d: %w", id, err)
	}
	if cl, ok := u.(Closer); ok {
		defer cl.Close()
	}
	for tk := range tickets {
		sent := time.Now()
		col.due(id, tk.due, sent)
		op, fn := u.Next()
		err := fn(ctx)
		col.record(id, op, tk.due, sent, time.Now(), err)
	}
	return nil
}
