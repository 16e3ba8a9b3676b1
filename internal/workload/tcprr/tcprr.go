// Package tcprr is the TCP request/response micro-benchmark after the seed
// "Docker Containers Performance in VMware vSphere" (netperf TCP_RR, its
// Figures 7 and 8): a server on the platform, a client on the host, one
// message in flight at a time, the full round trip reported. The seed's
// finding to test: the bridge's NAT adds about 9-10 us per round trip, the
// host network is at native latency.
//
// Two tools, one parameter apart:
//
//   - rr (the default): nearnative's nn-rr (csrc/rr, built by package
//     benchbin into the workload image and onto the host), netperf TCP_RR's
//     protocol: 1-byte requests and responses by default, TCP_NODELAY,
//     blocking send and recv, every round trip timed.
//   - sockperf: sockperf ping-pong --full-rtt against sockperf server, whose
//     smallest message is its own 14-byte header. nn-rr at 14 bytes is
//     cross-checked against it (BENCH.md).
//
// Either way the full round trip is reported, never sockperf's default
// one-way latency (RTT/2).
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
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
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

// Tools.
const (
	ToolRR       = "rr"
	ToolSockperf = "sockperf"
)

// MinMessageSize is sockperf's smallest message: its own 14-byte header.
// netperf TCP_RR's 1-byte messages cannot be asked of it; tool=rr sends them.
const MinMessageSize = 14

// MaxMessageSize is the largest message either tool takes.
const MaxMessageSize = 65000

// SeedMessageSize is netperf TCP_RR's request and response size.
const SeedMessageSize = 1

// ClosedLoopNote goes with every trial.
const ClosedLoopNote = "closed loop: the client keeps one message outstanding and sends the next when the whole reply has arrived, so transactions/s is 1/RTT and latency has no queueing"

// RTTNote says which latency is reported with sockperf.
const RTTNote = "latencies are full round trips (sockperf --full-rtt), not sockperf's default one-way figure (RTT/2)"

// rrWarmup is the time nn-rr runs before it measures, as sockperf leaves
// its first 400 ms out of its statistics.
const rrWarmup = 500 * time.Millisecond

// saturated is the client CPU share above which the single-threaded driver
// may be the bottleneck.
const saturated = 0.90

// ReadyTimeout bounds the wait for the server to accept a connection.
const ReadyTimeout = 30 * time.Second

// Markers the tools print at the start and the end of their timed run.
const (
	markStart   = "Starting test"
	markEnd     = "Test end"
	rrMarkStart = "measure: start"
	rrMarkEnd   = "measure: end"
)

// Workload is the tcp-rr workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "tcp-rr" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "TCP request/response (netperf TCP_RR): nn-rr (1-byte messages) or sockperf, server on the platform, client on the host: round trip (mean, p50, p99), transactions/s, CPU per transaction"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "tool", Type: workload.String, Default: ToolRR, Enum: []string{ToolRR, ToolSockperf},
			Help: "rr: nearnative's nn-rr, netperf TCP_RR's protocol; sockperf: sockperf ping-pong (messages of at least 14 bytes)"},
		{Name: "msgsize", Type: workload.Int, Default: strconv.Itoa(SeedMessageSize), Min: 1, HasMin: true,
			Help: "request and response size in bytes (seed: netperf TCP_RR, 1); tool=sockperf needs at least 14, its header"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{tool: v.String("tool"), msgsize: v.Int("msgsize"), readyTimeout: ReadyTimeout,
		version: sysinfo.ToolVersion{Spec: sysinfo.ToolSpec{Name: "sockperf", Binary: "sockperf", Package: "sockperf", VersionArgs: []string{"--version"}}}}
	switch {
	case in.msgsize > MaxMessageSize:
		return nil, fmt.Errorf("tcp-rr: msgsize %d is above %d bytes", in.msgsize, MaxMessageSize)
	case in.tool == ToolSockperf && in.msgsize < MinMessageSize:
		return nil, fmt.Errorf("tcp-rr: tool=sockperf cannot send %d-byte messages (its header alone is %d): set msgsize to at least %d, or tool=rr", in.msgsize, MinMessageSize, MinMessageSize)
	}
	return in, nil
}

