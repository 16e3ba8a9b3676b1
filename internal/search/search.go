// Package search finds the most load that still meets a workload's quality
// of service: Weathervane's findMax, written as a pure function of the
// pass/fail history (Next) plus a small runner (Run) that executes steps
// through a callback and records each one, so that an interrupted search
// resumes where it stopped.
//
// The rules (see ../shared/specs/apps.md): a coarse ramp multiplies the load
// until a first failure; the fine search then starts 10% below that failure
// and steps up on a pass, down on a fail, growing the step 1.25x after 3
// passes in a row and 1.5x after 2 fails in a row, never crossing the best
// pass or the worst fail (an upward step shrinks to half their gap, a
// downward one to three quarters of it); it stops when min-fail - max-pass is
// below the tolerance (1%) of min-fail, and verifies at max-pass.
//
// apps.md does not say what to do when the very first load fails; here the
// coarse ramp then runs downwards (dividing by the same factor) to a first
// pass, and the fine search starts 10% below the lowest failure above it.
// Nor when a failure overrules the only pass (a failed verification on a
// noisy machine): the fine search then steps down no faster than the coarse
// ramp, dividing by its factor at most.
package search

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Phase is the kind of a step.
type Phase string

// Phases of a search.
const (
	// Coarse steps ramp the load in large factors to a first failure.
	Coarse Phase = "coarse"
	// Fine steps move up on a pass and down on a fail.
	Fine Phase = "fine"
	// Verify repeats the best pass once the bracket is narrow enough.
	Verify Phase = "verify"
	// Fixed is not a search phase: a trial at one given load stores its QoS
	// verdict as a single step of this phase through the same StepLog, so
	// that every rule's outcome is kept with the trial. Next refuses it.
	Fixed Phase = "fixed"
)

// Defaults of Config fields left zero.
const (
	DefaultFactor    = 2.0
	DefaultBelow     = 0.10
	DefaultStep      = 0.05
	DefaultTolerance = 0.01
	DefaultMaxSteps  = 40
)

// Growth and shrink factors of the fine search (apps.md).
const (
	growAfterPasses = 3    // passes in a row before the step grows
	growOnPasses    = 1.25 // by this factor
	growAfterFails  = 2    // fails in a row before the step grows
	growOnFails     = 1.5
	shrinkUp        = 0.5  // an upward step that would reach min-fail: this share of the gap
	shrinkDown      = 0.75 // a downward step that would reach max-pass: this share of the gap
)

// Config says where a search starts and when it stops. Zero fields take the
// defaults above; Validate checks the rest.
type Config struct {
	// Start is the first load of the coarse ramp (users or requests/s).
	Start float64
	// Factor multiplies the load after each coarse pass (default 2).
	Factor float64
	// Min and Max bound every load tried; Max 0 means no upper bound.
	Min, Max float64
	// Below: the fine search starts this fraction below the first failure
	// (default 0.10).
	Below float64
	// Step is the fine search's first step as a fraction of the first
	// failure (default 0.05).
	Step float64
	// Tolerance: the search stops when min-fail - max-pass is below this
	// fraction of min-fail (default 0.01).
	Tolerance float64
	// Integer rounds every load to a whole number (users).
	Integer bool
	// MaxSteps ends a search that has not converged (default 40).
	MaxSteps int
	// MaxIs names what sets Max, for a result that reached it ("the
	// data's limit", "the rate cap"); empty: "the search's maximum".
	MaxIs string
	// MinIs names what sets Min, for a search whose every load failed down
	// to it ("the lowest rate a p99 can be judged at"); empty: "the
	// search's minimum".
	MinIs string
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Factor == 0 {
		c.Factor = DefaultFactor
	}
	if c.Below == 0 {
		c.Below = DefaultBelow
	}
	if c.Step == 0 {
		c.Step = DefaultStep
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	return c
}

// Validate reports settings a search cannot run with.
func (c Config) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	c = c.withDefaults()
	switch {
	case bad(c.Start) || c.Start <= 0:
		return fmt.Errorf("search start %v: must be positive", c.Start)
	case bad(c.Min) || c.Min < 0:
		return fmt.Errorf("search minimum %v: must be zero or positive", c.Min)
	case bad(c.Max) || c.Max < 0:
		return fmt.Errorf("search maximum %v: must be zero (no bound) or positive", c.Max)
	case c.Max > 0 && c.Max < c.Start:
		return fmt.Errorf("search maximum %v is below its start %v", c.Max, c.Start)
	case c.Start < c.Min:
		return fmt.Errorf("search start %v is below its minimum %v", c.Start, c.Min)
	case bad(c.Factor) || c.Factor <= 1:
		return fmt.Errorf("search factor %v: must be above 1", c.Factor)
	case bad(c.Below) || c.Below <= 0 || c.Below >= 1:
		return fmt.Errorf("search start below the first failure %v: want a fraction between 0 and 1", c.Below)
	case bad(c.Step) || c.Step <= 0 || c.Step >= 1:
		return fmt.Errorf("search step %v: want a fraction between 0 and 1", c.Step)
	case bad(c.Tolerance) || c.Tolerance <= 0 || c.Tolerance >= 1:
		return fmt.Errorf("search tolerance %v: want a fraction between 0 and 1", c.Tolerance)
	case c.MaxSteps < 2:
		return fmt.Errorf("search step cap %d: want at least 2", c.MaxSteps)
	}
	return nil
}

