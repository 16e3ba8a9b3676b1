package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/driver/respc"
	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names. The CPU account (Cost.Metrics) adds run_cpu_us_per_op and
// the diagnostic CPU shares, all of the scale-out experiment.
const (
	MetricBaseline     = "baseline_ops_per_sec"
	MetricScaleout     = "scaleout_ops_per_sec"
	MetricSpeedup      = "speedup"
	MetricCPUPerOp     = "cpu_us_per_op"
	MetricBaseCPUPerOp = "baseline_cpu_us_per_op"
	MetricBaseP50      = "baseline_p50_ms"
	MetricBaseP99      = "baseline_p99_ms"
	MetricP50          = "scaleout_p50_ms"
	MetricP99          = "scaleout_p99_ms"
	// Diagnostics: what explains the speedup.
	MetricRedisCPU      = "redis_cpu_pct"
	MetricProxyCPU      = "twemproxy_cpu_pct"
	MetricLBCPU         = "haproxy_cpu_pct"
	MetricMigrations    = "redis_migrations_per_sec"
	MetricBaseMigration = "baseline_migrations_per_sec"
	MetricBusyMin       = "cpu_busy_min_pct"
	MetricBusyMax       = "cpu_busy_max_pct"
	MetricSaturated     = "driver_saturated"
)

// Cost is what the workload charges CPU to: one command of the scale-out
// experiment, in microseconds.
var Cost = workload.CPUCost{Metric: MetricCPUPerOp, Unit: "us", Scale: 1e6, Op: "command of the scale-out experiment"}

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: each connection sends its next pipeline when the replies of the last one are in (as redis-benchmark); latency is a whole pipeline's round trip"

// New implements workload.Workload: the settings are resolved for this
// machine and checked before anything starts.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	m := ThisMachine()
	s := Resolve(v, m)
	if err := s.Validate(m); err != nil {
		return nil, err
	}
	in := &Instance{s: s}
	c := in.driverConfig("127.0.0.1:1", s.Drivers, time.Second, 1, "")
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s driver settings (clients, drivers, pipeline, driver_cpus): %w", Name, err)
	}
	return in, nil
}

// CheckPlatform implements workload.PlatformChecker: a platform variant's
// pin: spread pins each Redis shard to a core of its own, so the shards
// must fit the cores left after driver_cpus (the vm platforms pin nothing
// in their guests).
//
// On the vm platforms the first guest must hold the baseline's key space,
// its shard(s) and an AOF rewrite's worst case (GuestMemoryNeed) in the
// platform's vm_memory.
func (in *Instance) CheckPlatform(base string, o platform.Options) error {
	if platform.Family(base) == platform.FamilyVM {
		mem := o.VMMemory
		if mem == "" {
			mem = vm.DefaultVMMemory
		}
		b, err := platform.ParseBytes(mem)
		if err != nil {
			return fmt.Errorf("vm_memory %q: %w", mem, err)
		}
		if need := in.s.GuestMemoryNeed(); need > b {
			return fmt.Errorf("the key space does not fit a guest: its first guest holds the baseline's %d keys and its shard(s), %s with an AOF rewrite's worst case and the guest's system, but vm_memory is %s: raise vm_memory or lower keyspace",
				in.s.Keyspace, gib(need), gib(b))
		}
		return nil
	}
	if o.Pin != platform.PinSpread {
		return nil
	}
	return in.s.checkPin(ThisMachine(), "option pin: spread")
}

// drain is how long each experiment's driver lets its last pipelines finish.
const drain = 2 * time.Second

// Estimate implements workload.Estimator: a trial runs two experiments of
// a warm-up and the measured interval each (a drain ends as soon as the
// last pipelines are answered, well within its allowance), starts N+1
// Redis (loading their data), K twemproxies and HAProxy, about 3 s with
// their readiness waits: 8 s a trial natively and 9-10 s in Docker under
// --quick on the 2-core development machine (run 20261127-032601-8572, quiet).
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	load := time.Duration(float64(in.s.Keyspace*2) / 400000 * float64(time.Second))
	return 2*(in.s.Warmup+trial) + 3*time.Second + load
}

