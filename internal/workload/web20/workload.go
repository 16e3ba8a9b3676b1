package web20

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Name is the workload's name in studies.
const Name = "web20"

// Modes of the workload.
const (
	// ModeFixed drives a fixed number of users per instance for one run
	// (ramp-up, steady state, ramp-down) and reports the seed's figures.
	ModeFixed = "fixed"
	// ModeFindMax searches for the most users per instance that pass
	// every rule (internal/search, Weathervane's findMax).
	ModeFindMax = "find-max"
)

// Quick defaults: what --quick scales down, stated in the study and in
// every trial's notes.
const (
	QuickUsers    = 300
	quickRampUp   = "10s"
	quickRampDown = "2s"
)

// QuickSigmas is qos_sigmas under --quick: the mix and p90 rules allow 3.5
// binomial standard errors at the operations a step completed (never less
// than the seed's ±2 points and 10%). A rule with seven operations tested
// every step fails one of them by chance in about 1 of 300 steps at 3.5
// standard errors (two-sided normal tail 4.7e-4 per operation) against 1 of
// 50 at 3; a chance failure in a search's coarse ramp halves the maximum
// it finds, and a quick run holds some 80 steps.
const QuickSigmas = 3.5

// lagLimitShare: the driver's wake-up lag counts as saturation above this
// share of the smallest p90 limit (a closed loop of 5 s cycles shrugs off
// a few milliseconds that an open-loop microbenchmark would not).
const lagLimitShare = 0.1

// seedCPUsPerInstance is the seed's host per instance: 8 instances on 32
// cores (64 threads). The default instance count gives this machine one
// instance per 4 CPUs, at least 2 (a scale-out), at most the seed's 8.
const seedCPUsPerInstance = 4

// DefaultInstances is the seed's 8 instances scaled to this machine.
func DefaultInstances() int {
	return min(SeedInstances, max(2, sysinfo.CPUCount()/seedCPUsPerInstance))
}