// Step is one load tried and its outcome.
type Step struct {
	// Seq numbers the steps of a search from 0.
	Seq   int
	Phase Phase
	Value float64
	Pass  bool
	// Started and Duration say when the step ran; Summary is one line for
	// people (p99, throughput, which rule failed); Detail is the step's full
	// record (QoS outcomes, driver figures) as JSON.
	Started  time.Time
	Duration time.Duration
	Summary  string
	Detail   []byte
}

// Decision is what to do after a history of steps.
type Decision struct {
	// Done is set when the search is over; Phase and Value are then unset.
	Done  bool
	Phase Phase
	Value float64
	// Found and Max are the result once Done: the verified highest passing
	// load (Found false when no load passed). Reason says why it stopped.
	Found  bool
	Max    float64
	Reason string
	// Ceiling, when Found, says that no step above Max failed: the search
	// stopped at a limit of its own (the largest load allowed passed, or
	// the step cap ended it before a step failed), so Max is a lower bound
	// of the real maximum, not a maximum. CeilingIs names that limit.
	Ceiling   bool
	CeilingIs string
	// Floor, when Done without Found, says that no pass stands (every load
	// failed, or a later step overruled the pass) and FloorAt, the lowest
	// load that failed, is an upper bound of the real maximum: the search
	// went down to the smallest load it may try, or its step cap ended it
	// on the way. FloorIs names where it stopped.
	Floor   bool
	FloorAt float64
	FloorIs string
}

// Reasons a search stops.
const (
	ReasonVerified  = "verified at the best pass"
	ReasonMaxPassed = "the largest load allowed passed"
	ReasonMinFailed = "the smallest load allowed failed"
	ReasonStepCap   = "step cap reached before the bracket closed"
)

// ErrHistory means a step history that Next cannot have produced.
var ErrHistory = errors.New("inconsistent search history")

// state is what a history of steps leaves behind.
type state struct {
	passes, fails []float64 // every load that passed / failed, outside coarse too
	hasPass       bool
	maxPass       float64 // highest pass below minFail
	hasFail       bool
	minFail       float64 // lowest fail
	firstFail     float64 // first failure (end of the coarse ramp)
	coarseDone    bool
	step          float64 // current fine step (absolute)
	passRun       int     // passes in a row in the fine phase
	failRun       int
	last          Step
	verified      bool
}

// pass records a passing load. A pass at or above the lowest fail overrules
// it (the latest evidence wins): the lowest fail becomes the lowest fail
// above the pass.
func (s *state) pass(v float64) {
	s.passes = append(s.passes, v)
	if s.hasFail && v >= s.minFail {
		s.hasFail, s.minFail = false, 0
		for _, f := range s.fails {
			if f > v && (!s.hasFail || f < s.minFail) {
				s.hasFail, s.minFail = true, f
			}
		}
	}
	if !s.hasPass || v > s.maxPass {
		s.hasPass, s.maxPass = true, v
	}
}

// fail records a failing load. A fail at or below the best pass overrules it:
// the best pass becomes the best pass below the fail.
func (s *state) fail(v float64) {
	s.fails = append(s.fails, v)
	if s.hasPass && v <= s.maxPass {
		s.hasPass, s.maxPass = false, 0
		for _, p := range s.passes {
			if p < v && (!s.hasPass || p > s.maxPass) {
				s.hasPass, s.maxPass = true, p
			}
		}
	}
	if !s.hasFail || v < s.minFail {
		s.hasFail, s.minFail = true, v
	}
}

