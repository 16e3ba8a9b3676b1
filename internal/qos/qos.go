// Package qos judges a trial's driver results against quality-of-service
// rules and keeps every rule's outcome. Rules are pure functions of counts and
// latency distributions, so they are tested without starting anything.
//
// Two rule sets follow the benchmarks the seeds used (facts in
// ../shared/specs/apps.md):
//
//   - Faban (Olio/CloudStone): each operation's share of the mix within ±2
//     percentage points of its target, its pNN (p90) under its limit, and the
//     mean cycle time within 2% of the target.
//   - Weathervane: at least 99% of each operation within its limit, each
//     share within a relative tolerance of its target, failures at most
//     0.5%; operations with a 0% target share are not checked.
package qos

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Latencies is one operation's latency distribution, as a driver's
// HdrHistogram gives it.
type Latencies interface {
	// Quantile returns the q-quantile, q in [0, 1].
	Quantile(q float64) time.Duration
	// FractionWithin returns the share of recorded latencies at or below d.
	FractionWithin(d time.Duration) float64
}

// Op is what the driver recorded for one operation in the steady phase.
type Op struct {
	Count    int64 // successful operations
	Failures int64
	Latency  Latencies // of the successful operations; nil when Count is 0
}

// Input is a trial's driver results as the rules see them.
type Input struct {
	Ops map[string]Op
	// CycleTarget and CycleAchieved are the closed-loop users' mean cycle
	// time as intended and as run; zero for an open-loop trial.
	CycleTarget, CycleAchieved time.Duration
	// Due is the number of requests an open-loop plan made due in the
	// steady phase; zero for a closed-loop trial.
	Due int64
}

// Outcome is one rule applied to one operation (Op "" for the trial).
type Outcome struct {
	Rule  string  `json:"rule"`
	Op    string  `json:"op,omitempty"`
	Pass  bool    `json:"pass"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Unit  string  `json:"unit"`
	// Text says it in one line: "Login p90 212ms <= 250ms".
	Text string `json:"text"`
}

// MarshalJSON writes a NaN value (nothing to measure) as null.
func (o Outcome) MarshalJSON() ([]byte, error) {
	type plain Outcome
	var v *float64
	if !math.IsNaN(o.Value) {
		v = &o.Value
	}
	return json.Marshal(struct {
		plain
		Value *float64 `json:"value"`
	}{plain(o), v})
}

// UnmarshalJSON reads what MarshalJSON wrote, null as NaN.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	type plain Outcome
	var x struct {
		plain
		Value *float64 `json:"value"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*o = Outcome(x.plain)
	o.Value = math.NaN()
	if x.Value != nil {
		o.Value = *x.Value
	}
	return nil
}

// Verdict is a rule set's judgement of one trial.
type Verdict struct {
	Pass     bool      `json:"pass"`
	Outcomes []Outcome `json:"outcomes"`
}

// Failed returns the outcomes that did not pass.
func (v Verdict) Failed() []Outcome {
	var out []Outcome
	for _, o := range v.Outcomes {
		if !o.Pass {
			out = append(out, o)
		}
	}
	return out
}

// Summary is one line: "pass" or the failed rules' texts.
func (v Verdict) Summary() string {
	if v.Pass {
		return "pass"
	}
	var parts []string
	for _, o := range v.Failed() {
		parts = append(parts, o.Text)
	}
	return "fail: " + strings.Join(parts, "; ")
}

// Rule is one quality-of-service check.
type Rule interface {
	// Name is the rule's name in outcomes ("mix", "p90", "within", ...).
	Name() string
	// Ops lists the operations the rule names, for Validate.
	Ops() []string
	// Validate checks the rule's own settings.
	Validate() error
	// Check applies the rule to a trial's results.
	Check(in Input) []Outcome
}

// Set is a rule set: a trial passes when every outcome of every rule passes.
type Set []Rule