// Workload is the web20 workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return Name }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "CloudStone/Olio: the Olio social-events site (nginx + PHP-FPM + MariaDB, apps/olio) per instance, closed-loop simulated users on a Markov chain, per-operation latency judged by Faban's rules; fixed users or find-max"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	ps := []workload.Param{
		{Name: "mode", Type: workload.String, Default: ModeFixed, Enum: []string{ModeFixed, ModeFindMax},
			Help: "fixed: one run at `users` per instance; find-max: the most users per instance that pass every rule (Weathervane's search)"},
		{Name: "users", Type: workload.Int, Default: strconv.Itoa(SeedUsersPerInstance), Quick: strconv.Itoa(QuickUsers), Min: 1, HasMin: true,
			Help: "simulated users per instance (the seed: 1500; --quick: 300, which a busy 2-core machine holds with the driver beside the servers, about 60 operations/s)"},
		{Name: "data_users", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "concurrent users the Olio data is loaded for (100 registered users each, Olio's rule); 0: the users, or in find-max the search's max_users; loaded once into a cached template"},
		{Name: "data_seed", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "seed of the data generator"},
		{Name: "ramp_up", Type: workload.Duration, Default: SeedRampUp.String(), Quick: quickRampUp,
			Help: "users start spread over this time before the steady state (the seed: 5m); the steady state is the study's trial length (the seed: 30m)"},
		{Name: "ramp_down", Type: workload.Duration, Default: SeedRampDown.String(), Quick: quickRampDown, Help: "load after the steady state, not counted (the seed: 5m)"},
		{Name: "cycle", Type: workload.Duration, Default: MeanCycle.String(),
			Help: "mean cycle time: negative-exponential, capped at 5x, from one operation's start to the next (Faban CYCLETIME; AddPerson at least 2 s, AddEvent 3 s)"},
		{Name: "mix", Type: workload.String, Default: FormatMix(TargetMix),
			Help: "target mix of Faban's mix rule, percent: HomePage, Login, TagSearch, EventDetail, PersonDetail, AddPerson, AddEvent (the seed's Table 1)"},
		{Name: "matrix", Type: workload.String, Default: FormatMatrix(DefaultMatrix),
			Help: "the users' Markov chain: 7 rows (from) of 7 percentages (to), rows separated by \";\", in the mix's order (Olio's driver)"},
		{Name: "limit_frequent", Type: workload.Duration, Default: P90Limit[HomePage].String(), Help: "p90 limit of HomePage, Login, TagSearch, EventDetail (the seed: 250ms)"},
		{Name: "limit_rare", Type: workload.Duration, Default: P90Limit[AddEvent].String(), Help: "p90 limit of PersonDetail, AddPerson, AddEvent (the seed: 500ms)"},
		{Name: "qos_sigmas", Type: workload.Float, Default: "0", Quick: strconv.FormatFloat(QuickSigmas, 'g', -1, 64), Min: 0, HasMin: true,
			Help: "0: Faban's mix and p90 rules exactly (the seed's); above 0 the rules know their sample size, for decision intervals far shorter than Faban's: each share's tolerance is the larger of ±2 points and this many binomial standard errors at the operations the interval completed, a p90 fails when the share beyond its limit exceeds 10% by more than this many standard errors, and an operation with none in the interval is not judged (--quick's 20 s steps hold a few hundred operations)"},
		{Name: "max_failures", Type: workload.Float, Default: "0.01", Min: 0, HasMin: true,
			Help: "failed operations allowed, a share of each operation's attempts (not a Faban rule: nearnative's, so that a run whose operations fail cannot pass)"},
		{Name: "conditional_share", Type: workload.Float, Default: strconv.FormatFloat(DefaultConditionalShare, 'g', -1, 64), Min: 0, HasMin: true,
			Help: "share of users whose browser revalidates statics with If-Modified-Since (the rest fetch each once per session)"},
		{Name: "attend_chance", Type: workload.Float, Default: strconv.FormatFloat(DefaultAttendChance, 'g', -1, 64), Min: 0, HasMin: true,
			Help: "chance that a logged-in user's EventDetail adds the user as attendee"},
		{Name: "request_timeout", Type: workload.Duration, Default: "30s", Help: "one HTTP request fails after this long"},
		{Name: "php_children", Type: workload.Int, Default: strconv.Itoa(olio.DefaultChildren), Min: 1, HasMin: true, Help: "PHP-FPM children per instance (the seed: 16)"},
		{Name: "nginx_workers", Type: workload.Int, Default: strconv.Itoa(olio.DefaultWorkers), Min: 1, HasMin: true, Help: "nginx worker processes per instance (the seed: 4)"},
		{Name: "nginx_connections", Type: workload.Int, Default: strconv.Itoa(olio.DefaultConnections), Min: 16, HasMin: true, Help: "connections per nginx worker (the seed: 4096)"},
		{Name: "buffer_pool", Type: workload.String, Default: olio.DefaultBufferPool, Help: "MariaDB's innodb_buffer_pool_size per instance (holds the seed's data set)"},
		{Name: "drivers", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "child driver processes (0: the users run in the nearnative process itself); pinned to driver_cpus when set"},
		{Name: ParamVMSplit, Type: workload.String, Default: "", Platforms: true, Keywords: []string{SplitAll},
			Help: "vm platforms (comma-separated study names, or all) on which each instance's database runs in a guest of its own, apart from its web tier (nginx + PHP-FPM): the seed's two-VM variant; vms then counts guest pairs there (vms: 1 and one instance: a web guest and a database guest); the web guest has the platform's vcpus, the database guest db_vcpus, both its vm_memory (the seed: 6 + 2 vCPUs, 2 GB each); ignored, with a note, on platforms that are not VMs"},
		{Name: ParamDBVCPUs, Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "vm_split: vCPUs of the database's guest (0: the platform's vcpus, as the web guest; the seed: 2 beside a 6-vCPU web guest)"},
		{Name: "start_users", Type: workload.Int, Default: "200", Quick: "0", Min: 0, HasMin: true, Help: "find-max: users per instance of the search's first step; the coarse ramp doubles them until a step fails (halves them while it fails); 0: a quarter of max_users"},
		{Name: "max_users", Type: workload.Int, Default: "3000", Quick: "0", Min: 0, HasMin: true,
			Help: fmt.Sprintf("find-max: the search never tries more users per instance (the data is loaded for them unless data_users says more); 0: sized from the machine, %d per CPU divided among the instances (here %d for one instance), about twice what its CPUs carry, so that the search fails before this limit of its own", UsersPerCPU, MachineUsers(1))},
		{Name: "tolerance", Type: workload.Float, Default: "0.01", Quick: "0.15", Min: 0.001, HasMin: true,
			Help: "find-max: the search stops when the lowest failing and highest passing user counts are within this fraction (Weathervane: 1%)"},
		{Name: "fine_step", Type: workload.Float, Default: strconv.FormatFloat(search.DefaultStep, 'g', -1, 64), Quick: "0.2", Min: 0.001, HasMin: true,
			Help: "find-max: the fine search's first step, a fraction of the first failing user count (Weathervane: 5%; a larger one closes the bracket in fewer steps)"},
		{Name: "max_steps", Type: workload.Int, Default: "40", Quick: "7", Min: 2, HasMin: true, Help: "find-max: the search stops after this many steps and reports its best pass unverified"},
		{Name: "step_ramp", Type: workload.Duration, Default: "1m", Quick: "3s", Help: "find-max: ramp-up of each step before its decision interval (the study's trial length); the users of the step before go on, the new ones start over it"},
	}
	return append(ps, workload.TopologyParams(workload.TopologyDefaults{
		Instances: DefaultInstances(), QuickInstances: 2, Layout: topology.ContainerPerServer, VMs: 1,
		InstancesHelp: fmt.Sprintf("the seed: 1 instance, then a scale-out to 8; default the seed's 8 scaled to this machine, one instance per %d CPUs, at least 2: %d", seedCPUsPerInstance, DefaultInstances()),
	})...)
}

