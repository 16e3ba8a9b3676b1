// Package httpmax is the http-max workload, the first study on nearnative's
// own driver: nginx on the platform serves a static 4 KB page, the
// open-loop driver on the host sends GETs at a fixed rate (latency timed
// from each request's due time, wrk2's rule), and a find-max search (the
// Weathervane rules in internal/search) looks for the highest rate whose p99
// stays under a limit (default 10 ms) with at most 0.5% failures and every
// due request answered. The metric, the verified maximum rate, is an
// ordinary metric of the trial: platforms are interleaved per round and get
// a ratio and an interval like any other.
package httpmax

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/driver/httpc"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricMaxRate   = "max_rate"
	MetricCPUPerReq = "cpu_us_per_req"
	MetricP99       = "p99_at_max_ms"
	MetricDriverCPU = "driver_cpu_pct"
	MetricServerCPU = "server_cpu_pct"
	MetricSteps     = "search_steps"
	MetricSaturated = "driver_saturated"
)

// Rules besides the latency limit.
const (
	maxFailures  = 0.005 // Weathervane's failure limit
	minDelivered = 0.99  // due requests that must be answered
	readyTimeout = 30 * time.Second
	stepPause    = 100 * time.Millisecond // between steps: the server drains
	drain        = 500 * time.Millisecond // in-flight requests at a step's end
	// requestTimeout fails a request nginx has not answered in this long.
	requestTimeout = 5 * time.Second
)

// OpenLoopNote goes with every trial.
const OpenLoopNote = "open loop: requests are due at a fixed rate whatever happened to the ones before; latency runs from each request's due time (wrk2's rule against coordinated omission), not from when it was sent"

// defaultBackends is the number of nginx servers behind HAProxy.
const defaultBackends = 2

