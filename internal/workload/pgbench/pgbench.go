// Package pgbench is the plain database benchmark next to the DVD Store
// study: PostgreSQL on the platform, PostgreSQL's own pgbench on the host
// running its TPC-B-like script (or the select-only or simple-update one)
// for the trial's length. A user compares it with the oltp workload to see
// whether the application's differences between platforms track a plain
// database benchmark's.
//
// The database is initialised per trial, not copied from a template: `pgbench
// -i` with server-side generation (-I dtGvp) takes about 1.8 s at scale 10 on
// the 2-core development machine, and a fresh cluster made by initdb in the
// server's own directory works on every platform, VMs included.
package pgbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricTPS       = "tps"
	MetricLatAvg    = "latency_avg_ms"
	MetricLatP95    = "latency_p95_ms"
	MetricLatP99    = "latency_p99_ms"
	MetricCPUPerTx  = "cpu_us_per_tx"
	MetricClientCPU = "client_cpu_pct"
	MetricServerCPU = "server_cpu_pct"
	MetricInit      = "init_s"
)

// Database is the database pgbench fills and drives.
const Database = "postgres"

// ReadyTimeout bounds the wait for a fresh cluster (initdb, then start).
const ReadyTimeout = 90 * time.Second

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: each pgbench client sends its next transaction when the previous one has finished, so latency excludes the queueing an open-loop load would see"

// saturated is the share of its threads' CPU above which pgbench may be the
// bottleneck.
const saturated = 0.90

// Scripts are pgbench's built-in scripts, by the names -b takes.
var Scripts = []string{"tpcb-like", "simple-update", "select-only"}

// Workload is the pgbench workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "pgbench" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "PostgreSQL on the platform, pgbench (TPC-B-like) on the host: transactions/s, latency mean/p95/p99 and CPU per transaction; database initialised per trial"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "scale", Type: workload.Int, Default: "10", Min: 1, HasMin: true,
			Help: "pgbench -i scale factor: 100,000 accounts (about 16 MB) each; loaded per trial with server-side generation (about 1.8 s at 10 on a 2-core machine)"},
		{Name: "clients", Type: workload.Int, Default: "8", Min: 1, HasMin: true, Help: "pgbench -c: concurrent database sessions"},
		{Name: "threads", Type: workload.Int, Default: "2", Min: 1, HasMin: true, Help: "pgbench -j: driver threads (at most clients)"},
		{Name: "script", Type: workload.String, Default: "tpcb-like", Enum: Scripts, Help: "pgbench -b: the built-in transaction script"},
		{Name: "protocol", Type: workload.String, Default: "prepared", Enum: []string{"simple", "extended", "prepared"},
			Help: "pgbench -M: query protocol (prepared, as applications with a driver's statement cache do)"},
		{Name: "memory", Type: workload.String, Default: "2g",
			Help: "memory the server is tuned for: shared_buffers a quarter of it (see the trial notes for every setting)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{
		scale:    v.Int("scale"),
		clients:  v.Int("clients"),
		threads:  v.Int("threads"),
		script:   v.String("script"),
		protocol: v.String("protocol"),
	}
	if in.threads > in.clients {
		return nil, fmt.Errorf("parameter threads: %d is more than clients (%d); pgbench needs at least one client per thread", in.threads, in.clients)
	}
	mem, err := platform.ParseBytes(v.String("memory"))
	if err != nil {
		return nil, fmt.Errorf("parameter memory: %w", err)
	}
	in.settings = pgserver.Tune(mem, in.clients+10)
	if err := in.settings.Validate(); err != nil {
		return nil, fmt.Errorf("parameter memory: %w", err)
	}
	return in, nil
}

// Instance is a configured pgbench workload.
type Instance struct {
	scale, clients, threads int
	script, protocol        string
	settings                pgserver.Settings
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricTPS, Unit: "tx/s", HigherIsBetter: true, Help: "transactions per second as pgbench reports it (without initial connection time)"},
		{Name: MetricLatAvg, Unit: "ms", Help: "mean transaction latency as pgbench reports it (closed loop)"},
		{Name: MetricLatP95, Unit: "ms", Help: "95th percentile transaction latency, from pgbench's per-transaction log"},
		{Name: MetricLatP99, Unit: "ms", Help: "99th percentile transaction latency, from pgbench's per-transaction log"},
		{Name: MetricCPUPerTx, Unit: "us", Help: "busy CPU time of the whole machine (/proc/stat, softirq included) during the run, per transaction"},
		{Name: MetricClientCPU, Unit: "%", Help: "pgbench's own CPU use, per thread; near 100% means the driver may be the bottleneck", Diagnostic: true},
		{Name: MetricServerCPU, Unit: "%", Help: "PostgreSQL's CPU use during the run (its processes or container cgroup), 100% = one CPU", Diagnostic: true},
		{Name: MetricInit, Unit: "s", Help: "wall time of pgbench -i (server-side generation, vacuum, primary keys) before the run; not part of the measurement", Diagnostic: true},
	}
}