// Instance is a configured redis-scaleout workload.
type Instance struct {
	s Settings
	// cacheRoot is where the loaded key spaces are kept (CacheRoot() when
	// empty; tests use a directory of their own).
	cacheRoot string
}

// Settings returns the resolved settings.
func (in *Instance) Settings() Settings { return in.s }

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricBaseline, Unit: "ops/s", HigherIsBetter: true, Help: "the baseline: commands per second of one driver process against one Redis holding the whole key space, directly"},
		{Name: MetricScaleout, Unit: "ops/s", HigherIsBetter: true, Help: "the scale-out system: commands per second of D driver processes through HAProxy and twemproxy to N Redis"},
		{Name: MetricSpeedup, Unit: "x", HigherIsBetter: true, Help: "scale-out / baseline commands per second of the same trial (linear would be N)"},
		{Name: MetricBaseCPUPerOp, Unit: "us", Help: "CPU time of the whole machine per command of the baseline (/proc/stat busy time, softirq included, steal excluded)"},
		{Name: MetricBaseP50, Unit: "ms", Quantile: 0.5, Help: "the baseline's median pipeline round trip (closed loop)"},
		{Name: MetricBaseP99, Unit: "ms", Quantile: 0.99, Help: "the baseline's 99th percentile pipeline round trip (closed loop)"},
		{Name: MetricP50, Unit: "ms", Quantile: 0.5, Help: "the scale-out system's median pipeline round trip (closed loop)"},
		{Name: MetricP99, Unit: "ms", Quantile: 0.99, Help: "the scale-out system's 99th percentile pipeline round trip (closed loop)"},
	}
	ms = append(ms, Cost.Metrics()...)
	return append(ms,
		workload.Metric{Name: MetricRedisCPU, Unit: "% of a core", Diagnostic: true, Help: "the Redis shards' CPU during the scale-out load, summed (a VM row: their processes in the guests)"},
		workload.Metric{Name: MetricProxyCPU, Unit: "% of a core", Diagnostic: true, Help: "the twemproxies' CPU during the scale-out load, summed"},
		workload.Metric{Name: MetricLBCPU, Unit: "% of a core", Diagnostic: true, Help: "HAProxy's CPU during the scale-out load"},
		workload.Metric{Name: MetricMigrations, Unit: "/s", Diagnostic: true, Help: "how often the Redis shards' threads moved between CPUs during the scale-out load, summed (a VM row: between the guests' vCPUs)"},
		workload.Metric{Name: MetricBaseMigration, Unit: "/s", Diagnostic: true, Help: "how often the baseline Redis's threads moved between CPUs during its load"},
		workload.Metric{Name: MetricBusyMin, Unit: "%", Diagnostic: true, Help: "the least busy host CPU during the scale-out load"},
		workload.Metric{Name: MetricBusyMax, Unit: "%", Diagnostic: true, Help: "the busiest host CPU during the scale-out load"},
		workload.Metric{Name: MetricSaturated, Unit: "0/1", Diagnostic: true, Help: "1 when the driver's own checks found it may have been the bottleneck in either experiment"},
	)
}

// driverConfig is one experiment's driver run: drivers processes of
// Clients connections against addr.
func (in *Instance) driverConfig(addr string, drivers int, steady time.Duration, seed int64, run string) driver.Config {
	s := in.s
	m := respc.Mix{Addrs: []string{addr}, Pipeline: s.Pipeline, GetRatio: s.GetRatio, Keyspace: uint64(s.Keyspace), ValueSize: s.ValueSize}
	c := driver.Config{Behaviour: respc.MixBehaviour, Params: m.Params(), Mode: driver.Closed, Users: drivers * s.Clients,
		Pacing: driver.Pacing{Mode: driver.Think, Delay: driver.Distribution{Kind: driver.Fixed}},
		Phases: driver.Phases{RampUp: s.Warmup, Steady: steady}, Drain: drain,
		Drivers: drivers, Threads: s.DriverThreads, Seed: seed}
	if s.DriverCPUs != "" {
		c.CPUSets = []string{s.DriverCPUs}
	}
	if run != "" {
		c.Run = runid.ID(run)
	}
	return c
}

