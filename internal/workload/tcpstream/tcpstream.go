// Package tcpstream is the TCP throughput micro-benchmark after the seed
// "Docker Containers Performance in VMware vSphere" (netperf TCP_STREAM in
// both directions): an iperf3 server on the platform, the iperf3 client on
// the host, one bulk TCP stream by default for the study's trial length.
//
// The direction is a parameter rather than two metrics of one trial: each
// direction is then its own trial with its own CPU accounting (the
// whole-machine busy time divided by the bytes of that transfer) and its own
// place in the randomised interleaving, and a study that wants both lists
// the workload twice (direction: send and direction: recv).
package tcpstream

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names. The CPU account (Cost.Metrics) adds run_cpu_ms_per_gb and
// the diagnostic CPU shares.
const (
	MetricGbps        = "gbit_per_sec"
	MetricCPUPerGB    = "cpu_ms_per_gb"
	MetricRetransmits = "retransmits"
)

// Cost is what the workload charges CPU to: one GB (10^9 bytes) received,
// in milliseconds.
var Cost = workload.CPUCost{Metric: MetricCPUPerGB, Unit: "ms", Scale: 1e3, Op: "GB (10^9 bytes) received"}

// Directions.
const (
	Send = "send" // the host client sends to the server
	Recv = "recv" // the server sends to the host client (iperf3 -R)
)

// ReadyTimeout bounds how long a trial retries a client that could not start
// its test because the server was not listening yet.
const ReadyTimeout = 30 * time.Second

// retryPause is the wait between such attempts.
const retryPause = 200 * time.Millisecond

// saturated is the client CPU share above which the driver may be the
// bottleneck: iperf3 3.12 drives all its streams from one thread.
const saturated = 0.90

// Workload is the tcp-stream workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "tcp-stream" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "iperf3 server on the platform, iperf3 client on the host: bulk TCP throughput (Gbit/s) and CPU per GB, either direction"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "direction", Type: workload.String, Default: Send, Enum: []string{Send, Recv},
			Help: "send: the host client sends to the server; recv: the server sends to the client (iperf3 -R). The seed measured both: list the workload once per direction"},
		{Name: "streams", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "parallel TCP streams (iperf3 -P; seed: netperf TCP_STREAM, one stream)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{direction: v.String("direction"), streams: v.Int("streams"), readyTimeout: ReadyTimeout,
		version: sysinfo.ToolVersion{Spec: sysinfo.ToolSpec{Name: "iperf3", Binary: "iperf3", Package: "iperf3", VersionArgs: []string{"--version"}}}}
	if in.direction != Send && in.direction != Recv {
		return nil, fmt.Errorf("parameter direction: %q is not %s or %s", in.direction, Send, Recv)
	}
	if in.streams > 128 {
		return nil, fmt.Errorf("parameter streams: %d exceeds iperf3's limit of 128", in.streams)
	}
	return in, nil
}

// Instance is a configured tcp-stream workload.
type Instance struct {
	direction    string
	streams      int
	readyTimeout time.Duration

	// version is the client's iperf3 (the server runs the same Debian
	// package, natively or from the workload image built to match).
	version sysinfo.ToolVersion
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	ms := []workload.Metric{
		{Name: MetricGbps, Unit: "Gbit/s", HigherIsBetter: true, Help: "TCP payload throughput as the receiving side counted it (10^9 bits/s)"},
		{Name: MetricRetransmits, Unit: "segments", HigherIsBetter: false, Help: "TCP segments the sender retransmitted (the server in direction recv)", Diagnostic: true},
	}
	return append(ms, Cost.Metrics()...)
}

