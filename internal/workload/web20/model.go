// Package web20 drives the Olio social-events site (apps/olio) as
// CloudStone's Faban driver did (the seed "Scaling Web 2.0 Applications
// using Docker containers on vSphere 6.0"): per simulated user a browser
// with its cookies, login and cache, the seven operations over HTTP/1.1,
// and the user model (a Markov chain over the operations). The load driver
// (internal/driver) runs the users, paces them with the cycle times given
// here and judges the results against the QoS values given here.
package web20

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Recorder times the operations of one simulated user (the load driver implements it).
type Recorder interface {
	// Do runs fn as one operation named op, timed from the call until fn returns; a
	// non-nil error counts as a failure of op and is returned.
	Do(ctx context.Context, op string, fn func(context.Context) error) error
}

// Op is one of Olio's seven operations.
type Op int

// The operations, in the order of the seed's tables and of Matrix.
const (
	HomePage Op = iota
	Login
	TagSearch
	EventDetail
	PersonDetail
	AddPerson
	AddEvent
	// NumOps is the number of operations.
	NumOps = 7
)

var opNames = [NumOps]string{"HomePage", "Login", "TagSearch", "EventDetail", "PersonDetail", "AddPerson", "AddEvent"}

// String is the operation's name as the seed and Faban report it.
func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Ops lists the operations in order.
var Ops = [NumOps]Op{HomePage, Login, TagSearch, EventDetail, PersonDetail, AddPerson, AddEvent}

// ParseOp returns the operation named name.
func ParseOp(name string) (Op, error) {
	for i, n := range opNames {
		if n == name {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("web20: no operation %q (known: %v)", name, opNames)
}

// Matrix is a Markov chain over the operations: Matrix[from][to] is the
// percentage of operations that follow from with to.
type Matrix [NumOps][NumOps]float64

// Mix is a share of each operation, in percent.
type Mix [NumOps]float64

// DefaultMatrix is the Olio driver's transition matrix (workloads.md,
// "CloudStone / Olio Web 2.0"; rows and columns Home, Login, TagSearch,
// EventDetail, PersonDetail, AddPerson, AddEvent).
var DefaultMatrix = Matrix{
	HomePage:     {0, 11, 52, 36, 0, 1, 0},
	Login:        {0, 0, 60, 20, 0, 0, 20},
	TagSearch:    {21, 6, 41, 31, 0, 1, 0},
	EventDetail:  {72, 21, 0, 0, 6, 1, 0},
	PersonDetail: {52, 6, 0, 31, 11, 0, 0},
	AddPerson:    {0, 0, 0, 0, 100, 0, 0},
	AddEvent:     {0, 0, 0, 100, 0, 0, 0},
}

// TargetMix is the mix the seed observed with 1500 users (its Table 1:
// 141908, 55473, 181126, 134144, 14393, 4662 and 11087 operations), the
// target of Faban's mix rule. DefaultMatrix's steady state is within 0.1
// point of it (26.15, 10.22, 33.45, 24.68, 2.61, 0.84, 2.04).
var TargetMix = Mix{26.14, 10.22, 33.37, 24.71, 2.65, 0.86, 2.04}

// Tolerance of the sums of a Mix and of a Matrix row (rounding of
// published percentages).
const sumTolerance = 0.5

// Validate reports a matrix whose rows are not percentages summing to 100.
func (m Matrix) Validate() error {
	for i, row := range m {
		sum := 0.0
		for j, v := range row {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("web20 matrix: row %s, column %s: %v is not a percentage", Op(i), Op(j), v)
			}
			sum += v
		}
		if math.Abs(sum-100) > sumTolerance {
			return fmt.Errorf("web20 matrix: row %s sums to %.2f%%, want 100%%: change that row's seven percentages so that they add up to 100", Op(i), sum)
		}
	}
	return nil
}

// Validate reports a mix that is not percentages summing to 100.
func (x Mix) Validate() error {
	sum := 0.0
	for i, v := range x {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("web20 mix: %s: %v is not a percentage", Op(i), v)
		}
		sum += v
	}
	if math.Abs(sum-100) > sumTolerance {
		return fmt.Errorf("web20 mix sums to %.2f%%, want 100%%: change the seven percentages (%s) so that they add up to 100", sum, strings.Join(opNames[:], ", "))
	}
	return nil
}

