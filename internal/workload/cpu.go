package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// The CPU account of a trial: what every workload that drives a load from
// the host measures around that load, in one place (StartCPU, CPUMeter.Stop,
// CPUAccount.Record). Per trial it tells apart
//
//   - the run's servers: each server's own CPU time, read the same way on
//     every platform that can (the server's cgroup natively and in a
//     container; for a VM the qemu process, i.e. the whole guest), plus the
//     helper processes the platform runs for it on the host (Docker's
//     userland proxy);
//   - the load generator: client processes (their rusage when reaped),
//     nearnative's own process when it drives the load itself, child driver
//     processes;
//   - steal: time the hypervisor gave this machine's vCPUs to others;
//   - outside: every other process on the machine, i.e. the machine's busy
//     time (steal excluded) minus the run's own processes minus interrupt
//     and softirq time. Interrupt work is left out because, depending on
//     the kernel's accounting (CONFIG_IRQ_TIME_ACCOUNTING), it is charged to
//     whatever process it interrupted or to none; most of it here is the
//     run's own network traffic, which must not count as someone else's.
//     The price: other processes' interrupt work is not counted as outside,
//     and with tick-based accounting the part charged to the run's processes
//     is subtracted twice, so outside errs low by at most the softirq time
//     (stated in each trial's note).
//
// and it reports CPU per operation twice: for the whole machine (steal
// excluded, softirq included: every layer a platform adds, wherever it
// runs) and for the run's own processes (servers, their platform helpers
// and the load generator).

// Metric names of the CPU account (CPUCost.Metrics). The per-operation
// names are the workload's (CPUCost.Metric), the run's own with the prefix
// RunCPUPrefix.
const (
	MetricServerCPU  = "server_cpu_pct"
	MetricClientCPU  = "client_cpu_pct"
	MetricStealCPU   = "steal_cpu_pct"
	MetricOutsideCPU = "outside_cpu_pct"
	// RunCPUPrefix turns a workload's machine CPU per operation metric
	// ("cpu_us_per_op") into the name of the run's own ("run_cpu_us_per_op").
	RunCPUPrefix = "run_"
)

// DefaultOutsideCPUMax is the outside CPU (percent of one core) above which
// a trial counts as disturbed by the rest of the machine; a study setting
// (outside_cpu_max) changes it.
const DefaultOutsideCPUMax = 5.0

// CPUCost says what a workload charges CPU time to: its unit of work and the
// unit the cost is reported in.
type CPUCost struct {
	// Metric names the whole machine's CPU per operation, e.g.
	// "cpu_us_per_op"; the run's own is RunCPUPrefix+Metric.
	Metric string
	// Unit is the cost's unit ("us", "ms") and Scale converts CPU seconds
	// per operation into it (1e6 for us).
	Unit  string
	Scale float64
	// Op names one operation in help texts: "request", "GB received".
	Op string
}

// Metrics returns the metrics of the CPU account: the two costs per
// operation (results) and the CPU shares (diagnostic), for a workload's
// Metrics list.
func (c CPUCost) Metrics() []Metric {
	return []Metric{
		{Name: c.Metric, Unit: c.Unit, Help: fmt.Sprintf("CPU time of the whole machine per %s (of every sut host's machine on a run with --hosts): /proc/stat busy time over the load (softirq included, steal excluded), so every layer a platform adds counts, wherever it runs", c.Op)},
		{Name: RunCPUPrefix + c.Metric, Unit: c.Unit, Help: fmt.Sprintf("CPU time of the run's own processes per %s: the servers (their cgroups; a VM's whole guest), the platform's helpers on the host (docker-proxy) and the load generator; the rest of the machine is left out", c.Op)},
		{Name: MetricServerCPU, Unit: "% of a core", Diagnostic: true, Help: "the servers' CPU over the load: their cgroups (natively and in containers), or a VM's whole guest (its qemu process on the host); 100 = one core"},
		{Name: MetricClientCPU, Unit: "% of a core", Diagnostic: true, Help: "the load generator's CPU over the load (client processes, nearnative's own driver); 100 = one core"},
		{Name: MetricStealCPU, Unit: "% of a core", Diagnostic: true, Help: "steal time over the load: CPU the hypervisor gave this machine's vCPUs to others (/proc/stat); 100 = one core"},
		{Name: MetricOutsideCPU, Unit: "% of a core", Diagnostic: true, Help: "CPU of everything outside the run over the load: machine busy time (the sut hosts' with --hosts) minus the run's processes there minus interrupt work; a trial above the study's outside_cpu_max is marked disturbed"},
	}
}

