package driver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Recorder times the operations of one simulated user.
type Recorder interface {
	// Do runs fn as one operation named op, timed from the call until fn returns,
	// recorded in op's histogram while the driver is in its steady phase; a non-nil
	// error counts as a failure of op (classified by cause) and is returned.
	Do(ctx context.Context, op string, fn func(context.Context) error) error
}

// Counter is implemented by the Recorder the driver gives closed-loop
// users: Count adds n to a named counter of events that are not operations
// of their own (a purchase rolled back, a retry), counted when they happen
// in the steady phase and summed over users and driver processes into
// Result.Counters. Users find it by type assertion.
type Counter interface {
	Count(name string, n int64)
}

// Operation is one thing a simulated user does: one or many requests.
type Operation func(ctx context.Context) error

// User is one simulated user (closed loop) or one connection (open loop):
// the driver asks it for its next operation, runs and times it, and paces.
type User interface {
	// Next returns the name and the function of the next operation.
	Next() (op string, fn Operation)
}

// Runner is implemented by users that run themselves, such as a user with
// asynchronous long-poll loops in parallel goroutines: the driver calls Run
// once, in the closed loop only; the user records every operation through
// rec, paces itself with p.Wait, and returns when ctx ends. Next is then not
// called.
type Runner interface {
	Run(ctx context.Context, rec Recorder, p *Pacer) error
}

// MinCycler is implemented by users with per-operation minimum cycle times
// of their own (Markov does); the pacer waits at least that long after op.
type MinCycler interface {
	MinCycle(op string) time.Duration
}

// Closer is implemented by users that hold something to release at the end
// (a connection, a session to log out of).
type Closer interface {
	Close() error
}

// MarkovSpec is a session as a Markov chain over named operations: the
// first operation is Start; after operation a the next is b with
// probability Transitions[a][b] / sum(Transitions[a]).
type MarkovSpec struct {
	Start       string
	Transitions map[string]map[string]float64
	// MinCycle is the least cycle after an operation (Olio: AddEvent 3 s).
	MinCycle map[string]time.Duration
}

// Validate checks the chain against the operations the user has.
func (m MarkovSpec) Validate(ops []string) error {
	have := map[string]bool{}
	for _, o := range ops {
		have[o] = true
	}
	known := func(what, op string) error {
		if !have[op] {
			sorted := append([]string(nil), ops...)
			sort.Strings(sorted)
			return fmt.Errorf("markov session: %s names operation %q, which has no function (operations: %s)", what, op, strings.Join(sorted, ", "))
		}
		return nil
	}
	if err := known("start", m.Start); err != nil {
		return err
	}
	reach := []string{m.Start}
	seen := map[string]bool{m.Start: true}
	for len(reach) > 0 {
		op := reach[0]
		reach = reach[1:]
		row := m.Transitions[op]
		sum := 0.0
		for next, w := range row {
			if err := known("the transitions from "+op, next); err != nil {
				return err
			}
			if w < 0 || w != w {
				return fmt.Errorf("markov session: transition %s -> %s has weight %v", op, next, w)
			}
			sum += w
			if w > 0 && !seen[next] {
				seen[next] = true
				reach = append(reach, next)
			}
		}
		if sum <= 0 {
			return fmt.Errorf("markov session: operation %s is reachable but has no transition out of it", op)
		}
	}
	for from := range m.Transitions {
		if err := known("a transition row", from); err != nil {
			return err
		}
	}
	for op, d := range m.MinCycle {
		if err := known("min_cycle", op); err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("markov session: minimum cycle of %s is negative", op)
		}
	}
	return nil
}

// Markov is one user walking a MarkovSpec.
type Markov struct {
	spec  MarkovSpec
	ops   map[string]Operation
	rng   *rand.Rand
	cur   string
	rows  map[string][]choice
	begun bool
}

type choice struct {
	op  string
	cum float64
}

// NewMarkov returns a user whose operations are ops, chosen by spec's chain
// with rng.
func NewMarkov(spec MarkovSpec, ops map[string]Operation, rng *rand.Rand) (*Markov, error) {
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	if err := spec.Validate(names); err != nil {
		return nil, err
	}
	m := &Markov{spec: spec, ops: ops, rng: rng, rows: map[string][]choice{}}
	for from, row := range spec.Transitions {
		var cs []choice
		sum := 0.0
		for _, to := range sortedKeys(row) { // sorted: the same seed gives the same walk
			if row[to] > 0 {
				sum += row[to]
				cs = append(cs, choice{to, sum})
			}
		}
		for i := range cs {
			cs[i].cum /= sum
		}
		m.rows[from] = cs
	}
	return m, nil
}

// Next implements User.
func (m *Markov) Next() (string, Operation) {
	if !m.begun {
		m.begun, m.cur = true, m.spec.Start
		return m.cur, m.ops[m.cur]
	}
	cs := m.rows[m.cur]
	x := m.rng.Float64()
	i := sort.Search(len(cs), func(i int) bool { return cs[i].cum > x })
	if i == len(cs) {
		i = len(cs) - 1
	}
	m.cur = cs[i].op
	return m.cur, m.ops[m.cur]
}

// MinCycle implements MinCycler.
func (m *Markov) MinCycle(op string) time.Duration { return m.spec.MinCycle[op] }

// Script is a user that repeats a fixed sequence of operations (Faban's
// fixed sequence; DVD Store's order loop is one operation).
type Script struct {
	Names []string
	Ops   []Operation
	i     int
}

// NewScript returns a script of the given named operations, in order.
func NewScript(names []string, ops []Operation) (*Script, error) {
	if len(names) == 0 || len(names) != len(ops) {
		return nil, fmt.Errorf("script: %d names for %d operations", len(names), len(ops))
	}
	return &Script{Names: names, Ops: ops}, nil
}

// Next implements User.
func (s *Script) Next() (string, Operation) {
	i := s.i % len(s.Ops)
	s.i++
	return s.Names[i], s.Ops[i]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
