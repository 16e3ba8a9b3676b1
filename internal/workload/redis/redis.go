// Package redis is the Redis workload after the seed "Docker Containers
// Performance in VMware vSphere": redis-server without persistence on the
// platform, redis-benchmark on the host as the client, SET (or GET) of 1-byte
// values with random keys, pipeline 1, 1000 clients. The number of requests
// per trial is sized from the rate last seen on the same platform so that a
// trial lasts about the study's trial length.
package redis

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/workload"
)

// MaxKeyspace is the largest key space redis-benchmark accepts: its -r is a
// C int. The seed used 100 billion keys; more than 2^31 cannot be asked of it.
const MaxKeyspace = math.MaxInt32

// Metric names. The CPU account (Cost.Metrics) adds run_cpu_us_per_op and
// the diagnostic CPU shares.
const (
	MetricOps      = "ops_per_sec"
	MetricCPUPerOp = "cpu_us_per_op"
	MetricLatAvg   = "latency_avg_ms"
	MetricLatP99   = "latency_p99_ms"
)

// Cost is what the workload charges CPU to: one request, in microseconds.
var Cost = workload.CPUCost{Metric: MetricCPUPerOp, Unit: "us", Scale: 1e6, Op: "request"}

// ClosedLoopNote goes with every trial: redis-benchmark's latencies are
// those of a closed-loop driver.
const ClosedLoopNote = "closed loop: each redis-benchmark client waits for its reply before sending the next request, so latency excludes the queueing an open-loop load would see"

// saturated is the client CPU share above which the driver may be the
// bottleneck (redis-benchmark's event loop is one thread per --threads).
const saturated = 0.90

// Workload is the redis workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "redis" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "redis-server (no persistence) on the platform, redis-benchmark on the host: SET or GET throughput, latency and CPU per op"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "op", Type: workload.String, Default: "set", Enum: []string{"set", "get"}, Help: "command driven: set (as the seed) or get (keys preloaded)"},
		{Name: "clients", Type: workload.Int, Default: "1000", Min: 1, HasMin: true, Help: "parallel connections (seed: 1000)"},
		{Name: "pipeline", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "requests in flight per connection (seed: 1)"},
		{Name: "keyspace", Type: workload.Int, Default: strconv.Itoa(MaxKeyspace), Min: 1, HasMin: true, Help: "random SET keys drawn from this many (seed: 1e11; redis-benchmark's -r caps it at 2^31-1)"},
		{Name: "preload", Type: workload.Int, Default: "1000000", Quick: "100000", Min: 1, HasMin: true, Help: "for op=get: keys loaded before the trial; GETs draw from them"},
		{Name: "datasize", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "value size in bytes (seed: 1)"},
		{Name: "threads", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "redis-benchmark --threads (client event loops)"},
		{Name: "requests", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "requests per trial; 0 = sized to last the trial length"},
		{Name: "client_cpus", Type: workload.String, Default: "", Help: "CPU list to pin redis-benchmark to (taskset), e.g. 1; empty = unpinned"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{
		op:         v.String("op"),
		clients:    v.Int("clients"),
		pipeline:   v.Int("pipeline"),
		keyspace:   v.Int("keyspace"),
		preload:    v.Int("preload"),
		datasize:   v.Int("datasize"),
		threads:    v.Int("threads"),
		requests:   v.Int("requests"),
		clientCPUs: v.String("client_cpus"),
		rates:      map[string]float64{},
	}
	if in.keyspace > MaxKeyspace {
		return nil, fmt.Errorf("parameter keyspace: %d exceeds redis-benchmark's limit %d", in.keyspace, MaxKeyspace)
	}
	if in.clientCPUs != "" {
		if _, err := platform.ParseCPUSet(in.clientCPUs); err != nil {
			return nil, fmt.Errorf("parameter client_cpus: %w", err)
		}
	}
	return in, nil
}

