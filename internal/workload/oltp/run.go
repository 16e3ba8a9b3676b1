package oltp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: each DVD Store thread sends its next transaction when the previous one has answered (after the think time, 0 by default), as DVD Store's driver; overload shows as fewer orders, not as queueing"

// Readiness timeouts: PostgreSQL recovers nothing (the template was shut
// down cleanly) but a guest under emulation starts it slowly.
const (
	dbReadyTimeout  = 3 * time.Minute
	webReadyTimeout = 2 * time.Minute
)

// maxFailedPct is the share of failed transactions above which a trial is
// marked failed rather than averaged.
const maxFailedPct = 1.0

// Role names of the topology.
const (
	RoleDB  = "db"
	RoleWeb = "web"
)

// templateCache is where DVD Store templates are kept, under nearnative's
// state directory.
func templateCache() dvdstore.Cache { return dvdstore.DefaultCache(state.Home()) }

// roles are the servers of one instance: the database on the trial's copy
// of the template (copies[i] for instance i; nil gives placeholders, for
// validation) and, in http mode, Apache with mod_php in front of it.
func (in *Instance) roles(copies []string) []topology.Role {
	dataOf := func(i int) string {
		if i < len(copies) {
			return copies[i]
		}
		return "/nonexistent/dvdstore-data"
	}
	db := topology.Role{
		Name: RoleDB, Ports: []string{pgserver.Port}, Entry: in.mode == ModeDirect,
		Ready: dvdstore.DBReady, ReadyTimeout: dbReadyTimeout,
		Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
			return dvdstore.DBSpec(dvdstore.DBConfig{Name: RoleDB, Memory: in.dbMemory, MaxConnections: in.maxConnections(),
				Data: platform.Volume{HostPath: dataOf(id.Instance), Path: dvdstore.DataPath, Own: true}})
		},
	}
	if in.mode == ModeDirect {
		return []topology.Role{db}
	}
	web := topology.Role{
		Name: RoleWeb, Ports: []string{dvdstore.WebPort}, After: []string{RoleDB}, Entry: true,
		Ready: dvdstore.WebReady, ReadyTimeout: webReadyTimeout,
		Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
			return dvdstore.WebSpec(dvdstore.WebConfig{Name: RoleWeb, DBAddrs: []string{peers.Addr(RoleDB, 0, pgserver.Port)}, Workers: in.workers})
		},
	}
	return []topology.Role{db, web}
}

// Run implements workload.Instance: it makes sure the size's template
// exists (building it once), copies it for every instance, deploys the
// instances on the trial's platform, drives them, and reads the figures.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	if t.Builder() == nil {
		return res, errors.New("the oltp workload builds its database template through the native platform, and the engine provided none")
	}
	tmpl, err := in.template(ctx, t, &res)
	if err != nil {
		return res, err
	}
	if err := in.checkGuests(t.Platform); err != nil {
		return res, err
	}
	dir, err := state.TempDir(t.Run, "oltp")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir) // after the servers have stopped (deferred below)
	copies, copyWall, err := in.copyData(ctx, tmpl, dir)
	if err != nil {
		return res, err
	}
	topo := in.base
	topo.Roles = in.roles(copies)
	topo.Layout = in.layoutOn(t.Platform.Name())
	if !in.pinnedOn(t.Platform.Name()) {
		topo.Placement = topology.Placement{DriverCPUs: in.base.Placement.DriverCPUs}
	}
	d, stop, err := workload.Deploy(ctx, t, topo, &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)

	entryRole, entryPort := RoleWeb, dvdstore.WebPort
	if in.mode == ModeDirect {
		entryRole, entryPort = RoleDB, pgserver.Port
	}
	addrs := d.Entries(entryRole, entryPort)
	dbAddrs := d.Entries(RoleDB, pgserver.Port)
	if len(addrs) != in.base.Instances || len(dbAddrs) != in.base.Instances {
		return res, fmt.Errorf("the deployment has %d %s and %d database servers for %d instances", len(addrs), entryRole, len(dbAddrs), in.base.Instances)
	}
	cfg := in.driverConfig(addrs, t.Duration, string(t.Run))
	m, err := in.load(ctx, t, d, cfg, dbAddrs)
	if err != nil {
		return res, err
	}
	if err := d.Check(ctx); err != nil {
		return res, fmt.Errorf("a server stopped during the trial: %w", err)
	}
	res.Commands = append(res.Commands, m.commands...)
	if t.Series != nil {
		if err := t.Series.PutSeries(ctx, 0, m.r.Points()); err != nil {
			return res, err
		}
	}
	m.copyWall = copyWall
	m.layout = topo.Layout
	return res, in.record(m, &res)
}