// replay rebuilds the state from a history.
func replay(c Config, hist []Step) (state, error) {
	var s state
	for i, h := range hist {
		if h.Seq != i {
			return s, fmt.Errorf("%w: step %d has sequence number %d", ErrHistory, i, h.Seq)
		}
		if math.IsNaN(h.Value) || h.Value < 0 {
			return s, fmt.Errorf("%w: step %d has load %v", ErrHistory, i, h.Value)
		}
		switch h.Phase {
		case Coarse:
			if s.coarseDone {
				return s, fmt.Errorf("%w: coarse step %d after the ramp ended", ErrHistory, i)
			}
			// The ramp goes up while it passes and down while it fails; it
			// ends at the first change, with the lowest failure above the
			// passes as the first failure.
			if h.Pass {
				s.pass(h.Value)
				if s.hasFail {
					s.coarseDone, s.firstFail = true, s.minFail
				}
			} else {
				s.fail(h.Value)
				if s.hasPass {
					s.coarseDone, s.firstFail = true, h.Value
				}
			}
			if s.coarseDone {
				s.step = c.Step * s.firstFail
			}
		case Fine, Verify:
			if !s.coarseDone {
				return s, fmt.Errorf("%w: %s step %d before the coarse ramp failed", ErrHistory, h.Phase, i)
			}
			if h.Pass {
				s.pass(h.Value)
				s.passRun++
				s.failRun = 0
				if s.passRun >= growAfterPasses {
					s.step *= growOnPasses
					s.passRun = 0
				}
			} else {
				s.fail(h.Value)
				s.failRun++
				s.passRun = 0
				if s.failRun >= growAfterFails {
					s.step *= growOnFails
					s.failRun = 0
				}
			}
			s.verified = h.Phase == Verify && h.Pass
		default:
			return s, fmt.Errorf("%w: step %d has unknown phase %q", ErrHistory, i, h.Phase)
		}
		s.last = h
	}
	return s, nil
}

// Next decides the step after hist, or that the search is over. It is a pure
// function: the same history always gives the same decision, which is what
// lets an interrupted search resume from its stored steps.
func Next(c Config, hist []Step) (Decision, error) {
	if err := c.Validate(); err != nil {
		return Decision{}, err
	}
	c = c.withDefaults()
	s, err := replay(c, hist)
	if err != nil {
		return Decision{}, err
	}
	if s.verified {
		return s.done(c, ReasonVerified), nil
	}
	if len(hist) >= c.MaxSteps {
		return s.done(c, ReasonStepCap), nil
	}
	if len(hist) == 0 {
		return Decision{Phase: Coarse, Value: c.round(c.Start)}, nil
	}
	if !s.coarseDone {
		return s.coarse(c), nil
	}
	if !s.hasFail {
		// Every fail was overruled by a later pass at or above it: there is
		// nothing to bracket, so verify the best pass.
		return Decision{Phase: Verify, Value: s.maxPass}, nil
	}
	if s.hasPass && s.narrow(c) {
		return Decision{Phase: Verify, Value: s.maxPass}, nil
	}
	if !s.hasPass && s.minFail <= c.Min {
		return s.done(c, ReasonMinFailed), nil
	}
	if s.last.Phase == Coarse {
		return Decision{Phase: Fine, Value: s.clamp(c, c.round((1-c.Below)*s.firstFail))}, nil
	}
	return s.fine(c), nil
}

// done is the decision that ends the search for reason: the best pass, a
// ceiling when nothing above it failed.
func (s state) done(c Config, reason string) Decision {
	d := Decision{Done: true, Found: s.hasPass, Max: s.maxPass, Reason: reason}
	if d.Found && !s.hasFail {
		d.Ceiling, d.CeilingIs = true, c.ceilingIs(s.maxPass, reason)
	}
	if !d.Found && s.hasFail {
		d.Floor, d.FloorAt, d.FloorIs = true, s.minFail, c.floorIs(s.minFail)
	}
	return d
}