// CPUAccount is the CPU spent during one trial's load.
type CPUAccount struct {
	// Machine is the whole machine's /proc/stat delta over the load.
	Machine sysinfo.CPUDelta
	// Servers is the CPU time of the run's servers, Overhead that of the
	// platform's helpers for them, Clients that of the load generator.
	Servers, Overhead, Clients time.Duration
	// PerServer is each server's own CPU time, in the order the servers
	// were given to StartCPU (their sum is Servers): a topology's CPU per
	// tier.
	PerServer []time.Duration
	// Sources says how each server's CPU was read, without repeats.
	Sources []string
	// Machines names the machines whose counters make Machine when they
	// are not this machine alone (the sut hosts of a hosts file; see
	// machineSet); nil for this machine. OnMachines is then the run's own
	// CPU time that ran on them, which OutsideSeconds subtracts.
	Machines   []string
	OnMachines time.Duration
}

// Interval is the wall time of the load.
func (a CPUAccount) Interval() time.Duration { return a.Machine.Interval }

// MachineSeconds is the machine's busy CPU time without steal.
func (a CPUAccount) MachineSeconds() float64 { return a.Machine.BusySeconds - a.Machine.StealSeconds }

// OwnSeconds is the CPU time of the run's own processes: servers, their
// platform helpers and the load generator.
func (a CPUAccount) OwnSeconds() float64 { return (a.Servers + a.Overhead + a.Clients).Seconds() }

// OutsideSeconds is the CPU time of everything outside the run: the machine
// without steal, interrupt and softirq time, minus the run's own processes;
// never below 0 (counters tick at 10 ms, so small negative differences are
// rounding).
func (a CPUAccount) OutsideSeconds() float64 {
	d := a.Machine
	own := a.OwnSeconds()
	if len(a.Machines) > 0 {
		own = a.OnMachines.Seconds()
	}
	return max(0, a.MachineSeconds()-d.IRQSeconds-d.SoftIRQSeconds-own)
}

// pct is seconds of CPU over the load in percent of one core.
func (a CPUAccount) pct(seconds float64) float64 {
	if iv := a.Interval().Seconds(); iv > 0 {
		return seconds / iv * 100
	}
	return 0
}

// Record puts the account into res for ops operations of the load: the
// metrics of c.Metrics(), how the servers' CPU was read (in Where), and a
// note with the machine's figures. ops must be positive.
func (a CPUAccount) Record(c CPUCost, ops float64, res *Result) {
	if res.Values == nil {
		res.Values = map[string]float64{}
	}
	res.Values[c.Metric] = a.MachineSeconds() / ops * c.Scale
	res.Values[RunCPUPrefix+c.Metric] = a.OwnSeconds() / ops * c.Scale
	res.Values[MetricServerCPU] = a.pct((a.Servers + a.Overhead).Seconds())
	res.Values[MetricClientCPU] = a.pct(a.Clients.Seconds())
	res.Values[MetricStealCPU] = a.pct(a.Machine.StealSeconds)
	res.Values[MetricOutsideCPU] = a.pct(a.OutsideSeconds())
	for _, s := range a.Sources {
		if w := "server CPU: " + s; !slices.Contains(res.Where, w) {
			res.Where = append(res.Where, w)
		}
	}
	lo, hi := a.Machine.Spread()
	machine := "machine"
	if len(a.Machines) > 0 {
		machine = "sut machines (" + strings.Join(a.Machines, ", ") + ")"
	}
	res.Notes = append(res.Notes, fmt.Sprintf("CPU over the load (%v): %s busy %.0f%% (per-CPU %.0f%%..%.0f%%); servers %.2f s, platform helpers %.2f s, load generator %.2f s, interrupts %.2f s, outside the run %.2f s, steal %.2f s",
		a.Interval().Round(time.Millisecond), machine, a.Machine.Utilisation*100, lo*100, hi*100,
		a.Servers.Seconds(), a.Overhead.Seconds(), a.Clients.Seconds(), a.Machine.IRQSeconds+a.Machine.SoftIRQSeconds, a.OutsideSeconds(), a.Machine.StealSeconds))
}