// template returns the dataset's template, building it first when the
// cache has none, and notes which it is.
func (in *Instance) template(ctx context.Context, t workload.Trial, res *workload.Result) (dvdstore.Template, error) {
	cache := templateCache()
	if in.cache != nil {
		cache = *in.cache
	}
	tmpl, built, err := cache.Ensure(ctx, dvdstore.Builder{Platform: t.Builder(), LogDir: t.LogDir, Log: t.Log}, in.dataset)
	if err != nil {
		return tmpl, fmt.Errorf("the DVD Store database %s: %w", in.dataset, err)
	}
	mt := tmpl.Meta
	c := mt.Counts
	how := "cached"
	if built {
		how = fmt.Sprintf("built by this trial in %v (%s)", mt.Build.Round(100*time.Millisecond), mt.Load)
		fmt.Fprintf(t.Log, "%s: built the DVD Store %s template in %v\n", t.Name, in.dataset, mt.Build.Round(100*time.Millisecond))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("data: DVD Store %s: %d customers, %d products, %d orders; template %s (%s, %.0f MB), copied for every instance",
		in.dataset, c.Customers, c.Products, c.Orders(), mt.Key, how, float64(mt.DataDirBytes)/(1<<20)))
	return tmpl, nil
}

// copyData copies the template for every instance into dir/iN/data, a few
// at a time, and returns the data directories and the wall time.
func (in *Instance) copyData(ctx context.Context, tmpl dvdstore.Template, dir string) ([]string, time.Duration, error) {
	start := time.Now()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, 0, err
	}
	n := in.base.Instances
	if err := dvdstore.CheckSpace(dir, int64(n)*tmpl.Meta.DataDirBytes, fmt.Sprintf("%d copies of the DVD Store template", n)); err != nil {
		return nil, 0, err
	}
	uid, gid, err := dvdstore.SystemUser()
	if err != nil {
		return nil, 0, err
	}
	copies := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range copies {
		parent := filepath.Join(dir, fmt.Sprintf("i%d", i))
		copies[i] = filepath.Join(parent, "data")
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			if err := os.Mkdir(parent, 0o755); err != nil {
				errs[i] = err
				return
			}
			// The host's postgres owns the copy natively; the platform
			// gives it to its own postgres user (Volume.Own).
			if _, err := tmpl.CopyTo(copies[i], uid, gid); err != nil {
				errs[i] = fmt.Errorf("instance %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	return copies, time.Since(start), nil
}

// checkGuests refuses, on a VM platform, instances that do not fit their
// guest's memory (each guest holds an equal share of the instances).
func (in *Instance) checkGuests(p platform.Platform) error {
	sz, ok := p.(interface{ Size() (int, int64) })
	if !ok {
		return nil
	}
	_, memMiB := sz.Size()
	vms := max(in.base.VMs, 1)
	per := (in.base.Instances + vms - 1) / vms
	need := int64(per) * in.instanceBytes()
	if have := memMiB << 20; need > have/10*8 {
		return fmt.Errorf("%s: each of the %d guest(s) holds %d instance(s), which need about %.1f GB (%s each for PostgreSQL and the Apache processes), more than 80%% of its %d MiB: give the platform a larger vm_memory, use more vms, or a smaller %s",
			p.Name(), vms, per, gb(need), fmt.Sprintf("%.0f MB", float64(in.instanceBytes())/(1<<20)), memMiB, pDBMemory)
	}
	return nil
}

// measured is what a trial's load measured.
type measured struct {
	r        *driver.Result
	acct     workload.CPUAccount
	tiers    map[string]time.Duration // CPU by role
	stats    pgserver.Rates
	statsErr error
	wall     time.Duration
	copyWall time.Duration
	commands []string
	layout   string // the trial's (layoutOn)
	// migrations are the servers' moves between CPUs over the load; -1
	// when some server cannot count them.
	migrations int64
}

// The driver starts its plan this long after Run is called (driver
// internals: 20 ms in process, 750 ms with child processes); the database
// readings are taken statsInset inside the measured period, so that an
// error of some hundred milliseconds does not matter.
const (
	inProcessStart = 20 * time.Millisecond
	childStart     = 750 * time.Millisecond
	statsInset     = time.Second
)

// load drives the deployment and measures the CPU account, each tier's
// CPU and the databases' statistics around it.
func (in *Instance) load(ctx context.Context, t workload.Trial, d *deploy.Deployment, cfg driver.Config, dbAddrs []string) (measured, error) {
	var m measured
	cfg.Client = t.Client
	var servers []platform.Server
	for _, r := range d.Servers() {
		servers = append(servers, r.Srv)
	}
	tiers0, err := tierCPU(ctx, d)
	if err != nil {
		return m, err
	}
	mig0, err := d.Migrations(ctx)
	if err != nil {
		return m, err
	}
	meter, err := workload.StartCPU(ctx, servers, workload.SelfCPU{})
	if err != nil {
		return m, err
	}
	begin := time.Now()
	delay := inProcessStart
	if cfg.Drivers > 0 {
		delay = childStart
	}
	inset := min(statsInset, cfg.Phases.Steady/4)
	from := begin.Add(delay + cfg.Phases.RampUp + inset)
	to := begin.Add(delay + cfg.Phases.RampUp + cfg.Phases.Steady - inset)
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		m.stats, m.statsErr = readRates(ctx, dbAddrs, dbDials(d), from, to)
	}()
	fmt.Fprintf(t.Log, "%s: %d users (%d instances x %d threads), %s mode, %d driver process(es), %v ramp-up, %v measured\n",
		t.Name, cfg.Users, in.base.Instances, in.threads, in.mode, cfg.Drivers, cfg.Phases.RampUp, cfg.Phases.Steady)
	r, rerr := driver.Run(ctx, cfg)
	m.wall = time.Since(begin)
	if r != nil && r.Drivers > 0 { // child processes ran the load (also on driver hosts with drivers: 0)
		meter.AddClient(r.ProcessCPU)
	}
	acct, serr := meter.Stop(ctx)
	<-statsDone
	if rerr != nil {
		return m, fmt.Errorf("the DVD Store driver: %w", rerr)
	}
	if serr != nil {
		return m, serr
	}
	tiers1, err := tierCPU(ctx, d)
	if err != nil {
		return m, err
	}
	m.r, m.acct, m.tiers = r, acct, map[string]time.Duration{}
	for role, v := range tiers1 {
		m.tiers[role] = max(0, v-tiers0[role])
	}
	mig1, err := d.Migrations(ctx)
	if err != nil {
		return m, err
	}
	m.migrations = migrationsOver(mig0, mig1, len(d.Servers()))
	m.commands = append(m.commands, fmt.Sprintf("driver: nearnative's DVD Store users (behaviour %s), %d instances x %d threads = %d users, %s mode, think %v, %d driver process(es), ramp-up %v, measured %v, ramp-down %v; entries %s",
		BehaviourName, in.base.Instances, in.threads, cfg.Users, in.mode, in.think, cfg.Drivers, cfg.Phases.RampUp, cfg.Phases.Steady, cfg.Phases.RampDown,
		cfg.Params[ParamAddrs]))
	m.commands = append(m.commands, r.Commands...)
	return m, nil
}

// migrationsOver is the servers' migrations between two readings, -1 when
// not every one of the n servers was counted in both.
func migrationsOver(before, after map[string]int64, n int) int64 {
	if len(before) != n || len(after) != n {
		return -1
	}
	var sum int64
	for name, a := range after {
		b, ok := before[name]
		if !ok {
			return -1
		}
		sum += max(0, a-b)
	}
	return sum
}

// tierCPU reads every server's CPU time, summed by role.
func tierCPU(ctx context.Context, d *deploy.Deployment) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, r := range d.Servers() {
		c, ok := r.Srv.(platform.CPUReporter)
		if !ok {
			return nil, fmt.Errorf("server %s cannot report its CPU time", r.ID.Name())
		}
		v, err := c.CPUTime(ctx)
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s: %w", r.ID.Name(), err)
		}
		out[r.ID.Role] += v
	}
	return out, nil
}