// hostPlatform is what the loader and the roles beside the driver need.
type hostPlatform interface {
	platform.Platform
	deploy.Backend
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	s := in.s
	host := t.Host
	if host == nil {
		return res, errors.New("redis-scaleout needs this machine's native platform for twemproxy, HAProxy and the data loader")
	}
	be, ok := t.Platform.(deploy.Backend)
	if !ok {
		return res, fmt.Errorf("platform %s cannot deploy a topology of several servers", t.Platform.Name())
	}
	mach := be.Machine()
	if mach.GuestMemory > 0 {
		if need := s.GuestMemoryNeed(); need > mach.GuestMemory {
			return res, fmt.Errorf("the key space does not fit a guest: its first guest holds the baseline's %d keys and its shard(s), %s with an AOF rewrite's worst case and the guest's system, but the platform's vm_memory is %s: raise vm_memory or lower keyspace",
				s.Keyspace, gib(need), gib(mach.GuestMemory))
		}
	}
	log := t.Log
	if log == nil {
		log = io.Discard
	}
	cache, err := Loader{Host: t.Builder(), Run: t.Run, Root: in.cacheRoot, Log: log}.Ensure(ctx, s)
	if err != nil {
		return res, err
	}
	data, remove, err := cache.Copy(t.Run, t.Name)
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := remove(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the trial's copy of the data: %w", rerr))
		}
	}()
	topo := s.Topology(data, "")
	if mach.VCPUs > 0 {
		// In a guest, pinning would name vCPUs: the seed pinned nothing there.
		topo.Placement.Pin = topology.PinNone
	} else if s.Pin == topology.PinSpread || mach.Pin == topology.PinSpread {
		topo.Placement.Roles = map[string]string{RoleBase: firstFree(mach.CPUs, s.DriverCPUs)}
	}
	d, stop, err := workload.Deploy(ctx, t, topo, &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	// The sizes, and what the machine changed from the seed's, are the
	// note the report states once per workload.
	size := workload.SizeNote + s.Describe()
	if n := s.ScaledNote(); n != "" {
		size += "; " + n
	}
	res.Notes = append(res.Notes, size, ClosedLoopNote, in.dataNote(cache, mach))

	base, err := in.experiment(ctx, t, d, "baseline", d.Entries(RoleBase, PortRedis)[0], 1, 0)
	if err != nil {
		return res, err
	}
	scale, err := in.experiment(ctx, t, d, "scale-out", d.Entries(RoleLB, PortLB)[0], s.Drivers, 1)
	if err != nil {
		return res, err
	}
	if err := d.Check(ctx); err != nil {
		return res, err
	}
	stats, err := proxyStats(ctx, d)
	if err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, stats.note())
	if err := stats.problem(); err != nil {
		return res, err
	}
	in.record(&res, base, scale)
	return res, nil
}

// firstFree is the first CPU PinSpread gives out: the baseline's Redis
// gets the core of the first shard (they never run the load at once).
func firstFree(cpus []int, driverCPUs string) string {
	skip := map[int]bool{}
	if driverCPUs != "" {
		d, _ := platform.ParseCPUSet(driverCPUs)
		for _, c := range d {
			skip[c] = true
		}
	}
	sorted := append([]int(nil), cpus...)
	sort.Ints(sorted)
	for _, c := range sorted {
		if !skip[c] {
			return strconv.Itoa(c)
		}
	}
	return ""
}

// dataNote says where the trial's data came from.
func (in *Instance) dataNote(c *Cache, mach topology.Machine) string {
	where := "a copy of its AOF directory on the host (hard links to the cached base file, which Redis only reads)"
	if mach.VCPUs > 0 {
		where = "its AOF directory copied into its guest's disk"
	}
	return fmt.Sprintf("data: the key space loaded once into cache %s (%d keys; the baseline's Redis directly, the shards through twemproxy: %s of writing, %s to turn the AOF on, %s in all; shards hold %s keys) and reused: each Redis starts from %s and loads it before the trial's load begins",
		c.Meta.Key, c.Meta.Keyspace, c.Meta.Load.Round(time.Millisecond), c.Meta.AOF.Round(time.Millisecond), c.Meta.Total.Round(time.Millisecond),
		joinInts(c.Meta.ShardKeys), where)
}

