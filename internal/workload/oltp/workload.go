package oltp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// The seed's setup ("Running Transactional Workloads Using Docker
// Containers on vSphere 6.0"): 16 DVD Store instances, 16 drivers of 4
// threads (one driver per instance), 8 VMs of 2 instances each.
const (
	SeedInstances = 16
	SeedThreads   = 4
	SeedVMs       = 8
)

// Metric names. The per-transaction ones are OpName+MetricMeanSuffix and
// OpName+MetricP95Suffix ("login_ms", "login_p95_ms").
const (
	MetricOPM         = "opm"
	MetricOrderMs     = "order_ms"
	MetricMeanSuffix  = "_ms"
	MetricP95Suffix   = "_p95_ms"
	MetricRollbackPct = "rollback_pct"
	MetricCommits     = "commits_per_s"
	MetricHitRatio    = "hit_ratio_pct"
	MetricRetries     = "deadlock_retries"
	MetricDBCPU       = "db_cpu_pct"
	MetricWebCPU      = "web_cpu_pct"
	MetricCopy        = "copy_s"
	MetricMigrations  = "server_migrations_per_order"
)

// CPU is the CPU account's cost per order.
var CPU = workload.CPUCost{Metric: "cpu_us_per_order", Unit: "us", Scale: 1e6, Op: "order completed"}

// Parameter names of the workload (besides workload.TopologyParams).
const (
	pMode         = "mode"
	pSize         = "size"
	pScale        = "scale"
	pDataSeed     = "data_seed"
	pThreads      = "threads"
	pDrivers      = "drivers"
	pThink        = "think"
	pPctNew       = "pct_new"
	pRampUp       = "ramp_up"
	pDBMemory     = "db_memory"
	pWebWorkers   = "web_workers"
	pPinPlatforms = "pin_platforms"
	pPerServer    = "per_server_platforms"
)

// DriversPerInstance is the drivers parameter's value for one driver
// process per instance (the seed).
const DriversPerInstance = "per-instance"

// HalvesCPUSets is the instance_cpusets value of the seed's explanation
// experiment: half the instances on the first half of the host's CPUs,
// half on the second.
const HalvesCPUSets = "halves"

// webProcessBytes is what each Apache process of the web tier is reckoned
// to take when the memory check adds up the instances (mod_php's prefork
// children measured 10-14 MB resident here).
const webProcessBytes = 16 << 20

// Workload is the oltp workload kind: DVD Store on every platform.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "oltp" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "DVD Store instances (Apache + mod_php + PostgreSQL, data from a template) on the platform, DVD Store's order loop from nearnative's driver on the host: orders per minute, rollbacks, response time per transaction type, CPU per order"
}