// Validate checks every rule and that each operation it names is one of
// known, the operations the workload's users perform.
func (s Set) Validate(known []string) error {
	ok := map[string]bool{}
	for _, k := range known {
		ok[k] = true
	}
	for _, r := range s {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("qos rule %s: %w", r.Name(), err)
		}
		for _, op := range r.Ops() {
			if !ok[op] {
				sorted := append([]string(nil), known...)
				sort.Strings(sorted)
				return fmt.Errorf("qos rule %s names operation %q, which the workload does not perform (operations: %s)",
					r.Name(), op, strings.Join(sorted, ", "))
			}
		}
	}
	return nil
}

// Evaluate applies every rule.
func (s Set) Evaluate(in Input) Verdict {
	v := Verdict{Pass: true}
	for _, r := range s {
		for _, o := range r.Check(in) {
			v.Outcomes = append(v.Outcomes, o)
			v.Pass = v.Pass && o.Pass
		}
	}
	return v
}

// sortedKeys returns m's keys in order, so outcomes come out stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// shares returns the share of each operation of target with a non-zero
// target among the successful operations of those operations, in percent,
// and their total. Operations outside the mix (a 0% target: Weathervane's
// asynchronous long polls) do not dilute the others' shares.
func shares(in Input, target map[string]float64) (map[string]float64, int64) {
	var total int64
	for name, p := range target {
		if p > 0 {
			total += in.Ops[name].Count
		}
	}
	out := map[string]float64{}
	for name, p := range target {
		if p > 0 && total > 0 {
			out[name] = 100 * float64(in.Ops[name].Count) / float64(total)
		}
	}
	return out, total
}

func checkMix(target map[string]float64) error {
	if len(target) == 0 {
		return fmt.Errorf("no target mix")
	}
	sum := 0.0
	for op, p := range target {
		if math.IsNaN(p) || p < 0 || p > 100 {
			return fmt.Errorf("target share of %s is %v%%: want 0 to 100", op, p)
		}
		sum += p
	}
	if math.Abs(sum-100) > 0.5 {
		return fmt.Errorf("target shares add up to %.2f%%, want 100%%", sum)
	}
	return nil
}

func checkLimits(limits map[string]time.Duration) error {
	if len(limits) == 0 {
		return fmt.Errorf("no response-time limits")
	}
	for op, d := range limits {
		if d <= 0 {
			return fmt.Errorf("limit of %s is %v: must be positive", op, d)
		}
	}
	return nil
}

// ms formats a latency with three significant digits: 212ms, 1.23ms, 2.5s.
func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
	return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
}

// MixPoints checks each operation's share against its target within an
// absolute tolerance in percentage points (Faban).
//
// Faban's ±2 points were made for 5-minute intervals of hundreds of users:
// hundreds of thousands of operations, among which a share's sampling error
// is a tenth of a point. A short interval has too few operations for that:
// among n operations a share p has a binomial standard error of
// sqrt(p(1-p)/n), 1.6 points for TagSearch's 33% at 800 operations, so the
// users' own random walk fails the rule by chance alone. With Sigmas > 0 the
// tolerance of each operation is the larger of Points and Sigmas standard
// errors of its target share at the operations the interval completed: the
// seed's tolerance wherever the sample supports it, and never below it.
// Sigmas 0 is Faban's rule exactly.
type MixPoints struct {
	Target map[string]float64 // percent, adding up to 100
	Points float64            // tolerance in percentage points
	Sigmas float64            // 0: Points alone
}

// Tol is the tolerance, in percentage points, of an operation of target
// share p (percent) among n operations.
func (r MixPoints) Tol(p float64, n int64) float64 {
	if r.Sigmas <= 0 || n <= 0 || p <= 0 || p >= 100 {
		return r.Points
	}
	f := p / 100
	return math.Max(r.Points, r.Sigmas*100*math.Sqrt(f*(1-f)/float64(n)))
}

// Name implements Rule.
func (MixPoints) Name() string { return "mix" }

// Ops implements Rule.
func (r MixPoints) Ops() []string { return sortedKeys(r.Target) }

