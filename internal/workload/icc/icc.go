// Package icc is the inter-container networking workload after the seed
// "Docker network performance": iperf3 servers and clients, all in
// containers of the workload image, joined by the platform's networking
// technique (each technique is a platform kind). One TCP stream per client,
// iperf3 -J, in one of three topologies: one server and N clients, N servers
// and N clients in pairs, or one server and C client containers running K
// clients each. The metric is the seed's: the average Gbit/s per client
// container, with the aggregate beside it.
package icc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricPerContainer = "gbps_per_container"
	MetricAggregate    = "gbps_aggregate"
)

// readyTimeout bounds how long a client waits for its server's port.
const readyTimeout = 30 * time.Second

// Workload is the icc workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "icc" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "inter-container networking: iperf3 servers and clients in containers joined by the platform's technique; Gbit/s per client container"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "topology", Type: workload.String, Default: OneToMany, Enum: []string{OneToMany, Pairs, Grouped},
			Help: "one-to-many: 1 server, N clients; pairs: N servers, N clients (i to i mod N); grouped: 1 server, C containers x K clients"},
		{Name: "count", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "N for one-to-many and pairs (seed: 1,2,4,8,16,20 and 1,2,4,20)"},
		{Name: "containers", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "C client containers for grouped (seed: 1,2,4,16)"},
		{Name: "clients", Type: workload.Int, Default: "1", Min: 1, HasMin: true, Help: "K iperf3 clients per container for grouped (seed: 1,2,4,16)"},
		{Name: "duration", Type: workload.Duration, Default: "", Optional: true, Help: "iperf3 run length; empty = the study's trial length (seed: 5s)"},
		{Name: "scale", Type: workload.Float, Default: "1", Quick: "0.25", Min: 0.01, HasMin: true,
			Help: "multiplies the counts (rounded up, at least 1) for small machines; the trial records the counts run"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	plan, err := NewPlan(v.String("topology"), v.Int("count"), v.Int("containers"), v.Int("clients"), v.Float("scale"))
	if err != nil {
		return nil, err
	}
	in := &Instance{plan: plan}
	if d := v.String("duration"); d != "" {
		if in.duration, err = time.ParseDuration(d); err != nil || in.duration < time.Second {
			return nil, fmt.Errorf("parameter duration: %q: want at least 1s", d)
		}
	}
	return in, nil
}

// Instance is a configured icc workload.
type Instance struct {
	plan     Plan
	duration time.Duration // 0: the trial length
}

// Plan returns the topology the instance runs.
func (in *Instance) Plan() Plan { return in.plan }

// Per-trial costs for the run's duration estimate, from icc --quick on the
// 2-core development machine (run 20261127-091604-25d5, 1 s trials): about
// 3.4 s a trial with 2 endpoint containers, 4.9 s with 5, 6 s with 10, the
// platform's start-up the estimate adds (0.9 s) included: a third of a
// second per endpoint container started and removed, and 0.85 s for
// iperf3's servers to listen and its clients to connect and report.
const (
	endpointCost = 330 * time.Millisecond
	iperfStart   = 850 * time.Millisecond
)

// Estimate implements workload.Estimator: the run (duration, or the
// trial), iperf3's start, and each server and client container.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	run := in.duration
	if run == 0 {
		run = trial
	}
	endpoints := len(in.plan.Servers) + len(in.plan.Clients)
	return run + iperfStart + time.Duration(endpoints)*endpointCost
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricPerContainer, Unit: "Gbit/s", HigherIsBetter: true,
			Help: "received rate of each client container (sum of its iperf3 clients), averaged over the client containers: the seed's metric"},
		{Name: MetricAggregate, Unit: "Gbit/s", HigherIsBetter: true, Help: "received rate of all iperf3 clients together"},
	}
}

