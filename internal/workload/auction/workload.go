package auction

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	app "github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names of the auction workload.
const (
	MetricPeakUsers  = "peak_users"
	MetricOpsAtPeak  = "ops_per_sec_at_peak"
	MetricSteps      = "search_steps"
	MetricSaturated  = "driver_saturated"
	MetricCycleRatio = "cycle_ratio_at_peak"
)

// TierMetric is the name of a role's CPU share at the peak: tier_app_cpu_pct.
func TierMetric(role string) string { return "tier_" + role + "_cpu_pct" }

// cpuCost is what the CPU account charges: an operation of the mix (every
// operation counts once, a long poll too).
var cpuCost = workload.CPUCost{Metric: "cpu_us_per_op", Unit: "us", Scale: 1e6, Op: "operation of the mix (long polls included)"}

// Names of the auction's own parameters.
const (
	pMaxUsers       = "max_users"
	pSearchMax      = "search_max"
	pStartUsers     = "start_users"
	pAppServers     = "app_servers"
	pHeap           = "app_heap"
	pThreads        = "app_threads"
	pDBPool         = "db_pool"
	pItemIdle       = "item_idle"
	pWebWorkers     = "web_workers"
	pTolerance      = "tolerance"
	pRampFactor     = "ramp_factor"
	pFineStep       = "fine_step"
	pMaxSteps       = "max_steps"
	pRampUp         = "ramp_up"
	pStepWarmup     = "step_warmup"
	pCoarseInterval = "coarse_interval"
	pMixTolerance   = "mix_tolerance"
	pMixSigmas      = "mix_sigmas"
	pDrivers        = "drivers"
	pSeed           = "data_seed"
)

// Workload is the auction workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "auction" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "Weathervane-style live auction (nginx, J Tomcat app servers, PostgreSQL, RabbitMQ) on the platform, simulated users on nearnative's driver: find-max of the users that meet Weathervane's QoS"
}

