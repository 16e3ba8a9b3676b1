package web20

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/workload"
)

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop (Faban's): each user waits for its operation, then for the rest of its cycle; an operation's latency runs from its first request sent to its last answer read, over all its requests (page, statics, images, form posts); a late user starts its next operation at once and never catches up"

// Tiers whose CPU the trial reports: the seed's web server (nginx and
// PHP-FPM) and database.
var tierOf = map[string]string{RoleDB: "db", RoleFPM: "web", RoleWeb: "web"}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (res workload.Result, err error) {
	tmpl, err := in.template(ctx, t)
	if err != nil {
		return res, err
	}
	instances := max(in.s.Topology.Instances, 1)
	data, remove, err := copyData(t, tmpl, instances)
	if err != nil {
		return res, err
	}
	defer remove()
	topo := in.topology(data)
	if n := in.split(t.Platform, &topo); n != "" {
		res.Notes = append(res.Notes, n)
	}
	d, stop, err := workload.Deploy(ctx, t, topo, &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	var bases []string
	for _, addr := range d.Entries(RoleWeb, olio.PortHTTP) {
		bases = append(bases, "http://"+addr)
	}
	counts := tmpl.Meta.Counts
	res.Notes = append(res.Notes, ClosedLoopNote,
		fmt.Sprintf("data: Olio's tables loaded for %s (%d persons, %d events, %d tags; template %s), copied for each instance before the trial",
			tmpl.Meta.Size, counts.Persons, counts.Events, counts.Tags, tmpl.Meta.Key))
	if in.s.Mode == ModeFindMax {
		err = in.findMax(ctx, t, d, bases, counts, &res)
	} else {
		err = in.fixed(ctx, t, d, bases, counts, &res)
	}
	if err != nil {
		if cerr := d.Check(context.WithoutCancel(ctx)); cerr != nil {
			err = fmt.Errorf("%w; %v", err, cerr)
		}
	}
	return res, err
}

// fixed runs the users once and reports the seed's figures.
func (in *Instance) fixed(ctx context.Context, t workload.Trial, d *deploy.Deployment, bases []string, counts olio.Counts, res *workload.Result) error {
	users := in.s.Users
	rec, err := in.measure(ctx, t, d, users, bases, counts, in.s.RampUp, t.Duration, userSeed(t.Round, 0), 0, "")
	if err != nil {
		return err
	}
	if err := d.Check(ctx); err != nil {
		return err
	}
	// Every operation must have been measured: an operation without a
	// success has no latency to report (at the study's sizes each one has
	// dozens, so none means it failed every time).
	for _, op := range Ops {
		if o := rec.Ops[op.String()]; o.Count == 0 {
			return fmt.Errorf("%s never succeeded in the steady state (%d attempts failed; %.1f operations/s in all): %s",
				op, o.Failed, rec.Throughput, rec.failureText())
		}
	}
	res.Values, res.Samples = rec.values(), rec.samples()
	res.Commands = append(res.Commands, rec.Commands...)
	res.Where = appendNew(res.Where, rec.CPUSources...)
	res.Notes = append(res.Notes, in.describe(users), rec.summary(), rec.CPUNote)
	res.Notes = append(res.Notes, rec.notes()...)
	if n := in.sigmasNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if n := rampNote(in.s.RampUp, in.s.Cycle); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return nil
}

// sigmasNote says, when qos_sigmas makes Faban's rules know their sample
// size, what they are; "" for the seed's rules.
func (in *Instance) sigmasNote() string {
	if in.s.Sigmas <= 0 {
		return ""
	}
	return fmt.Sprintf("Faban's mix and p90 rules know the interval's sample size (qos_sigmas %g): a share's tolerance is the larger of ±%g points and %g binomial standard errors at the operations the interval completed; a p90 fails when the share beyond its limit exceeds 10%% by more than %g standard errors; an operation with none in the interval is not judged. The seed's rules are these with qos_sigmas 0",
		in.s.Sigmas, MixTolerancePoints, in.s.Sigmas, in.s.Sigmas)
}

// transientCycles is the ramp-up, in mean cycles, after which the users'
// chain has forgotten its start at HomePage: from HomePage, the default
// matrix's HomePage share is 0%, 36.8%, 20.7%, 28.6%, 25.2%, 26.5% at
// steps 1 to 6, then within 0.1 point of its steady 26.15%.
const transientCycles = 5

// rampNote says when the ramp-up is too short for the users' chain to
// reach its steady mix before the steady state: every user starts at
// HomePage, and the operations of its first few cycles are not in the
// chain's steady proportions (HomePage's share runs low), on every
// platform alike. Empty when the ramp-up is long enough.
func rampNote(rampUp, cycle time.Duration) string {
	if cycle <= 0 || rampUp >= transientCycles*cycle {
		return ""
	}
	return fmt.Sprintf("ramp-up %v is %.1f mean cycles, under the %d the users' Markov chain needs to forget its start at HomePage: the steady state counts operations of the users' first cycles, whose mix is not the chain's (HomePage's share runs about 2 points low at 2 cycles), so the mix rule may fail for that reason alone, on every platform alike; the seed's 5-minute ramp-up is 60 cycles",
		rampUp, float64(rampUp)/float64(cycle), transientCycles)
}

// findMax searches for the most users per instance that pass every rule.
//
// The users persist from step to step, as Weathervane's do (in process; a
// child driver's start fresh each step): a step adds users to or removes
// them from those of the step before, which go on where they were in the
// Markov chain, logged in, with their browser caches. Fresh users at every
// step would all start at HomePage with cold caches, and a step's decision
// interval would count their first few operations, whose mix is not the
// chain's (HomePage about 2.7 points low after a 5 s ramp-up: a bias the mix
// rule would fail however large the sample).
func (in *Instance) findMax(ctx context.Context, t workload.Trial, d *deploy.Deployment, bases []string, counts olio.Counts, res *workload.Result) error {
	session := ""
	if in.s.Drivers == 0 {
		session = string(t.Run) + "/" + t.Name
		defer ReleaseSession(session)
	}
	exec := func(ctx context.Context, st search.Step) (search.Outcome, error) {
		return in.findMaxStep(ctx, t, d, st, bases, counts, session)
	}
	sr, err := search.Run(ctx, in.s.Search, t.Steps, exec)
	if err != nil {
		return err
	}
	if !sr.Found {
		last := "no steps"
		if len(sr.Steps) > 0 {
			last = sr.Steps[len(sr.Steps)-1].Summary
		}
		if sr.Reason == search.ReasonStepCap {
			return fmt.Errorf("%w in %d steps (%s): %s", errNoPass, len(sr.Steps), search.ReasonStepCap, last)
		}
		return fmt.Errorf("%w down to %g users per instance: %s", errNoPass, in.s.Search.Min, last)
	}
	rec, minFail, err := atMaximum(sr)
	if err != nil {
		return err
	}
	res.Values = map[string]float64{MetricMaxUsers: sr.Max, MetricMinFail: minFail, MetricSteps: float64(len(sr.Steps))}
	for k, v := range rec.values() {
		if findMaxKeeps[k] {
			res.Values[k] = v
		}
	}
	res.Commands = append(res.Commands, rec.Commands...)
	res.Where = appendNew(res.Where, rec.CPUSources...)
	bracket := "no failing step above it"
	if !math.IsNaN(minFail) {
		bracket = fmt.Sprintf("the lowest failing step had %g", minFail)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("find-max: %g users per instance passed every rule (%s); %d steps, each a ramp-up of %v and a decision interval of %v; search stopped: %s",
		sr.Max, bracket, len(sr.Steps), in.s.StepRamp, t.Duration, sr.Reason), in.describe(int(sr.Max)), "at the maximum: "+rec.summary(), rec.CPUNote)
	if in.s.Search.Tolerance > search.DefaultTolerance {
		res.Notes = append(res.Notes, fmt.Sprintf("the search stops within %g%% (coarser than Weathervane's %g%%: a quick search)", in.s.Search.Tolerance*100, search.DefaultTolerance*100))
	}
	if in.s.MaxSized {
		res.Notes = append(res.Notes, fmt.Sprintf("the search tries at most %g users per instance, sized from the machine (max_users 0: %d per CPU among the instances), from %g", in.s.Search.Max, UsersPerCPU, in.s.Search.Start))
	}
	if n := in.sigmasNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if sr.Resumed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the search resumed from %d stored steps of an interrupted attempt", sr.Resumed))
	}
	if c, ok := sr.CeilingOf(MetricMaxUsers); ok {
		res.Notes = append(res.Notes, c.Note())
	} else if sr.Reason != search.ReasonVerified {
		res.Notes = append(res.Notes, "search ended: "+sr.Reason+": the maximum is the best pass, not verified")
	}
	res.Notes = append(res.Notes, rec.notes()...)
	return nil
}

// findMaxStep is one step of the search: users per instance for the
// decision interval, judged by the QoS rules, the stack left to work off an
// overload before the next step.
func (in *Instance) findMaxStep(ctx context.Context, t workload.Trial, d *deploy.Deployment, st search.Step, bases []string, counts olio.Counts, session string) (search.Outcome, error) {
	users := int(st.Value)
	rec, err := in.measure(ctx, t, d, users, bases, counts, in.s.StepRamp, t.Duration, userSeed(t.Round, st.Seq), st.Seq, session)
	if err != nil {
		return search.Outcome{}, err
	}
	if err := d.Check(ctx); err != nil {
		return search.Outcome{}, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return search.Outcome{}, fmt.Errorf("encoding the step record: %w", err)
	}
	summary := fmt.Sprintf("%s %d users per instance: %s", st.Phase, users, rec.summary())
	fmt.Fprintf(t.Log, "%s: %s\n", t.Name, summary)
	if !rec.QoS.Pass {
		// An overloaded stack goes on serving what the overload queued
		// after the driver stops: let it work that off before the next
		// step, which would meet the backlog (workload.Settle).
		waited, drained, err := workload.SettleTiers(ctx, func(ctx context.Context) (map[string]time.Duration, error) {
			return tierCPU(ctx, d)
		})
		if err != nil {
			return search.Outcome{}, err
		}
		if !drained {
			fmt.Fprintf(t.Log, "%s: the servers were still busy %v after the failing step of %d users per instance\n", t.Name, waited.Round(time.Second), users)
		}
	}
	return search.Outcome{Pass: rec.QoS.Pass, Summary: summary, Detail: b}, nil
}

// atMaximum returns the record of the passing step at the search's maximum
// and the lowest failing load above it (NaN: none).
func atMaximum(sr search.Result) (record, float64, error) {
	var atMax search.Step
	minFail := math.NaN()
	for _, st := range sr.Steps {
		if st.Pass && st.Value == sr.Max {
			atMax = st
		}
		if !st.Pass && st.Value > sr.Max && (math.IsNaN(minFail) || st.Value < minFail) {
			minFail = st.Value
		}
	}
	var rec record
	if err := json.Unmarshal(atMax.Detail, &rec); err != nil {
		return rec, minFail, fmt.Errorf("reading the record of the step at the maximum: %w", err)
	}
	return rec, minFail, nil
}

// userSeed seeds the users' random choices: the same for every platform
// of a round (common random numbers: the platforms of a round see the same
// walks through the site, pages, tags and uploads, so that their
// differences are the platforms'), new each round and each search step.
func userSeed(round, step int) int64 { return int64(round)*1000 + int64(step) + 1 }

// record is what one driver run measured, as the trial's metrics and a
// find-max step's stored detail read it.
type record struct {
	Users     int `json:"users_per_instance"`
	Instances int `json:"instances"`
	// Ops holds each operation's steady-state figures.
	Ops        map[string]opRecord `json:"ops"`
	Completed  int64               `json:"completed"`
	Throughput float64             `json:"ops_per_sec"`
	// Cycle: the configured mean, the mean of the drawn cycles (the cap
	// and the minimum cycles applied: the cycle rule's target) and the
	// achieved mean; late cycles ran past their time.
	CycleMean     float64     `json:"cycle_mean_ms"`
	CycleTarget   float64     `json:"cycle_target_ms"`
	CycleAchieved float64     `json:"cycle_achieved_ms"`
	Cycles        int64       `json:"cycles"`
	LateCycles    int64       `json:"late_cycles"`
	QoS           qos.Verdict `json:"qos"`
	// CPU holds the CPU account's metrics, CPUNote its line, CPUSources
	// how the servers' CPU was read; Tier the tiers' CPU (% of a core).
	CPU        map[string]float64 `json:"cpu"`
	CPUNote    string             `json:"cpu_note"`
	CPUSources []string           `json:"cpu_sources,omitempty"`
	Tier       map[string]float64 `json:"tier_cpu_pct"`
	HostBusy   float64            `json:"host_busy_pct"`
	DriverCPU  float64            `json:"driver_cpu_pct"`
	DriverOpMs float64            `json:"driver_cpu_ms_per_op"`
	Saturation driver.Saturation  `json:"saturation"`
	SetupFail  int64              `json:"setup_failures,omitempty"`
	SetupEx    string             `json:"setup_example,omitempty"`
	Commands   []string           `json:"commands,omitempty"`
}

// opRecord is one operation's steady-state figures.
type opRecord struct {
	Count      int64             `json:"count"`
	Failed     int64             `json:"failed"`
	Unfinished int64             `json:"unfinished,omitempty"`
	MeanMs     float64           `json:"mean_ms"`
	P90Ms      float64           `json:"p90_ms"`
	P99Ms      float64           `json:"p99_ms"`
	MaxMs      float64           `json:"max_ms"`
	MixPct     float64           `json:"mix_pct"`
	TargetPct  float64           `json:"target_pct"`
	LimitMs    float64           `json:"p90_limit_ms"`
	Failures   map[string]int64  `json:"failures,omitempty"`
	Examples   map[string]string `json:"examples,omitempty"`
}

// measure runs the driver once with users per instance and judges the
// result: CPU of the machine, the servers, each tier and the driver over
// the load.
func (in *Instance) measure(ctx context.Context, t workload.Trial, d *deploy.Deployment, users int, bases []string, counts olio.Counts,
	ramp, steady time.Duration, seed int64, step int, session string) (*record, error) {
	c := in.driverConfig(users, bases, counts, ramp, steady, seed, string(t.Run), session)
	c.Client = t.Client
	var servers []platform.Server
	for _, r := range d.Servers() {
		servers = append(servers, r.Srv)
	}
	tier0, err := tierCPU(ctx, d)
	if err != nil {
		return nil, err
	}
	meter, err := workload.StartCPU(ctx, servers, workload.SelfCPU{})
	if err != nil {
		return nil, err
	}
	r, err := driver.Run(ctx, c)
	if err != nil {
		meter.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if r.Drivers > 0 { // child processes ran the load (also on driver hosts with drivers: 0)
		meter.AddClient(r.ProcessCPU)
	}
	acct, err := meter.Stop(ctx)
	if err != nil {
		return nil, err
	}
	tier1, err := tierCPU(ctx, d)
	if err != nil {
		return nil, err
	}
	if t.Series != nil {
		if err := t.Series.PutSeries(ctx, step, r.Points()); err != nil {
			return nil, err
		}
	}
	rec := in.newRecord(r, users, len(bases))
	rec.QoS = in.rules().Evaluate(r.QoS())
	// CPU per operation over the same interval as the CPU: every
	// operation that ended in any phase.
	ok, failed := r.Ended()
	if ended := ok + failed; ended > 0 {
		var scratch workload.Result
		acct.Record(CPUCost, float64(ended), &scratch)
		rec.CPU, rec.CPUSources = scratch.Values, scratch.Where
		if len(scratch.Notes) > 0 {
			rec.CPUNote = scratch.Notes[0]
		}
		rec.DriverOpMs = acct.Clients.Seconds() / float64(ended) * 1e3
	}
	rec.HostBusy = acct.Machine.Utilisation * 100
	if iv := acct.Interval().Seconds(); iv > 0 {
		rec.Tier = map[string]float64{}
		for tier, v := range tier1 {
			rec.Tier[tier] = (v - tier0[tier]).Seconds() / iv * 100
		}
		rec.DriverCPU = acct.Clients.Seconds() / iv * 100
	}
	rec.Saturation = r.Saturation(c.Limits)
	rec.Commands = append([]string{fmt.Sprintf("driver: nearnative's closed loop, %d users (%d per instance), behaviour %s over %s, pacing %s, phases %v / %v / %v",
		c.Users, users, c.Behaviour, strings.Join(bases, ", "), r.Pacing, c.Phases.RampUp, c.Phases.Steady, c.Phases.RampDown)}, r.Commands...)
	return rec, nil
}

// tierCPU reads every server's CPU time, summed per tier.
func tierCPU(ctx context.Context, d *deploy.Deployment) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, r := range d.Servers() {
		c, ok := r.Srv.(platform.CPUReporter)
		if !ok {
			return nil, fmt.Errorf("server %s cannot report its CPU time: %s", r.ID.Name(), r.Srv.Describe())
		}
		v, err := c.CPUTime(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the CPU time of %s: %w", r.ID.Name(), err)
		}
		out[tierOf[r.ID.Role]] += v
	}
	return out, nil
}

// newRecord summarises a driver result.
func (in *Instance) newRecord(r *driver.Result, users, instances int) *record {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rec := &record{Users: users, Instances: instances, Ops: map[string]opRecord{},
		Completed: r.Completed(), Throughput: r.Throughput(),
		CycleMean: ms(in.s.Cycle), CycleTarget: ms(r.Cycle.MeanTarget()), CycleAchieved: ms(r.Cycle.MeanAchieved()),
		Cycles: r.Cycle.N, LateCycles: r.Cycle.Late, SetupFail: r.SetupFailures, SetupEx: r.SetupExample}
	limits := in.s.limits()
	for _, op := range Ops {
		name := op.String()
		o := opRecord{TargetPct: in.s.Mix[op], LimitMs: ms(limits[name]), MeanMs: math.NaN(), P90Ms: math.NaN(), P99Ms: math.NaN(), MaxMs: math.NaN()}
		if x := r.Ops[name]; x != nil {
			o.Count, o.Failed, o.Unfinished, o.Failures, o.Examples = x.Count, x.Failed(), x.Unfinished, x.Failures, x.Examples
			if x.Count > 0 {
				o.MeanMs, o.P90Ms = ms(x.Latency.Mean()), ms(x.Latency.Quantile(0.9))
				o.P99Ms, o.MaxMs = ms(x.Latency.Quantile(0.99)), ms(x.Latency.Max())
			}
		}
		if rec.Completed > 0 {
			o.MixPct = 100 * float64(o.Count) / float64(rec.Completed)
		}
		rec.Ops[name] = o
	}
	return rec
}

// MarshalJSON writes NaN figures (an operation that never succeeded) as
// null.
func (o opRecord) MarshalJSON() ([]byte, error) {
	type plain opRecord
	p := plain(o)
	nan := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		MeanMs *float64 `json:"mean_ms"`
		P90Ms  *float64 `json:"p90_ms"`
		P99Ms  *float64 `json:"p99_ms"`
		MaxMs  *float64 `json:"max_ms"`
	}{p, nan(o.MeanMs), nan(o.P90Ms), nan(o.P99Ms), nan(o.MaxMs)})
}