// dbDials are how the databases' statistics are reached, in dbAddrs'
// order (deploy.Deployment.Dialers).
func dbDials(d *deploy.Deployment) []pgconn.DialFunc {
	var out []pgconn.DialFunc
	for _, f := range d.Dialers(RoleDB) {
		out = append(out, f)
	}
	return out
}

// readRates reads every database's pg_stat_database at from and at to
// (while the users still run: an idle backend holds its counters back for
// up to 10 s) and returns the rates of all of them together.
func readRates(ctx context.Context, addrs []string, dials []pgconn.DialFunc, from, to time.Time) (pgserver.Rates, error) {
	read := func(at time.Time) (pgserver.DBStats, error) {
		if err := sleepCtx(ctx, time.Until(at)); err != nil {
			return pgserver.DBStats{}, err
		}
		var sum pgserver.DBStats
		for i, a := range addrs {
			var dial pgconn.DialFunc
			if i < len(dials) {
				dial = dials[i]
			}
			s, err := DBStats(ctx, a, dial)
			if err != nil {
				return sum, fmt.Errorf("database at %s: %w", a, err)
			}
			sum.Commits += s.Commits
			sum.Rollbacks += s.Rollbacks
			sum.BlocksHit += s.BlocksHit
			sum.BlocksRead += s.BlocksRead
			sum.Deadlocks += s.Deadlocks
		}
		sum.At = time.Now()
		return sum, nil
	}
	a, err := read(from)
	if err != nil {
		return pgserver.Rates{}, err
	}
	b, err := read(to)
	if err != nil {
		return pgserver.Rates{}, err
	}
	return a.Rates(b)
}

