package auction

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/nearnative/nearnative/internal/qos"
)

// Limits are the response-time limits of the operations Weathervane times
// (every operation of Ops with CheckLimit).
func Limits() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, o := range Ops {
		if o.CheckLimit {
			out[o.Name] = o.Limit
		}
	}
	return out
}

// FollowerOps are the operations of the loop that follows a joined
// auction: how often they run depends on the bidding in the auctions (a
// GetNextBid completes when someone bids or the item closes), that is on
// how many users follow each live auction, not on the user's choices.
var FollowerOps = []string{OpGetCurrentItem, OpGetNextBid}

// MainMix is the target share of each operation of the main user's Markov
// chain, in percent of those operations: Weathervane's mixPercentage
// without the follower's operations, scaled to 100 (0: not checked).
//
// Weathervane's own rule includes GetCurrentItem and GetNextBid, whose
// shares (7.39% and 38.68%) hold when the users are about 15 per live
// auction, as at Weathervane's maxUsers: a find-max below maxUsers has
// fewer users per auction, fewer bids and fewer long polls completing, so
// the whole mix would fail there however fast the servers (measured here:
// GetNextBid 30-35% with the chain's own shares within a few percent of
// their targets). Their response times and failures are still judged.
func MainMix() map[string]float64 {
	out := map[string]float64{}
	var sum float64
	for _, o := range Ops {
		if !slices.Contains(FollowerOps, o.Name) {
			sum += o.Mix
		}
	}
	for _, o := range Ops {
		if !slices.Contains(FollowerOps, o.Name) {
			out[o.Name] = o.Mix * 100 / sum
		}
	}
	return out
}

// mixed lists the operations with a target share, sorted.
func mixed() []string {
	var ops []string
	for _, o := range Ops {
		if o.Mix > 0 {
			ops = append(ops, o.Name)
		}
	}
	sort.Strings(ops)
	return ops
}

// MixRule is Weathervane's mix rule, each operation's share of all
// operations within a relative tolerance of its target, made fair to short
// decision intervals: an operation's tolerance is at least Sigmas standard
// errors of its share (binomial, at the target share and the number of
// operations counted), so that sampling noise alone fails an interval of a
// few hundred operations no more often than about 1 in 300 per operation
// (Sigmas 3). With Weathervane's 5-minute intervals and thousands of users
// the seed's tolerance is the larger one for every operation.
type MixRule struct {
	Target    map[string]float64 // percent; 0: not checked
	Tolerance float64            // relative, Weathervane 0.10
	Sigmas    float64            // 0: the seed's tolerance alone
}

// Name implements qos.Rule.
func (MixRule) Name() string { return "mix" }