// Validate implements Rule.
func (r MixPoints) Validate() error {
	if r.Points <= 0 || math.IsNaN(r.Points) {
		return fmt.Errorf("tolerance %v percentage points: must be positive", r.Points)
	}
	if r.Sigmas < 0 || math.IsNaN(r.Sigmas) || math.IsInf(r.Sigmas, 0) {
		return fmt.Errorf("sigmas %v: want 0 (the points alone) or more", r.Sigmas)
	}
	return checkMix(r.Target)
}

// Check implements Rule.
func (r MixPoints) Check(in Input) []Outcome {
	got, total := shares(in, r.Target)
	var out []Outcome
	for _, op := range sortedKeys(r.Target) {
		want, have := r.Target[op], got[op]
		tol := r.Tol(want, total)
		o := Outcome{Rule: r.Name(), Op: op, Value: have, Limit: tol, Unit: "%",
			Pass: total > 0 && math.Abs(have-want) <= tol}
		o.Text = fmt.Sprintf("%s share %.2f%% vs target %.2f%% (±%g points)", op, have, want, r.Points)
		if tol > r.Points {
			o.Text = fmt.Sprintf("%s share %.2f%% vs target %.2f%% (±%.2f points: %g standard errors at %d operations; the seed's ±%g)", op, have, want, tol, r.Sigmas, total, r.Points)
		}
		out = append(out, o)
	}
	return out
}

// MixRelative checks each operation's share against its target within a
// tolerance relative to the target (Weathervane); operations with a 0%
// target are not checked.
type MixRelative struct {
	Target    map[string]float64 // percent, adding up to 100
	Tolerance float64            // relative, e.g. 0.1 = within 10% of the target share
	// PerOp overrides Tolerance for some operations.
	PerOp map[string]float64
}

// Name implements Rule.
func (MixRelative) Name() string { return "mix" }

// Ops implements Rule.
func (r MixRelative) Ops() []string {
	ops := sortedKeys(r.Target)
	for _, op := range sortedKeys(r.PerOp) {
		if _, ok := r.Target[op]; !ok {
			ops = append(ops, op)
		}
	}
	return ops
}

// Validate implements Rule.
func (r MixRelative) Validate() error {
	if r.Tolerance <= 0 || r.Tolerance >= 1 || math.IsNaN(r.Tolerance) {
		return fmt.Errorf("relative tolerance %v: want a fraction between 0 and 1", r.Tolerance)
	}
	for op, t := range r.PerOp {
		if t <= 0 || t >= 1 || math.IsNaN(t) {
			return fmt.Errorf("relative tolerance of %s %v: want a fraction between 0 and 1", op, t)
		}
	}
	return checkMix(r.Target)
}

// Check implements Rule.
func (r MixRelative) Check(in Input) []Outcome {
	got, total := shares(in, r.Target)
	var out []Outcome
	for _, op := range sortedKeys(r.Target) {
		want := r.Target[op]
		if want == 0 {
			continue
		}
		tol := r.Tolerance
		if t, ok := r.PerOp[op]; ok {
			tol = t
		}
		have := got[op]
		dev := math.Abs(have-want) / want
		o := Outcome{Rule: r.Name(), Op: op, Value: dev, Limit: tol, Unit: "fraction",
			Pass: total > 0 && dev <= tol}
		o.Text = fmt.Sprintf("%s share %.2f%% vs target %.2f%% (%.1f%% off, limit %.0f%%)", op, have, want, dev*100, tol*100)
		out = append(out, o)
	}
	return out
}

// Percentile checks that an operation's q-quantile latency is under its
// limit (Faban's p90 rule; http-max's p99).
//
// The q-quantile is within the limit when at least q of the operations
// were. A quantile of few operations is one of their largest latencies (the
// p90 of 7 is the slowest of them): one slow operation in a short interval
// fails the rule however fast the other six were, and an operation with none
// in the interval fails it for want of a latency. With Sigmas > 0 the rule
// knows its sample size: it fails when the share of the n operations beyond
// the limit exceeds 1-q by more than Sigmas binomial standard errors,
// sqrt(q(1-q)/n), that is when the sample shows the quantile above the
// limit rather than when chance put one slow operation among a handful;
// an operation that completed none in the interval is not judged (the line
// says so; its failures still are, by the failure rule). With many
// operations the allowance shrinks towards the seed's exact rule. Sigmas 0
// is the seed's rule exactly.
type Percentile struct {
	Q      float64 // 0.9 for p90
	Limits map[string]time.Duration
	Sigmas float64 // 0: the seed's rule
}