// record turns what the load measured into the trial's metrics and notes.
// A trial whose rollback rate is far from DVD Store's, whose deadlock
// retries ran out, or with too many failed transactions is marked failed,
// with its figures in the error and the notes, not averaged.
func (in *Instance) record(m measured, res *workload.Result) error {
	r := m.r
	steady := r.Phases.Steady
	if res.Values == nil {
		res.Values = map[string]float64{}
	}
	if res.Samples == nil {
		res.Samples = map[string]int64{}
	}
	orders := r.Counters[CountOrders]
	res.Values[MetricOPM] = OPM(orders, steady)
	failed, done, problems := in.opFigures(r, res)
	cp, cr := r.Counters[CountPurchases], r.Counters[CountRollbacks]
	rollbackPct := 0.0
	if cp > 0 {
		rollbackPct = 100 * float64(cr) / float64(cp)
	}
	res.Values[MetricRollbackPct] = rollbackPct
	res.Values[MetricRetries] = float64(r.Counters[CountDeadlockRetries])
	res.Values[MetricCopy] = m.copyWall.Seconds()
	problems = append(problems, m.cpuFigures(res)...)

	res.Notes = append(res.Notes, ClosedLoopNote, in.settingsNote(m.layout))
	res.Notes = append(res.Notes, fmt.Sprintf("measured %v: %d orders (%s OPM), %d purchases of which %d rolled back (%.2f%%), %d deadlock retries, %d new customers; %s",
		steady, orders, fmtNum(res.Values[MetricOPM]), cp, cr, rollbackPct, r.Counters[CountDeadlockRetries], r.Counters[CountNewCustomers], in.perOpNote(r)))
	if m.statsErr == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("pg_stat_database over %.1f s of the measured period, all instances: %.0f commits/s, %.0f rollbacks/s, buffer hit ratio %.2f%%, %d deadlocks",
			m.stats.Seconds, m.stats.CommitsPerSec, m.stats.RollbacksPerSec, 100*m.stats.HitRatio, m.stats.Deadlocks))
	}
	if sat := r.Saturation(driver.Limits{}); sat.Saturated {
		res.Notes = append(res.Notes, "the DVD Store driver may have been the bottleneck: "+strings.Join(sat.Reasons, "; "))
	}
	if failed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d transactions failed: %s", failed, done, failureExamples(r)))
	}
	problems = append(problems, in.loadProblems(r, failed, done, rollbackPct)...)
	if len(problems) > 0 {
		res.Notes = append(res.Notes, "marked failed, not averaged: "+strings.Join(problems, "; "))
		return fmt.Errorf("trial marked failed, not averaged: %s (its figures are in the notes: %s OPM)", strings.Join(problems, "; "), fmtNum(res.Values[MetricOPM]))
	}
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// opFigures records each transaction's mean and p95 latency and the mean
// order time, and returns the failed and attempted transactions and the
// transactions that never completed (a problem each).
func (in *Instance) opFigures(r *driver.Result, res *workload.Result) (failed, done int64, problems []string) {
	var stepSum float64
	var purchases int64
	for _, op := range Ops {
		o := r.Ops[op]
		if o == nil {
			continue
		}
		failed += o.Failed()
		done += o.Count + o.Failed()
		if o.Count > 0 {
			stepSum += ms(o.Latency.Mean()) * float64(o.Count)
		}
		if op == OpPurchase {
			purchases = o.Count
		}
	}
	for _, op := range in.transactionOps() {
		o := r.Ops[op]
		if o == nil || o.Count == 0 {
			problems = append(problems, fmt.Sprintf("no %s transaction completed in the measured period (%v): lengthen the trial", op, r.Phases.Steady))
			continue
		}
		res.Values[op+MetricMeanSuffix] = ms(o.Latency.Mean())
		res.Values[op+MetricP95Suffix] = ms(o.Latency.Quantile(0.95))
		res.Samples[op+MetricP95Suffix] = o.Latency.Count()
	}
	if purchases > 0 {
		res.Values[MetricOrderMs] = stepSum / float64(purchases)
	}
	return failed, done, problems
}