// Workload is the http-max workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "http-max" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "nginx serving a static page on the platform, nearnative's open-loop driver on the host: find-max of the request rate whose p99 stays under a limit"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "limit", Type: workload.Duration, Default: "10ms", Help: "p99 latency limit (from each request's due time) a rate must meet"},
		{Name: "page_bytes", Type: workload.Int, Default: "4096", Min: 1, HasMin: true, Help: "size of the static page"},
		{Name: "connections", Type: workload.Int, Default: "64", Min: 1, HasMin: true, Help: "concurrent driver connections (keep-alive), each sending when a request is due and it is free"},
		{Name: "drivers", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "child driver processes (0: the load comes from the nearnative process itself)"},
		{Name: "driver_cpus", Type: workload.String, Default: "", Help: "CPU list the child driver processes are pinned to (needs drivers >= 1), e.g. 1 or 2-3"},
		{Name: "nginx_workers", Type: workload.String, Default: "auto", Help: "nginx worker_processes: auto (one per CPU the server sees) or a number"},
		{Name: "lb", Type: workload.String, Default: LBNone, Help: "none: the driver sends to one nginx; haproxy: to HAProxy (HTTP mode, round robin) in front of backends nginx servers, all on the platform"},
		{Name: "backends", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "nginx servers behind HAProxy (lb: haproxy only; 0: two)"},
		{Name: "start_rate", Type: workload.Float, Default: "1000", Quick: "2000", Min: 1, HasMin: true, Help: "first rate (requests/s) of the search's coarse ramp, which doubles it until a first failure"},
		{Name: "max_rate", Type: workload.Float, Default: "1000000", Min: 1, HasMin: true, Help: "the search never tries more than this many requests/s"},
		{Name: "tolerance", Type: workload.Float, Default: "0.01", Quick: "0.05", Min: 0.001, HasMin: true,
			Help: "the search stops when the lowest failing and highest passing rates are within this fraction (Weathervane: 1%)"},
		{Name: "max_steps", Type: workload.Int, Default: "40", Quick: "12", Min: 2, HasMin: true,
			Help: "the search stops after this many steps even if its bracket is still open, and reports its best pass unverified (the notes say so)"},
		{Name: "step_warmup", Type: workload.Duration, Default: "2s", Quick: "250ms", Help: "load before each step's decision interval, not counted"},
		{Name: "coarse_interval", Type: workload.Duration, Default: "2s", Quick: "500ms",
			Help: "decision interval of the coarse ramp's steps (the fine steps and the verification use the study's trial length)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{
		limit:       v.Duration("limit"),
		pageBytes:   v.Int("page_bytes"),
		connections: v.Int("connections"),
		drivers:     v.Int("drivers"),
		driverCPUs:  v.String("driver_cpus"),
		workers:     v.String("nginx_workers"),
		lb:          v.String("lb"),
		backends:    v.Int("backends"),
		search: search.Config{Start: v.Float("start_rate"), Max: v.Float("max_rate"), Min: 1,
			Tolerance: v.Float("tolerance"), MaxSteps: v.Int("max_steps"), MaxIs: "the rate cap, max_rate", MinIs: "the lowest rate tried"},
		warmup: v.Duration("step_warmup"),
		coarse: v.Duration("coarse_interval"),
	}
	if in.lb == LBHAProxy && in.backends == 0 {
		in.backends = defaultBackends
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// Instance is a configured http-max workload.
type Instance struct {
	limit       time.Duration
	pageBytes   int
	connections int
	drivers     int
	driverCPUs  string
	workers     string
	lb          string
	backends    int // nginx servers behind HAProxy; 0 until New sets the default
	search      search.Config
	warmup      time.Duration
	coarse      time.Duration
}

// Validate checks the settings together, before anything starts.
func (in *Instance) Validate() error {
	if in.limit <= 0 {
		return fmt.Errorf("parameter limit %v: must be positive", in.limit)
	}
	if err := checkWorkers(in.workers); err != nil {
		return err
	}
	switch in.lb {
	case LBNone:
		if in.backends != 0 {
			return fmt.Errorf("parameter backends %d: only with lb: %s (lb is %s: one nginx, driven directly)", in.backends, LBHAProxy, LBNone)
		}
	case LBHAProxy:
		if in.backends < 1 {
			return fmt.Errorf("parameter backends %d: want at least 1 nginx behind HAProxy", in.backends)
		}
		if err := in.topology().Validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("parameter lb %q: want %s or %s", in.lb, LBNone, LBHAProxy)
	}
	if err := in.search.Validate(); err != nil {
		return fmt.Errorf("parameters start_rate, max_rate, tolerance: %w", err)
	}
	if in.search.Tolerance >= 0.5 {
		return fmt.Errorf("parameter tolerance %g: want a fraction below 0.5", in.search.Tolerance)
	}
	c := in.driverConfig(search.Step{Phase: search.Coarse, Value: in.search.Start}, "http://127.0.0.1:1/", time.Second, "")
	if err := c.Validate(); err != nil {
		return fmt.Errorf("http-max driver settings (connections, drivers, driver_cpus): %w", err)
	}
	if err := in.rules().Validate([]string{httpc.GetOp}); err != nil {
		return err
	}
	return nil
}

// rules are the QoS every step must meet. The failure rule names the GET
// operation, so that a step in which no request was even sent (every
// connection held by a stalled server) still records its outcome, "never
// attempted", instead of dropping it.
func (in *Instance) rules() qos.Set {
	return qos.Set{
		qos.Percentile{Q: 0.99, Limits: map[string]time.Duration{httpc.GetOp: in.limit}},
		qos.Failures{Max: maxFailures, Only: []string{httpc.GetOp}},
		qos.Delivered{Min: minDelivered},
	}
}

// RefusePlatform implements workload.PlatformRefuser: nginx listens with
// SO_REUSEPORT (a listening socket per worker, the kernel spreading
// connections over them), which gVisor's host network (runsc --network=host,
// hostinet) does not pass on to the host's socket in the packaged runsc:
// the second worker's bind fails with EADDRINUSE. gVisor's own network
// stack has it.
func (in *Instance) RefusePlatform(_ string, p platform.Platform) error {
	sb, ok := p.(platform.Sandboxed)
	if !ok {
		return nil
	}
	if s, ok := sb.Sandbox(); ok && s.Network == "host" {
		return fmt.Errorf("%s's host network (hostinet) does not pass SO_REUSEPORT on to the host's socket, and nginx listens with it (a socket per worker): its second worker cannot bind", s.Name)
	}
	return nil
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricMaxRate, Unit: "req/s", HigherIsBetter: true, Help: "highest request rate whose p99 (from the due time) met the limit, verified (unless the search hit its step cap, which the notes say); open loop"},
		{Name: MetricCPUPerReq, Unit: "us", HigherIsBetter: false, Help: "busy CPU time of the whole machine (driver included, /proc/stat) per request answered, at the verified maximum"},
		{Name: MetricP99, Unit: "ms", HigherIsBetter: false, Help: "p99 latency from the due time at the verified maximum", Diagnostic: true},
		{Name: MetricDriverCPU, Unit: "%", HigherIsBetter: false, Help: "the driver's own CPU use at the verified maximum (100 = one CPU)", Diagnostic: true},
		{Name: MetricServerCPU, Unit: "%", HigherIsBetter: false, Help: "the servers' CPU use (nginx's processes or container cgroup; with lb haproxy, HAProxy's and every nginx's) and the platform's helpers' (docker-proxy), as server_cpu_pct of the other workloads, over the driver's run of the step at the maximum", Diagnostic: true},
		{Name: MetricSteps, Unit: "steps", HigherIsBetter: false, Help: "search steps the trial took, resumed ones included", Diagnostic: true},
		{Name: MetricSaturated, Unit: "0/1", HigherIsBetter: false, Help: "1 when the driver's own checks found it may have been the bottleneck at the verified maximum", Diagnostic: true},
	}
}