// Allowed is the largest share of n operations that may exceed the limit.
func (r Percentile) Allowed(n int64) float64 {
	if r.Sigmas <= 0 || n <= 0 {
		return 1 - r.Q
	}
	return 1 - r.Q + r.Sigmas*math.Sqrt(r.Q*(1-r.Q)/float64(n))
}

// Name implements Rule.
func (r Percentile) Name() string { return fmt.Sprintf("p%g", r.Q*100) }

// Ops implements Rule.
func (r Percentile) Ops() []string { return sortedKeys(r.Limits) }

// Validate implements Rule.
func (r Percentile) Validate() error {
	if !(r.Q > 0 && r.Q < 1) {
		return fmt.Errorf("quantile %v: want a fraction between 0 and 1", r.Q)
	}
	if r.Sigmas < 0 || math.IsNaN(r.Sigmas) || math.IsInf(r.Sigmas, 0) {
		return fmt.Errorf("sigmas %v: want 0 (the seed's rule) or more", r.Sigmas)
	}
	return checkLimits(r.Limits)
}

// Check implements Rule.
func (r Percentile) Check(in Input) []Outcome {
	var out []Outcome
	for _, op := range sortedKeys(r.Limits) {
		limit := r.Limits[op]
		o := Outcome{Rule: r.Name(), Op: op, Limit: float64(limit) / 1e6, Unit: "ms"}
		st := in.Ops[op]
		switch {
		case (st.Count == 0 || st.Latency == nil) && r.Sigmas > 0:
			o.Value, o.Pass = math.NaN(), true
			o.Text = fmt.Sprintf("%s: no successful operation in the interval: its %s is not judged (too rare for the interval's length; its failures are)", op, r.Name())
		case st.Count == 0 || st.Latency == nil:
			o.Value = math.NaN()
			o.Text = fmt.Sprintf("%s: no successful operation to take a %s of", op, r.Name())
		case r.Sigmas > 0:
			q := st.Latency.Quantile(r.Q)
			beyond := 1 - st.Latency.FractionWithin(limit)
			allowed := r.Allowed(st.Count)
			o.Value, o.Pass = float64(q)/1e6, beyond <= allowed+1e-12
			o.Text = fmt.Sprintf("%s %s %s (limit %s): %.1f%% of %d beyond the limit, %.1f%% allowed (%.3g%% and %g standard errors)",
				op, r.Name(), ms(q), ms(limit), beyond*100, st.Count, allowed*100, (1-r.Q)*100, r.Sigmas)
		default:
			q := st.Latency.Quantile(r.Q)
			o.Value, o.Pass = float64(q)/1e6, q <= limit
			o.Text = fmt.Sprintf("%s %s %s (limit %s)", op, r.Name(), ms(q), ms(limit))
		}
		out = append(out, o)
	}
	return out
}

// Within checks that at least Fraction of an operation's responses came
// within its limit (Weathervane: 99%). Operations without a limit are not
// checked.
type Within struct {
	Fraction float64
	Limits   map[string]time.Duration
}

// Name implements Rule.
func (Within) Name() string { return "within" }

// Ops implements Rule.
func (r Within) Ops() []string { return sortedKeys(r.Limits) }

// Validate implements Rule.
func (r Within) Validate() error {
	if !(r.Fraction > 0 && r.Fraction <= 1) {
		return fmt.Errorf("fraction %v: want a share above 0, at most 1", r.Fraction)
	}
	return checkLimits(r.Limits)
}

