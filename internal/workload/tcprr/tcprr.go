// Package tcprr is the TCP request/response micro-benchmark after the seed
// "Docker Containers Performance in VMware vSphere" (netperf TCP_RR): a
// sockperf server on the platform, sockperf ping-pong on the host, one small
// message in flight at a time. It reports the full round trip (sockperf
// --full-rtt), never sockperf's default one-way latency (RTT/2). The seed's
// finding to test: the bridge's NAT adds microseconds per round trip, the
// host network is at native latency.
package tcprr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricMean      = "rtt_mean_us"
	MetricP50       = "rtt_p50_us"
	MetricP99       = "rtt_p99_us"
	MetricTPS       = "transactions_per_sec"
	MetricCPUPerTx  = "cpu_us_per_transaction"
	MetricClientCPU = "client_cpu_pct"
	MetricServerCPU = "server_cpu_pct"
)

// MinMessageSize is sockperf's smallest message: its own 14-byte header.
// netperf TCP_RR's 1-byte messages cannot be asked of it; at this size the
// difference is a few bytes on the wire, not a different code path.
const MinMessageSize = 14

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: sockperf ping-pong keeps one message outstanding and sends the next when the reply arrives, so transactions/s is 1/RTT and latency has no queueing"

// RTTNote says which latency is reported.
const RTTNote = "latencies are full round trips (sockperf --full-rtt), not sockperf's default one-way figure (RTT/2)"

// saturated is the client CPU share above which the single-threaded driver
// may be the bottleneck.
const saturated = 0.90

// ReadyTimeout bounds the wait for the server to accept a connection.
const ReadyTimeout = 30 * time.Second

// Markers sockperf prints at the start and the end of its timed run.
const (
	markStart = "Starting test"
	markEnd   = "Test end"
)

// Workload is the tcp-rr workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "tcp-rr" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "sockperf server on the platform, sockperf ping-pong on the host: TCP round-trip time (mean, p50, p99), transactions/s and CPU per transaction"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "msgsize", Type: workload.Int, Default: strconv.Itoa(MinMessageSize), Min: MinMessageSize, HasMin: true,
			Help: "message size in bytes, each way (seed: netperf TCP_RR, 1 byte; sockperf's minimum is its 14-byte header)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{msgsize: v.Int("msgsize"), readyTimeout: ReadyTimeout}
	if in.msgsize < MinMessageSize || in.msgsize > 65000 {
		return nil, fmt.Errorf("parameter msgsize: %d is outside sockperf's %d..65000 bytes", in.msgsize, MinMessageSize)
	}
	return in, nil
}

// Instance is a configured tcp-rr workload.
type Instance struct {
	msgsize      int
	readyTimeout time.Duration

	mu      sync.Mutex
	version string // the host's sockperf, once looked up
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricMean, Unit: "us", HigherIsBetter: false, Help: "mean TCP round trip (request and reply), closed loop"},
		{Name: MetricP50, Unit: "us", HigherIsBetter: false, Help: "median TCP round trip"},
		{Name: MetricP99, Unit: "us", HigherIsBetter: false, Help: "99th percentile TCP round trip"},
		{Name: MetricTPS, Unit: "tx/s", HigherIsBetter: true, Help: "round trips per second over sockperf's statistics period (one outstanding message)"},
		{Name: MetricCPUPerTx, Unit: "us", HigherIsBetter: false, Help: "busy CPU time of the whole machine (/proc/stat, softirq included) during sockperf's timed run, per round trip"},
		{Name: MetricClientCPU, Unit: "%", HigherIsBetter: false, Help: "sockperf client's own CPU use over its timed run", Diagnostic: true},
		{Name: MetricServerCPU, Unit: "%", HigherIsBetter: false, Help: "sockperf server's own CPU use during the timed run (its process or container cgroup)", Diagnostic: true},
	}
}

// spec is the sockperf server.
func (in *Instance) spec() platform.Spec {
	return platform.Spec{
		Name:  "sockperf",
		Ports: []string{"sockperf"},
		Command: func(l platform.Listen) []string {
			return []string{"sockperf", "server", "--tcp", "-i", l.Host, "-p", strconv.Itoa(l.Port("sockperf"))}
		},
	}
}

// seconds is the sockperf -t value for a trial length: whole seconds, at
// least 2 (sockperf leaves the first 400 ms out of its statistics).
func seconds(d time.Duration) int {
	return max(2, int(math.Round(d.Seconds())))
}

// clientArgv is the sockperf ping-pong command line for addr.
func (in *Instance) clientArgv(addr string, secs int) []string {
	host, port, _ := net.SplitHostPort(addr)
	return []string{"sockperf", "ping-pong", "--tcp", "-i", host, "-p", port,
		"-m", strconv.Itoa(in.msgsize), "-t", strconv.Itoa(secs), "--mps=max", "--full-rtt"}
}

// window holds the counters read at sockperf's start and end markers.
type window struct {
	cpuRep         platform.CPUReporter
	ctx            context.Context
	started, ended bool
	cpu0, cpu1     sysinfo.CPUSample
	srv0, srv1     time.Duration
	err            error
}