func (in *Instance) spec() (platform.Spec, error) {
	return pgserver.Spec(pgserver.Config{Settings: in.settings})
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	bin, err := pgserver.Tool("pgbench")
	if err != nil {
		return res, err
	}
	spec, err := in.spec()
	if err != nil {
		return res, err
	}
	srv, stop, err := workload.StartServer(ctx, t, spec, &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	addr := srv.Addr(pgserver.Port)
	rctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	err = pgserver.Ready(rctx, spec.Name, addr, Database)
	cancel()
	if err != nil {
		return res, fmt.Errorf("%w (the server's output is in the run's logs/%s-%s.log)", err, t.Name, spec.Name)
	}

	initArgv := in.initArgv(bin, addr)
	logf(t.Log, "pgbench -i -s %d on %s", in.scale, t.Platform.Name())
	initRun, err := workload.RunClient(ctx, t, t.Name+"-pgbench-init.txt", initArgv)
	res.Commands = append(res.Commands, "init: "+strings.Join(initArgv, " "))
	if err != nil {
		return res, err
	}

	logPrefix := filepath.Join(t.RawDir, t.Name+"-pgbench-log")
	m, err := in.drive(ctx, t, srv, bin, addr, logPrefix, &res)
	if err != nil {
		return res, err
	}
	m.init = initRun.Wall
	run := m.run
	sum, err := ParseSummary(run.Output)
	if err != nil {
		return res, fmt.Errorf("pgbench output: %w: see %s", err, run.RawPath)
	}
	lat, err := ReadLatencyLogs(logPrefix)
	if err != nil {
		return res, err
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("pgbench wrote no per-transaction log at %s.*", logPrefix)
	}
	m.sum, m.lat = sum, lat
	in.record(m, &res)
	return res, nil
}

// pgMeasured is what one pgbench run measured.
type pgMeasured struct {
	run    workload.ClientRun
	cpu    sysinfo.CPUDelta
	server time.Duration // the server's CPU time during the run
	init   time.Duration // pgbench -i
	sum    Summary
	lat    []float64 // per-transaction latencies, microseconds
}

// drive runs pgbench against addr for the trial's duration and reads the
// machine's and the server's CPU time around it.
func (in *Instance) drive(ctx context.Context, t workload.Trial, srv platform.Server, bin, addr, logPrefix string, res *workload.Result) (pgMeasured, error) {
	var m pgMeasured
	cpuRep, ok := srv.(platform.CPUReporter)
	if !ok {
		return m, fmt.Errorf("platform %s cannot report the server's CPU time", t.Platform.Name())
	}
	argv := in.runArgv(bin, addr, t.Duration, logPrefix)
	srvBefore, err := cpuRep.CPUTime(ctx)
	if err != nil {
		return m, err
	}
	before, err := sysinfo.ReadCPU()
	if err != nil {
		return m, err
	}
	run, err := workload.RunClient(ctx, t, t.Name+"-pgbench.txt", argv)
	after, cerr := sysinfo.ReadCPU()
	// Backends that ended with pgbench's sessions are counted natively once
	// the postmaster has reaped them.
	time.Sleep(200 * time.Millisecond)
	srvAfter, serr := cpuRep.CPUTime(ctx)
	res.Commands = append(res.Commands, "client: "+strings.Join(argv, " "))
	if err != nil {
		return m, err
	}
	if cerr != nil {
		return m, cerr
	}
	if serr != nil {
		return m, serr
	}
	m.run, m.cpu, m.server = run, before.Delta(after), srvAfter-srvBefore
	return m, nil
}

// record writes the trial's figures and notes.
func (in *Instance) record(m pgMeasured, res *workload.Result) {
	sum, lat, cpu, run := m.sum, m.lat, m.cpu, m.run
	share := run.CPUShare() / float64(in.threads)
	res.Values = map[string]float64{
		MetricTPS:       sum.TPS,
		MetricLatAvg:    sum.LatencyAvgMs,
		MetricLatP95:    Percentile(lat, 0.95) / 1000,
		MetricLatP99:    Percentile(lat, 0.99) / 1000,
		MetricCPUPerTx:  cpu.BusySeconds / float64(sum.Processed) * 1e6,
		MetricClientCPU: share * 100,
		MetricServerCPU: m.server.Seconds() / run.Wall.Seconds() * 100,
		MetricInit:      m.init.Seconds(),
	}
	if share > saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("pgbench used %.0f%% of its %d thread(s): the driver may be the bottleneck (raise threads)", share*100, in.threads))
	}
	if sum.Failed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d transactions failed (%.2f%%); tps counts only the successful ones", sum.Failed, 100*float64(sum.Failed)/float64(sum.Processed+sum.Failed)))
	}
	if in.clients > in.scale && in.script != "select-only" {
		res.Notes = append(res.Notes, fmt.Sprintf("%d clients on %d branches: updates of the pgbench_branches rows contend for row locks", in.clients, in.scale))
	}
	res.Notes = append(res.Notes, ClosedLoopNote,
		fmt.Sprintf("%s; %d transactions in %.1f s; per-transaction latencies from %d log lines", sum.Version, sum.Processed, sum.DurationS, len(lat)),
		fmt.Sprintf("database initialised per trial: pgbench -i -s %d with server-side generation took %.1f s (not measured)", in.scale, m.init.Seconds()),
		in.settings.Describe())
	lo, hi := cpu.Spread()
	res.Notes = append(res.Notes, fmt.Sprintf("machine busy %.0f%% over %v; per-CPU busy %.0f%%..%.0f%%", cpu.Utilisation*100, cpu.Interval.Round(time.Millisecond), lo*100, hi*100))
}