// Settings are a web20 instance's settings, checked by Validate.
type Settings struct {
	Mode             string
	Users            int // per instance (ModeFixed)
	DataUsers        int // 0: derived
	DataSeed         uint64
	RampUp, RampDown time.Duration
	Cycle            time.Duration
	Mix              Mix
	Matrix           Matrix
	LimitFrequent    time.Duration
	LimitRare        time.Duration
	MaxFailures      float64
	Sigmas           float64 // qos_sigmas
	Conditional      float64
	Attend           float64
	RequestTimeout   time.Duration
	Children         int
	Workers          int
	Connections      int
	BufferPool       string
	Drivers          int
	Search           search.Config // users per instance
	MaxSized         bool          // max_users 0: from the machine
	StepRamp         time.Duration
	VMSplit          []string // platforms, or SplitAll
	DBVCPUs          int
	Topology         topology.Topology // instances, layout, guests, placement (roles filled per trial)
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	s := Settings{
		Mode: v.String("mode"), Users: v.Int("users"), DataUsers: v.Int("data_users"), DataSeed: uint64(v.Int("data_seed")),
		RampUp: v.Duration("ramp_up"), RampDown: v.Duration("ramp_down"), Cycle: v.Duration("cycle"),
		LimitFrequent: v.Duration("limit_frequent"), LimitRare: v.Duration("limit_rare"),
		MaxFailures: v.Float("max_failures"), Sigmas: v.Float("qos_sigmas"), Conditional: v.Float("conditional_share"), Attend: v.Float("attend_chance"),
		RequestTimeout: v.Duration("request_timeout"), Children: v.Int("php_children"), Workers: v.Int("nginx_workers"),
		Connections: v.Int("nginx_connections"), BufferPool: v.String("buffer_pool"), Drivers: v.Int("drivers"),
		StepRamp: v.Duration("step_ramp"), DBVCPUs: v.Int(ParamDBVCPUs),
		Search: search.Config{Start: float64(v.Int("start_users")), Max: float64(v.Int("max_users")), Min: 1, Integer: true,
			Tolerance: v.Float("tolerance"), Step: v.Float("fine_step"), MaxSteps: v.Int("max_steps"), MaxIs: "the users allowed, max_users"},
	}
	instances := max(1, v.Int(workload.ParamInstances))
	if s.Search.Max == 0 {
		s.Search.Max, s.MaxSized = float64(MachineUsers(instances)), true
	}
	if s.Search.Start == 0 {
		s.Search.Start = math.Max(1, math.Round(s.Search.Max/4))
	}
	for _, p := range strings.Split(v.String(ParamVMSplit), ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.VMSplit = append(s.VMSplit, p)
		}
	}
	var err error
	if s.Mix, err = ParseMix(v.String("mix")); err != nil {
		return nil, fmt.Errorf("parameter mix: %w", err)
	}
	if s.Matrix, err = ParseMatrix(v.String("matrix")); err != nil {
		return nil, fmt.Errorf("parameter matrix: %w", err)
	}
	// The shared topology parameters are checked on the real roles (with
	// placeholder paths: the copies are made per trial).
	in := &Instance{s: s}
	topo := in.topology([]instanceData{{DB: "/check/db", Site: "/check/site", Store: "/check/files"}})
	if err := workload.ApplyTopology(v, &topo); err != nil {
		return nil, err
	}
	topo.Roles = nil
	in.s.Topology = topo
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// Instance is a configured web20 workload.
type Instance struct {
	s Settings
	// cacheDir holds the templates (olio.CacheDir of the state directory
	// when empty; tests use their own).
	cacheDir string
}