// Params implements workload.Workload. The seed gives no sizes (its
// figures are relative); Weathervane's own are the defaults where a study
// can afford them (the QoS rules, the item idle time, the cycle time), and
// its findMax intervals scaled to a fifth (a 24 s ramp and a 36 s warm-up
// per step; the decision interval is the study's trial length), since
// Weathervane's would make one trial an hour. --quick scales the intervals,
// the data and the search down further. Every trial's notes say where the
// settings are below Weathervane's.
func (Workload) Params() []workload.Param {
	ps := []workload.Param{
		{Name: pMaxUsers, Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: fmt.Sprintf("the data's size, Weathervane's maxUsers: 5 registered users per user (each with 5 purchases, 100 bids, 20 attendances), one live auction per 15 users; loaded once into a template, copied per trial; 0: sized from the machine, %d per CPU (here %d), about twice the users its CPUs can carry, so that the search fails before the data's limit", UsersPerCPU, MachineUsers())},
		{Name: pSearchMax, Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "the most users the search tries (0: max_users); more than max_users is refused: every user needs registered users of its own"},
		{Name: pStartUsers, Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "users of the coarse ramp's first step, which doubles them until a step fails (halves them while it fails); 0: a quarter of the most users the search may try"},
		{Name: pAppServers, Type: workload.Int, Default: "2", Quick: "1", Min: 1, HasMin: true,
			Help: "application servers (Tomcat) behind nginx, each in a container of its own under Docker (--quick: one, each JVM costs a 2-core machine about a minute to boot)"},
		{Name: pHeap, Type: workload.String, Default: "512m", Help: "each application server's JVM heap (-Xms and -Xmx)"},
		{Name: pThreads, Type: workload.Int, Default: "200", Min: 1, HasMin: true, Help: "Tomcat's maxThreads per application server"},
		{Name: pDBPool, Type: workload.Int, Default: "20", Min: 1, HasMin: true, Help: "database connections per application server (PostgreSQL's max_connections follows)"},
		{Name: pItemIdle, Type: workload.Duration, Default: "30s",
			Help: "time without a bid before an item goes to last call, then to sold (Weathervane's auctionMaxIdleTime)"},
		{Name: pWebWorkers, Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "nginx worker processes (0: one per CPU nginx sees)"},
		{Name: pTolerance, Type: workload.Float, Default: "0.05", Quick: "0.2", Min: 0.001, HasMin: true,
			Help: "the search stops when the lowest failing and highest passing user counts are within this fraction (Weathervane: 1%; ours 5%: a 2-core machine's noise between steps is larger than 1%)"},
		{Name: pRampFactor, Type: workload.Float, Default: strconv.FormatFloat(search.DefaultFactor, 'g', -1, 64), Quick: "1.5", Min: 1.01, HasMin: true,
			Help: "the coarse ramp multiplies the users by this after each pass (Weathervane's findMax: 2; --quick: 1.5, so that its first failing step overloads the stack by at most half again: a 2x overload left the quick steps after it failing on the backlog, nginx's connections to Tomcat timing out, for tens of seconds)"},
		{Name: pFineStep, Type: workload.Float, Default: "0.05", Quick: "0.2", Min: 0.001, HasMin: true,
			Help: "the fine search's first step, a fraction of the first failing user count (ours: 5%; a larger one closes the bracket in fewer steps)"},
		{Name: pMaxSteps, Type: workload.Int, Default: "40", Quick: "7", Min: 2, HasMin: true,
			Help: "the search stops after this many steps even if its bracket is open, and reports its best pass unverified (the notes say so)"},
		{Name: pRampUp, Type: workload.Duration, Default: "24s", Quick: "3s",
			Help: "each step's users start spread over this (Weathervane ramps 120 s between levels; ours a fifth of it)"},
		{Name: pStepWarmup, Type: workload.Duration, Default: "36s", Quick: "5s",
			Help: "load after the ramp-up before each decision, not counted: users log in and join auctions (Weathervane: 180 s; ours a fifth of it)"},
		{Name: pCoarseInterval, Type: workload.Duration, Default: "20s", Quick: "6s",
			Help: "decision interval of the coarse ramp's steps (Weathervane's initial ramp: 60 s; ours a third of it); the fine steps and the verification use the study's trial length (Weathervane's QoS period: 5 minutes)"},
		{Name: pMixTolerance, Type: workload.Float, Default: strconv.FormatFloat(MixTolerance, 'g', -1, 64), Quick: "0.9", Min: 0.001, HasMin: true,
			Help: "relative tolerance of each operation's share of the mix (Weathervane: 0.10; --quick: 0.9, only a gross break of the mix fails a step: seconds-long warm-ups leave the users' visits short of their steady mix, failing shares 17-78% off their targets at 560 and 720 users after a 5 s warm-up in probe run 20261123-130658-8611)"},
		{Name: pMixSigmas, Type: workload.Float, Default: "3", Min: 0, HasMin: true,
			Help: "an operation's mix tolerance is at least this many standard errors of its share at the operations counted, so that short intervals are not failed by sampling noise (0: Weathervane's tolerance alone)"},
		{Name: pDrivers, Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "child driver processes (0: the users run in the nearnative process)"},
		{Name: pSeed, Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "the data generator's seed"},
	}
	return append(ps, workload.TopologyParams(workload.TopologyDefaults{InstancesHelp: "the auction runs one instance"})...)
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	maxUsers, sized := v.Int(pMaxUsers), false
	if maxUsers == 0 {
		maxUsers, sized = MachineUsers(), true
	}
	in := &Instance{
		size:       app.Size{MaxUsers: maxUsers},
		sized:      sized,
		searchMax:  v.Int(pSearchMax),
		start:      v.Int(pStartUsers),
		appServers: v.Int(pAppServers),
		heap:       v.String(pHeap),
		threads:    v.Int(pThreads),
		dbPool:     v.Int(pDBPool),
		itemIdle:   v.Duration(pItemIdle),
		webWorkers: v.Int(pWebWorkers),
		tolerance:  v.Float(pTolerance),
		factor:     v.Float(pRampFactor),
		fineStep:   v.Float(pFineStep),
		maxSteps:   v.Int(pMaxSteps),
		rampUp:     v.Duration(pRampUp),
		warmup:     v.Duration(pStepWarmup),
		coarse:     v.Duration(pCoarseInterval),
		mixTol:     v.Float(pMixTolerance),
		mixSigmas:  v.Float(pMixSigmas),
		drivers:    v.Int(pDrivers),
		driverCPUs: v.String(workload.ParamDriverCPUs),
		seed:       uint64(v.Int(pSeed)),
		values:     v,
	}
	if in.searchMax == 0 {
		in.searchMax = in.size.MaxUsers
	}
	if in.start == 0 {
		in.start = max(1, (in.searchMax+2)/4)
	}
	// The shared topology parameters, checked against the auction's roles
	// (the data directory and the application are the trial's).
	in.topo = in.stack([]byte("war"), "/data").topology()
	if err := workload.ApplyTopology(v, &in.topo); err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// Instance is a configured auction workload.
type Instance struct {
	size       app.Size
	sized      bool // size from the machine (max_users 0)
	searchMax  int
	start      int
	appServers int
	heap       string
	threads    int
	dbPool     int
	itemIdle   time.Duration
	webWorkers int
	tolerance  float64
	factor     float64
	fineStep   float64
	maxSteps   int
	rampUp     time.Duration
	warmup     time.Duration
	coarse     time.Duration
	mixTol     float64
	mixSigmas  float64
	drivers    int
	driverCPUs string
	seed       uint64
	values     workload.Values
	// topo holds the shared topology parameters (layout, guests,
	// placement); the roles are added per trial.
	topo topology.Topology
}

// Validate checks the settings together, before anything starts.
func (in *Instance) Validate() error {
	if err := in.size.Validate(); err != nil {
		return fmt.Errorf("parameter %s: %w", pMaxUsers, err)
	}
	if in.searchMax > in.size.MaxUsers {
		return fmt.Errorf("parameter %s %d is beyond the data loaded for %s %d: each simulated user logs in as registered users of its own (%d per user of max_users); raise %s (the data is loaded once per size) or lower %s",
			pSearchMax, in.searchMax, pMaxUsers, in.size.MaxUsers, app.UsersPerMaxUser, pMaxUsers, pSearchMax)
	}
	if in.start > in.searchMax {
		return fmt.Errorf("parameter %s %d is above the most users the search may try (%d): lower it", pStartUsers, in.start, in.searchMax)
	}
	if in.topo.Instances > 1 {
		return fmt.Errorf("parameter instances %d: the auction runs one instance (its users share the live auctions); scale it with %s", in.topo.Instances, pAppServers)
	}
	if in.topo.VMs > 1 {
		return fmt.Errorf("parameter vms %d: the auction's one instance runs in one guest", in.topo.VMs)
	}
	if in.itemIdle < 100*time.Millisecond {
		return fmt.Errorf("parameter %s %v: want at least 100ms", pItemIdle, in.itemIdle)
	}
	if in.mixTol >= 1 {
		return fmt.Errorf("parameter %s %g: want a fraction below 1", pMixTolerance, in.mixTol)
	}
	if in.tolerance >= 0.5 {
		return fmt.Errorf("parameter %s %g: want a fraction below 0.5", pTolerance, in.tolerance)
	}
	if err := in.searchConfig().Validate(); err != nil {
		return fmt.Errorf("parameters %s, %s, %s, %s, %s: %w", pStartUsers, pSearchMax, pTolerance, pRampFactor, pFineStep, err)
	}
	// The servers' settings, with placeholder addresses.
	s := in.stack([]byte("war"), "/data")
	for _, r := range s.topology().Roles {
		if _, err := r.Spec(topology.ServerID{Role: r.Name}, fakePeers{}); err != nil {
			return fmt.Errorf("%s server: %w", r.Name, err)
		}
	}
	c := in.driverConfig(in.start, "127.0.0.1:1", time.Second, "", "")
	if err := c.Validate(); err != nil {
		return fmt.Errorf("driver settings (%s, %s): %w", pDrivers, workload.ParamDriverCPUs, err)
	}
	ops, err := c.Ops()
	if err != nil {
		return err
	}
	if err := in.rules().Validate(ops); err != nil {
		return err
	}
	return CoarseRules().Validate(ops)
}

// fakePeers answers every peer with a placeholder address, for validating
// server settings before anything runs.
type fakePeers struct{}

func (fakePeers) Addr(string, int, string) string { return "127.0.0.1:1" }
func (fakePeers) All(string, string) []string     { return []string{"127.0.0.1:1"} }

// stack is the servers' settings for a trial.
func (in *Instance) stack(war []byte, dataDir string) stack {
	return stack{appServers: in.appServers, heap: in.heap, threads: in.threads, dbPool: in.dbPool,
		itemIdle: in.itemIdle, webWorkers: in.webWorkers, war: war, dataDir: dataDir}
}

// rules are the QoS of the fine steps and the verification.
func (in *Instance) rules() qos.Set { return Rules(in.mixTol, in.mixSigmas) }

// searchConfig is the find-max search over whole users.
func (in *Instance) searchConfig() search.Config {
	is := "the data's limit"
	if in.searchMax < in.size.MaxUsers {
		is = "the users allowed, " + pSearchMax
	}
	return search.Config{Start: float64(in.start), Factor: in.factor, Min: 1, Max: float64(in.searchMax), Tolerance: in.tolerance,
		Step: in.fineStep, Integer: true, MaxSteps: in.maxSteps, MaxIs: is}
}

// driverConfig is the driver run of one step: users simulated users at
// nginx's addr, paced by Weathervane's cycle time, kept from step to step
// under the session key (in process).
func (in *Instance) driverConfig(users int, addr string, decide time.Duration, run, session string) driver.Config {
	c := driver.Config{
		Behaviour: Behaviour,
		Params: map[string]string{ParamAddr: addr, ParamMaxUsers: strconv.Itoa(in.searchMax),
			ParamRegistered: strconv.Itoa(in.size.Users()), ParamSession: session},
		Mode: driver.Closed, Users: users, Pacing: Pacing,
		Phases:  driver.Phases{RampUp: in.rampUp, Warmup: in.warmup, Steady: decide},
		Drivers: in.drivers,
		Seed:    int64(users),
	}
	if in.driverCPUs != "" && in.drivers > 0 {
		c.CPUSets = []string{in.driverCPUs}
	}
	if run != "" {
		c.Run = runid.ID(run)
	}
	return c
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricPeakUsers, Unit: "users", HigherIsBetter: true,
			Help: "the most simulated users whose decision interval met Weathervane's QoS (>= 99% of each timed operation within its limit, the mix within its tolerance, <= 0.5% failures), verified (unless the search hit its step cap, which the notes say); closed loop"},
		{Name: MetricOpsAtPeak, Unit: "ops/s", HigherIsBetter: true, Diagnostic: true,
			Help: "operations completed per second of the decision interval at the peak (long polls included)"},
	}
	ms = append(ms, cpuCost.Metrics()...)
	for _, r := range Roles {
		ms = append(ms, workload.Metric{Name: TierMetric(r), Unit: "% of a core", Diagnostic: true,
			Help: fmt.Sprintf("CPU of the %s tier (%s) over the step at the peak; in a guest, as the guest's kernel counts its processes", r, tierWhat[r])})
	}
	return append(ms,
		workload.Metric{Name: MetricCycleRatio, Unit: "ratio", Diagnostic: true,
			Help: "mean achieved cycle time / target over the decision interval at the peak (above 1: operations ran past their cycle, the users were held back)"},
		workload.Metric{Name: MetricSteps, Unit: "steps", Diagnostic: true, Help: "search steps the trial took, resumed ones included"},
		workload.Metric{Name: MetricSaturated, Unit: "0/1", Diagnostic: true, Help: "1 when the driver's own checks found it may have been the bottleneck at the peak"},
	)
}