func joinInts(xs []int64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.FormatInt(x, 10))
	}
	return strings.Join(parts, ", ")
}

// outcome is what one experiment measured.
type outcome struct {
	name    string
	r       *driver.Result
	cpu     workload.CPUAccount
	layout  placement.Record
	tiers   map[string]time.Duration // CPU per role
	ops     float64                  // commands per second of the steady phase
	all     int64                    // commands completed over the whole run
	sat     driver.Saturation
	wall    time.Duration
	pipesOK int64
}

// experiment drives one experiment: drivers processes against addr, with
// the CPU account, the per-role CPU and the layout measured around it.
func (in *Instance) experiment(ctx context.Context, t workload.Trial, d *deploy.Deployment, name, addr string, drivers, step int) (outcome, error) {
	o := outcome{name: name, tiers: map[string]time.Duration{}}
	c := in.driverConfig(addr, drivers, t.Duration, int64(step+1), string(t.Run))
	c.Client = t.Client
	obs, err := d.Observe(ctx)
	if err != nil {
		return o, err
	}
	servers := d.Servers()
	var srvs []platform.Server
	for _, r := range servers {
		srvs = append(srvs, r.Srv)
	}
	meter, err := workload.StartCPU(ctx, srvs)
	if err != nil {
		return o, err
	}
	if t.Log != nil {
		fmt.Fprintf(t.Log, "%s: %s: %d driver process(es) x %d connections, pipeline %d, against %s\n", t.Name, name, drivers, in.s.Clients, in.s.Pipeline, addr)
	}
	start := time.Now()
	r, rerr := driver.Run(ctx, c)
	o.wall = time.Since(start)
	if r != nil {
		meter.AddClient(r.ProcessCPU)
	}
	acct, err := meter.Stop(ctx)
	if rerr != nil {
		return o, fmt.Errorf("%s: the driver: %w", name, rerr)
	}
	if err != nil {
		return o, err
	}
	if o.layout, err = obs.Layout(ctx); err != nil {
		return o, err
	}
	for i, v := range acct.PerServer {
		o.tiers[servers[i].ID.Role] += v
	}
	if t.Series != nil {
		if err := t.Series.PutSeries(ctx, step, r.Points()); err != nil {
			return o, err
		}
	}
	o.r, o.cpu = r, acct
	if err := in.check(name, r); err != nil {
		if cerr := d.Check(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return o, err
	}
	op := r.Ops[respc.OpPipeline]
	o.pipesOK = op.Count
	o.ops = float64(op.Count*int64(in.s.Pipeline)) / r.Phases.Steady.Seconds()
	ok, _ := r.Ended()
	o.all = ok * int64(in.s.Pipeline)
	o.sat = r.Saturation(driver.Limits{})
	return o, nil
}

// check fails an experiment whose driver saw any failure: a GET that
// missed, an error reply (a Redis out of memory, a twemproxy that lost a
// server), a broken connection.
func (in *Instance) check(name string, r *driver.Result) error {
	if r.SetupFailures > 0 {
		return fmt.Errorf("%s: %d driver connections could not start: %s", name, r.SetupFailures, r.SetupExample)
	}
	op := r.Ops[respc.OpPipeline]
	_, failed := r.Ended()
	var causes []string
	if op != nil {
		for cause, n := range op.Failures {
			causes = append(causes, fmt.Sprintf("%d %s (%s)", n, cause, op.Examples[cause]))
		}
		sort.Strings(causes)
		failed = max(failed, op.Failed())
	}
	why := ""
	if len(causes) > 0 {
		why = ": " + strings.Join(causes, "; ")
	}
	if op == nil || op.Count == 0 {
		return fmt.Errorf("%s: no pipeline completed in the measured interval (%d failed over the run)%s", name, failed, why)
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d pipelines failed%s", name, failed, why)
	}
	return nil
}

// record puts both experiments into res.
func (in *Instance) record(res *workload.Result, base, scale outcome) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	bop, sop := base.r.Ops[respc.OpPipeline], scale.r.Ops[respc.OpPipeline]
	scale.cpu.Record(Cost, float64(scale.all), res)
	res.Values[MetricBaseline] = base.ops
	res.Values[MetricScaleout] = scale.ops
	res.Values[MetricSpeedup] = scale.ops / base.ops
	res.Values[MetricBaseCPUPerOp] = base.cpu.MachineSeconds() / float64(base.all) * 1e6
	res.Values[MetricBaseP50] = ms(bop.Latency.Quantile(0.5))
	res.Values[MetricBaseP99] = ms(bop.Latency.Quantile(0.99))
	res.Values[MetricP50] = ms(sop.Latency.Quantile(0.5))
	res.Values[MetricP99] = ms(sop.Latency.Quantile(0.99))
	// A trial is disturbed when the rest of the machine was busy during
	// either experiment.
	res.Values[workload.MetricOutsideCPU] = max(res.Values[workload.MetricOutsideCPU], pct(base.cpu.OutsideSeconds(), base.cpu.Interval()))
	if res.Samples == nil {
		res.Samples = map[string]int64{}
	}
	res.Samples[MetricBaseP50], res.Samples[MetricBaseP99] = bop.Count, bop.Count
	res.Samples[MetricP50], res.Samples[MetricP99] = sop.Count, sop.Count
	iv := scale.cpu.Interval()
	res.Values[MetricRedisCPU] = pct(scale.tiers[RoleRedis].Seconds(), iv)
	res.Values[MetricProxyCPU] = pct(scale.tiers[RoleProxy].Seconds(), iv)
	res.Values[MetricLBCPU] = pct(scale.tiers[RoleLB].Seconds(), iv)
	res.Values[MetricMigrations] = migrations(scale.layout, RoleRedis)
	res.Values[MetricBaseMigration] = migrations(base.layout, RoleBase)
	lo, hi := scale.layout.Spread()
	res.Values[MetricBusyMin], res.Values[MetricBusyMax] = lo*100, hi*100
	res.Values[MetricSaturated] = 0
	l := scale.layout
	res.Layout = &l
	for _, o := range []outcome{base, scale} {
		res.Commands = append(res.Commands, o.r.Commands...)
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %.0f commands/s (%d pipelines of %d in %v), pipeline round trip p50 %.3g ms, p99 %.3g ms; %s; per-CPU busy %s",
			o.name, o.ops, o.pipesOK, in.s.Pipeline, o.r.Phases.Steady, ms(o.r.Ops[respc.OpPipeline].Latency.Quantile(0.5)), ms(o.r.Ops[respc.OpPipeline].Latency.Quantile(0.99)),
			deploy.Summary(o.layout), perCPU(o.layout)))
		if o.sat.Saturated {
			res.Values[MetricSaturated] = 1
			res.Notes = append(res.Notes, o.name+": the driver may have been the bottleneck: "+strings.Join(o.sat.Reasons, "; "))
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("speedup %.3g (scale-out / baseline of this trial; linear would be %d)", scale.ops/base.ops, in.s.Redis))
	if l.Note != "" {
		res.Notes = append(res.Notes, l.Note)
	}
}