// dataSize is the size of the data the trial loads: data_users, else the
// most users per instance the trial drives.
func (s Settings) dataSize() olio.Size {
	if s.DataUsers != 0 {
		return olio.Size{Users: s.DataUsers, Seed: s.DataSeed}
	}
	u := s.Users
	if s.Mode == ModeFindMax {
		u = int(s.Search.Max)
	}
	// Olio loads for at least 25 users: fewer users browse a bigger site.
	return olio.Size{Users: max(u, olio.MinUsers), Seed: s.DataSeed}
}

// Validate checks the settings together, before anything starts: what
// cannot run is refused with the parameter to change.
func (in *Instance) Validate() error {
	s := in.s
	size := s.dataSize()
	if err := size.Validate(); err != nil {
		return fmt.Errorf("parameter data_users: %w", err)
	}
	most := s.Users
	if s.Mode == ModeFindMax {
		most = int(s.Search.Max)
		if err := s.Search.Validate(); err != nil {
			return fmt.Errorf("parameters start_users, max_users, tolerance, max_steps: %w", err)
		}
		if s.Search.Tolerance >= 0.5 {
			return fmt.Errorf("parameter tolerance %g: want a fraction below 0.5", s.Search.Tolerance)
		}
	}
	if err := size.Fits(most); err != nil {
		what := "users"
		if s.Mode == ModeFindMax {
			what = "max_users"
		}
		return fmt.Errorf("parameters %s and data_users: %w (set data_users to at least %d, or to 0: the data is then loaded for %s)", what, err, most, what)
	}
	if s.Cycle < 100*time.Millisecond {
		return fmt.Errorf("parameter cycle %v: want at least 100ms", s.Cycle)
	}
	if s.MaxFailures >= 1 {
		return fmt.Errorf("parameter max_failures %g: want a share below 1", s.MaxFailures)
	}
	if s.Conditional > 1 || s.Attend > 1 {
		return fmt.Errorf("parameters conditional_share %g and attend_chance %g: want shares from 0 to 1", s.Conditional, s.Attend)
	}
	if s.DBVCPUs > 0 && len(s.VMSplit) == 0 {
		return fmt.Errorf("parameter %s %d: the database has a guest of its own only on the platforms %s names, and it names none: set %s too, or drop %s", ParamDBVCPUs, s.DBVCPUs, ParamVMSplit, ParamVMSplit, ParamDBVCPUs)
	}
	if len(s.VMSplit) > 1 && slices.Contains(s.VMSplit, SplitAll) {
		return fmt.Errorf("parameter %s %q: %s or platform names, not both", ParamVMSplit, strings.Join(s.VMSplit, ","), SplitAll)
	}
	if _, err := platform.ParseBytes(s.BufferPool); err != nil {
		return fmt.Errorf("parameter buffer_pool: %w", err)
	}
	if err := in.rules().Validate(opNames[:]); err != nil {
		return err
	}
	// The servers' specs and the driver's settings, for the most users the
	// trial will run, with placeholder addresses: what they refuse is
	// refused here, before anything starts.
	if err := in.checkSpecs(); err != nil {
		return err
	}
	c := in.driverConfig(most, []string{"http://127.0.0.1:1"}, olio.CountsFor(size.Users), s.RampUp, time.Second, 1, "", "")
	if err := c.Validate(); err != nil {
		return fmt.Errorf("web20 driver settings (users, instances, drivers, driver_cpus, cycle): %w", err)
	}
	return nil
}

