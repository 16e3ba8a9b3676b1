// Package containerstart is the container-start workload: how long a
// platform takes to start a server, from the platform's first request to
// make it (the engine's create request, LXC's lxc-start, the fork) to the
// server's first answer to its readiness probe from the client host. The
// server is small (redis-server without persistence, which answers PING
// as soon as it listens), so that the time is the platform's: making the
// container or sandbox, its network, starting its process. Runtime
// differences that only show at start (crun against runc, gVisor's sandbox,
// Podman's conmon, an LXC system container) are measured here, and a trial
// holds many starts.
package containerstart

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricStart    = "start_ms"
	MetricStartMax = "start_max_ms"
	MetricStop     = "stop_ms"
)

// Probe timing: how often the readiness probe tries, how long a start may
// take before the trial fails.
const (
	probeEvery   = 5 * time.Millisecond
	readyTimeout = 60 * time.Second
)

// Note goes with every trial.
const Note = "start: from the platform's request to make the server (container create, lxc-start, fork) to its first PING answered from the client host; the trial's median over its starts, after one start that is not counted (a platform's one-time preparation stays out)"

// Workload is the container-start workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "container-start" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "start latency: from the platform's create request to redis-server answering PING from the client host, many starts per trial; median start and stop times"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "starts", Type: workload.Int, Default: "20", Quick: "3", Min: 1, HasMin: true,
			Help: "timed starts per trial (each followed by a stop); the trial reports their median"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	return &Instance{starts: v.Int("starts")}, nil
}

// Instance is a configured container-start workload.
type Instance struct{ starts int }

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricStart, Unit: "ms", Help: "median time from the platform's request to make the server to its first answer from the client host"},
		{Name: MetricStartMax, Unit: "ms", Diagnostic: true, Help: "slowest start of the trial"},
		{Name: MetricStop, Unit: "ms", Diagnostic: true, Help: "median time to stop and remove the server (SIGTERM; a container removed)"},
	}
}

// Estimate implements workload.Estimator: a start and a stop took about
// half a second together under runc and Podman (runtimes --quick on the
// 2-core development machine, run 20261127-031342-764b: 2.2-2.6 s a trial
// of 3 starts and the uncounted first, the platform's start-up that the
// run's estimate adds included; gVisor 3.2 s, LXC 0.6 s). 400 ms a start
// here, as the estimate adds the platform's start-up on top.
func (in *Instance) Estimate(time.Duration) time.Duration {
	return time.Duration(in.starts+1) * 400 * time.Millisecond
}

func spec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
		},
	}
}

// Run implements workload.Instance: one start that is not counted, then
// the timed ones.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	res := workload.Result{Values: map[string]float64{}, Notes: []string{Note}}
	var starts, stops []time.Duration
	for i := 0; i <= in.starts; i++ {
		start, stop, err := in.once(ctx, t, i, &res)
		if err != nil {
			return res, err
		}
		if i > 0 {
			starts, stops = append(starts, start), append(stops, stop)
		}
	}
	res.Values[MetricStart] = ms(median(starts))
	res.Values[MetricStartMax] = ms(slices.Max(starts))
	res.Values[MetricStop] = ms(median(stops))
	return res, nil
}

// once starts the server, waits for its answer from the client host and
// stops it, timing both.
func (in *Instance) once(ctx context.Context, t workload.Trial, i int, res *workload.Result) (start, stop time.Duration, err error) {
	client := t.ClientHost()
	name := fmt.Sprintf("%s-s%d", t.Name, i)
	t0 := time.Now()
	srv, err := t.Platform.Start(platform.QuickStart(ctx), name, spec())
	if err != nil {
		return 0, 0, workload.StopUnit(fmt.Errorf("starting the redis server (start %d): %w", i, err))
	}
	addr := srv.Addr("redis")
	err = platform.WaitReady(ctx, readyTimeout, probeEvery, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return redisproto.PingDial(pctx, client.DialContext, addr)
	})
	start = time.Since(t0)
	if i == 0 {
		res.Commands = append(res.Commands, "server: "+strings.Join(srv.Command(), " "))
		res.Where = append(res.Where, srv.Describe())
	}
	t1 := time.Now()
	serr := srv.Stop(context.WithoutCancel(ctx))
	stop = time.Since(t1)
	if err != nil {
		return 0, 0, errors.Join(fmt.Errorf("start %d: redis at %s did not answer the client host (%s): %w", i, addr, client.Describe(), err), serr)
	}
	if serr != nil {
		return 0, 0, fmt.Errorf("stopping the redis server (start %d): %w", i, serr)
	}
	return start, stop, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median is the middle value (the mean of the two middle ones).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return time.Duration(math.Round(float64(s[n/2-1]+s[n/2]) / 2))
}
