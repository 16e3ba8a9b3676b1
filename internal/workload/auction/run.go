package auction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	app "github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
)

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: each simulated user (and each auction it follows) waits for its operation, then paces by Weathervane's cycle time (normal, mean 5 s, sd 1.25 s, clipped to [2.5 s, 7.5 s]) from the previous start; overload shows as operations past their limits and a longer achieved cycle"

// prepared is what every trial of a run shares: the application and the
// data template, made once.
type prepared struct {
	war      []byte
	template *app.Template
}

var (
	prepMu   sync.Mutex
	prepDone = map[string]*prepared{}
)

// prepare builds the application (Maven, unless the WAR of these sources is
// in the state directory) and the data template of the instance's size
// (unless cached), once per process.
func (in *Instance) prepare(ctx context.Context, t workload.Trial) (*prepared, error) {
	key := fmt.Sprintf("%s/%d/%s", in.size.Name(), in.seed, t.Run)
	prepMu.Lock()
	defer prepMu.Unlock()
	if p, ok := prepDone[key]; ok {
		return p, nil
	}
	if t.Builder() == nil {
		return nil, errors.New("the auction's data is loaded by a PostgreSQL on this host, but the trial has no host platform")
	}
	home := state.Home()
	start := time.Now()
	if _, err := app.BuildWAR(ctx, home, t.Log); err != nil {
		return nil, err
	}
	war, err := app.ReadWAR(home)
	if err != nil {
		return nil, err
	}
	tpl, err := app.EnsureTemplate(ctx, app.TemplateOptions{State: home, Size: in.size, Seed: in.seed, Platform: t.Builder(), Run: t.Run, Log: t.Log})
	if err != nil {
		return nil, err
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(t.Log, "%s: the application and the data for %d users ready in %v (made once, then kept under %s)\n",
			t.Name, in.size.MaxUsers, d.Round(100*time.Millisecond), home.Root)
	}
	p := &prepared{war: war, template: tpl}
	prepDone[key] = p
	return p, nil
}

// stepDetail is what each step stores (search_steps.detail) and what the
// trial's metrics are read from.
type stepDetail struct {
	Users      int                `json:"users"`
	Throughput float64            `json:"ops_per_sec"`
	Ops        map[string]opStats `json:"ops"`
	Cycle      struct {
		TargetMs, AchievedMs float64
		Late, N              int64
	} `json:"cycle"`
	SetupFailures int64               `json:"setup_failures,omitempty"`
	CPU           cpuRecord           `json:"cpu"`
	Tiers         map[string]float64  `json:"tier_cpu_pct"`
	DriverCPU     float64             `json:"driver_cpu_pct"`
	Saturation    driver.Saturation   `json:"saturation"`
	QoS           qos.Verdict         `json:"qos"`
	Commands      []string            `json:"commands,omitempty"`
	Examples      map[string][]string `json:"failure_examples,omitempty"`
	// Settled is how long, in seconds, the servers took after a failing
	// step to work off the overload's backlog (workload.Settle).
	Settled float64 `json:"settled_s,omitempty"`
}