// Instance is a configured redis workload. It remembers the request rate seen
// on each platform to size the next trial there.
type Instance struct {
	op                                                      string
	clients, pipeline, keyspace, preload, datasize, threads int
	requests                                                int
	clientCPUs                                              string

	mu    sync.Mutex
	rates map[string]float64
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricOps, Unit: "ops/s", HigherIsBetter: true, Help: "requests per second as redis-benchmark reports it"},
		{Name: MetricLatAvg, Unit: "ms", HigherIsBetter: false, Help: "mean request latency (closed loop: each client waits for its reply)"},
		{Name: MetricLatP99, Unit: "ms", HigherIsBetter: false, Quantile: 0.99, Help: "99th percentile request latency (closed loop) over the trial's requests"},
	}
	return append(ms, Cost.Metrics()...)
}

func (in *Instance) spec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		// Debian's redis-server package made the user; the server needs no
		// root, and natively a password-less server must not have it.
		User: "redis",
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir,
				"--maxclients", strconv.Itoa(in.clients + 100)}
		},
	}
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	srv, stop, err := workload.StartServer(ctx, t, in.spec(), &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	addr := srv.Addr("redis")
	if err := redisproto.WaitReadyDial(ctx, t.ClientHost().DialContext, addr, 30*time.Second); err != nil {
		return res, fmt.Errorf("from the client host (%s): %w", t.ClientHost().Describe(), err)
	}
	keys := in.keyspace
	if in.op == "get" {
		keys = in.preload
		// From the client host, as the load: a server on a sut host or a
		// platform subnet may not be reachable from this machine.
		if err := Preload(ctx, t.ClientHost().DialContext, addr, in.preload, in.datasize); err != nil {
			return res, err
		}
	}

	n := in.requests
	if n == 0 {
		rate, err := in.rate(ctx, t, addr, keys)
		if err != nil {
			return res, err
		}
		n = int(rate * t.Duration.Seconds())
		if n < in.clients*4 {
			n = in.clients * 4
		}
	}
	argv := in.benchArgv(addr, n, keys)
	res.Commands = append(res.Commands, "client: "+strings.Join(argv, " "))
	var run workload.ClientRun
	acct, err := workload.MeasureCPU(ctx, []platform.Server{srv}, nil, func(m *workload.CPUMeter) error {
		var err error
		run, err = m.RunClient(ctx, t, t.Name+"-redis-benchmark.csv", argv, nil)
		return err
	})
	if run.RawNote != "" {
		res.Notes = append(res.Notes, run.RawNote)
	}
	if err != nil {
		return res, err
	}
	row, err := ParseCSV(run.Output)
	if err != nil {
		return res, fmt.Errorf("redis-benchmark output: %w%s", err, workload.SeeRaw(run.RawPath))
	}
	in.mu.Lock()
	in.rates[t.Platform.Name()] = row.RPS
	in.mu.Unlock()
	res.Values = map[string]float64{
		MetricOps:    row.RPS,
		MetricLatAvg: row.AvgMs,
		MetricLatP99: row.P99Ms,
	}
	res.Samples = map[string]int64{MetricLatAvg: int64(n), MetricLatP99: int64(n)}
	acct.Record(Cost, float64(n), &res)
	if share := run.CPUShare() / float64(in.threads); share > saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("redis-benchmark used %.0f%% of its %d thread(s): the driver may be the bottleneck (raise threads)", share*100, in.threads))
	}
	res.Notes = append(res.Notes, ClosedLoopNote)
	return res, nil
}

// Estimate implements workload.Estimator: the trial and about a second
// around it (the readiness wait, the GET preload, the first trial's sizing
// probe, the CPU readings): aa --quick on the 2-core development machine
// (run 20261127-092649-1549) took 4.1-5.6 s a 3 s trial natively, redis
// --quick 2.2-4 s a 1.5 s trial, the platform's start-up included.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	return trial + time.Second
}