// line takes the counters at the markers: the machine's first, as the
// server's CPU time takes an API call in a container.
func (w *window) line(l string) {
	var err error
	switch {
	case !w.started && strings.Contains(l, markStart):
		w.started = true
		if w.cpu0, err = sysinfo.ReadCPU(); err == nil {
			w.srv0, err = w.cpuRep.CPUTime(w.ctx)
		}
	case w.started && !w.ended && strings.Contains(l, markEnd):
		w.ended = true
		if w.cpu1, err = sysinfo.ReadCPU(); err == nil {
			w.srv1, err = w.cpuRep.CPUTime(w.ctx)
		}
	}
	if err != nil && w.err == nil {
		w.err = err
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
	cpuRep, ok := srv.(platform.CPUReporter)
	if !ok {
		return res, fmt.Errorf("platform %s cannot report the server's CPU time", t.Platform.Name())
	}
	addr := srv.Addr("sockperf")
	if err := WaitReady(ctx, addr, in.readyTimeout); err != nil {
		return res, fmt.Errorf("sockperf server: %w", err)
	}

	secs := seconds(t.Duration)
	argv := in.clientArgv(addr, secs)
	res.Commands = append(res.Commands, "client: "+strings.Join(argv, " "))
	w := &window{cpuRep: cpuRep, ctx: ctx}
	run, err := workload.RunClientLines(ctx, t.Run, t.RawDir, t.Name+"-sockperf.txt", argv, w.line)
	if err != nil {
		return res, err
	}
	sum, err := ParseSummary(run.Output)
	if err != nil {
		return res, fmt.Errorf("sockperf output: %w: see %s", err, run.RawPath)
	}
	if w.err != nil {
		return res, fmt.Errorf("reading CPU counters during the sockperf run: %w", w.err)
	}
	if !w.ended {
		return res, fmt.Errorf("sockperf output lacks its %q/%q lines, so its timed run cannot be bounded: see %s", markStart, markEnd, run.RawPath)
	}
	cpu := w.cpu0.Delta(w.cpu1)
	if sum.TotalReceived <= 0 || cpu.Interval <= 0 {
		return res, fmt.Errorf("sockperf's timed run counted %d round trips in %v: see %s", sum.TotalReceived, cpu.Interval, run.RawPath)
	}
	res.Values = map[string]float64{
		MetricMean:      sum.MeanUs,
		MetricP50:       sum.P50Us,
		MetricP99:       sum.P99Us,
		MetricTPS:       sum.TransactionsPerSec(),
		MetricCPUPerTx:  cpu.BusySeconds / float64(sum.TotalReceived) * 1e6,
		MetricClientCPU: run.CPU.Seconds() / cpu.Interval.Seconds() * 100,
		MetricServerCPU: (w.srv1 - w.srv0).Seconds() / cpu.Interval.Seconds() * 100,
	}
	res.Notes = append(res.Notes, ClosedLoopNote, RTTNote, in.versionNote(ctx, sum))
	if in.msgsize == MinMessageSize {
		res.Notes = append(res.Notes, fmt.Sprintf("messages of %d bytes each way: sockperf's minimum (the seed's netperf TCP_RR used 1 byte)", in.msgsize))
	}
	if float64(secs) != t.Duration.Seconds() {
		res.Notes = append(res.Notes, fmt.Sprintf("sockperf runs whole seconds (at least 2): trial length %v ran as %d s", t.Duration, secs))
	}
	if share := res.Values[MetricClientCPU] / 100; share > saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("the sockperf client used %.0f%% of a CPU: the driver may be the bottleneck", share*100))
	}
	if sum.Dropped+sum.Duplicated+sum.OutOfOrder > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("sockperf counted %d dropped, %d duplicated, %d out-of-order messages", sum.Dropped, sum.Duplicated, sum.OutOfOrder))
	}
	lo, hi := cpu.Spread()
	res.Notes = append(res.Notes, fmt.Sprintf("machine busy %.0f%% over sockperf's timed run of %v; per-CPU busy %.0f%%..%.0f%%; %d round trips in the statistics (p99.9 %.1f us, max %.1f us)",
		cpu.Utilisation*100, cpu.Interval.Round(time.Millisecond), lo*100, hi*100, sum.Observations, sum.P999Us, sum.MaxUs))
	return res, nil
}

// WaitReady waits until the server at addr accepts a connection and keeps
// it open. A connection that is closed at once is not readiness: Docker's
// userland proxy accepts for a container whose server is not listening yet,
// then closes. The probe sends nothing; sockperf's TCP server takes the
// closed connection in its stride.
func WaitReady(ctx context.Context, addr string, timeout time.Duration) error {
	err := platform.WaitReady(ctx, timeout, 50*time.Millisecond, func(ctx context.Context) error { return probe(ctx, addr) })
	if err != nil {
		return fmt.Errorf("%s did not accept and hold a connection: %w", addr, err)
	}
	return nil
}

// holdFor is how long a probe connection must stay open to count.
const holdFor = 200 * time.Millisecond

// probe connects once and checks that the peer keeps the connection open.
func probe(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(holdFor))
	var b [1]byte
	_, err = c.Read(b[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err == nil {
		return nil // the server spoke first: it is there
	}
	if err == io.EOF {
		return fmt.Errorf("connection closed by the peer at once (a proxy without its backend?)")
	}
	return err
}

// versionNote names the client's sockperf version (the server runs the same
// Debian package, natively or from the workload image built to match).
func (in *Instance) versionNote(ctx context.Context, sum Summary) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.version == "" {
		tool := sysinfo.LookupTool(ctx, sysinfo.ToolSpec{Name: "sockperf", Binary: "sockperf", Package: "sockperf", VersionArgs: []string{"--version"}})
		v := tool.BinaryVersion
		if tool.Version != "" {
			v += " (Debian " + tool.Package + " " + tool.Version + ")"
		}
		in.version = v
	}
	v := in.version
	if v == "" {
		v = sum.Version + " (from its output)"
	}
	return "sockperf --version: " + v
}