// defaultInstances scales the seed's 16 instances (on 32 CPUs: 8 VMs of 4
// vCPUs exactly committed) to this machine: one instance per 2 CPUs, at
// least 2 (so that the instances can be split over the CPUs), at most 16.
func defaultInstances() int {
	return max(2, min(SeedInstances, sysinfo.CPUCount()/2))
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	inst := defaultInstances()
	ps := []workload.Param{
		{Name: pMode, Type: workload.String, Default: ModeHTTP, Enum: []string{ModeHTTP, ModeDirect},
			Help: "http: the users go through the web tier (Apache + PHP), the seed's setup; direct: they call the database's functions over pgx, no web tier"},
		{Name: pSize, Type: workload.String, Default: "10mb", Enum: []string{"10mb", "1gb"},
			Help: "DVD Store database size: 10mb (20,000 customers, 10,000 products) or 1gb (2 M / 100 k). The seed does not say which it ran; 10mb is the one every platform holds (a VM guest's disk has about 1 GB free for data). Loaded once per size into a cached template; every trial starts from a copy"},
		{Name: pScale, Type: workload.Float, Default: "1", Min: 0.0001, HasMin: true, Help: "multiplies the size's row counts (below 1 for small machines)"},
		{Name: pDataSeed, Type: workload.Int, Default: "1", Min: 0, HasMin: true, Help: "seed of the data generator (and of the users' choices)"},
		{Name: pThreads, Type: workload.Int, Default: strconv.Itoa(SeedThreads), Min: 1, HasMin: true,
			Help: "DVD Store driver threads (simulated users, no think time by default) per instance: the seed's 4"},
		{Name: pDrivers, Type: workload.String, Default: DriversPerInstance,
			Help: "driver processes carrying the users: per-instance (the seed: 16 drivers x 4 threads, one driver per instance), or a number (0: nearnative's own process)"},
		{Name: pThink, Type: workload.Float, Default: "0", Min: 0, HasMin: true,
			Help: "mean think time in seconds after each transaction, drawn U[0, 2 x think) (DVD Store's default 0)"},
		{Name: pPctNew, Type: workload.Int, Default: strconv.Itoa(DefaultOrder.PctNewCustomer), Min: 0, HasMin: true,
			Help: "percent of orders by a new customer, who registers instead of logging in (DVD Store: 20)"},
		{Name: pRampUp, Type: workload.Duration, Default: "30s", Quick: "5s",
			Help: "warm-up before the measured period (the study's trial length): the users start spread over it, and it is not counted"},
		{Name: pDBMemory, Type: workload.String, Default: "512m",
			Help: "memory each instance's PostgreSQL is tuned for (shared_buffers a quarter but at least 128 MB, effective_cache_size half; the trial notes state every setting): plenty for the 10mb size, so that two instances and their Apache processes fit a default 2 GB guest; give the 1gb size 2g or more"},
		{Name: pWebWorkers, Type: workload.Int, Default: strconv.Itoa(dvdstore.DefaultWorkers), Min: 1, HasMin: true,
			Help: "Apache (prefork, mod_php) processes per instance, each with one persistent database connection; at least threads"},
		{Name: pPinPlatforms, Type: workload.String, Default: "", Platforms: true,
			Help: "platforms (comma-separated study names) on which the placement parameters (instance_cpusets, cpusets, pin) apply; empty: all. The seed's explanation experiment pins a variant only: {name: docker-pinned, base: docker-bridge} with instance_cpusets: halves"},
		{Name: pPerServer, Type: workload.String, Default: "", Platforms: true,
			Help: "platforms (comma-separated study names) on which every server gets a container of its own, natively a cgroup of its own (layout container-per-server), whatever layout says: the control for how an instance's servers are grouped. Under container-per-instance an instance's Apache and PostgreSQL share one container in Docker and one cgroup natively, so the scheduler sees them alike; a variant named here, e.g. {name: native-per-server, base: native}, splits them (bench/studies/oltp-controls.yaml)"},
	}
	tp := workload.TopologyParams(workload.TopologyDefaults{
		Instances: inst, QuickInstances: 2, Layout: topology.ContainerPerInstance, VMs: max(1, inst/2),
		InstancesHelp: fmt.Sprintf("the seed ran %d; the default is one per 2 CPUs of this machine, at least 2 and at most %d; VMs: the default vms is half the default instances, as the seed's %d VMs x 2",
			SeedInstances, SeedInstances, SeedVMs),
	})
	for i := range tp {
		if tp[i].Name == workload.ParamInstanceCPUSets {
			tp[i].Help += "; " + HalvesCPUSets + ": the first half of this machine's CPUs, then the second (the seed's explanation experiment)"
		}
	}
	return append(ps, tp...)
}

// Instance is a configured oltp workload.
type Instance struct {
	mode      string
	dataset   dvdstore.Dataset
	threads   int
	drivers   int // child driver processes; 0: in process
	perInst   bool
	think     time.Duration
	order     OrderParams
	rampUp    time.Duration
	dbMemory  int64
	workers   int
	pinOn     []string
	perServer []string          // platforms on which the layout is container-per-server
	base      topology.Topology // instances, layout, guests, placement; roles per trial
	driverCPU string
	cpusets   string // instance_cpusets as given ("halves" resolved)
	// cache, when set, replaces the template cache under the state
	// directory (tests share one template per test binary).
	cache *dvdstore.Cache
}