// cpuFigures records the database's statistics, the tiers' CPU shares and
// the CPU per order over the whole load, and returns what could not be
// measured (a problem each).
func (m measured) cpuFigures(res *workload.Result) []string {
	var problems []string
	if m.statsErr == nil {
		res.Values[MetricCommits] = m.stats.CommitsPerSec
		res.Values[MetricHitRatio] = 100 * m.stats.HitRatio
	} else {
		problems = append(problems, "reading pg_stat_database: "+m.statsErr.Error())
	}
	if iv := m.acct.Interval().Seconds(); iv > 0 {
		res.Values[MetricDBCPU] = m.tiers[RoleDB].Seconds() / iv * 100
		res.Values[MetricWebCPU] = m.tiers[RoleWeb].Seconds() / iv * 100
	}
	// CPU per order over the whole load: every order completed while the
	// meter ran (the purchases of every phase in the driver's series).
	var all int64
	for _, p := range m.r.Points() {
		if p.Op == OpPurchase {
			all += p.Count
		}
	}
	if all > 0 {
		m.acct.Record(CPU, float64(all), res)
		if m.migrations >= 0 {
			res.Values[MetricMigrations] = float64(m.migrations) / float64(all)
		} else {
			// Pods (and other servers whose threads this machine cannot
			// see) have no migration count: a diagnostic left out, not a
			// failed trial.
			res.Unmeasured = append(res.Unmeasured, MetricMigrations)
			res.Notes = append(res.Notes, MetricMigrations+": not measured, some of the servers on this platform do not report their threads' migrations")
		}
	} else {
		problems = append(problems, "no order completed")
	}
	return problems
}