// Check implements Rule.
func (r Within) Check(in Input) []Outcome {
	var out []Outcome
	for _, op := range sortedKeys(r.Limits) {
		limit := r.Limits[op]
		st := in.Ops[op]
		o := Outcome{Rule: r.Name(), Op: op, Limit: r.Fraction, Unit: "fraction"}
		if st.Count == 0 || st.Latency == nil {
			o.Value = math.NaN()
			o.Text = fmt.Sprintf("%s: no successful operation to time", op)
		} else {
			f := st.Latency.FractionWithin(limit)
			o.Value, o.Pass = f, f >= r.Fraction
			o.Text = fmt.Sprintf("%s %.2f%% within %s (want >= %g%%)", op, f*100, ms(limit), r.Fraction*100)
		}
		out = append(out, o)
	}
	return out
}

// Failures checks each operation's failures against a share of its
// attempts. Only restricts the rule to some operations; empty means every
// operation the driver recorded. Skip leaves operations out (Weathervane:
// those with a 0% target share).
type Failures struct {
	Max  float64 // share of attempts, e.g. 0.005
	Only []string
	Skip map[string]bool
}

// Name implements Rule.
func (Failures) Name() string { return "failures" }

// Ops implements Rule.
func (r Failures) Ops() []string { return r.Only }

// Validate implements Rule.
func (r Failures) Validate() error {
	if !(r.Max >= 0 && r.Max < 1) {
		return fmt.Errorf("share %v: want a fraction from 0 to below 1", r.Max)
	}
	return nil
}

// Check implements Rule.
func (r Failures) Check(in Input) []Outcome {
	ops := r.Only
	if len(ops) == 0 {
		ops = sortedKeys(in.Ops)
	}
	var out []Outcome
	for _, op := range ops {
		if r.Skip[op] {
			continue
		}
		st := in.Ops[op]
		n := st.Count + st.Failures
		o := Outcome{Rule: r.Name(), Op: op, Limit: r.Max, Unit: "fraction"}
		if n == 0 {
			o.Value = math.NaN()
			o.Text = fmt.Sprintf("%s: never attempted", op)
		} else {
			f := float64(st.Failures) / float64(n)
			o.Value, o.Pass = f, f <= r.Max
			o.Text = fmt.Sprintf("%s %d of %d failed (%.2f%%, limit %g%%)", op, st.Failures, n, f*100, r.Max*100)
		}
		out = append(out, o)
	}
	return out
}

// CycleTime checks the closed-loop users' mean cycle time against its
// target within a relative tolerance (Faban: 2%).
type CycleTime struct {
	Tolerance float64
}

// Name implements Rule.
func (CycleTime) Name() string { return "cycle" }

// Ops implements Rule.
func (CycleTime) Ops() []string { return nil }

// Validate implements Rule.
func (r CycleTime) Validate() error {
	if !(r.Tolerance > 0 && r.Tolerance < 1) {
		return fmt.Errorf("tolerance %v: want a fraction between 0 and 1", r.Tolerance)
	}
	return nil
}

// Check implements Rule.
func (r CycleTime) Check(in Input) []Outcome {
	o := Outcome{Rule: r.Name(), Limit: r.Tolerance, Unit: "fraction"}
	if in.CycleTarget <= 0 || in.CycleAchieved <= 0 {
		o.Value = math.NaN()
		o.Text = "no closed-loop cycle time was measured"
		return []Outcome{o}
	}
	dev := math.Abs(float64(in.CycleAchieved-in.CycleTarget)) / float64(in.CycleTarget)
	o.Value, o.Pass = dev, dev <= r.Tolerance
	o.Text = fmt.Sprintf("mean cycle time %s vs target %s (%.2f%% off, limit %g%%)",
		ms(in.CycleAchieved), ms(in.CycleTarget), dev*100, r.Tolerance*100)
	return []Outcome{o}
}

// Delivered checks that an open-loop driver's requests due in the steady
// phase were answered (successes and failures) in at least this share: a
// server that falls behind leaves requests unanswered, and the latency of
// those never counts.
type Delivered struct {
	Min float64 // e.g. 0.99
}

// Name implements Rule.
func (Delivered) Name() string { return "delivered" }