// New implements workload.Workload. It refuses what this machine cannot
// hold: more instances than its memory or disk allow, placements naming
// CPUs it lacks.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	size, err := dvdstore.ParseSize(v.String(pSize))
	if err != nil {
		return nil, fmt.Errorf("parameter %s: %w", pSize, err)
	}
	in := &Instance{
		mode:    v.String(pMode),
		dataset: dvdstore.Dataset{Size: size, Scale: v.Float(pScale), Seed: uint64(v.Int(pDataSeed))},
		threads: v.Int(pThreads),
		think:   time.Duration(v.Float(pThink) * float64(time.Second)),
		order:   DefaultOrder,
		rampUp:  v.Duration(pRampUp),
		workers: v.Int(pWebWorkers),
	}
	in.order.PctNewCustomer = v.Int(pPctNew)
	in.order.Think = in.think
	if in.dbMemory, err = platform.ParseBytes(v.String(pDBMemory)); err != nil {
		return nil, fmt.Errorf("parameter %s: %w", pDBMemory, err)
	}
	switch d := strings.TrimSpace(v.String(pDrivers)); d {
	case DriversPerInstance:
		in.perInst = true
	default:
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("parameter %s: %q: want %s or a number of driver processes (0: nearnative's own process)", pDrivers, d, DriversPerInstance)
		}
		in.drivers = n
	}
	in.pinOn = platformList(v.String(pPinPlatforms))
	in.perServer = platformList(v.String(pPerServer))
	tv := workload.Values{}
	for k, val := range v {
		tv[k] = val
	}
	if strings.TrimSpace(v.String(workload.ParamInstanceCPUSets)) == HalvesCPUSets {
		sets, err := halves(deploy.HostCPUs())
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", workload.ParamInstanceCPUSets, err)
		}
		tv[workload.ParamInstanceCPUSets] = sets
	}
	in.cpusets = tv[workload.ParamInstanceCPUSets]
	in.driverCPU = v.String(workload.ParamDriverCPUs)
	in.base.Roles = in.roles(nil)
	if err := workload.ApplyTopology(tv, &in.base); err != nil {
		return nil, err
	}
	if in.perInst {
		in.drivers = in.base.Instances
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// platformList splits a comma-separated list of platform names.
func platformList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// halves splits cpus into two CPU lists of (about) equal size.
func halves(cpus []int) (string, error) {
	if len(cpus) < 2 {
		return "", fmt.Errorf("%s needs at least 2 CPUs, this machine has %d", HalvesCPUSets, len(cpus))
	}
	c := slices.Clone(cpus)
	slices.Sort(c)
	h := len(c) / 2
	return topology.FormatCPUs(c[:h]) + ";" + topology.FormatCPUs(c[h:]), nil
}

// Validate checks the settings together and against this machine, before
// anything starts.
func (in *Instance) Validate() error {
	if err := in.dataset.Validate(); err != nil {
		return fmt.Errorf("parameters %s, %s: %w", pSize, pScale, err)
	}
	if err := in.order.Validate(); err != nil {
		return fmt.Errorf("parameters %s, %s: %w", pPctNew, pThink, err)
	}
	if in.mode == ModeHTTP && in.workers < in.threads {
		return fmt.Errorf("parameter %s: %d Apache processes per instance for %d threads: a keep-alive connection holds its process, so users would wait for one; want at least %d",
			pWebWorkers, in.workers, in.threads, in.threads)
	}
	if in.dbMemory < 64<<20 {
		return fmt.Errorf("parameter %s: %d bytes: want at least 64m", pDBMemory, in.dbMemory)
	}
	if in.rampUp < 0 {
		return fmt.Errorf("parameter %s: %v is negative", pRampUp, in.rampUp)
	}
	users := in.users()
	if in.drivers > users {
		return fmt.Errorf("parameter %s: %d driver processes for %d users (%d instances x %d threads): want at most %d",
			pDrivers, in.drivers, users, in.base.Instances, in.threads, users)
	}
	addrs := make([]string, in.base.Instances)
	for i := range addrs {
		addrs[i] = "127.0.0.1:1"
	}
	if err := in.driverConfig(addrs, time.Second, "").Validate(); err != nil {
		return fmt.Errorf("oltp driver settings (threads, drivers, driver_cpus): %w", err)
	}
	if err := checkMemory(in.base.Instances, in.instanceBytes()); err != nil {
		return err
	}
	return checkDisk(in.dataset, in.base.Instances)
}

// users is the number of simulated users: threads per instance.
func (in *Instance) users() int { return in.base.Instances * in.threads }

// maxConnections is each database's connection limit: every Apache
// process holds one, every direct user one, plus the statistics readers.
func (in *Instance) maxConnections() int {
	if in.mode == ModeDirect {
		return in.threads + 10
	}
	return in.workers + 10
}

// instanceBytes is what one instance is reckoned to need in memory: its
// PostgreSQL's tuned memory and its Apache processes.
func (in *Instance) instanceBytes() int64 {
	b := in.dbMemory
	if in.mode == ModeHTTP {
		b += int64(in.workers) * webProcessBytes
	}
	return b
}

// checkMemory refuses instances that together need more than 80% of the
// machine's memory.
func checkMemory(instances int, each int64) error {
	total, err := sysinfo.MemoryBytes()
	if err != nil {
		return nil // no /proc/meminfo: nothing to check against
	}
	need := int64(instances) * each
	if limit := total / 10 * 8; need > limit {
		return fmt.Errorf("parameter %s: %d instances need about %.1f GB (%.0f MB each: the database's %s memory and the Apache processes), more than 80%% of this machine's %.1f GB: use fewer instances, a smaller %s, or fewer %s",
			workload.ParamInstances, instances, gb(need), float64(each)/(1<<20), pDBMemory, gb(total), pDBMemory, pWebWorkers)
	}
	return nil
}

// checkDisk refuses a size whose template (when not built yet) and
// per-trial copies do not fit on the disks that hold them.
func checkDisk(d dvdstore.Dataset, instances int) error {
	est := dvdstore.EstimateBytes(d)
	copies := int64(instances) * est
	tmp := os.TempDir()
	if err := dvdstore.CheckSpace(tmp, copies, fmt.Sprintf("the %s database for %d instances (a copy of its template each)", d.Size.Name, instances)); err != nil {
		return fmt.Errorf("parameters %s, %s, %s: %w", pSize, pScale, workload.ParamInstances, err)
	}
	cacheDir := existingParent(templateCache().Dir)
	need := est
	if sameDevice(tmp, cacheDir) {
		need += copies
	}
	if err := dvdstore.CheckSpace(cacheDir, need, fmt.Sprintf("the %s template (built once, kept) and the trials' copies", d.Size.Name)); err != nil {
		return fmt.Errorf("parameters %s, %s: %w", pSize, pScale, err)
	}
	return nil
}

func existingParent(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || dir == "/" || dir == "." {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

func sameDevice(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev
}

func gb(b int64) float64 { return float64(b) / (1 << 30) }

// pinnedOn reports whether the placement parameters apply on platform name.
func (in *Instance) pinnedOn(name string) bool {
	return len(in.pinOn) == 0 || slices.Contains(in.pinOn, name)
}

// layoutOn is the layout of a trial on platform name: container-per-server
// on the platforms per_server_platforms names, else the layout parameter's.
func (in *Instance) layoutOn(name string) string {
	if slices.Contains(in.perServer, name) {
		return topology.ContainerPerServer
	}
	return in.base.Layout
}

// transactionOps are the operations the trial reports per type: a new
// customer's registration only when some orders register.
func (in *Instance) transactionOps() []string {
	var out []string
	for _, op := range Ops {
		if op == OpNewCustomer && in.order.PctNewCustomer == 0 {
			continue
		}
		if op == OpLogin && in.order.PctNewCustomer == 100 {
			continue
		}
		out = append(out, op)
	}
	return out
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricOPM, Unit: "orders/min", HigherIsBetter: true,
			Help: "DVD Store's orders per minute over all instances: floor(60 x orders completed in the measured period / its seconds); closed loop"},
		{Name: MetricOrderMs, Unit: "ms",
			Help: "mean response time of an order: the sum of its timed transactions (login or registration, browses, purchase), without think time"},
	}
	for _, op := range in.transactionOps() {
		ms = append(ms, workload.Metric{Name: op + MetricMeanSuffix, Unit: "ms",
			Help: fmt.Sprintf("mean response time of the %s transaction (closed loop: from the request to the answer)", op)})
	}
	for _, op := range in.transactionOps() {
		ms = append(ms, workload.Metric{Name: op + MetricP95Suffix, Unit: "ms", Quantile: 0.95,
			Help: fmt.Sprintf("95th percentile response time of the %s transaction (closed loop)", op)})
	}
	ms = append(ms, CPU.Metrics()...)
	return append(ms,
		workload.Metric{Name: MetricRollbackPct, Unit: "%", Diagnostic: true,
			Help: fmt.Sprintf("purchases rolled back for short stock (DVD Store's sample run: about 1.9%%); a trial above %d%% is marked failed", MaxRollbackPct)},
		workload.Metric{Name: MetricRetries, Unit: "retries", Diagnostic: true,
			Help: "purchases retried after a deadlock in the measured period; a trial whose retries ran out is marked failed"},
		workload.Metric{Name: MetricCommits, Unit: "commits/s", HigherIsBetter: true, Diagnostic: true,
			Help: "database commits per second, all instances (pg_stat_database xact_commit over the measured period)"},
		workload.Metric{Name: MetricHitRatio, Unit: "%", HigherIsBetter: true, Diagnostic: true,
			Help: "share of database block reads served from shared_buffers, all instances (pg_stat_database blks_hit / (blks_hit + blks_read))"},
		workload.Metric{Name: MetricDBCPU, Unit: "% of a core", Diagnostic: true,
			Help: "CPU of the database tier over the load, all instances (each server's own CPU source, see the trial's where lines)"},
		workload.Metric{Name: MetricWebCPU, Unit: "% of a core", Diagnostic: true,
			Help: "CPU of the web tier (Apache and PHP) over the load, all instances; 0 in direct mode"},
		workload.Metric{Name: MetricMigrations, Unit: "migrations", Diagnostic: true,
			Help: "moves of the servers' threads (every worker's) between CPUs over the load, per order completed: how the scheduler placed the instances' Apache and PostgreSQL processes (native: each server's process tree or cgroup; in a container, its process tree)"},
		workload.Metric{Name: MetricCopy, Unit: "s", Diagnostic: true,
			Help: "wall time of copying the template's data directory for every instance before the trial (not measured load)"},
	)
}

// driverConfig is the driver run of a trial whose instances' entries are
// addrs, measuring for steady, with child processes pinned to driver_cpus.
func (in *Instance) driverConfig(addrs []string, steady time.Duration, run string) driver.Config {
	bc := BehaviourConfig{Mode: in.mode, Addrs: addrs, Threads: in.threads, Dataset: in.dataset, Order: in.order}
	pacing := driver.Pacing{Mode: driver.Think, Delay: driver.Distribution{Kind: driver.Fixed}}
	if in.think > 0 {
		pacing.Delay = driver.Distribution{Kind: driver.Uniform, Min: 0, Max: 2 * in.think}
	}
	c := driver.Config{
		Behaviour: BehaviourName, Params: bc.Params(), Mode: driver.Closed, Users: in.users(), Pacing: pacing,
		Phases:  driver.Phases{RampUp: in.rampUp, Steady: steady, RampDown: rampDown},
		Drain:   drain,
		Drivers: in.drivers,
		Seed:    int64(in.dataset.Seed),
	}
	if in.driverCPU != "" && in.drivers > 0 {
		c.CPUSets = []string{in.driverCPU}
	}
	if run != "" {
		c.Run = runid.ID(run)
	}
	return c
}

// Phases around the measured period: the users keep ordering for rampDown
// after it, so that every order begun in it completes, and an order still
// running drain after that is cut off (unfinished, not failed).
const (
	rampDown = 2 * time.Second
	drain    = 5 * time.Second
)

// stackEstimate is the instances' start and stop (a database copied from
// its template, PostgreSQL and Apache started) beyond the engine's
// per-platform start-up, for the run's duration estimate: oltp-pinned
// --quick trials took 23 to 26 s for 19 s of phases (run
// 20261123-170915-549d).
const stackEstimate = 5 * time.Second

// Estimate implements workload.Estimator: the stack, the ramp-up, the
// trial and the ramp-down.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	return stackEstimate + in.rampUp + trial + rampDown
}