func pct(seconds float64, iv time.Duration) float64 {
	if iv <= 0 {
		return 0
	}
	return seconds / iv.Seconds() * 100
}

// migrations sums the migrations per second of role's servers (0 when the
// platform cannot tell).
func migrations(l placement.Record, role string) float64 {
	var sum float64
	for _, s := range l.Servers {
		if s.Role == role && s.MigrationsPerSec > 0 {
			sum += s.MigrationsPerSec
		}
	}
	return sum
}

// perCPU lists each host CPU's busy share: "0: 95%, 1: 88%".
func perCPU(l placement.Record) string {
	var parts []string
	for _, c := range l.CPUs {
		parts = append(parts, fmt.Sprintf("%d: %.0f%%", c.ID, c.Busy*100))
	}
	return strings.Join(parts, ", ")
}

// serverStats are one Redis's counters in a twemproxy's statistics.
type serverStats struct {
	Proxy, Server               string
	EOF, Err, TimedOut, Ejected int64
	Requests, Responses         int64
	// The pool's counters, the same in each server's entry.
	ForwardErrors, ServerEjects int64
}

type proxyReport []serverStats

// proxyStats reads every twemproxy's statistics (refreshed every 500 ms,
// so it waits for one more refresh first).
func proxyStats(ctx context.Context, d *deploy.Deployment) (proxyReport, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(600 * time.Millisecond):
	}
	var out proxyReport
	// From each twemproxy's own host when it is on another machine (a
	// container on a sut host's bridge is not reachable from here).
	dialers := d.Dialers(RoleProxy)
	for i, r := range d.Role(RoleProxy) {
		st, err := readStats(ctx, dialers[i], r.Srv.Addr(PortStats))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.ID.Name(), err)
		}
		for _, s := range st {
			s.Proxy = r.ID.Name()
			out = append(out, s)
		}
	}
	return out, nil
}