// loadProblems are what makes the load unfit to average: users that could
// not start, purchases deadlocked past their retries, too many failed
// transactions, too many rollbacks.
func (in *Instance) loadProblems(r *driver.Result, failed, done int64, rollbackPct float64) []string {
	var problems []string
	if r.SetupFailures > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d users could not start: %s", r.SetupFailures, r.Users, r.SetupExample))
	}
	if n := exhaustedRetries(r); n > 0 {
		problems = append(problems, fmt.Sprintf("%d purchase(s) still deadlocked after %d retries (%s)", n, in.order.DeadlockRetries, CauseRetriesExhausted))
	}
	if done > 0 && 100*float64(failed)/float64(done) > maxFailedPct {
		problems = append(problems, fmt.Sprintf("%.1f%% of the transactions failed (more than %g%%): %s", 100*float64(failed)/float64(done), maxFailedPct, failureExamples(r)))
	}
	if rollbackPct > MaxRollbackPct {
		cp, cr := r.Counters[CountPurchases], r.Counters[CountRollbacks]
		problems = append(problems, fmt.Sprintf("%.1f%% of the purchases rolled back (%d of %d), far above DVD Store's 1.9%% (limit %d%%): too little stock for the load, e.g. too small a scale",
			rollbackPct, cr, cp, MaxRollbackPct))
	}
	return problems
}

// settingsNote states the configuration of a trial laid out as layout, and
// where it differs from the seed's.
func (in *Instance) settingsNote(layout string) string {
	var seed []string
	if in.base.Instances != SeedInstances {
		seed = append(seed, fmt.Sprintf("%d instances (the seed: %d)", in.base.Instances, SeedInstances))
	}
	if in.threads != SeedThreads {
		seed = append(seed, fmt.Sprintf("%d threads per instance (the seed: %d)", in.threads, SeedThreads))
	}
	if in.dataset.Scale != 1 {
		seed = append(seed, fmt.Sprintf("the %s size scaled by %g", in.dataset.Size.Name, in.dataset.Scale))
	}
	drivers := fmt.Sprintf("%d driver process(es)", in.drivers)
	if in.drivers == 0 {
		drivers = "the users in nearnative's own process"
	} else if in.perInst {
		drivers += ", one per instance as the seed"
	}
	db := dvdstore.DBConfig{Memory: in.dbMemory, MaxConnections: in.maxConnections()}.Settings()
	web := ""
	if in.mode == ModeHTTP {
		web = fmt.Sprintf("; Apache prefork with mod_php, %d processes per instance, each with a persistent database connection", in.workers)
	}
	s := fmt.Sprintf("%s mode, %d instances x %d threads (%d users), %s, think time %v, %d%% new customers, %s; each instance's database: %s%s",
		in.mode, in.base.Instances, in.threads, in.users(), drivers, in.think, in.order.PctNewCustomer, layoutNote(layout), db.Describe(), web)
	if len(seed) > 0 {
		s += "; scaled down from the seed: " + strings.Join(seed, ", ")
	}
	return s
}

// perOpNote is each transaction type's count, mean and p95.
func (in *Instance) perOpNote(r *driver.Result) string {
	var parts []string
	for _, op := range Ops {
		o := r.Ops[op]
		if o == nil || o.Count == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d x mean %.1f ms p95 %.1f ms", op, o.Count,
			float64(o.Latency.Mean())/float64(time.Millisecond), float64(o.Latency.Quantile(0.95))/float64(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// exhaustedRetries counts purchases whose deadlock retries ran out.
func exhaustedRetries(r *driver.Result) int64 {
	if o := r.Ops[OpPurchase]; o != nil {
		return o.Failures[CauseRetriesExhausted]
	}
	return 0
}

// failureExamples lists each operation's failure causes with an example.
func failureExamples(r *driver.Result) string {
	var parts []string
	ops := make([]string, 0, len(r.Ops))
	for op := range r.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		o := r.Ops[op]
		causes := make([]string, 0, len(o.Failures))
		for c := range o.Failures {
			causes = append(causes, c)
		}
		sort.Strings(causes)
		for _, c := range causes {
			parts = append(parts, fmt.Sprintf("%s %s x%d (e.g. %s)", op, c, o.Failures[c], o.Examples[c]))
		}
	}
	return strings.Join(parts, "; ")
}

func fmtNum(v float64) string { return fmt.Sprintf("%.0f", v) }

// layoutNote names a trial's layout and what it means on every platform.
func layoutNote(layout string) string {
	if layout == topology.ContainerPerServer {
		return "layout " + layout + " (every server in a container of its own, natively in a cgroup of its own)"
	}
	return "layout " + layout + " (an instance's servers in one container, natively in one cgroup, so that the scheduler groups them alike)"
}