// CPUMeter reads the counters of a CPUAccount at the start of a load and
// at its end. Make one with StartCPU.
type CPUMeter struct {
	servers  []platform.CPUReporter
	overhead []platform.OverheadReporter
	clients  []platform.CPUReporter
	sources  []string

	machine0         sysinfo.CPUSample
	machines         *machineSet
	remote0          []sysinfo.CPUSample
	srv0, ovh0, cli0 []time.Duration
	added            time.Duration
	stopped          bool
}

// StartCPU starts measuring the CPU of a load: it reads the CPU time of
// every server (each must implement platform.CPUReporter, and may implement
// platform.OverheadReporter and platform.CPUDescriber), of every client
// source (a load generator that runs throughout: nearnative's own process,
// see SelfCPU, or a child driver process), and last the machine's
// /proc/stat. Call Stop when the load ends; client processes that start and
// end within the load are added with AddClient or run with RunClient.
//
// Any number of servers and client sources may be given, so that a
// workload with a topology of many servers and several drivers makes one
// account for the trial.
func StartCPU(ctx context.Context, servers []platform.Server, clients ...platform.CPUReporter) (*CPUMeter, error) {
	m := &CPUMeter{clients: clients}
	for _, s := range servers {
		r, ok := s.(platform.CPUReporter)
		if !ok {
			name := "server"
			if argv := s.Command(); len(argv) > 0 {
				name = "server " + argv[0]
			}
			return nil, fmt.Errorf("%s cannot report its CPU time: %s", name, s.Describe())
		}
		m.servers = append(m.servers, r)
		if o, ok := s.(platform.OverheadReporter); ok {
			m.overhead = append(m.overhead, o)
		}
		if d, ok := s.(platform.CPUDescriber); ok && !slices.Contains(m.sources, d.CPUSource()) {
			m.sources = append(m.sources, d.CPUSource())
		}
	}
	var err error
	if m.srv0, m.ovh0, m.cli0, err = m.read(ctx); err != nil {
		return nil, err
	}
	// The machines last at the start and first at the end: the server
	// readings (an API call for a container) stay outside their interval.
	if m.machines, m.remote0, err = planMachines(ctx, servers); err != nil {
		return nil, err
	}
	if m.machine0, err = sysinfo.ReadCPU(); err != nil {
		return nil, err
	}
	return m, nil
}

// read reads every server, overhead and client counter. The readings run
// in parallel: a container's figure comes from the engine's stats API,
// which takes about a second per call on a busy machine, and a topology has
// many servers.
func (m *CPUMeter) read(ctx context.Context) (srv, ovh, cli []time.Duration, err error) {
	srv = make([]time.Duration, len(m.servers))
	ovh = make([]time.Duration, len(m.overhead))
	cli = make([]time.Duration, len(m.clients))
	var wg sync.WaitGroup
	errs := make([]error, len(srv)+len(ovh)+len(cli))
	for i, r := range m.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if srv[i], errs[i] = r.CPUTime(ctx); errs[i] != nil {
				errs[i] = fmt.Errorf("reading CPU time: %w", errs[i])
			}
		}()
	}
	for i, o := range m.overhead {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := len(srv) + i
			if ovh[i], errs[k] = o.OverheadCPUTime(ctx); errs[k] != nil {
				errs[k] = fmt.Errorf("reading the platform's helper CPU time: %w", errs[k])
			}
		}()
	}
	for i, r := range m.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := len(srv) + len(ovh) + i
			if cli[i], errs[k] = r.CPUTime(ctx); errs[k] != nil {
				errs[k] = fmt.Errorf("reading CPU time: %w", errs[k])
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, nil, nil, e
		}
	}
	return srv, ovh, cli, nil
}