// readStats reads a twemproxy's JSON statistics (its pool's counters and
// each server's) over a connection opened by dial.
func readStats(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) ([]serverStats, error) {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("twemproxy statistics at %s: %w", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, fmt.Errorf("twemproxy statistics at %s: %w", addr, err)
	}
	return parseStats(b)
}

// parseStats reads the servers of the pool of a twemproxy's statistics.
func parseStats(b []byte) ([]serverStats, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("twemproxy statistics: %w", err)
	}
	raw, ok := top["scaleout"]
	if !ok {
		return nil, errors.New("twemproxy statistics: no pool \"scaleout\"")
	}
	var pool map[string]json.RawMessage
	if err := json.Unmarshal(raw, &pool); err != nil {
		return nil, fmt.Errorf("twemproxy statistics of the pool: %w", err)
	}
	num := func(m map[string]json.RawMessage, k string) int64 {
		var v int64
		json.Unmarshal(m[k], &v)
		return v
	}
	var out []serverStats
	for name, v := range pool {
		var srv map[string]json.RawMessage
		if json.Unmarshal(v, &srv) != nil {
			continue // a pool counter, not a server
		}
		out = append(out, serverStats{Server: name, EOF: num(srv, "server_eof"), Err: num(srv, "server_err"),
			TimedOut: num(srv, "server_timedout"), Ejected: num(srv, "server_ejected_at"),
			Requests: num(srv, "requests"), Responses: num(srv, "responses"),
			ForwardErrors: num(pool, "forward_error"), ServerEjects: num(pool, "server_ejects")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, nil
}

// note lists the requests each shard got from each twemproxy.
func (p proxyReport) note() string {
	var parts []string
	for _, s := range p {
		parts = append(parts, fmt.Sprintf("%s->%s %d", s.Proxy, s.Server, s.Requests))
	}
	return "twemproxy requests per shard over the trial: " + strings.Join(parts, ", ")
}

// problem fails the trial when a twemproxy saw a server fail: errors,
// timeouts, a closed connection, an ejection, requests it could not
// forward.
func (p proxyReport) problem() error {
	var errs []string
	for _, s := range p {
		var what []string
		if s.Err > 0 {
			what = append(what, fmt.Sprintf("%d errors", s.Err))
		}
		if s.TimedOut > 0 {
			what = append(what, fmt.Sprintf("%d timeouts (over %v)", s.TimedOut, ProxyTimeout))
		}
		if s.EOF > 0 {
			what = append(what, fmt.Sprintf("%d closed connections", s.EOF))
		}
		if s.Ejected > 0 {
			what = append(what, "ejected it")
		}
		if len(what) > 0 {
			errs = append(errs, fmt.Sprintf("%s saw server %s fail: %s", s.Proxy, s.Server, strings.Join(what, ", ")))
		}
	}
	for _, s := range p {
		if s.ForwardErrors > 0 || s.ServerEjects > 0 {
			errs = append(errs, fmt.Sprintf("%s: %d requests could not be forwarded, %d server ejections", s.Proxy, s.ForwardErrors, s.ServerEjects))
			break
		}
	}
	if len(errs) > 0 {
		return errors.New("twemproxy: " + strings.Join(errs, "; "))
	}
	return nil
}