var tierWhat = map[string]string{RoleWeb: "nginx", RoleApp: "every Tomcat", RoleDB: "PostgreSQL", RoleBroker: "RabbitMQ"}

// quickNotes says where the settings are below Weathervane's and the
// seed's, for every trial's notes.
func (in *Instance) quickNotes(trial time.Duration) []string {
	var below []string
	if in.tolerance > search.DefaultTolerance {
		below = append(below, fmt.Sprintf("the search stops within %g%% (Weathervane: 1%%)", in.tolerance*100))
	}
	if trial < 5*time.Minute {
		below = append(below, fmt.Sprintf("%v decision intervals (Weathervane: 5 minutes)", trial))
	}
	if in.warmup < 3*time.Minute || in.rampUp < 2*time.Minute {
		below = append(below, fmt.Sprintf("%v ramp and %v warm-up per step (Weathervane: 120 s and 180 s)", in.rampUp, in.warmup))
	}
	if in.mixTol > MixTolerance {
		below = append(below, fmt.Sprintf("the mix within %g%% of its targets (Weathervane: %g%%)", in.mixTol*100, MixTolerance*100))
	}
	if in.factor != 0 && in.factor < search.DefaultFactor {
		below = append(below, fmt.Sprintf("a coarse ramp by %gx (Weathervane: %gx)", in.factor, search.DefaultFactor))
	}
	if in.coarse < time.Minute {
		below = append(below, fmt.Sprintf("%v coarse intervals (Weathervane: 60 s)", in.coarse))
	}
	if len(below) == 0 {
		return nil
	}
	return []string{"shorter than Weathervane's findMax: " + strings.Join(below, "; ") +
		fmt.Sprintf("; data for %d users%s; the peak is coarser and noisier than a full run's", in.size.MaxUsers, in.sizedNote())}
}