// Ops implements Rule.
func (Delivered) Ops() []string { return nil }

// Validate implements Rule.
func (r Delivered) Validate() error {
	if !(r.Min > 0 && r.Min <= 1) {
		return fmt.Errorf("share %v: want above 0, at most 1", r.Min)
	}
	return nil
}

// Check implements Rule.
func (r Delivered) Check(in Input) []Outcome {
	o := Outcome{Rule: r.Name(), Limit: r.Min, Unit: "fraction"}
	var done int64
	for _, op := range in.Ops {
		done += op.Count + op.Failures
	}
	if in.Due <= 0 {
		o.Value = math.NaN()
		o.Text = "no open-loop requests were due"
		return []Outcome{o}
	}
	f := float64(done) / float64(in.Due)
	o.Value, o.Pass = f, f >= r.Min
	o.Text = fmt.Sprintf("%d of %d requests due were answered (%.2f%%, want >= %g%%)", done, in.Due, f*100, r.Min*100)
	return []Outcome{o}
}

// FabanSpec is the Faban pass rules of a workload; zero tolerances take
// Faban's defaults.
type FabanSpec struct {
	Mix            map[string]float64       // target shares, percent
	MixPoints      float64                  // default 2 percentage points
	Quantile       float64                  // default 0.9
	Limits         map[string]time.Duration // per operation
	CycleTolerance float64                  // default 0.02; negative: no cycle-time rule (open loop)
	// Sigmas > 0 makes the mix and percentile rules know their sample size
	// (MixPoints, Percentile): for intervals far shorter than Faban's.
	// 0 is Faban's rules exactly.
	Sigmas float64
}

// Faban returns Faban's rule set: mix within ±2 points, pNN under the
// limits, mean cycle time within 2%.
func Faban(s FabanSpec) Set {
	if s.MixPoints == 0 {
		s.MixPoints = 2
	}
	if s.Quantile == 0 {
		s.Quantile = 0.9
	}
	if s.CycleTolerance == 0 {
		s.CycleTolerance = 0.02
	}
	set := Set{MixPoints{Target: s.Mix, Points: s.MixPoints, Sigmas: s.Sigmas}, Percentile{Q: s.Quantile, Limits: s.Limits, Sigmas: s.Sigmas}}
	if s.CycleTolerance > 0 {
		set = append(set, CycleTime{Tolerance: s.CycleTolerance})
	}
	return set
}

// WeathervaneSpec is the Weathervane QoS rules of a workload; zero values
// take Weathervane's defaults.
type WeathervaneSpec struct {
	Mix          map[string]float64       // target shares, percent; 0 = not checked
	MixTolerance float64                  // relative, default 0.1
	PerOp        map[string]float64       // relative tolerance per operation (10-20%)
	Limits       map[string]time.Duration // per operation; operations without one are not timed
	Within       float64                  // default 0.99
	MaxFailures  float64                  // default 0.005
}

// Weathervane returns Weathervane's rule set: >= 99% of each operation
// within its limit, shares within a relative tolerance, failures <= 0.5%,
// operations with a 0% target share unchecked.
func Weathervane(s WeathervaneSpec) Set {
	if s.MixTolerance == 0 {
		s.MixTolerance = 0.1
	}
	if s.Within == 0 {
		s.Within = 0.99
	}
	if s.MaxFailures == 0 {
		s.MaxFailures = 0.005
	}
	skip := map[string]bool{}
	limits := map[string]time.Duration{}
	for op, p := range s.Mix {
		if p == 0 {
			skip[op] = true
		}
	}
	for op, d := range s.Limits {
		if !skip[op] {
			limits[op] = d
		}
	}
	var ops []string
	for _, op := range sortedKeys(s.Mix) {
		if !skip[op] {
			ops = append(ops, op)
		}
	}
	return Set{
		Within{Fraction: s.Within, Limits: limits},
		MixRelative{Target: s.Mix, Tolerance: s.MixTolerance, PerOp: s.PerOp},
		Failures{Max: s.MaxFailures, Only: ops},
	}
}
