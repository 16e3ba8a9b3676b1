package driver

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Kinds of delay distributions.
const (
	Fixed       = "fixed"   // always Mean
	NegExp      = "negexp"  // negative exponential with Mean, clamped to [Min, Max]
	Uniform     = "uniform" // uniform on [Min, Max)
	NormalClips = "normal"  // normal with Mean and SD, clipped to [Min, Max]
)

// Pacing modes.
const (
	Cycle = "cycle" // the delay runs from the previous operation's start (Faban CYCLETIME)
	Think = "think" // from the previous operation's end (Faban THINKTIME)
)

const (
	capFactor = 5 // default cap of a negative exponential: 5x its mean (Faban)
	sdClip    = 2 // default clip of a normal: mean ± 2 SD
)

// Distribution is a random delay: a closed-loop user's cycle or think time.
// Olio's cycle time is {negexp, Mean 5s} (capped at 5x the mean, Faban's
// default); Weathervane's {normal, Mean 5s, SD 1.25s, Min 2.5s, Max 7.5s};
// DVD Store's think time {uniform, Min 0, Max 2*think}.
type Distribution struct {
	Kind string        `json:"kind"`
	Mean time.Duration `json:"mean,omitempty"`
	SD   time.Duration `json:"sd,omitempty"`
	// Min and Max bound the delay: the truncation and cap of a negative
	// exponential (Max 0 = 5x Mean), the range of a uniform, the clip of a
	// normal (both 0 = Mean ± 2 SD, not below 0).
	Min time.Duration `json:"min,omitempty"`
	Max time.Duration `json:"max,omitempty"`
}

// Validate checks that the distribution can be drawn from.
func (d Distribution) Validate() error {
	if d.Mean < 0 || d.SD < 0 || d.Min < 0 || d.Max < 0 {
		return fmt.Errorf("%s delay: durations must not be negative", d.Kind)
	}
	switch d.Kind {
	case Fixed:
	case NegExp:
		if d.Mean <= 0 {
			return fmt.Errorf("negexp delay: mean %v must be positive", d.Mean)
		}
		if d.Min > d.Mean || d.Max != 0 && d.Max < d.Mean {
			return fmt.Errorf("negexp delay: want min %v <= mean %v <= max %v", d.Min, d.Mean, d.Max)
		}
	case Uniform:
		if d.Max < d.Min {
			return fmt.Errorf("uniform delay: max %v is below min %v", d.Max, d.Min)
		}
	case NormalClips:
		if d.Mean <= 0 || d.SD <= 0 {
			return fmt.Errorf("normal delay: mean %v and sd %v must be positive", d.Mean, d.SD)
		}
		if (d.Min != 0 || d.Max != 0) && !(d.Min <= d.Mean && d.Mean <= d.Max) {
			return fmt.Errorf("normal delay: want min %v <= mean %v <= max %v", d.Min, d.Mean, d.Max)
		}
	default:
		return fmt.Errorf("delay distribution %q: want %s, %s, %s or %s", d.Kind, Fixed, NegExp, Uniform, NormalClips)
	}
	return nil
}

// bounds returns the effective clamp of d.
func (d Distribution) bounds() (lo, hi time.Duration) {
	switch d.Kind {
	case NegExp:
		hi = d.Max
		if hi == 0 {
			hi = capFactor * d.Mean
		}
		return d.Min, hi
	case NormalClips:
		if d.Min == 0 && d.Max == 0 {
			return max(0, d.Mean-sdClip*d.SD), d.Mean + sdClip*d.SD
		}
	}
	return d.Min, d.Max
}

// Draw returns one delay.
func (d Distribution) Draw(rng *rand.Rand) time.Duration {
	lo, hi := d.bounds()
	var v float64
	switch d.Kind {
	case Fixed:
		return d.Mean
	case NegExp:
		v = float64(d.Mean) * rng.ExpFloat64()
	case Uniform:
		if hi == lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	case NormalClips:
		v = float64(d.Mean) + float64(d.SD)*rng.NormFloat64()
	}
	v = math.Max(float64(lo), math.Min(float64(hi), v))
	return time.Duration(v)
}