func connArgs(addr string) []string {
	host, port, _ := net.SplitHostPort(addr)
	return []string{"-h", host, "-p", port, "-U", pgserver.Superuser}
}

// initArgv creates and fills the tables: drop, create, server-side generate,
// vacuum, primary keys.
func (in *Instance) initArgv(bin, addr string) []string {
	argv := append([]string{bin}, connArgs(addr)...)
	return append(argv, "-i", "-s", strconv.Itoa(in.scale), "-I", "dtGvp", "-q", Database)
}

// runArgv runs the script for d, logging every transaction under logPrefix;
// -n because the init step has just vacuumed.
func (in *Instance) runArgv(bin, addr string, d time.Duration, logPrefix string) []string {
	secs := int(math.Ceil(d.Seconds()))
	if secs < 1 {
		secs = 1
	}
	argv := append([]string{bin}, connArgs(addr)...)
	return append(argv, "-b", in.script, "-M", in.protocol, "-c", strconv.Itoa(in.clients), "-j", strconv.Itoa(in.threads),
		"-T", strconv.Itoa(secs), "-n", "-l", "--log-prefix", logPrefix, Database)
}

// Summary is what pgbench prints at the end of a run.
type Summary struct {
	Version      string // "pgbench (15.20 (Debian 15.20-0+deb12u1))"
	Processed    int64
	Failed       int64
	LatencyAvgMs float64
	TPS          float64
	DurationS    float64
}

var (
	reVersion   = regexp.MustCompile(`(?m)^(pgbench \(.*\))\s*$`)
	reProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	reFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	reLatency   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	reTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	reDuration  = regexp.MustCompile(`(?m)^duration: (\d+) s`)
	reAborted   = regexp.MustCompile(`(?m)^(pgbench: error: .*|Run was aborted.*)$`)
)

// ParseSummary reads pgbench's final report (PostgreSQL 15 format).
func ParseSummary(out []byte) (Summary, error) {
	var s Summary
	if m := reAborted.FindSubmatch(out); m != nil {
		return s, fmt.Errorf("pgbench: %s", m[1])
	}
	if m := reVersion.FindSubmatch(out); m != nil {
		s.Version = string(m[1])
	}
	num := func(re *regexp.Regexp, what string) (float64, error) {
		m := re.FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("no %q line", what)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%s %q is not a number", what, m[1])
		}
		return v, nil
	}
	var err error
	var f float64
	if f, err = num(reProcessed, "number of transactions actually processed"); err != nil {
		return Summary{}, err
	}
	s.Processed = int64(f)
	if m := reFailed.FindSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		s.Failed = n
	}
	if s.LatencyAvgMs, err = num(reLatency, "latency average"); err != nil {
		return Summary{}, err
	}
	if s.TPS, err = num(reTPS, "tps"); err != nil {
		return Summary{}, err
	}
	if s.DurationS, err = num(reDuration, "duration"); err != nil {
		return Summary{}, err
	}
	if s.Processed <= 0 || s.TPS <= 0 {
		return Summary{}, fmt.Errorf("no transaction processed (processed %d, tps %v)", s.Processed, s.TPS)
	}
	return s, nil
}

// ReadLatencyLogs reads every per-transaction log pgbench -l wrote under
// prefix (prefix.PID for the first thread, prefix.PID.N for the others) and
// returns the latencies in microseconds (the third field of each line).
func ReadLatencyLogs(prefix string) ([]float64, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return nil, err
	}
	var lat []float64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("reading pgbench's transaction log: %w", err)
		}
		l, err := parseLatencyLog(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("pgbench transaction log %s: %w", f, err)
		}
		lat = append(lat, l...)
	}
	return lat, nil
}

func parseLatencyLog(r io.Reader) ([]float64, error) {
	var lat []float64
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if len(f) < 6 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 6 (client tx latency script epoch us)", n, len(f))
		}
		// Failed transactions log "failed" or "serialization"/"deadlock"
		// instead of a latency; they have no latency to count.
		v, err := strconv.ParseFloat(string(f[2]), 64)
		if err != nil {
			continue
		}
		lat = append(lat, v)
	}
	return lat, sc.Err()
}

// Percentile returns the q-quantile (0 < q <= 1) of v by the nearest-rank
// method; v is sorted in place. It returns NaN for no values.
func Percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	if !sort.Float64sAreSorted(v) {
		sort.Float64s(v)
	}
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