// AddClient adds the CPU time of a load-generator process that ran entirely
// within the load (its rusage once reaped, as ClientRun.CPU).
func (m *CPUMeter) AddClient(d time.Duration) { m.added += d }

// RunClient runs a load generator with RunClientLines and adds its CPU
// time to the account, also when it fails.
func (m *CPUMeter) RunClient(ctx context.Context, t Trial, name string, argv []string, onLine func(string)) (ClientRun, error) {
	run, err := RunClientLines(ctx, t, name, argv, onLine)
	m.AddClient(run.CPU)
	return run, err
}

// Stop reads the counters again and returns the account of the load. A
// meter stops once; a second Stop is an error.
func (m *CPUMeter) Stop(ctx context.Context) (CPUAccount, error) {
	if m.stopped {
		return CPUAccount{}, errors.New("CPU meter stopped twice")
	}
	m.stopped = true
	machine1, err := sysinfo.ReadCPU()
	if err != nil {
		return CPUAccount{}, err
	}
	remote1, err := m.machines.read(ctx)
	if err != nil {
		return CPUAccount{}, err
	}
	srv1, ovh1, cli1, err := m.read(ctx)
	if err != nil {
		return CPUAccount{}, err
	}
	a := CPUAccount{Machine: m.machine0.Delta(machine1), Clients: m.added, Sources: m.sources, Machines: m.machines.machineNames()}
	a.Servers = sumDelta(m.srv0, srv1)
	for i := range m.srv0 {
		a.PerServer = append(a.PerServer, max(0, srv1[i]-m.srv0[i]))
	}
	a.Overhead = sumDelta(m.ovh0, ovh1)
	a.Clients += sumDelta(m.cli0, cli1)
	if m.machines.remoteOnly() {
		for i, d := range a.PerServer {
			if m.machines.onSet[i] {
				a.OnMachines += d
			}
		}
		var deltas []sysinfo.CPUDelta
		if m.machines.local {
			deltas = append(deltas, a.Machine)
			a.OnMachines += a.Overhead + a.Clients
		}
		for i := range remote1 {
			deltas = append(deltas, m.remote0[i].Delta(remote1[i]))
		}
		a.Machine = sysinfo.SumDeltas(deltas)
	}
	return a, nil
}

// sumDelta is Σ (after[i] - before[i]), each difference at least 0.
func sumDelta(before, after []time.Duration) time.Duration {
	var sum time.Duration
	for i := range before {
		sum += max(0, after[i]-before[i])
	}
	return sum
}

// MeasureCPU runs load between StartCPU and Stop and returns the account;
// load gets the meter to run its clients with (CPUMeter.RunClient) or add
// their CPU time. When load fails, its error is returned with the account
// measured so far.
func MeasureCPU(ctx context.Context, servers []platform.Server, clients []platform.CPUReporter, load func(m *CPUMeter) error) (CPUAccount, error) {
	m, err := StartCPU(ctx, servers, clients...)
	if err != nil {
		return CPUAccount{}, err
	}
	lerr := load(m)
	a, err := m.Stop(ctx)
	if lerr != nil {
		return a, lerr
	}
	return a, err
}

// SelfCPU is a client CPU source for a load generated by nearnative's own
// process (an in-process driver): the user and system time of this process,
// all its threads, without its children (which are counted when reaped).
// nearnative does little else while a trial's load runs.
type SelfCPU struct{}

// CPUTime implements platform.CPUReporter.
func (SelfCPU) CPUTime(context.Context) (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// ProcessCPU is a client CPU source for a running child driver process:
// its own CPU time and that of the children it has reaped, read from
// /proc/PID/stat while it runs.
type ProcessCPU struct{ PID int }

// CPUTime implements platform.CPUReporter.
func (p ProcessCPU) CPUTime(context.Context) (time.Duration, error) {
	st, err := sysinfo.ReadProcStat(p.PID)
	if err != nil {
		return 0, err
	}
	return st.CPUWithChildren(), nil
}