// rate returns the request rate to size a trial with: the last one seen on
// this platform, or a short probe's.
func (in *Instance) rate(ctx context.Context, t workload.Trial, addr string, keys int) (float64, error) {
	in.mu.Lock()
	r, ok := in.rates[t.Platform.Name()]
	in.mu.Unlock()
	if ok && r > 0 {
		return r, nil
	}
	probeN := in.clients * 20
	if probeN < 20000 {
		probeN = 20000
	}
	argv := in.benchArgv(addr, probeN, keys)
	run, err := workload.RunClient(ctx, t, t.Name+"-probe.csv", argv)
	if err != nil {
		return 0, fmt.Errorf("sizing probe: %w", err)
	}
	row, err := ParseCSV(run.Output)
	if err != nil {
		return 0, fmt.Errorf("sizing probe output: %w%s", err, workload.SeeRaw(run.RawPath))
	}
	return row.RPS, nil
}

func (in *Instance) benchArgv(addr string, n, keys int) []string {
	host, port, _ := net.SplitHostPort(addr)
	argv := []string{"redis-benchmark", "-h", host, "-p", port,
		"-c", strconv.Itoa(in.clients), "-n", strconv.Itoa(n), "-P", strconv.Itoa(in.pipeline),
		"-t", in.op, "-d", strconv.Itoa(in.datasize), "-r", strconv.Itoa(keys), "--csv"}
	if in.threads > 1 {
		argv = append(argv, "--threads", strconv.Itoa(in.threads))
	}
	if in.clientCPUs != "" {
		argv = append([]string{"taskset", "-c", in.clientCPUs}, argv...)
	}
	return argv
}

// Row is one test line of redis-benchmark --csv.
type Row struct {
	Test                                          string
	RPS, AvgMs, MinMs, P50Ms, P95Ms, P99Ms, MaxMs float64
}

// ParseCSV reads redis-benchmark --csv output (Redis 7: header
// "test","rps","avg_latency_ms",...). It expects exactly one test row.
func ParseCSV(out []byte) (Row, error) {
	r := csv.NewReader(strings.NewReader(string(out)))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return Row{}, fmt.Errorf("not CSV: %w", err)
	}
	var header []string
	var rows [][]string
	for _, rec := range recs {
		if len(rec) > 0 && rec[0] == "test" {
			header = rec
			continue
		}
		if header != nil && len(rec) == len(header) {
			rows = append(rows, rec)
		}
	}
	if header == nil {
		return Row{}, fmt.Errorf("no CSV header (\"test\",\"rps\",...) found")
	}
	if len(rows) != 1 {
		return Row{}, fmt.Errorf("want one result row, found %d", len(rows))
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	get := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok {
			return 0, fmt.Errorf("column %q missing", name)
		}
		v, err := strconv.ParseFloat(rows[0][i], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("column %q: %q is not a number", name, rows[0][i])
		}
		return v, nil
	}
	row := Row{Test: rows[0][col["test"]]}
	for name, dst := range map[string]*float64{"rps": &row.RPS, "avg_latency_ms": &row.AvgMs, "min_latency_ms": &row.MinMs,
		"p50_latency_ms": &row.P50Ms, "p95_latency_ms": &row.P95Ms, "p99_latency_ms": &row.P99Ms, "max_latency_ms": &row.MaxMs} {
		v, err := get(name)
		if err != nil {
			return Row{}, err
		}
		*dst = v
	}
	if row.RPS <= 0 {
		return Row{}, fmt.Errorf("rps %v is not positive", row.RPS)
	}
	return row, nil
}

// Preload writes n keys (key:%012d, the names redis-benchmark's -r draws)
// with size-byte values over one pipelined connection opened by dial (the
// client host's, as redisproto.WaitReadyDial's).
func Preload(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, n, size int) error {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(5 * time.Minute))
	}
	val := strings.Repeat("x", size)
	w := bufio.NewWriterSize(c, 1<<16)
	rd := bufio.NewReaderSize(c, 1<<16)
	const batch = 2000
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		for i := start; i < end; i++ {
			key := fmt.Sprintf("key:%012d", i)
			fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		for i := start; i < end; i++ {
			line, err := rd.ReadString('\n')
			if err != nil {
				return fmt.Errorf("preload: %w", err)
			}
			if !strings.HasPrefix(line, "+OK") {
				return fmt.Errorf("preload: SET answered %q", strings.TrimSpace(line))
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}