// Instance is a configured tcp-rr workload.
type Instance struct {
	tool         string
	msgsize      int
	readyTimeout time.Duration

	// version is the client's sockperf (the server runs the same Debian
	// package, natively or from the workload image built to match).
	version sysinfo.ToolVersion
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

// spec is the server.
func (in *Instance) spec() platform.Spec {
	if in.tool == ToolRR {
		return platform.Spec{
			Name:  "rr",
			Ports: []string{"rr"},
			Command: func(l platform.Listen) []string {
				return []string{benchbin.RR.Path(), "server", "-i", l.Host, "-p", strconv.Itoa(l.Port("rr"))}
			},
		}
	}
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

// port is the server's port name.
func (in *Instance) port() string { return in.spec().Ports[0] }

// clientArgv is the client's command line for addr and a trial of length d.
func (in *Instance) clientArgv(addr string, d time.Duration) []string {
	host, port, _ := net.SplitHostPort(addr)
	if in.tool == ToolRR {
		return []string{benchbin.RR.Path(), "client", "-i", host, "-p", port, "-m", strconv.Itoa(in.msgsize),
			"-t", strconv.FormatFloat(d.Seconds(), 'f', -1, 64), "-w", strconv.FormatFloat(rrWarmup.Seconds(), 'f', -1, 64)}
	}
	secs := seconds(d)
	return []string{"sockperf", "ping-pong", "--tcp", "-i", host, "-p", port,
		"-m", strconv.Itoa(in.msgsize), "-t", strconv.Itoa(secs), "--mps=max", "--full-rtt"}
}

// window holds the counters read at the client's start and end markers.
type window struct {
	start, end     string
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
	case !w.started && strings.Contains(l, w.start):
		w.started = true
		if w.cpu0, err = sysinfo.ReadCPU(); err == nil {
			w.srv0, err = w.cpuRep.CPUTime(w.ctx)
		}
	case w.started && !w.ended && strings.Contains(l, w.end):
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
	if in.tool == ToolRR {
		// The client runs from the host's copy; the server's comes from the
		// platform (the host's, or the image's, which the image build made
		// from the same sources).
		if err := benchbin.RR.CheckHost(); err != nil {
			return res, fmt.Errorf("tcp-rr: %w", err)
		}
	}
	srv, stop, err := workload.StartServer(ctx, t, in.spec(), &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	cpuRep, ok := srv.(platform.CPUReporter)
	if !ok {
		return res, fmt.Errorf("platform %s cannot report the server's CPU time", t.Platform.Name())
	}
	addr := srv.Addr(in.port())
	if err := WaitReady(ctx, addr, in.readyTimeout); err != nil {
		return res, fmt.Errorf("%s server: %w", in.tool, err)
	}

	argv := in.clientArgv(addr, t.Duration)
	res.Commands = append(res.Commands, "client: "+strings.Join(argv, " "))
	w := &window{start: markStart, end: markEnd, cpuRep: cpuRep, ctx: ctx}
	if in.tool == ToolRR {
		w.start, w.end = rrMarkStart, rrMarkEnd
	}
	run, err := workload.RunClientLines(ctx, t, t.Name+"-"+in.tool+".txt", argv, w.line)
	if err != nil {
		return res, err
	}
	var sum Summary
	if in.tool == ToolRR {
		sum, err = ParseRR(run.Output)
	} else {
		sum, err = ParseSummary(run.Output)
	}
	if err != nil {
		return res, fmt.Errorf("%s output: %w: see %s", in.tool, err, run.RawPath)
	}
	if w.err != nil {
		return res, fmt.Errorf("reading CPU counters during the %s run: %w", in.tool, w.err)
	}
	if !w.ended {
		return res, fmt.Errorf("%s output lacks its %q/%q lines, so its timed run cannot be bounded: see %s", in.tool, w.start, w.end, run.RawPath)
	}
	cpu := w.cpu0.Delta(w.cpu1)
	if sum.TotalReceived <= 0 || cpu.Interval <= 0 {
		return res, fmt.Errorf("%s's timed run counted %d round trips in %v: see %s", in.tool, sum.TotalReceived, cpu.Interval, run.RawPath)
	}
	err = in.record(ctx, t, sum, run, w, cpu, &res)
	return res, err
}

// record writes the figures of the client's timed run (its summary, the
// CPU window w bounded, the machine's CPU over it) and the notes that
// qualify them.
func (in *Instance) record(ctx context.Context, t workload.Trial, sum Summary, run workload.ClientRun, w *window, cpu sysinfo.CPUDelta, res *workload.Result) error {
	res.Values = map[string]float64{
		MetricMean:      sum.MeanUs,
		MetricP50:       sum.P50Us,
		MetricP99:       sum.P99Us,
		MetricTPS:       sum.TransactionsPerSec(),
		MetricCPUPerTx:  cpu.BusySeconds / float64(sum.TotalReceived) * 1e6,
		MetricClientCPU: run.CPU.Seconds() / cpu.Interval.Seconds() * 100,
		MetricServerCPU: (w.srv1 - w.srv0).Seconds() / cpu.Interval.Seconds() * 100,
	}
	res.Notes = append(res.Notes, ClosedLoopNote)
	if in.tool == ToolRR {
		if err := benchbin.RR.CheckBuild(benchbin.Parse(run.Output), "the host"); err != nil {
			return fmt.Errorf("%w: see %s", err, run.RawPath)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s%d-byte requests and responses (the seed's netperf TCP_RR: 1); nn-rr speaks TCP_RR's protocol (TCP_NODELAY, blocking send/recv) and times every round trip with CLOCK_MONOTONIC after %v unmeasured", workload.SizeNote, in.msgsize, rrWarmup))
	} else {
		res.Notes = append(res.Notes, RTTNote, in.version.Note(ctx, sum.Version+" (from its output)"))
		res.Notes = append(res.Notes, fmt.Sprintf("%smessages of %d bytes each way (the seed's netperf TCP_RR used 1 byte; sockperf's minimum is 14)", workload.SizeNote, in.msgsize))
		if secs := seconds(t.Duration); float64(secs) != t.Duration.Seconds() {
			res.Notes = append(res.Notes, fmt.Sprintf("sockperf runs whole seconds (at least 2): trial length %v ran as %d s", t.Duration, secs))
		}
	}
	if share := res.Values[MetricClientCPU] / 100; share > saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("the %s client used %.0f%% of a CPU: the driver may be the bottleneck", in.tool, share*100))
	}
	if sum.Dropped+sum.Duplicated+sum.OutOfOrder > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("sockperf counted %d dropped, %d duplicated, %d out-of-order messages", sum.Dropped, sum.Duplicated, sum.OutOfOrder))
	}
	lo, hi := cpu.Spread()
	res.Notes = append(res.Notes, fmt.Sprintf("machine busy %.0f%% over the client's timed run of %v; per-CPU busy %.0f%%..%.0f%%; %d round trips in the statistics (p99.9 %.1f us, max %.1f us)",
		cpu.Utilisation*100, cpu.Interval.Round(time.Millisecond), lo*100, hi*100, sum.Observations, sum.P999Us, sum.MaxUs))
	return nil
}

// Estimate implements workload.Estimator: nn-rr runs its warm-up before the
// trial length; sockperf rounds the trial up to whole seconds, at least 2.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	if in.tool == ToolRR {
		return trial + rrWarmup + 300*time.Millisecond
	}
	return time.Duration(seconds(trial))*time.Second + 500*time.Millisecond
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