// sizedNote says how the data's size was chosen, when from the machine.
func (in *Instance) sizedNote() string {
	if !in.sized {
		return ""
	}
	return fmt.Sprintf(" (sized from the machine: %d per CPU, %s 0)", UsersPerCPU, pMaxUsers)
}

// bootEstimate is a rough time to copy the data and start the servers: the
// last server answered 12-16 s after a trial began on the quiet 2-core
// machine (run 20261127-052428-8d4a); a Tomcat deploying the WAR has taken
// 20 to 60 s on a loaded one, which the run's busy-machine line warns of.
const bootEstimate = 15 * time.Second

// UsersPerCPU sizes the data when max_users is 0: twice the simulated
// users one CPU of the development machine carries, so that a search fails
// before the data's limit on it and on a machine whose CPUs are up to twice
// as fast. Measured (BENCH.md, the auction's timings): at 1,500 users the stack
// and the driver did 366 operations/s with 88% of a core busy (web 9, app
// 40, db 15, broker 1.5, driver 23), 2.4 ms of CPU an operation; a user
// does 0.244 operations/s, 0.59 ms of CPU a second, so a CPU carries at
// most about 1,700 users; every quick search of 2026-11-26 passed at 3,000
// users on the 2 CPUs. A machine whose search still passes at the limit
// reports ">= N (the data's limit)", not a peak (search.Ceiling).
const UsersPerCPU = 3400