// driverConfig is the driver run of one step.
func (in *Instance) driverConfig(st search.Step, url string, decide time.Duration, run string) driver.Config {
	c := driver.Config{
		Behaviour: httpc.GetBehaviour,
		Params: map[string]string{httpc.ParamURL: url, httpc.ParamBytes: strconv.Itoa(in.pageBytes),
			httpc.ParamTimeout: requestTimeout.String()},
		Mode: driver.Open, Plan: driver.Constant(st.Value), Connections: in.connections,
		Phases:  driver.Phases{RampUp: in.warmup, Steady: decide},
		Drain:   drain,
		Drivers: in.drivers,
		Seed:    int64(st.Seq) + 1,
		Limits:  driver.Limits{Lag: in.limit / 5},
	}
	if in.driverCPUs != "" {
		c.CPUSets = []string{in.driverCPUs}
	}
	if run != "" {
		c.Run = runid.ID(run)
	}
	return c
}

// stepDetail is what each step stores (search_steps.detail) and what the
// trial's metrics are read from.
type stepDetail struct {
	Rate        float64           `json:"rate"`
	Throughput  float64           `json:"throughput"` // answered successfully per second of the decision interval
	Due         int64             `json:"due"`
	Sent        int64             `json:"sent"` // of the due ones, before the driver stopped
	Late        int64             `json:"late"`
	P50Ms       float64           `json:"p50_ms"`
	P90Ms       float64           `json:"p90_ms"`
	P99Ms       float64           `json:"p99_ms"`
	P999Ms      float64           `json:"p999_ms"`
	MaxMs       float64           `json:"max_ms"`
	ServiceP99  float64           `json:"service_p99_ms"` // from the actual send
	Failures    map[string]int64  `json:"failures,omitempty"`
	Examples    map[string]string `json:"examples,omitempty"`
	Unfinished  int64             `json:"unfinished,omitempty"`
	CPUPerReqUs float64           `json:"cpu_us_per_req"`
	MachineBusy float64           `json:"machine_busy"`
	CPUs        int               `json:"cpus"` // CPUs the machine's busy share is of
	DriverCPU   float64           `json:"driver_cpu_pct"`
	ServerCPU   float64           `json:"server_cpu_pct"`
	Saturation  driver.Saturation `json:"saturation"`
	QoS         qos.Verdict       `json:"qos"`
	Commands    []string          `json:"commands,omitempty"`
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	start := in.startOne
	if in.lb == LBHAProxy {
		start = in.deployLB
	}
	tg, stop, err := start(ctx, t, &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	res.Commands = append(res.Commands, fmt.Sprintf("driver: %d connections, open loop, GET %s", in.connections, tg.url))

	sr, err := in.findMax(ctx, t, tg)
	if err != nil {
		return res, err
	}
	if n := in.cliffNote(t.ClientHost(), t.Platform, sr.Steps); n != "" {
		res.Notes = append(res.Notes, n)
	}
	floor, noMax := sr.FloorOf(MetricMaxRate)
	var d stepDetail
	if !noMax {
		if d, err = atMax(sr); err != nil {
			return res, err
		}
		res.Values = map[string]float64{
			MetricMaxRate:   sr.Max,
			MetricCPUPerReq: d.CPUPerReqUs,
			MetricP99:       d.P99Ms,
			MetricDriverCPU: d.DriverCPU,
			MetricServerCPU: d.ServerCPU,
			MetricSteps:     float64(len(sr.Steps)),
			MetricSaturated: b2f(d.Saturation.Saturated),
		}
		res.Commands = append(res.Commands, d.Commands...)
	}
	res.Notes = append(res.Notes, OpenLoopNote, in.searchNote(t, sr))
	if tg.finish != nil {
		if err := tg.finish(ctx, &res); err != nil {
			return res, err
		}
	}
	if noMax {
		return in.floorResult(res, sr, floor), nil
	}
	res.Notes = append(res.Notes, maxNotes(sr, d, tg)...)
	return res, nil
}

// findMax runs the find-max search over request rates against tg and
// checks that the servers lived through it. A search with no pass standing
// is a finding (search.Decision.Floor), not an error: Run records it.
func (in *Instance) findMax(ctx context.Context, t workload.Trial, tg *target) (search.Result, error) {
	exec := func(ctx context.Context, st search.Step) (search.Outcome, error) {
		return in.step(ctx, t, st, tg)
	}
	cfg := in.searchConfig(t.Duration)
	if cfg.Tolerance > search.DefaultTolerance {
		fmt.Fprintf(t.Log, "%s: a quick search: stops within %g%% (Weathervane: %g%%), %v coarse and %v fine decision intervals, at most %d steps\n",
			t.Name, cfg.Tolerance*100, search.DefaultTolerance*100, min(in.coarse, t.Duration), t.Duration, cfg.MaxSteps)
	}
	sr, err := search.Run(ctx, cfg, t.Steps, exec)
	if err != nil {
		return sr, err
	}
	if tg.check != nil {
		if err := tg.check(ctx); err != nil {
			return sr, fmt.Errorf("%w: %w", errTopologyGone, err)
		}
	}
	if _, floor := sr.FloorOf(MetricMaxRate); !sr.Found && !floor {
		// Only a search that ran no step ends with neither.
		return sr, fmt.Errorf("the search ended with no step run (%s)", sr.Reason)
	}
	return sr, nil
}

// floorResult is the trial of a search with no pass standing: max_rate is
// the lowest rate that failed, marked as an upper bound (no ratio, no
// verdict), and nothing else but the steps is a metric, since no step met
// the QoS to measure one at.
func (in *Instance) floorResult(res workload.Result, sr search.Result, f search.Ceiling) workload.Result {
	res.Values = map[string]float64{
		MetricMaxRate: f.Value,
		MetricSteps:   float64(len(sr.Steps)),
	}
	for _, m := range in.Metrics() {
		if _, ok := res.Values[m.Name]; !ok {
			res.Unmeasured = append(res.Unmeasured, m.Name)
		}
	}
	why := fmt.Sprintf("no request rate met p99 <= %v down to %g req/s (below it a decision interval of at most %v holds fewer than the %d requests a p99 needs): %s",
		in.limit, f.Value, maxTailInterval, tailSamples, lastSummary(sr.Steps))
	if sr.Reason == search.ReasonStepCap {
		why = fmt.Sprintf("no request rate met p99 <= %v and stood in %d steps (%s; the lowest that failed: %g req/s): %s",
			in.limit, len(sr.Steps), search.ReasonStepCap, f.Value, lastSummary(sr.Steps))
	}
	res.Notes = append(res.Notes, f.Note(), why)
	return res
}

// atMax is the record of the (last) passing step at the maximum: the
// verification, or the best pass when the search hit its step cap.
func atMax(sr search.Result) (stepDetail, error) {
	var at search.Step
	for _, st := range sr.Steps {
		if st.Pass && st.Value == sr.Max {
			at = st
		}
	}
	var d stepDetail
	if err := json.Unmarshal(at.Detail, &d); err != nil {
		return d, fmt.Errorf("reading the record of the step at the maximum: %w", err)
	}
	return d, nil
}

// maxNotes say how the search ended and what the machine, the driver and
// the servers did at the maximum.
func maxNotes(sr search.Result, d stepDetail, tg *target) []string {
	var notes []string
	if sr.Resumed > 0 {
		notes = append(notes, fmt.Sprintf("the search resumed from %d stored steps of an interrupted attempt", sr.Resumed))
	}
	if c, ok := sr.CeilingOf(MetricMaxRate); ok {
		notes = append(notes, c.Note())
	} else if sr.Reason != search.ReasonVerified {
		notes = append(notes, "search ended: "+sr.Reason+": the maximum is the best pass, not verified")
	}
	if d.Saturation.Saturated {
		notes = append(notes, "the driver may have been the bottleneck at the maximum: "+strings.Join(d.Saturation.Reasons, "; "))
	}
	if n := saturatedSteps(sr.Steps); n > 0 {
		notes = append(notes, fmt.Sprintf("the driver's own checks flagged it in %d of %d steps (see the steps' records)", n, len(sr.Steps)))
	}
	notes = append(notes, fmt.Sprintf("at the maximum %.0f req/s: p50 %.3g ms, p99 %.3g ms (from the send: %.3g ms), %d of %d sent late; machine %.0f%% busy, the driver %.0f%% and %s %.0f%% of one CPU",
		sr.Max, d.P50Ms, d.P99Ms, d.ServiceP99, d.Late, d.Due, d.MachineBusy*100, d.DriverCPU, tg.servers, d.ServerCPU))
	if n := othersBusy(sr.Steps); n > 0 {
		notes = append(notes, fmt.Sprintf("in %d of %d steps the machine was over 90%% busy while the driver and the servers used less than half of it: other processes competed for the CPUs", n, len(sr.Steps)))
	}
	return notes
}

// A p99 judged on few requests is one of their largest: on 100 it is their
// maximum, and one slow request fails the step. The docker-nat path of
// http-max-lb delays about 1 request in 100 by 25-40 ms even on an idle
// machine (run 20261126-232131-c8a4: p50 0.6 ms, p90 1 ms, p99 24-41 ms at
// 200-1000 req/s with the machine 4-18% busy); with 0.5 s coarse steps the
// search judged p99s of 100 to 500 requests, failed every step on such a
// request, halved down to its floor of 200 req/s and failed the trial, in 2
// (an earlier run: 3) of 5 rounds. So every step's decision interval holds
// at least tailSamples requests, the analysis' own rule for a p99
// (stats.MinTailSamples: 10 beyond it): a step at a rate too low for its
// interval runs longer, up to maxTailInterval, and the search tries no
// rate below tailSamples/maxTailInterval. Above 2000 req/s (quick) or 500
// req/s (full) nothing changes.
var tailSamples = stats.MinTailSamples(0.99)

// maxTailInterval bounds the decision interval a low rate needs.
const maxTailInterval = 10 * time.Second

// decideAt is the decision interval of a step at rate whose interval would
// be base: long enough for tailSamples requests.
func decideAt(base time.Duration, rate float64) time.Duration {
	need := time.Duration(math.Ceil(float64(tailSamples) / rate * float64(time.Second)))
	return max(base, min(need, maxTailInterval))
}

// searchConfig is the search of a trial whose decision interval is decide:
// no rate is tried below the one at which maxTailInterval holds
// tailSamples requests.
func (in *Instance) searchConfig(decide time.Duration) search.Config {
	c := in.search
	c.Min = math.Max(c.Min, math.Ceil(float64(tailSamples)/maxTailInterval.Seconds()))
	c.Start = math.Max(c.Start, c.Min)
	if c.Max > 0 {
		c.Max = math.Max(c.Max, c.Start)
	}
	return c
}

// step runs the driver at one rate and judges it. The CPU account
// (workload.StartCPU) is measured around the driver's run: the machine's
// and the servers' CPU over the same interval.
func (in *Instance) step(ctx context.Context, t workload.Trial, st search.Step, tg *target) (search.Outcome, error) {
	url := tg.url
	decide := t.Duration
	if st.Phase == search.Coarse {
		decide = min(in.coarse, t.Duration)
	}
	decide = decideAt(decide, st.Value)
	c := in.driverConfig(st, url, decide, string(t.Run))
	c.Client = t.Client
	meter, err := workload.StartCPU(ctx, tg.measured)
	if err != nil {
		return search.Outcome{}, in.cpuTimeError(ctx, url, err)
	}
	r, err := driver.Run(ctx, c)
	if err != nil {
		return search.Outcome{}, err
	}
	acct, err := meter.Stop(ctx)
	if err != nil {
		return search.Outcome{}, in.cpuTimeError(ctx, url, err)
	}
	if t.Series != nil {
		if err := t.Series.PutSeries(ctx, st.Seq, r.Points()); err != nil {
			return search.Outcome{}, err
		}
	}
	verdict := in.rules().Evaluate(r.QoS())
	d := detail(r, verdict, acct, in.limit)
	d.Rate = st.Value
	if !verdict.Pass {
		if tg.check != nil {
			if err := tg.check(ctx); err != nil {
				return search.Outcome{}, fmt.Errorf("%w: %w", errTopologyGone, err)
			}
		}
		if gone := serverGone(ctx, r, url, in.pageBytes); gone != nil {
			return search.Outcome{}, gone
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return search.Outcome{}, fmt.Errorf("encoding the step record: %w", err)
	}
	summary := fmt.Sprintf("%s %.0f req/s: p99 %.3g ms, %.0f answered/s, %s", st.Phase, st.Value, d.P99Ms, d.Throughput, verdict.Summary())
	if d.Unfinished > 0 {
		summary += fmt.Sprintf(" (%d cut off unanswered at the end)", d.Unfinished)
	}
	if unsent := d.Due - d.Sent; unsent > 0 {
		summary += fmt.Sprintf(" (%d of the due requests never sent: all %d connections were waiting for answers, or the driver was behind its plan)", unsent, in.connections)
	}
	if d.Saturation.Saturated {
		summary += " (driver saturated)"
	}
	if d.othersBusy() {
		summary += fmt.Sprintf(" (machine %.0f%% busy, mostly with other processes)", d.MachineBusy*100)
	}
	fmt.Fprintf(t.Log, "%s: %s\n", t.Name, summary)
	if err := sleepCtx(ctx, stepPause); err != nil {
		return search.Outcome{}, err
	}
	return search.Outcome{Pass: verdict.Pass, Summary: summary, Detail: b}, nil
}

// The 40 ms band: a failing step's p99 in it, where what BENCH.md ("The
// 40 ms plateau") found behind it holds on this run, is TCP's, not a cost of
// the platform.
const (
	plateauLowMs  = 36
	plateauHighMs = 50
)

// tcpIPHeaders is what a full-size segment's IPv4 and TCP headers (without
// options) take of the link's MTU: a page larger than MTU-tcpIPHeaders
// cannot leave in one packet.
const tcpIPHeaders = 40

// congestionControl reads this machine's TCP congestion control; tests
// replace it.
var congestionControl = func() string {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	return strings.TrimSpace(string(b))
}

// cliffNote names TCP's mechanism when a failing step's p99 sits at about
// 40 ms and everything BENCH.md found behind such a p99 holds on this
// trial: the driver reaches nginx itself (not HAProxy, whose own sending
// was not examined) over a link whose MTU is known and too small for the
// page in one packet, nginx's TCP is this machine's kernel's (not a VM
// guest's nor a sandbox's own stack), and that kernel runs BBR. On
// loopback a response is one segment and nothing inside it waits; with
// cubic on the same link BENCH.md found no hold, and the delayed ACK
// (Nagle's 40 ms) was ruled out there. Anywhere else the note would claim a
// mechanism this run did not check, so it is "".
func (in *Instance) cliffNote(c host.Host, p platform.Platform, steps []search.Step) string {
	if in.lb != LBNone || c.Kind() == host.Loopback || !thisKernelsTCP(p) {
		return ""
	}
	link, ok := c.(interface{ MTU() int })
	if !ok || in.pageBytes <= link.MTU()-tcpIPHeaders {
		return ""
	}
	cc := congestionControl()
	if cc != "bbr" {
		return ""
	}
	for _, st := range steps {
		var d stepDetail
		if st.Pass || json.Unmarshal(st.Detail, &d) != nil || d.P99Ms < plateauLowMs || d.P99Ms > plateauHighMs {
			continue
		}
		return fmt.Sprintf("%sp99 %.3g ms at %.0f req/s over %s is TCP's, not the platform's: over this %d-byte link nginx's %d-byte page leaves in two packets or more "+
			"(over loopback in one), and nginx's TCP is this machine's, with tcp_congestion_control %s, under which BENCH.md (\"The 40 ms plateau\") "+
			"found the sender holding a response's last packet 35-50 ms with the client's ACKs on time, and cubic on the same link not",
			workload.CliffNote, d.P99Ms, st.Value, c.Describe(), link.MTU(), in.pageBytes, cc)
	}
	return ""
}

// thisKernelsTCP reports whether p's servers send with this machine's
// kernel's TCP: not in a VM guest (a platform with an Accelerator) nor
// behind a sandbox's own network stack.
func thisKernelsTCP(p platform.Platform) bool {
	if _, guest := p.(platform.Accelerator); guest {
		return false
	}
	if sb, ok := p.(platform.Sandboxed); ok {
		if s, ok := sb.Sandbox(); ok && s.Network != "host" {
			return false
		}
	}
	return true
}

// detail summarises a step whose driver run had the CPU account acct.
func detail(r *driver.Result, v qos.Verdict, acct workload.CPUAccount, limit time.Duration) stepDetail {
	cpu := acct.Machine
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	d := stepDetail{Due: r.Open.Due, Sent: r.Open.Sent, Late: r.Open.Late, QoS: v, Commands: r.Commands}
	if g := r.Ops[httpc.GetOp]; g != nil {
		d.P50Ms, d.P90Ms, d.P99Ms = ms(g.Latency.Quantile(0.5)), ms(g.Latency.Quantile(0.9)), ms(g.Latency.Quantile(0.99))
		d.P999Ms, d.MaxMs = ms(g.Latency.Quantile(0.999)), ms(g.Latency.Max())
		if g.Service != nil {
			d.ServiceP99 = ms(g.Service.Quantile(0.99))
		}
		d.Failures, d.Examples, d.Unfinished = g.Failures, g.Examples, g.Unfinished
		d.Throughput = float64(g.Count) / r.Phases.Steady.Seconds()
	}
	ok, failed := r.Ended()
	if answered := ok + failed; answered > 0 {
		d.CPUPerReqUs = cpu.BusySeconds / float64(answered) * 1e6
	}
	d.MachineBusy, d.CPUs = cpu.Utilisation, len(cpu.PerCPUBusy)
	if r.Wall > 0 {
		d.DriverCPU = r.CPUShare() * 100
	}
	if iv := acct.Interval(); iv > 0 {
		d.ServerCPU = (acct.Servers + acct.Overhead).Seconds() / iv.Seconds() * 100
	}
	d.Saturation = r.Saturation(driver.Limits{Lag: limit / 5})
	return d
}

// errServerGone marks a trial whose server stopped answering.
var errServerGone = errors.New("the nginx server stopped answering")

// errTopologyGone marks a trial in which a server of the load-balanced
// topology exited (the error names it and shows its log's tail).
var errTopologyGone = errors.New("a server behind the driver's address exited")

// startOne starts the single nginx the driver sends to directly.
func (in *Instance) startOne(ctx context.Context, t workload.Trial, res *workload.Result) (*target, func(*error), error) {
	srv, stop, err := workload.StartServer(ctx, t, in.spec(), res)
	if err != nil {
		return nil, nil, err
	}
	stopTail := func(err *error) {
		stop(err)
		if errors.Is(*err, errServerGone) {
			*err = fmt.Errorf("%w; last lines of its log:\n%s", *err, logTail(t, 15))
		}
	}
	url := "http://" + srv.Addr("http") + PagePath
	if rerr := WaitReady(ctx, url, in.pageBytes, readyTimeout); rerr != nil {
		err = fmt.Errorf("nginx server: %w", rerr)
		stopTail(&err)
		return nil, nil, err
	}
	return &target{url: url, measured: []platform.Server{srv}, servers: "nginx"}, stopTail, nil
}

// serverGone tells a server that died from one that was only overloaded:
// when most requests failed to connect, it must still serve the page.
func serverGone(ctx context.Context, r *driver.Result, url string, size int) error {
	g := r.Ops[httpc.GetOp]
	if g == nil || r.Open.Due == 0 {
		return nil
	}
	conn := g.Failures[driver.CauseRefused] + g.Failures[driver.CauseReset] + g.Failures[driver.CauseClosed]
	if float64(conn) < 0.5*float64(r.Open.Due) {
		return nil
	}
	if err := getOnce(ctx, url, size); err != nil {
		return fmt.Errorf("%w (%d of %d requests could not connect; a fresh GET: %v)", errServerGone, conn, r.Open.Due, err)
	}
	return nil
}

// cpuTimeError explains a failure to read the server's CPU time: most
// likely the server is gone.
func (in *Instance) cpuTimeError(ctx context.Context, url string, err error) error {
	if gerr := getOnce(ctx, url, in.pageBytes); gerr != nil {
		return fmt.Errorf("%w (its CPU time cannot be read: %v; a fresh GET: %v)", errServerGone, err, gerr)
	}
	return fmt.Errorf("reading the servers' CPU time: %w", err)
}

// logTail is the end of the server's log, which the platform writes to the
// run's logs directory beside raw/.
func logTail(t workload.Trial, n int) string {
	path := filepath.Join(t.LogDir, t.Name+"-nginx.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log at " + path + ")"
	}
	if strings.TrimSpace(string(b)) == "" {
		return "(" + path + " is empty)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// searchNote says how the search ran, and where its settings are coarser
// than Weathervane's (as --quick makes them).
func (in *Instance) searchNote(t workload.Trial, sr search.Result) string {
	cfg := in.searchConfig(t.Duration)
	n := fmt.Sprintf("find-max: p99 <= %v, failures <= %g%%, >= %g%% of due requests answered; coarse ramp from %g req/s doubling (halving while it fails, not below %g req/s), %v decision intervals; then fine steps with %v decision intervals to within %g%%, verified at the best pass; every decision holds at least %d requests (10 beyond the p99: an interval is lengthened at low rates, up to %v); %v of load before each decision; %d steps",
		in.limit, maxFailures*100, minDelivered*100, cfg.Start, cfg.Min, min(in.coarse, t.Duration), t.Duration,
		in.search.Tolerance*100, tailSamples, maxTailInterval, in.warmup, len(sr.Steps))
	if in.search.Tolerance > search.DefaultTolerance {
		n += fmt.Sprintf(" (coarser than Weathervane's %g%%: a quick search)", search.DefaultTolerance*100)
	}
	return n
}

// othersBusy counts the steps during which something else kept the machine
// busy.
func othersBusy(steps []search.Step) int {
	n := 0
	for _, s := range steps {
		var d stepDetail
		if json.Unmarshal(s.Detail, &d) == nil && d.othersBusy() {
			n++
		}
	}
	return n
}

// othersBusy reports whether the machine was over 90% busy during the step
// while the driver and the server used less than half of its CPU time. A
// server CPU time of zero is taken for unknown (a platform that counts only
// a multi-process server's first process), and claims nothing.
func (d stepDetail) othersBusy() bool {
	return d.MachineBusy > 0.9 && d.ServerCPU > 0 && (d.DriverCPU+d.ServerCPU)/100 < 0.5*d.MachineBusy*float64(d.CPUs)
}

func saturatedSteps(steps []search.Step) int {
	n := 0
	for _, s := range steps {
		var d stepDetail
		if json.Unmarshal(s.Detail, &d) == nil && d.Saturation.Saturated {
			n++
		}
	}
	return n
}

func lastSummary(steps []search.Step) string {
	if len(steps) == 0 {
		return "no steps"
	}
	return steps[len(steps)-1].Summary
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// For the run's duration estimate: a search as search.Simulate plays it
// against a typical maximum (typicalMax); each step adds its warm-up, the
// pause and about 0.2 s of driver start and CPU readings (the drain ends as
// soon as the last requests are answered).
const stepOverhead = stepPause + 200*time.Millisecond

// typicalMax is the maximum the estimate's search is played against: about
// what quiet --quick runs on the 2-core development machine found with the
// load from the client host (BENCH.md, "Every built-in study's --quick"):
// one nginx about 1550 req/s on every path, where a step above fails on
// TCP's 40 ms hold of a response's last packet (BENCH.md, "The 40 ms
// plateau"); HAProxy in front of two nginx about 5000 req/s. A machine
// without that plateau searches higher, in a few more coarse steps.
func (in *Instance) typicalMax() float64 {
	if in.lb == LBHAProxy {
		return 5000
	}
	return 1550
}

// Estimate implements workload.Estimator: coarse steps decide over
// min(coarse_interval, trial), the others over the trial.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	steps, err := search.Simulate(in.searchConfig(trial), in.typicalMax())
	if err != nil {
		return trial
	}
	d := time.Second
	for _, st := range steps {
		decide := trial
		if st.Phase == search.Coarse {
			decide = min(in.coarse, trial)
		}
		d += decideAt(decide, st.Value) + in.warmup + stepOverhead
	}
	return d
}