// opStats is one operation's figures in a step.
type opStats struct {
	Count      int64   `json:"count"`
	Failures   int64   `json:"failures,omitempty"`
	Unfinished int64   `json:"unfinished,omitempty"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Within     float64 `json:"within,omitempty"` // share within the limit
}

// cpuRecord is a step's CPU account, as stored.
type cpuRecord struct {
	Ops                        float64 `json:"ops"`
	MachinePerOpUs, RunPerOpUs float64
	ServerPct, ClientPct       float64
	StealPct, OutsidePct       float64
	MachineBusy                float64 `json:"machine_busy"`
}

// Run implements workload.Instance: it deploys the auction on the trial's
// platform and runs the find-max search over users, each step a driver run
// judged by Weathervane's QoS, every step stored as it ends.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	p, err := in.prepare(ctx, t)
	if err != nil {
		return res, err
	}
	dataDir, err := state.TempDir(t.Run, "auction-pgdata")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dataDir)
	uid, gid, err := datacache.UserIDs(pgserver.SystemUser)
	if err != nil {
		return res, err
	}
	copyStart := time.Now()
	if err := p.template.CopyTo(dataDir, uid, gid); err != nil {
		return res, err
	}
	copied := time.Since(copyStart)

	topo := in.stack(p.war, dataDir).topology()
	topo.Layout, topo.VMs, topo.Overcommit, topo.Placement = in.topo.Layout, in.topo.VMs, in.topo.Overcommit, in.topo.Placement
	deployStart := time.Now()
	d, stop, err := workload.Deploy(ctx, t, topo, &res)
	if err != nil {
		return res, workload.StopUnit(&StackError{Platform: t.Platform.Name(), Err: err})
	}
	defer stop(&err)
	booted := time.Since(deployStart)
	web := d.Entries(RoleWeb, app.PortHTTP)
	if len(web) != 1 {
		return res, fmt.Errorf("the deployment has %d nginx entries, want 1", len(web))
	}
	servers, tiers, err := serverTiers(d, t.Platform.Name())
	if err != nil {
		return res, err
	}
	res.Commands = append(res.Commands, fmt.Sprintf("driver: closed loop, simulated users at http://%s/ (%s)", web[0], Behaviour))

	// The users persist from step to step, as Weathervane's do when findMax
	// changes the load (in process; child drivers start fresh each step).
	session := string(t.Run) + "/" + t.Name
	defer ReleaseSession(session)
	exec := func(ctx context.Context, st search.Step) (search.Outcome, error) {
		return in.step(ctx, t, st, web[0], session, d, servers, tiers)
	}
	cfg := in.searchConfig()
	sr, err := search.Run(ctx, cfg, t.Steps, exec)
	if err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, ClosedLoopNote, in.searchNote(t, sr),
		fmt.Sprintf("data for %d users%s (template %s, %.0f MB) copied in %v; the servers ready in %v",
			in.size.MaxUsers, in.sizedNote(), p.template.Info.Key, float64(p.template.Info.Bytes)/(1<<20), copied.Round(10*time.Millisecond), booted.Round(100*time.Millisecond)))
	res.Notes = append(res.Notes, in.quickNotes(t.Duration)...)
	if !sr.Found {
		return res, notFound(t.Platform.Name(), cfg, sr)
	}
	err = peakResult(sr, &res)
	return res, err
}

// serverTiers lists the deployment's servers and groups their CPU
// reporters by tier (role).
func serverTiers(d *deploy.Deployment, platformName string) ([]platform.Server, map[string][]platform.CPUReporter, error) {
	tiers := map[string][]platform.CPUReporter{}
	var servers []platform.Server
	for _, r := range d.Servers() {
		c, ok := r.Srv.(platform.CPUReporter)
		if !ok {
			return nil, nil, fmt.Errorf("platform %s cannot report the CPU time of %s", platformName, r.ID.Name())
		}
		tiers[r.ID.Role] = append(tiers[r.ID.Role], c)
		servers = append(servers, r.Srv)
	}
	return servers, tiers, nil
}

// notFound is the error of a search that found no passing load: a
// *SearchError, which stops the platform (workload.StopUnit) unless the
// search only ran out of steps.
func notFound(platformName string, cfg search.Config, sr search.Result) error {
	err := &SearchError{Platform: platformName, Reason: fmt.Sprintf("no number of users met the QoS down to %g: %s", cfg.Min, lastSummary(sr.Steps))}
	if sr.Reason == search.ReasonStepCap {
		// The search ran out of steps before a pass (a loaded machine,
		// a stack still working off an overload): this trial has no
		// peak, but another round may; only a stack that fails at the
		// smallest load stops the platform.
		err.Reason = fmt.Sprintf("no number of users met the QoS in %d steps (%s), the lowest tried %g: %s", len(sr.Steps), search.ReasonStepCap, lowest(sr.Steps), lastSummary(sr.Steps))
		return err
	}
	return workload.StopUnit(err)
}

// peakResult fills res with the figures of the passing step at the peak
// and the notes that qualify it (a ceiling, an unverified peak, a
// saturated driver).
func peakResult(sr search.Result, res *workload.Result) error {
	var atMax search.Step
	for _, st := range sr.Steps {
		if st.Pass && st.Value == sr.Max {
			atMax = st
		}
	}
	var dt stepDetail
	if err := json.Unmarshal(atMax.Detail, &dt); err != nil {
		return fmt.Errorf("reading the record of the step at the peak: %w", err)
	}
	res.Values = map[string]float64{
		MetricPeakUsers:                        sr.Max,
		MetricOpsAtPeak:                        dt.Throughput,
		cpuCost.Metric:                         dt.CPU.MachinePerOpUs,
		workload.RunCPUPrefix + cpuCost.Metric: dt.CPU.RunPerOpUs,
		workload.MetricServerCPU:               dt.CPU.ServerPct,
		workload.MetricClientCPU:               dt.CPU.ClientPct,
		workload.MetricStealCPU:                dt.CPU.StealPct,
		workload.MetricOutsideCPU:              dt.CPU.OutsidePct,
		MetricSteps:                            float64(len(sr.Steps)),
		MetricSaturated:                        b2f(dt.Saturation.Saturated),
		MetricCycleRatio:                       safeDiv(dt.Cycle.AchievedMs, dt.Cycle.TargetMs),
	}
	for _, r := range Roles {
		res.Values[TierMetric(r)] = dt.Tiers[r]
	}
	res.Commands = append(res.Commands, dt.Commands...)
	if sr.Resumed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the search resumed from %d stored steps of an interrupted attempt", sr.Resumed))
	}
	if c, ok := sr.CeilingOf(MetricPeakUsers); ok {
		res.Notes = append(res.Notes, c.Note(), fmt.Sprintf("no number of users up to %g failed (raise %s, and %s for the data, or %s, to find the real peak)", sr.Max, pSearchMax, pMaxUsers, pMaxSteps))
	} else if sr.Reason != search.ReasonVerified {
		res.Notes = append(res.Notes, "search ended: "+sr.Reason+": the peak is the best pass, not verified")
	}
	if dt.Saturation.Saturated {
		res.Notes = append(res.Notes, "the driver may have been the bottleneck at the peak: "+strings.Join(dt.Saturation.Reasons, "; "))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("at the peak %.0f users: %.1f operations/s, mean cycle %.2f s (target %.2f s, %d of %d cycles late), machine busy %.0f%%, tiers %s",
		sr.Max, dt.Throughput, dt.Cycle.AchievedMs/1000, dt.Cycle.TargetMs/1000, dt.Cycle.Late, dt.Cycle.N, dt.CPU.MachineBusy*100, tierLine(dt.Tiers)))
	return nil
}

// settle waits, after a failing step, until the stack has worked off what
// the overload queued (workload.Settle over the tiers' CPU time), and
// returns how many seconds that took.
func (in *Instance) settle(ctx context.Context, t workload.Trial, d *deploy.Deployment, tiers map[string][]platform.CPUReporter, users int) (float64, error) {
	waited, drained, err := workload.SettleTiers(ctx, func(ctx context.Context) (map[string]time.Duration, error) {
		return readTiers(ctx, tiers)
	})
	if err != nil {
		return 0, in.serverError(ctx, t, d, err)
	}
	if !drained {
		fmt.Fprintf(t.Log, "%s: the servers were still busy %v after the failing step of %d users\n", t.Name, waited.Round(time.Second), users)
	}
	return waited.Seconds(), nil
}

// stepSummary is a step's one line: phase, users, throughput, cycle, the
// QoS verdict and what qualifies it.
func stepSummary(st search.Step, users int, dt stepDetail, verdict string) string {
	cycle := "no cycle completed within the interval"
	if dt.Cycle.N > 0 {
		cycle = fmt.Sprintf("cycle %.2f s", dt.Cycle.AchievedMs/1000)
	}
	summary := fmt.Sprintf("%s %d users: %.1f ops/s, %s, %s", st.Phase, users, dt.Throughput, cycle, verdict)
	if dt.SetupFailures > 0 {
		summary += fmt.Sprintf(" (%d users could not start)", dt.SetupFailures)
	}
	if dt.Saturation.Saturated {
		summary += " (driver saturated)"
	}
	return summary
}

// StackError is a deployment that did not come up or failed during the
// search (a server that failed to start or exited, an app server that lost
// its broker): the error names the
// server and carries its log's tail. Run returns it marked
// workload.StopUnit: the platform cannot run the auction as configured, and
// the study goes on with the others.
type StackError struct {
	Platform string
	Err      error
}

func (e *StackError) Error() string {
	return fmt.Sprintf("the auction's servers failed on %s: %v", e.Platform, e.Err)
}

func (e *StackError) Unwrap() error { return e.Err }

// SearchError is a search that found no passing number of users (also
// marked workload.StopUnit).
type SearchError struct {
	Platform, Reason string
}

func (e *SearchError) Error() string {
	return fmt.Sprintf("find-max on %s: %s", e.Platform, e.Reason)
}

// step runs the driver with st.Value users and judges the decision
// interval.
func (in *Instance) step(ctx context.Context, t workload.Trial, st search.Step, addr, session string, d *deploy.Deployment,
	servers []platform.Server, tiers map[string][]platform.CPUReporter) (search.Outcome, error) {
	users := int(st.Value)
	decide, rules := t.Duration, in.rules()
	if st.Phase == search.Coarse {
		decide, rules = min(in.coarse, t.Duration), CoarseRules()
	}
	c := in.driverConfig(users, addr, decide, string(t.Run), session)
	c.Client = t.Client
	clients := []platform.CPUReporter{workload.SelfCPU{}}
	meter, err := workload.StartCPU(ctx, servers, clients...)
	if err != nil {
		return search.Outcome{}, in.serverError(ctx, t, d, err)
	}
	tier0, err := readTiers(ctx, tiers)
	if err != nil {
		return search.Outcome{}, in.serverError(ctx, t, d, err)
	}
	r, err := driver.Run(ctx, c)
	if err != nil {
		return search.Outcome{}, err
	}
	if r.Drivers > 0 { // child processes ran the load (also on driver hosts with drivers: 0)
		meter.AddClient(r.ProcessCPU)
	}
	tier1, err := readTiers(ctx, tiers)
	if err != nil {
		return search.Outcome{}, in.serverError(ctx, t, d, err)
	}
	acct, err := meter.Stop(ctx)
	if err != nil {
		return search.Outcome{}, in.serverError(ctx, t, d, err)
	}
	if t.Series != nil {
		if err := t.Series.PutSeries(ctx, st.Seq, r.Points()); err != nil {
			return search.Outcome{}, err
		}
	}
	verdict := rules.Evaluate(r.QoS())
	dt := detail(r, verdict, acct, tier0, tier1, users)
	if !verdict.Pass {
		// An overloaded stack goes on serving what the overload queued
		// after the driver stops: let it work that off (workload.Settle)
		// before the health check, which a swamped nginx answers late,
		// and before the next step, which would meet the backlog.
		settled, err := in.settle(ctx, t, d, tiers, users)
		if err != nil {
			return search.Outcome{}, err
		}
		dt.Settled = settled
	}
	// A server that died, or an app server that lost the broker, ends the
	// search for this platform rather than passing or failing the step: a
	// step can pass without a broker (every long poll simply waits), and
	// the next would measure a stack that no longer auctions.
	if err := healthy(ctx, d, addr); err != nil {
		return search.Outcome{}, workload.StopUnit(&StackError{Platform: t.Platform.Name(), Err: fmt.Errorf("after the step of %d users: %w", users, err)})
	}
	b, err := json.Marshal(dt)
	if err != nil {
		return search.Outcome{}, fmt.Errorf("encoding the step record: %w", err)
	}
	summary := stepSummary(st, users, dt, verdict.Summary())
	fmt.Fprintf(t.Log, "%s: %s\n", t.Name, truncate(summary, 400))
	return search.Outcome{Pass: verdict.Pass, Summary: truncate(summary, 2000), Detail: b}, nil
}

// healthy checks that no server has exited and that the application,
// through nginx, still answers its health check (which fails when an app
// server has lost its broker or database).
//
// A health check that times out while every server runs is a stack still
// swamped by an overload, not a broken one: it is asked again, up to
// healthTries times, before the platform is given up.
func healthy(ctx context.Context, d *deploy.Deployment, addr string) error {
	for try := 1; ; try++ {
		if err := d.Check(ctx); err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, healthTimeout)
		err := app.WebReady(hctx, addr)
		cancel()
		if err == nil || try == healthTries || ctx.Err() != nil || !timedOut(err) {
			return err
		}
	}
}

// healthTries bounds the health checks of a swamped stack after a step.
const healthTries = 4

// timedOut reports whether err is a request that ran out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// healthTimeout bounds the health check after each step.
const healthTimeout = 15 * time.Second

// serverError explains a failure to read a server's CPU time: most likely
// a server is gone.
func (in *Instance) serverError(ctx context.Context, t workload.Trial, d *deploy.Deployment, err error) error {
	if cerr := d.Check(ctx); cerr != nil {
		return workload.StopUnit(&StackError{Platform: t.Platform.Name(), Err: cerr})
	}
	return err
}

// readTiers reads every tier's CPU time.
func readTiers(ctx context.Context, tiers map[string][]platform.CPUReporter) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for role, rs := range tiers {
		for _, r := range rs {
			c, err := r.CPUTime(ctx)
			if err != nil {
				return nil, fmt.Errorf("reading the CPU time of the %s tier: %w", role, err)
			}
			out[role] += c
		}
	}
	return out, nil
}

// detail summarises a step.
func detail(r *driver.Result, v qos.Verdict, a workload.CPUAccount, tier0, tier1 map[string]time.Duration, users int) stepDetail {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	limits := Limits()
	dt := stepDetail{Users: users, Ops: map[string]opStats{}, QoS: v, Commands: r.Commands, SetupFailures: r.SetupFailures,
		Tiers: map[string]float64{}, Examples: map[string][]string{}}
	for name, o := range r.Ops {
		s := opStats{Count: o.Count, Failures: o.Failed(), Unfinished: o.Unfinished}
		if o.Count > 0 {
			s.P50Ms, s.P99Ms = ms(o.Latency.Quantile(0.5)), ms(o.Latency.Quantile(0.99))
			if l, ok := limits[name]; ok {
				s.Within = o.Latency.FractionWithin(l)
			}
		}
		dt.Ops[name] = s
		for _, e := range o.Examples {
			if len(dt.Examples[name]) < 3 {
				dt.Examples[name] = append(dt.Examples[name], e)
			}
		}
	}
	dt.Throughput = r.Throughput()
	dt.Cycle.TargetMs, dt.Cycle.AchievedMs = ms(r.Cycle.MeanTarget()), ms(r.Cycle.MeanAchieved())
	dt.Cycle.Late, dt.Cycle.N = r.Cycle.Late, r.Cycle.N
	ok, failed := r.Ended()
	ops := ok + failed
	var res workload.Result
	if ops > 0 {
		a.Record(cpuCost, float64(ops), &res)
	}
	dt.CPU = cpuRecord{Ops: float64(ops), MachinePerOpUs: res.Values[cpuCost.Metric], RunPerOpUs: res.Values[workload.RunCPUPrefix+cpuCost.Metric],
		ServerPct: res.Values[workload.MetricServerCPU], ClientPct: res.Values[workload.MetricClientCPU],
		StealPct: res.Values[workload.MetricStealCPU], OutsidePct: res.Values[workload.MetricOutsideCPU], MachineBusy: a.Machine.Utilisation}
	if iv := a.Interval().Seconds(); iv > 0 {
		for role, c1 := range tier1 {
			dt.Tiers[role] = max(0, (c1-tier0[role]).Seconds()) / iv * 100
		}
	}
	if r.Wall > 0 {
		dt.DriverCPU = r.CPUShare() * 100
	}
	dt.Saturation = r.Saturation(driver.Limits{Lag: 50 * time.Millisecond})
	return dt
}

// searchNote says how the search ran.
func (in *Instance) searchNote(t workload.Trial, sr search.Result) string {
	cfg := in.searchConfig()
	return fmt.Sprintf("find-max over users (Weathervane's findMax): a coarse ramp from %d users multiplied by %g (%v decisions: >= 99.9%% of timed operations within their limits, <= %g%% failures), then fine steps and a verification with %v decisions (>= 99%% of each timed operation within its limit, each share within %g%% of its target or %g standard errors, <= %g%% failures) to within %g%%, at most %d users; each step a fresh set of users over a %v ramp and a %v warm-up; %d steps",
		in.start, cfg.Factor, min(in.coarse, t.Duration), MaxFailurePercent, t.Duration, in.mixTol*100, in.mixSigmas, MaxFailurePercent,
		cfg.Tolerance*100, in.searchMax, in.rampUp, in.warmup, len(sr.Steps))
}

func tierLine(t map[string]float64) string {
	var parts []string
	for _, r := range Roles {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", r, t[r]))
	}
	return strings.Join(parts, ", ")
}

// lowest is the smallest load the steps tried.
func lowest(steps []search.Step) float64 {
	low := math.Inf(1)
	for _, st := range steps {
		low = math.Min(low, st.Value)
	}
	return low
}

func lastSummary(steps []search.Step) string {
	if len(steps) == 0 {
		return "no steps"
	}
	s := make([]search.Step, len(steps))
	copy(s, steps)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Seq < s[j].Seq })
	return s[len(s)-1].Summary
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