// String describes the distribution for notes: "negexp mean 5s in [0s, 25s]".
func (d Distribution) String() string {
	lo, hi := d.bounds()
	switch d.Kind {
	case Fixed:
		return fmt.Sprintf("fixed %v", d.Mean)
	case Uniform:
		return fmt.Sprintf("uniform [%v, %v)", lo, hi)
	case NormalClips:
		return fmt.Sprintf("normal mean %v sd %v clipped to [%v, %v]", d.Mean, d.SD, lo, hi)
	}
	return fmt.Sprintf("%s mean %v in [%v, %v]", d.Kind, d.Mean, lo, hi)
}

// Pacing is how a closed-loop user spaces its operations.
type Pacing struct {
	// Mode is Cycle (the delay runs from the previous operation's start) or
	// Think (from its end).
	Mode  string       `json:"mode"`
	Delay Distribution `json:"delay"`
	// MinCycle is the least delay after an operation (Olio: AddEvent 3 s,
	// AddPerson 2 s), applied on top of the drawn one.
	MinCycle map[string]time.Duration `json:"min_cycle,omitempty"`
}

// Validate checks the pacing.
func (p Pacing) Validate() error {
	if p.Mode != Cycle && p.Mode != Think {
		return fmt.Errorf("pacing mode %q: want %s (from the previous start) or %s (from the previous end)", p.Mode, Cycle, Think)
	}
	if p.Mode == Cycle && p.Delay.Kind == Fixed && p.Delay.Mean == 0 {
		return fmt.Errorf("pacing: a cycle time of 0 is no pacing; use think time 0 for users that never wait")
	}
	for op, d := range p.MinCycle {
		if d < 0 {
			return fmt.Errorf("pacing: minimum cycle of %s is negative (%v)", op, d)
		}
	}
	return p.Delay.Validate()
}

// Pacer paces one closed-loop user: after each operation it draws the delay,
// waits until the next operation is due and records how the cycle went. A
// late operation (one that ran past its cycle) is followed at once by the
// next, and the schedule is not caught up afterwards: the next cycle starts
// from that next operation, as in Faban, DVD Store and Weathervane.
// Self-paced users (Runner) call Wait themselves.
type Pacer struct {
	mu     sync.Mutex // self-paced users may wait in several goroutines
	pacing Pacing
	rng    *rand.Rand
	col    *collector
	shard  int
	extra  func(op string) time.Duration // the user's own minimum cycle, or nil
}

// Wait paces after operation op, which started and ended at the given
// times: it sleeps until the next operation is due and returns then, or
// returns ctx's error when ctx ends first. The cycle is recorded as it
// stands when Wait returns.
func (p *Pacer) Wait(ctx context.Context, op string, started, ended time.Time) error {
	delay, late, err := p.wait(ctx, op, started, ended)
	if err != nil {
		return err
	}
	p.record(started, ended, time.Now(), delay, late)
	return nil
}

// wait draws the delay after op and sleeps until the next operation is
// due; it returns the delay and whether the operation ran late.
func (p *Pacer) wait(ctx context.Context, op string, started, ended time.Time) (time.Duration, bool, error) {
	p.mu.Lock()
	delay := p.pacing.Delay.Draw(p.rng)
	p.mu.Unlock()
	minCycle := p.pacing.MinCycle[op]
	if p.extra != nil {
		minCycle = max(minCycle, p.extra(op))
	}
	delay = max(delay, minCycle)
	now := time.Now()
	due, late := schedule(p.pacing.Mode, started, ended, delay, now)
	if wait := due.Sub(now); wait > 0 {
		if err := sleep(ctx, wait); err != nil {
			return delay, late, err
		}
		p.col.lag(p.shard, started, time.Since(due))
	}
	return delay, late, nil
}

// record files one cycle: the operation started and ended at the given
// times and the next one started at next.
func (p *Pacer) record(started, ended, next time.Time, delay time.Duration, late bool) {
	from := started
	if p.pacing.Mode == Think {
		from = ended
	}
	p.col.cycle(p.shard, started, delay, next.Sub(from), late)
}

// schedule applies the pacing rules to an operation that started and ended
// at the given times, with delay drawn for it: in Cycle mode the next
// operation is due delay after this one's start, in Think mode delay after
// its end. An operation that ran past its cycle makes the next one due at
// once (now) and late; nothing is caught up later, because the next cycle
// counts from the next operation's own start.
func schedule(mode string, started, ended time.Time, delay time.Duration, now time.Time) (due time.Time, late bool) {
	from := started
	if mode == Think {
		from = ended
	}
	due = from.Add(delay)
	if due.Before(now) {
		return now, mode == Cycle
	}
	return due, false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