// checkSpecs builds every tier's spec once with placeholder paths and
// addresses.
func (in *Instance) checkSpecs() error {
	_, err := olio.MariaDBSpec(olio.MariaDBSettings{DataDir: "/check/db", BufferPool: in.s.BufferPool})
	if err != nil {
		return fmt.Errorf("parameter buffer_pool: %w", err)
	}
	if _, err := olio.FPMSpec(olio.FPMSettings{SiteDir: "/check/site", DBAddr: "127.0.0.1:1", Children: in.s.Children}); err != nil {
		return fmt.Errorf("parameter php_children: %w", err)
	}
	if _, err := olio.NginxSpec(olio.NginxSettings{SiteDir: "/check/site", FPMAddr: "127.0.0.1:1", FileStore: "/check/files", Workers: in.s.Workers, Connections: in.s.Connections}); err != nil {
		return fmt.Errorf("parameters nginx_workers, nginx_connections: %w", err)
	}
	return nil
}

// limits are the p90 limits per operation.
func (s Settings) limits() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, op := range Ops {
		l := s.LimitFrequent
		if P90Limit[op] > P90Limit[HomePage] {
			l = s.LimitRare
		}
		out[op.String()] = l
	}
	return out
}

// rules are Faban's pass rules (mix within 2 points, p90 within its limit,
// mean cycle time within 2%) and nearnative's failure rule; with qos_sigmas
// the mix and p90 rules know their sample size (qos.MixPoints,
// qos.Percentile).
func (in *Instance) rules() qos.Set {
	mix := map[string]float64{}
	for _, op := range Ops {
		mix[op.String()] = in.s.Mix[op]
	}
	set := qos.Faban(qos.FabanSpec{Mix: mix, MixPoints: MixTolerancePoints, Quantile: 0.9, Limits: in.s.limits(), CycleTolerance: CycleTolerance,
		Sigmas: in.s.Sigmas})
	return append(set, qos.Failures{Max: in.s.MaxFailures})
}

// driverConfig is one driver run: users per instance over the instances
// at bases, with these phases; a find-max step's run keeps its users in
// session (ParamSession) for the next step.
func (in *Instance) driverConfig(users int, bases []string, counts olio.Counts, ramp, steady time.Duration, seed int64, run, session string) driver.Config {
	s := in.s
	pool := users // the sites' idle connections, one per user
	if session != "" {
		pool = max(users, int(s.Search.Max))
	}
	minCycle := map[string]time.Duration{}
	for _, op := range Ops {
		if MinCycle[op] > 0 {
			minCycle[op.String()] = MinCycle[op]
		}
	}
	smallest := s.LimitFrequent
	if s.LimitRare < smallest {
		smallest = s.LimitRare
	}
	c := driver.Config{
		Behaviour: Behaviour,
		Params: BehaviourConfig{Bases: bases, Counts: counts, UsersPerInstance: pool, Matrix: s.Matrix,
			ConditionalShare: nonZero(s.Conditional), AttendChance: nonZero(s.Attend), RequestTimeout: s.RequestTimeout,
			Tag: strconv.FormatInt(seed, 36), Session: session}.Params(),
		Mode:  driver.Closed,
		Users: users * len(bases),
		Pacing: driver.Pacing{Mode: driver.Cycle, MinCycle: minCycle,
			Delay: driver.Distribution{Kind: driver.NegExp, Mean: s.Cycle, Max: CycleCapFactor * s.Cycle}},
		Phases:  driver.Phases{RampUp: ramp, Steady: steady, RampDown: s.RampDown},
		Drain:   min(s.RequestTimeout, 10*time.Second),
		Drivers: s.Drivers,
		Seed:    seed,
		Limits:  driver.Limits{Lag: time.Duration(float64(smallest) * lagLimitShare)},
	}
	if s.Drivers > 0 && s.Topology.Placement.DriverCPUs != "" {
		c.CPUSets = []string{s.Topology.Placement.DriverCPUs}
	}
	if run != "" {
		c.Run = runid.ID(run)
	}
	return c
}