// UnmarshalJSON reads what MarshalJSON wrote, null as NaN.
func (o *opRecord) UnmarshalJSON(b []byte) error {
	type plain opRecord
	var x struct {
		plain
		MeanMs *float64 `json:"mean_ms"`
		P90Ms  *float64 `json:"p90_ms"`
		P99Ms  *float64 `json:"p99_ms"`
		MaxMs  *float64 `json:"max_ms"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*o = opRecord(x.plain)
	val := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	o.MeanMs, o.P90Ms, o.P99Ms, o.MaxMs = val(x.MeanMs), val(x.P90Ms), val(x.P99Ms), val(x.MaxMs)
	return nil
}

// rulePass reports whether every outcome of a rule passed (for an
// operation, when op is set).
func (r *record) rulePass(rule, op string) float64 {
	seen := false
	for _, o := range r.QoS.Outcomes {
		if o.Rule != rule || (op != "" && o.Op != op) {
			continue
		}
		seen = true
		if !o.Pass {
			return 0
		}
	}
	if !seen {
		return math.NaN()
	}
	return 1
}

// summary is one line: throughput, the cycle and the verdict.
func (r *record) summary() string {
	var parts []string
	for _, op := range Ops {
		o := r.Ops[op.String()]
		parts = append(parts, fmt.Sprintf("%s %d ok/%d failed, mean %.3g ms, p90 %.3g ms, %.2f%% of the mix", op, o.Count, o.Failed, o.MeanMs, o.P90Ms, o.MixPct))
	}
	return fmt.Sprintf("%.1f operations/s in the steady state (%d users per instance x %d); mean cycle %.0f ms as run, %.0f ms as drawn (configured mean %.0f ms), %d of %d cycles late; QoS %s; %s",
		r.Throughput, r.Users, r.Instances, r.CycleAchieved, r.CycleTarget, r.CycleMean, r.LateCycles, r.Cycles, r.QoS.Summary(), strings.Join(parts, "; "))
}

// failureText lists the failures by cause with an example each.
func (r *record) failureText() string {
	var parts []string
	for _, op := range Ops {
		o := r.Ops[op.String()]
		for _, cause := range sortedKeys(o.Failures) {
			parts = append(parts, fmt.Sprintf("%s %s x%d (e.g. %s)", op, cause, o.Failures[cause], o.Examples[cause]))
		}
	}
	if r.SetupFail > 0 {
		parts = append(parts, fmt.Sprintf("%d users could not start (e.g. %s)", r.SetupFail, r.SetupEx))
	}
	if len(parts) == 0 {
		return "no operation was attempted"
	}
	return strings.Join(parts, "; ")
}

// notes are the trial's warnings: failures by cause, a driver that may
// have been the bottleneck, percentiles from few operations, the mix
// rule's sampling noise.
func (r *record) notes() []string {
	var out []string
	var failed int64
	for _, o := range r.Ops {
		failed += o.Failed
	}
	if failed > 0 || r.SetupFail > 0 {
		out = append(out, "failed operations by cause: "+r.failureText())
	}
	if r.Saturation.Saturated {
		out = append(out, "the driver may have been the bottleneck: "+strings.Join(r.Saturation.Reasons, "; "))
	}
	out = append(out, fmt.Sprintf("the driver used %.1f%% of a core, %.2f ms of CPU per operation (the seed's Faban ran on a client host of its own; here it shares the machine)", r.DriverCPU, r.DriverOpMs))
	var few []string
	for _, op := range Ops {
		if o := r.Ops[op.String()]; o.Count < MinPercentileOps {
			few = append(few, fmt.Sprintf("%s %d", op, o.Count))
		}
	}
	if len(few) > 0 {
		out = append(out, fmt.Sprintf("p90 from fewer than %d operations (no verdict on it across platforms): %s", MinPercentileOps, strings.Join(few, ", ")))
	}
	if r.Completed > 0 {
		// The mix rule's own noise: a share p of n operations has a
		// binomial standard error of sqrt(p(1-p)/n).
		worst, name := 0.0, ""
		for _, op := range Ops {
			p := r.Ops[op.String()].TargetPct / 100
			if se := 100 * math.Sqrt(p*(1-p)/float64(r.Completed)); se > worst {
				worst, name = se, op.String()
			}
		}
		if worst > MixTolerancePoints/3 {
			out = append(out, fmt.Sprintf("the mix rule (±%g points) at %d operations: %s's share alone has a sampling standard error of %.2f points, so a mix failure may be chance (the seed counted some 540,000 operations)",
				MixTolerancePoints, r.Completed, name, worst))
		}
	}
	return out
}

// MinPercentileOps is the fewest operations behind a p90 that supports a
// verdict (stats.MinTailSamples(0.9): ten beyond it).
const MinPercentileOps = 100

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			found = found || l == a
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}