// spec is the iperf3 server. It stays up for retries (no --one-off).
func (in *Instance) spec() platform.Spec {
	return platform.Spec{
		Name:  "iperf3",
		Ports: []string{"iperf3"},
		Command: func(l platform.Listen) []string {
			return []string{"iperf3", "--server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("iperf3"))}
		},
	}
}

// seconds is the iperf3 -t value for a trial length: whole seconds, at least 1.
func seconds(d time.Duration) int {
	return max(1, int(math.Round(d.Seconds())))
}

// clientArgv is the iperf3 client command line for addr.
func (in *Instance) clientArgv(addr string, secs int) []string {
	host, port, _ := net.SplitHostPort(addr)
	argv := []string{"iperf3", "--client", host, "--port", port, "--time", strconv.Itoa(secs),
		"--parallel", strconv.Itoa(in.streams), "--json"}
	if in.direction == Recv {
		argv = append(argv, "--reverse")
	}
	return argv
}

// measurement is one client run with the CPU account around it.
type measurement struct {
	run  workload.ClientRun
	acct workload.CPUAccount
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (_ workload.Result, err error) {
	var res workload.Result
	srv, stop, err := workload.StartServer(ctx, t, in.spec(), &res)
	if err != nil {
		return res, err
	}
	defer stop(&err)
	secs := seconds(t.Duration)
	argv := in.clientArgv(srv.Addr("iperf3"), secs)
	res.Commands = append(res.Commands, "client: "+strings.Join(argv, " "))
	m, rep, attempts, err := in.drive(ctx, t, argv, srv)
	if m.run.RawNote != "" {
		res.Notes = append(res.Notes, m.run.RawNote)
	}
	if err != nil {
		return res, err
	}

	share := m.run.CPUShare()
	res.Values = map[string]float64{
		MetricGbps:        rep.BitsPerSecond / 1e9,
		MetricRetransmits: float64(rep.Retransmits),
	}
	m.acct.Record(Cost, float64(rep.BytesReceived)/1e9, &res)
	res.Notes = append(res.Notes, in.version.Note(ctx, rep.Version+" (from its JSON output)"))
	if attempts > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("the server was not ready at first: the client ran %d times, the last one counts", attempts))
	}
	if float64(secs) != t.Duration.Seconds() {
		res.Notes = append(res.Notes, fmt.Sprintf("iperf3 runs whole seconds: trial length %v ran as %d s", t.Duration, secs))
	}
	if share > saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("the iperf3 client used %.0f%% of a CPU (one thread for all streams): the driver may be the bottleneck", share*100))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%.2f GB received in %.2f s", float64(rep.BytesReceived)/1e9, rep.Seconds))
	return res, nil
}

// drive runs the client until its test starts, retrying for ReadyTimeout
// while the server is not listening yet (iperf3's server takes one client at
// a time, so the client itself is the readiness probe: a bare TCP connect
// would occupy the server). It returns the counters of the last attempt.
func (in *Instance) drive(ctx context.Context, t workload.Trial, argv []string, srv platform.Server) (measurement, Report, int, error) {
	deadline := time.Now().Add(in.readyTimeout)
	raw := t.Name + "-iperf3.json"
	for attempt := 1; ; attempt++ {
		m, runErr := measure(ctx, t, raw, argv, srv)
		if ctx.Err() != nil {
			return m, Report{}, attempt, ctx.Err()
		}
		if msg, early := notStarted(m.run.Output); early && time.Now().Before(deadline) {
			if t.Log != nil {
				fmt.Fprintf(t.Log, "iperf3 attempt %d did not start (%s); retrying\n", attempt, msg)
			}
			select {
			case <-ctx.Done():
				return m, Report{}, attempt, ctx.Err()
			case <-time.After(retryPause):
			}
			continue
		}
		if runErr != nil {
			return m, Report{}, attempt, runErr
		}
		rep, err := ParseJSON(m.run.Output)
		if err != nil {
			if attempt > 1 {
				err = fmt.Errorf("%w (attempt %d, retried for %v)", err, attempt, in.readyTimeout)
			}
			return m, Report{}, attempt, fmt.Errorf("iperf3 output: %w%s", err, workload.SeeRaw(m.run.RawPath))
		}
		return m, rep, attempt, nil
	}
}

// measure runs the client once with the CPU account around it.
func measure(ctx context.Context, t workload.Trial, raw string, argv []string, srv platform.Server) (measurement, error) {
	var m measurement
	var err error
	m.acct, err = workload.MeasureCPU(ctx, []platform.Server{srv}, nil, func(cm *workload.CPUMeter) error {
		var err error
		m.run, err = cm.RunClient(ctx, t, raw, argv, nil)
		return err
	})
	return m, err
}