// nonZero maps a share of 0 (none, in the study file) to SiteConfig's
// "none", a negative value.
func nonZero(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// errNoPass ends a find-max trial in which no user count passed.
var errNoPass = errors.New("no number of users passed every rule")

// describe is the trial's settings in one line, with what is scaled down
// and why.
func (in *Instance) describe(users int) string {
	s := in.s
	var b strings.Builder
	fmt.Fprintf(&b, "%d users per instance x %d instance(s)", users, max(s.Topology.Instances, 1))
	switch {
	case users == SeedUsersPerInstance:
		b.WriteString(" (the seed's users per instance)")
	case s.Mode == ModeFindMax:
		fmt.Fprintf(&b, " (a find-max step; the seed ran %d)", SeedUsersPerInstance)
	default:
		fmt.Fprintf(&b, " (scaled down from the seed's %d, as --quick does, to what the machine holds beside the driver; users: %d for the seed's)", SeedUsersPerInstance, SeedUsersPerInstance)
	}
	if n := max(s.Topology.Instances, 1); n != SeedInstances && n != 1 {
		fmt.Fprintf(&b, "; the seed's scale-out had %d instances", SeedInstances)
	}
	fmt.Fprintf(&b, "; ramp-up %v, ramp-down %v (the seed: %v and %v, steady %v)", s.RampUp, s.RampDown, SeedRampUp, SeedRampDown, SeedSteady)
	fmt.Fprintf(&b, "; cycle time negative-exponential, mean %v capped at %v, AddPerson at least %v, AddEvent %v, paced from each operation's start; closed loop",
		s.Cycle, CycleCapFactor*s.Cycle, MinCycle[AddPerson], MinCycle[AddEvent])
	return b.String()
}

// UsersPerCPU sizes a find-max search's maximum (and so the data) when
// max_users is 0: about twice the users per instance one CPU carries, so
// that the search fails before this limit of its own on the development
// machine and on one whose CPUs are up to twice as fast. Measured (run
// 20261126-222820-fdff, native, one instance, on the 2-core development
// machine while other engineers' builds kept its load average at 22-26):
// the servers and the driver used 7.1 ms of CPU an operation, and a user
// does 0.2 operations a second (5 s cycles), 1.4 ms of CPU a second, so a
// CPU carries at most about 700 users; on a quiet machine an operation
// costs less. A machine whose search still passes at the limit reports
// ">= N (the users allowed, max_users)", not a maximum (search.Ceiling).
// The data for 3200 users (2 CPUs) holds about 450 MB of tables and
// indexes, which the default buffer_pool (512m) just holds; on a machine
// with more CPUs per instance, raise buffer_pool with it, or the search
// measures MariaDB's reads from disk.
const UsersPerCPU = 1600

// MachineUsers is max_users sized from the machine for instances Olio
// instances sharing it: UsersPerCPU per CPU, divided among them, within
// the sizes Olio loads.
func MachineUsers(instances int) int {
	u := UsersPerCPU * max(sysinfo.CPUCount(), 1) / max(instances, 1)
	return min(max(u, olio.MinUsers), olio.MaxUsers)
}

// For the run's duration estimate: the stack's start and stop beyond the
// engine's per-platform start-up (web20-scaleout --quick trials took 34 to
// 42 s for 32 s of phases, run 20261123-171638-8e64), and what a find-max
// step adds to its phases (the driver's start, the CPU readings, the
// deployment's check: 22-23 s a step of 22 s of phases in run
// 20261126-222820-fdff).
const (
	stackEstimate = 5 * time.Second
	stepOverhead  = 500 * time.Millisecond
)

// expectedPeak is where the estimate puts a find-max search's maximum:
// peakShare of what max_users 0 sizes from the machine, or the most users
// the search may try if that is lower. The search then runs its coarse
// ramp past it, fails, and fine-steps back.
func (s Settings) expectedPeak() float64 {
	return min(s.Search.Max, math.Round(float64(MachineUsers(s.Topology.Instances))*peakShare))
}

// peakShare is the share of MachineUsers an instance carries at its
// maximum: `run web20-max --quick` on the quiet 2-core development machine
// (run 20261127-054415-c052) found 640-720 users per instance of the 1600
// sized (0.40-0.45); half, assumed before, made the estimate 1.57x the
// real time.
const peakShare = 0.45

// Estimate implements workload.Estimator: one run of ramp-up, the trial and
// ramp-down; in find-max mode the search as search.Simulate plays it against
// expectedPeak, each step a step_ramp, the trial and the ramp-down.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	if in.s.Mode != ModeFindMax {
		return stackEstimate + in.s.RampUp + trial + in.s.RampDown
	}
	steps, err := search.Simulate(in.s.Search, in.s.expectedPeak())
	if err != nil {
		return stackEstimate + trial
	}
	d := stackEstimate
	for _, st := range steps {
		d += in.s.StepRamp + trial + in.s.RampDown + stepOverhead
		if !st.Pass {
			d += settleEstimate
		}
	}
	return d
}

// settleEstimate is what settling adds after a failing step: one second's
// reading of the servers' CPU when they are idle (workload.Settle).
const settleEstimate = time.Second