// serverSpec is server endpoint s with n iperf3 servers.
func serverSpec(s, n int) platform.Spec {
	ports := make([]string, n)
	for i := range ports {
		ports[i] = "p" + strconv.Itoa(i)
	}
	return platform.Spec{
		Name:  "srv" + strconv.Itoa(s),
		Ports: ports,
		Command: func(l platform.Listen) []string {
			if n == 1 {
				return []string{"iperf3", "-s", "-B", l.Host, "-p", strconv.Itoa(l.Port("p0"))}
			}
			// iperf3 serves one client at a time: one process per port,
			// stopped together on SIGTERM.
			var b strings.Builder
			b.WriteString(`pids=""; trap 'kill $pids 2>/dev/null; wait; exit 0' TERM INT; `)
			for _, name := range ports {
				fmt.Fprintf(&b, `iperf3 -s -B %s -p %d & pids="$pids $!"; `, l.Host, l.Port(name))
			}
			b.WriteString("wait")
			return []string{"bash", "-c", b.String()}
		},
	}
}

// clientScript waits until every target accepts connections, then until the
// common start time (Unix nanoseconds), then runs one iperf3 client per
// target at once and prints their reports after Marker lines.
func clientScript(targets []string, start time.Time, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `ready() { local end=$((SECONDS+%d)); until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do `+
		`if [ $SECONDS -ge $end ]; then echo "nearnative: $1:$2 not reachable within %v" >&2; return 1; fi; sleep 0.05; done; }; `,
		int(readyTimeout.Seconds()), readyTimeout)
	for _, t := range targets {
		h, p, _ := net.SplitHostPort(t)
		fmt.Fprintf(&b, "ready %s %s || exit 90; ", h, p)
	}
	// A probe is a connection without a test; iperf3 -s logs it and resets.
	b.WriteString("sleep 0.2; ")
	fmt.Fprintf(&b, `d=$(( %d - $(date +%%s%%N) )); if [ $d -gt 0 ]; then sleep "$((d/1000000000)).$(printf %%09d $((d%%1000000000)))"; `+
		`else echo "nearnative: late by $(( -d/1000000 )) ms" >&2; fi; `, start.UnixNano())
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	for i, t := range targets {
		h, p, _ := net.SplitHostPort(t)
		fmt.Fprintf(&b, "iperf3 -c %s -p %s -t %s -J >/tmp/nn-iperf3-%d.json 2>/tmp/nn-iperf3-%d.err & p%d=$!; ", h, p, secs, i, i, i)
	}
	b.WriteString("rc=0; ")
	for i := range targets {
		fmt.Fprintf(&b, "wait $p%d || rc=$?; ", i)
	}
	for i := range targets {
		fmt.Fprintf(&b, "echo '%s%d'; cat /tmp/nn-iperf3-%d.json; cat /tmp/nn-iperf3-%d.err >&2; ", Marker, i, i, i)
	}
	b.WriteString("exit $rc")
	return b.String()
}

// startMargin is how long after the servers are up the clients start: time
// for every client container to be created and joined on a busy machine.
func startMargin(clients int) time.Duration {
	return 1500*time.Millisecond + time.Duration(clients)*350*time.Millisecond
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (res workload.Result, err error) {
	jr, ok := t.Platform.(platform.JobRunner)
	if !ok {
		return res, fmt.Errorf("platform %s cannot run client containers (no jobs)", t.Platform.Name())
	}
	d := in.duration
	if d == 0 {
		d = t.Duration
	}
	if d < time.Second {
		d = time.Second
	}
	plan := in.plan
	res.Where = append(res.Where, fmt.Sprintf("%s; %v per iperf3 client, 1 TCP stream each", plan.Summary, d))

	servers, err := in.startServers(ctx, t, plan)
	defer func() {
		if serr := stopAll(context.WithoutCancel(ctx), servers); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return res, err
	}
	for _, s := range servers {
		res.Commands = append(res.Commands, "server: "+strings.Join(s.Command(), " "))
		res.Where = append(res.Where, "server: "+s.Describe())
	}

	outs := runClients(ctx, jr, t.Name, plan, servers, d)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	perContainer, total, late, errs := readClients(t, plan, outs, &res)
	if len(errs) > 0 {
		return res, errors.Join(errs...)
	}
	res.Values = map[string]float64{
		MetricPerContainer: total / float64(len(perContainer)),
		MetricAggregate:    total,
	}
	if late > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the last client container started %.0f ms after the common start time, so the %v runs overlapped only partly", late, d))
	}
	lo, hi := perContainer[0], perContainer[0]
	for _, v := range perContainer {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(perContainer) > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("client containers %.2f..%.2f Gbit/s", lo, hi))
	}
	return res, nil
}