// coarse is the next step of the coarse phase: up by the factor after a
// pass (to Max), down by it while everything fails (to Min).
func (s state) coarse(c Config) Decision {
	v := s.last.Value
	if !s.last.Pass { // everything failed so far: ramp down
		if v <= c.Min || c.Integer && v <= 1 {
			return s.done(c, ReasonMinFailed)
		}
		next := c.round(v / c.Factor)
		if next >= v {
			next = v - 1
		}
		return Decision{Phase: Coarse, Value: math.Max(next, c.Min)}
	}
	if c.Max > 0 && v >= c.Max {
		return s.done(c, ReasonMaxPassed)
	}
	next := c.round(v * c.Factor)
	if c.Max > 0 && next > c.Max {
		next = c.Max
	}
	if next <= v { // an integer load too small to grow by the factor
		next = v + 1
	}
	return Decision{Phase: Coarse, Value: next}
}

// fine is the next step inside the bracket between the best pass and the
// lowest fail, or the verification of the best pass once rounding closes it.
func (s state) fine(c Config) Decision {
	v := s.last.Value
	var next float64
	if s.last.Pass {
		next = v + s.step
		if next >= s.minFail {
			next = v + shrinkUp*(s.minFail-v)
		}
	} else {
		next = v - s.step
		if s.hasPass && next <= s.maxPass {
			next = v - shrinkDown*(v-s.maxPass)
		}
		if !s.hasPass {
			// Nothing passes below (the only pass was overruled, as a
			// failed verification does): step down no faster than the
			// coarse ramp would. A step grown by fails in a row could
			// otherwise jump to a tenth of the load (400 to 40).
			next = math.Max(next, v/c.Factor)
		}
	}
	next = s.clamp(c, c.round(next))
	if s.hasPass && (next <= s.maxPass || next >= s.minFail) {
		// Rounding to whole users closed the bracket.
		return Decision{Phase: Verify, Value: s.maxPass}
	}
	return Decision{Phase: Fine, Value: next}
}

// ceilingIs names the limit a search without a failure above its best
// pass stopped at.
func (c Config) ceilingIs(maxPass float64, reason string) string {
	switch {
	case c.Max > 0 && maxPass >= c.Max && c.MaxIs != "":
		return c.MaxIs
	case c.Max > 0 && maxPass >= c.Max:
		return "the search's maximum"
	case reason == ReasonStepCap:
		return "the step cap"
	}
	return "no step above it failed"
}

// floorIs names where a search with no standing pass stopped: at its
// smallest load, or at its step cap before it got there.
func (c Config) floorIs(minFail float64) string {
	switch {
	case minFail <= c.Min && c.MinIs != "":
		return c.MinIs
	case minFail <= c.Min:
		return "the search's minimum"
	}
	return "the lowest load tried before the step cap"
}

// narrow reports whether the bracket is closed: min-fail - max-pass below
// the tolerance of min-fail, or no whole number between them.
func (s *state) narrow(c Config) bool {
	gap := s.minFail - s.maxPass
	if c.Integer && gap <= 1 {
		return true
	}
	return gap < c.Tolerance*s.minFail
}

// clamp keeps a fine load inside the bracket and the bounds.
func (s *state) clamp(c Config, v float64) float64 {
	if s.hasPass && v <= s.maxPass {
		v = s.maxPass + (1-shrinkDown)*(s.minFail-s.maxPass)
		v = c.round(v)
	}
	if v < c.Min {
		v = c.Min
	}
	if c.Min == 0 && v <= 0 {
		v = c.round(s.minFail / 2)
		if v <= 0 {
			v = s.minFail / 2
		}
	}
	return v
}

// round makes a load whole when the search counts users.
func (c Config) round(v float64) float64 {
	if c.Integer {
		return math.Max(1, math.Round(v))
	}
	return v
}

// Simulate returns the steps a search of c takes when every load up to top
// passes and every load above it fails: a noise-free system whose maximum
// is top, which is what a duration estimate can assume. It runs Next
// itself, so it follows the search's own rules (coarse ramp, fine steps,
// verification, step cap).
func Simulate(c Config, top float64) ([]Step, error) {
	var hist []Step
	for {
		d, err := Next(c, hist)
		if err != nil {
			return nil, err
		}
		if d.Done {
			return hist, nil
		}
		hist = append(hist, Step{Seq: len(hist), Phase: d.Phase, Value: d.Value, Pass: d.Value <= top})
	}
}