// Steady returns the chain's stationary mix (in percent), by power
// iteration from the uniform mix.
func (m Matrix) Steady() Mix {
	var p Mix
	for i := range p {
		p[i] = 1.0 / NumOps
	}
	for range 10000 {
		var q Mix
		for i := range p {
			sum := 0.0
			for _, v := range m[i] {
				sum += v
			}
			for j, v := range m[i] {
				q[j] += p[i] * v / sum
			}
		}
		diff := 0.0
		for i := range q {
			diff += math.Abs(q[i] - p[i])
		}
		p = q
		if diff < 1e-12 {
			break
		}
	}
	for i := range p {
		p[i] *= 100
	}
	return p
}

// Next draws the operation that follows from.
func (m Matrix) Next(r *rand.Rand, from Op) Op {
	x := r.Float64() * 100
	last := from
	for to, v := range m[from] {
		if v <= 0 {
			continue
		}
		last = Op(to)
		if x < v {
			return Op(to)
		}
		x -= v
	}
	return last // rounding of a row summing to a little less than 100
}

// Pacing (Faban's CYCLETIME semantics: an operation's cycle runs from the
// previous operation's start; a late user does not catch up). workloads.md
// and apps.md: "cycle time negative-exponential, mean 5 s (AddEvent min
// 3 s, AddPerson min 2 s), capped at 5x the mean".
const (
	// MeanCycle is the mean cycle time.
	MeanCycle = 5 * time.Second
	// CycleCapFactor caps a cycle at this multiple of MeanCycle.
	CycleCapFactor = 5
	// MaxCycle is the cap.
	MaxCycle = CycleCapFactor * MeanCycle
)

// MinCycle is each operation's minimum cycle time (0: none).
var MinCycle = [NumOps]time.Duration{AddPerson: 2 * time.Second, AddEvent: 3 * time.Second}

// P90Limit is each operation's 90th-percentile response-time limit in the
// seed: 250 ms for HomePage, Login, TagSearch and EventDetail ("users are
// less likely to visit a Web site if the response time is greater than 250
// milliseconds"), 500 ms for AddEvent, AddPerson and PersonDetail. (Olio's
// own limits were 1 to 4 s.)
var P90Limit = [NumOps]time.Duration{
	HomePage: 250 * time.Millisecond, Login: 250 * time.Millisecond, TagSearch: 250 * time.Millisecond,
	EventDetail: 250 * time.Millisecond, PersonDetail: 500 * time.Millisecond,
	AddPerson: 500 * time.Millisecond, AddEvent: 500 * time.Millisecond,
}

// Faban's pass rules (apps.md): every operation's share within
// MixTolerancePoints percentage points (absolute) of TargetMix; every p90
// within P90Limit; the mean cycle time within CycleTolerance (relative) of
// its target. A run passes only if every rule passes.
const (
	MixTolerancePoints = 2.0
	CycleTolerance     = 0.02
)

// The seed's run (workloads.md): users per instance, instances, and the
// run's phases.
const (
	SeedUsersPerInstance = 1500
	SeedInstances        = 8
	SeedRampUp           = 5 * time.Minute
	SeedSteady           = 30 * time.Minute
	SeedRampDown         = 5 * time.Minute
)

// Browser behaviour (apps.md, "Browser cache"): the share of users whose
// browser revalidates statics with If-Modified-Since (the rest fetch each
// static once per session; every user fetches an image once per session),
// and the chance that a logged-in user's EventDetail adds them as attendee.
const (
	DefaultConditionalShare = 0.60
	DefaultAttendChance     = 0.10
)