// clientOutcome is one client container's job and its error.
type clientOutcome struct {
	job platform.JobResult
	err error
}

// runClients starts every client container of the plan at once (each
// waits for a common start time) against its servers' ports, for d, and
// waits for them all.
func runClients(ctx context.Context, jr platform.JobRunner, trial string, plan Plan, servers []platform.Server, d time.Duration) []clientOutcome {
	start := time.Now().Add(startMargin(len(plan.Clients)))
	outs := make([]clientOutcome, len(plan.Clients))
	var wg sync.WaitGroup
	for c, targets := range plan.Clients {
		addrs := make([]string, len(targets))
		for i, tg := range targets {
			addrs[i] = servers[tg.Server].Addr("p" + strconv.Itoa(tg.Port))
		}
		script := clientScript(addrs, start, d)
		spec := platform.Spec{Name: "cli" + strconv.Itoa(c), Command: func(platform.Listen) []string {
			return []string{"bash", "-c", script}
		}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[c].job, outs[c].err = jr.RunJob(ctx, trial, spec)
		}()
	}
	wg.Wait()
	return outs
}

// readClients saves each client's raw output, records its command and
// place in res, and returns each container's throughput (Gbit/s), their
// total, the latest start (ms) and the clients that failed.
func readClients(t workload.Trial, plan Plan, outs []clientOutcome, res *workload.Result) (perContainer []float64, total, late float64, errs []error) {
	for c, o := range outs {
		raw, note := saveRaw(t, c, o.job)
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		if c == 0 || o.err != nil {
			res.Commands = append(res.Commands, fmt.Sprintf("client %d: %s", c, strings.Join(o.job.Command, " ")))
		}
		if o.job.Where != "" && (c == 0 || c == len(outs)-1) {
			res.Where = append(res.Where, fmt.Sprintf("client %d: %s", c, o.job.Where))
		}
		if o.err != nil {
			errs = append(errs, fmt.Errorf("client container %d: %w%s", c, o.err, workload.SeeRaw(raw)))
			continue
		}
		streams, perr := ParseEndpoint(o.job.Stdout, len(plan.Clients[c]))
		if perr != nil {
			errs = append(errs, fmt.Errorf("client container %d: %w%s", c, perr, workload.SeeRaw(raw)))
			continue
		}
		sum := 0.0
		for _, s := range streams {
			sum += s.BitsPerSecond / 1e9
		}
		perContainer = append(perContainer, sum)
		total += sum
		late = max(late, LateMillis(o.job.Stderr))
	}
	return perContainer, total, late, errs
}

// startServers starts the plan's server endpoints at once.
func (in *Instance) startServers(ctx context.Context, t workload.Trial, plan Plan) ([]platform.Server, error) {
	servers := make([]platform.Server, len(plan.Servers))
	errs := make([]error, len(plan.Servers))
	var wg sync.WaitGroup
	for s, n := range plan.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := t.Platform.Start(ctx, t.Name, serverSpec(s, n))
			if err != nil {
				errs[s] = fmt.Errorf("starting iperf3 server endpoint %d: %w", s, err)
				return
			}
			servers[s] = srv
		}()
	}
	wg.Wait()
	var started []platform.Server
	for _, s := range servers {
		if s != nil {
			started = append(started, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return started, err
	}
	return servers, nil
}

// stopAll stops the servers at once.
func stopAll(ctx context.Context, servers []platform.Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// saveRaw writes client container c's output to the trial's raw directory
// (see workload.SaveRaw).
func saveRaw(t workload.Trial, c int, job platform.JobResult) (path, note string) {
	raw := fmt.Sprintf("# %s\n# where: %s\n# exit %d, wall %v\n%s", strings.Join(job.Command, " "), job.Where, job.ExitCode,
		job.Wall.Round(time.Millisecond), job.Stdout)
	if len(job.Stderr) > 0 {
		raw += "# stderr:\n" + string(job.Stderr)
	}
	return workload.SaveRaw(t.RawDir, fmt.Sprintf("%s-icc-client%d.txt", t.Name, c), []byte(raw))
}