// MachineUsers is the data's size from this machine: UsersPerCPU per CPU.
func MachineUsers() int { return min(UsersPerCPU*max(sysinfo.CPUCount(), 1), app.MaxMaxUsers) }

// expectedPeak is where the duration estimate puts the peak: peakShare of
// MachineUsers, or the most users the search may try if that is lower; the
// search then runs its coarse ramp past it, fails, and fine-steps back.
func (in *Instance) expectedPeak() float64 {
	return min(float64(in.searchMax), math.Round(float64(MachineUsers())*peakShare))
}

// peakShare is the share of MachineUsers the machine carries at the peak:
// `run auction --quick` on the quiet 2-core development machine (run
// 20261127-052428-8d4a) peaked at 1417-2040 users, mean 1847, of the 6800
// the data was sized for (0.27); half, assumed before, made the estimate
// 1.43x the real time.
const peakShare = 0.27

// Estimate implements workload.Estimator: the servers' start and the search
// as search.Simulate plays it against expectedPeak; each step a ramp, a
// warm-up and a decision over min(coarse_interval, trial) on the coarse
// ramp, the trial after it, and its overhead (settling after a failure).
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	steps, err := search.Simulate(in.searchConfig(), in.expectedPeak())
	if err != nil {
		return bootEstimate + trial
	}
	d := bootEstimate
	for _, st := range steps {
		decide := trial
		if st.Phase == search.Coarse {
			decide = min(in.coarse, trial)
		}
		d += in.rampUp + in.warmup + decide + stepOverhead
		if !st.Pass {
			d += settleEstimate
		}
	}
	return d
}

// What a step adds to its phases: the driver's start and stop, the CPU
// readings and the health check (steps of 14-16 s of phases took 17-20 s
// in run 20261126-232438-fe1c, on a busy machine), and after a failing
// step the servers' settling (1-5 s there, workload.Settle).
const (
	stepOverhead   = 2 * time.Second
	settleEstimate = 2 * time.Second
)