// Ops implements qos.Rule.
func (r MixRule) Ops() []string {
	var ops []string
	for op := range r.Target {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// Validate implements qos.Rule.
func (r MixRule) Validate() error {
	if !(r.Tolerance > 0 && r.Tolerance < 1) {
		return fmt.Errorf("relative tolerance %v: want a fraction between 0 and 1", r.Tolerance)
	}
	if r.Sigmas < 0 || math.IsNaN(r.Sigmas) {
		return fmt.Errorf("sigmas %v: want 0 or more", r.Sigmas)
	}
	var sum float64
	for op, p := range r.Target {
		if p < 0 || p > 100 || math.IsNaN(p) {
			return fmt.Errorf("target share of %s is %v%%", op, p)
		}
		sum += p
	}
	if math.Abs(sum-100) > 0.5 {
		return fmt.Errorf("target shares add up to %.2f%%, want 100%%", sum)
	}
	return nil
}

// Tol is the relative tolerance of an operation of target share p (percent)
// among n operations.
func (r MixRule) Tol(p float64, n int64) float64 {
	if n <= 0 || p <= 0 || r.Sigmas == 0 {
		return r.Tolerance
	}
	f := p / 100
	return math.Max(r.Tolerance, r.Sigmas*math.Sqrt(f*(1-f)/float64(n))/f)
}

// Check implements qos.Rule. Shares are of every operation attempted
// (successes and failures, as Weathervane counts them) of the operations
// with a target.
func (r MixRule) Check(in qos.Input) []qos.Outcome {
	var total int64
	for op, p := range r.Target {
		if p > 0 {
			total += in.Ops[op].Count + in.Ops[op].Failures
		}
	}
	var out []qos.Outcome
	for _, op := range r.Ops() {
		want := r.Target[op]
		if want == 0 {
			continue
		}
		tol := r.Tol(want, total)
		var have float64
		if total > 0 {
			have = 100 * float64(in.Ops[op].Count+in.Ops[op].Failures) / float64(total)
		}
		dev := math.Abs(have-want) / want
		o := qos.Outcome{Rule: r.Name(), Op: op, Value: dev, Limit: tol, Unit: "fraction", Pass: total > 0 && dev <= tol}
		o.Text = fmt.Sprintf("%s share %.2f%% vs target %.2f%% (%.0f%% off, limit %.0f%%)", op, have, want, dev*100, tol*100)
		if tol > r.Tolerance {
			o.Text += fmt.Sprintf(" (%g standard errors at %d operations)", r.Sigmas, total)
		}
		out = append(out, o)
	}
	return out
}

// AllWithin is the rule of findMax's coarse ramp: of every timed operation
// together, at least Fraction within its own limit (Weathervane: 99.9%);
// the mix is not judged there.
type AllWithin struct {
	Fraction float64
	Limits   map[string]time.Duration
}

// Name implements qos.Rule.
func (AllWithin) Name() string { return "all-within" }

// Ops implements qos.Rule.
func (r AllWithin) Ops() []string {
	var ops []string
	for op := range r.Limits {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// Validate implements qos.Rule.
func (r AllWithin) Validate() error {
	if !(r.Fraction > 0 && r.Fraction <= 1) {
		return fmt.Errorf("fraction %v: want a share above 0, at most 1", r.Fraction)
	}
	if len(r.Limits) == 0 {
		return fmt.Errorf("no response-time limits")
	}
	return nil
}

// Check implements qos.Rule: failed operations count as outside their
// limit.
func (r AllWithin) Check(in qos.Input) []qos.Outcome {
	var within, n float64
	for op, limit := range r.Limits {
		st := in.Ops[op]
		n += float64(st.Count + st.Failures)
		if st.Count > 0 && st.Latency != nil {
			within += st.Latency.FractionWithin(limit) * float64(st.Count)
		}
	}
	o := qos.Outcome{Rule: r.Name(), Limit: r.Fraction, Unit: "fraction"}
	if n == 0 {
		o.Value = math.NaN()
		o.Text = "no timed operation completed"
		return []qos.Outcome{o}
	}
	o.Value = within / n
	o.Pass = o.Value >= r.Fraction
	o.Text = fmt.Sprintf("%.2f%% of %.0f timed operations within their limits (want >= %g%%)", o.Value*100, n, r.Fraction*100)
	return []qos.Outcome{o}
}

// present restricts a rule's operations to those attempted in the
// interval: an operation of a small share may not come up at all in a short
// interval, which is the mix rule's business, not a response-time or
// failure rule's (qos.Within and qos.Failures fail an operation never
// attempted).
type present struct {
	name string
	rule func(ops []string) qos.Rule
	ops  []string
}

// Name implements qos.Rule.
func (p present) Name() string { return p.name }

// Ops implements qos.Rule.
func (p present) Ops() []string { return p.ops }

// Validate implements qos.Rule.
func (p present) Validate() error { return p.rule(p.ops).Validate() }

// Check implements qos.Rule.
func (p present) Check(in qos.Input) []qos.Outcome {
	var ops []string
	for _, op := range p.ops {
		if st := in.Ops[op]; st.Count+st.Failures > 0 {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return []qos.Outcome{{Rule: p.name, Value: math.NaN(), Unit: "fraction", Text: "no operation was attempted"}}
	}
	return p.rule(ops).Check(in)
}

// within is qos.Within over the attempted operations of limits.
func within(fraction float64, limits map[string]time.Duration) qos.Rule {
	var ops []string
	for op := range limits {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return present{name: "within", ops: ops, rule: func(ops []string) qos.Rule {
		l := map[string]time.Duration{}
		for _, op := range ops {
			l[op] = limits[op]
		}
		return qos.Within{Fraction: fraction, Limits: l}
	}}
}

// failures is qos.Failures over the attempted operations of ops.
func failures(share float64, ops []string) qos.Rule {
	return present{name: "failures", ops: ops, rule: func(ops []string) qos.Rule { return qos.Failures{Max: share, Only: ops} }}
}

// Rules are the QoS of a decision interval: Weathervane's (>= 99% of each
// timed operation within its limit, the main user's mix within its relative
// tolerance, at most 0.5% failures of each operation with a target share).
func Rules(tolerance, sigmas float64) qos.Set {
	return qos.Set{
		within(0.99, Limits()),
		MixRule{Target: MainMix(), Tolerance: tolerance, Sigmas: sigmas},
		failures(MaxFailurePercent/100, mixed()),
	}
}

// CoarseRules are the QoS of the coarse ramp's shorter intervals:
// Weathervane's initial ramp judges response times only (99.9% of all timed
// operations within their limits); failures count against it, and more
// than 0.5% failed fail it too.
func CoarseRules() qos.Set {
	return qos.Set{
		AllWithin{Fraction: 0.999, Limits: Limits()},
		failures(MaxFailurePercent/100, mixed()),
	}
}
