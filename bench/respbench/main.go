// Command respbench cross-checks the Redis client of nearnative's load
// driver (behaviour redis-mix, package internal/driver/respc) against
// redis-benchmark on the same single-command load against one redis-server
// running natively: SET only, then GET only (keys preloaded, so every GET
// hits), 1-byte values, keys uniform over the same key space, the same
// number of connections and the same pipeline depth (the Redis scale-out
// seed's 100 clients and pipeline 30 by default). redis-benchmark cannot mix
// GET and SET in one run, which is why nearnative has its own client; on a
// single command the two must agree: throughput within 5%, and our CPU per
// command no higher than redis-benchmark's.
//
// Each repetition runs both tools on both commands in an order that rotates,
// so that a machine getting busier does not favour one. Throughput is
// commands answered per second of the measured interval (redis-benchmark's
// own figure; ours over the steady phase); CPU per command is the client
// process's user+system time over the commands it sent (redis-benchmark: its
// rusage when reaped; ours: the driver's CPU over the whole run divided by
// every command of the run, ramp-up and drain included). The table is
// Markdown for BENCH.md:
//
//	go run ./bench/respbench -duration 10s -reps 3
package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/driver/respc"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
)

func main() {
	// Our driver runs in a child process: this binary re-executed.
	if len(os.Args) > 1 && os.Args[1] == driver.ChildArg {
		if err := driver.ChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "respbench:", err)
		os.Exit(1)
	}
}

type options struct {
	duration  time.Duration
	reps      int
	clients   int
	pipeline  int
	keyspace  int
	serverCPU string
	clientCPU string
	threads   int
	raw       string
	id        runid.ID
}

func run() error {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	flag.IntVar(&o.reps, "reps", 3, "repetitions; the order of the four runs rotates")
	flag.IntVar(&o.clients, "clients", 100, "connections of each tool (the seed: 100 per redis-benchmark)")
	flag.IntVar(&o.pipeline, "pipeline", 30, "pipeline depth (the seed: 30)")
	flag.IntVar(&o.keyspace, "keyspace", 1000000, "keys, preloaded for the GET runs")
	flag.StringVar(&o.serverCPU, "server-cpus", "", "CPU list redis-server is confined to (empty: any)")
	flag.StringVar(&o.clientCPU, "client-cpus", "", "CPU list both clients are pinned to with taskset (empty: any)")
	flag.IntVar(&o.threads, "threads", 1, "threads running Go code in our driver process (GOMAXPROCS; 0: one per CPU), as redis-scaleout's driver_threads")
	flag.Parse()
	if o.reps < 1 || o.clients < 1 || o.pipeline < 1 || o.keyspace < 1 || o.duration <= 0 {
		return errors.New("-reps, -clients, -pipeline, -keyspace and -duration must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	o.id = runid.New()
	// The machine-wide measuring lock of `nearnative run`: a cross-check
	// measures one after the other with the runs, not during them.
	lock, err := state.Home().AcquireMachine(ctx, state.Holder{Run: o.id, Study: "respbench", PID: os.Getpid(), Since: time.Now()}, true,
		func(p state.Place) {
			fmt.Fprintf(os.Stderr, "respbench: waiting, %s: the machine is being measured by %s\n", p, p.Holder)
		})
	if err != nil {
		return err
	}
	defer lock.Release()
	root, err := state.TempDir(o.id, "respbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	o.raw = filepath.Join(root, "raw")
	env := platform.Env{Run: o.id, LogDir: filepath.Join(root, "logs")}
	plat, err := native.New("native", env, state.Dir{Root: root}, platform.Options{CPUSet: o.serverCPU})
	if err != nil {
		return err
	}
	defer plat.Close()
	srv, err := plat.Start(ctx, "bench", platform.Spec{Name: "redis", Ports: []string{"redis"}, Command: func(l platform.Listen) []string {
		return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
			"--save", "", "--appendonly", "no", "--dir", l.Dir, "--maxclients", "10000"}
	}})
	if err != nil {
		return err
	}
	defer srv.Stop(context.WithoutCancel(ctx))
	addr := srv.Addr("redis")
	if err := redisproto.WaitReady(ctx, addr, 30*time.Second); err != nil {
		return err
	}
	if err := preload(ctx, addr, o.keyspace); err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("<!-- respbench on %s, %s, redis-server natively at %s (CPUs %s), clients on CPUs %s, load average at start %s -->\n\n",
		host, time.Now().UTC().Format(time.RFC3339), addr, orAny(o.serverCPU), orAny(o.clientCPU), loadavg())
	fmt.Printf("### %d connections, pipeline %d, 1-byte values, %d keys (preloaded), %v runs\n\n", o.clients, o.pipeline, o.keyspace, o.duration)
	if err := table(ctx, o, addr); err != nil {
		return err
	}
	fmt.Printf("\n<!-- load average at the end %s -->\n", loadavg())
	return nil
}

// table measures both tools, each command, o.reps times in a rotating
// order, and prints a Markdown row per repetition and command and the
// means of our driver over redis-benchmark.
func table(ctx context.Context, o options, addr string) error {
	fmt.Println("| rep | command | redis-benchmark cmd/s | ours cmd/s | ours / redis-benchmark | redis-benchmark CPU us/cmd | ours CPU us/cmd | ours / redis-benchmark |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	type cell struct{ rate, cpu float64 }
	sums := map[string][2]float64{}
	for rep := 0; rep < o.reps; rep++ {
		got := map[string]cell{}
		type runFn struct {
			key string
			fn  func() (float64, float64, error)
		}
		var runs []runFn
		for _, cmd := range []string{"set", "get"} {
			runs = append(runs,
				runFn{"rb-" + cmd, func() (float64, float64, error) { return benchmark(ctx, o, addr, cmd, rep) }},
				runFn{"ours-" + cmd, func() (float64, float64, error) { return ours(ctx, o, addr, cmd) }})
		}
		for k := range runs {
			r := runs[(k+rep)%len(runs)]
			rate, cpu, err := r.fn()
			if err != nil {
				return fmt.Errorf("%s: %w", r.key, err)
			}
			got[r.key] = cell{rate, cpu}
		}
		for _, cmd := range []string{"set", "get"} {
			rb, us := got["rb-"+cmd], got["ours-"+cmd]
			fmt.Printf("| %d | %s | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f |\n", rep+1, strings.ToUpper(cmd),
				rb.rate, us.rate, us.rate/rb.rate, rb.cpu, us.cpu, us.cpu/rb.cpu)
			s := sums[cmd]
			sums[cmd] = [2]float64{s[0] + us.rate/rb.rate, s[1] + us.cpu/rb.cpu}
		}
	}
	fmt.Println()
	for _, cmd := range []string{"set", "get"} {
		s := sums[cmd]
		fmt.Printf("- %s: mean of ours / redis-benchmark over %d repetitions: throughput %.3f, CPU per command %.3f\n",
			strings.ToUpper(cmd), o.reps, s[0]/float64(o.reps), s[1]/float64(o.reps))
	}
	return nil
}

// preload writes every key of the key space with a 1-byte value.
func preload(ctx context.Context, addr string, n int) error {
	c, err := redisproto.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var buf, key []byte
	const batch = 1000
	for i := 0; i < n; i += batch {
		buf = buf[:0]
		m := min(batch, n-i)
		for j := 0; j < m; j++ {
			key = respc.AppendKey(key[:0], uint64(i+j))
			buf = redisproto.AppendArrayHeader(buf, 3)
			buf = redisproto.AppendBulk(buf, "SET")
			buf = redisproto.AppendBulkBytes(buf, key)
			buf = redisproto.AppendBulk(buf, "x")
		}
		if err := c.Pipeline(ctx, buf, m); err != nil {
			return err
		}
	}
	return nil
}

// lastRate remembers each command's rate to size redis-benchmark's -n.
var lastRate = map[string]float64{}

// benchmark runs redis-benchmark -t cmd and returns its commands per
// second and its CPU per command in microseconds.
func benchmark(ctx context.Context, o options, addr, cmd string, rep int) (float64, float64, error) {
	host, port, _ := strings.Cut(addr, ":")
	rate := lastRate[cmd]
	if rate == 0 {
		rate = 100000
	}
	n := int(rate * o.duration.Seconds())
	argv := []string{"redis-benchmark", "-h", host, "-p", port, "-t", cmd, "-n", strconv.Itoa(n), "-c", strconv.Itoa(o.clients),
		"-P", strconv.Itoa(o.pipeline), "-r", strconv.Itoa(o.keyspace), "-d", "1", "--csv"}
	if o.clientCPU != "" {
		argv = append([]string{"taskset", "-c", o.clientCPU}, argv...)
	}
	cr, err := workload.RunClientOn(ctx, nil, o.id, o.raw, fmt.Sprintf("redis-benchmark-%s-%d.csv", cmd, rep), argv, nil)
	if err != nil {
		return 0, 0, err
	}
	rps, err := csvRate(cr.Output)
	if err != nil {
		return 0, 0, fmt.Errorf("redis-benchmark's output (%s): %w", cr.RawPath, err)
	}
	lastRate[cmd] = rps
	return rps, cr.CPU.Seconds() / float64(n) * 1e6, nil
}

// csvRate reads the rps column of redis-benchmark --csv.
func csvRate(out []byte) (float64, error) {
	recs, err := csv.NewReader(bufio.NewReader(strings.NewReader(string(out)))).ReadAll()
	if err != nil {
		return 0, err
	}
	for _, r := range recs {
		if len(r) >= 2 && r[0] != "test" {
			return strconv.ParseFloat(r[1], 64)
		}
	}
	return 0, errors.New("no result line")
}

// ours runs the redis-mix behaviour with only GETs or only SETs, in one
// child driver process (pinned like redis-benchmark), and returns its
// commands per second over the steady phase and its CPU per command.
func ours(ctx context.Context, o options, addr, cmd string) (float64, float64, error) {
	m := respc.Mix{Addrs: []string{addr}, Pipeline: o.pipeline, Keyspace: uint64(o.keyspace), ValueSize: 1}
	if cmd == "get" {
		m.GetRatio = 1
	}
	c := driver.Config{Behaviour: respc.MixBehaviour, Params: m.Params(), Mode: driver.Closed, Users: o.clients,
		Pacing: driver.Pacing{Mode: driver.Think, Delay: driver.Distribution{Kind: driver.Fixed}},
		Phases: driver.Phases{RampUp: 500 * time.Millisecond, Steady: o.duration}, Drivers: 1, Threads: o.threads, Run: o.id}
	if o.clientCPU != "" {
		c.CPUSets = []string{o.clientCPU}
	}
	r, err := driver.Run(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	op := r.Ops[respc.OpPipeline]
	if op == nil || op.Count == 0 {
		return 0, 0, errors.New("our driver completed nothing")
	}
	if op.Failed() > 0 {
		return 0, 0, fmt.Errorf("our driver failed %d pipelines: %v", op.Failed(), op.Examples)
	}
	all, _ := r.Ended()
	cmds := float64(all * int64(o.pipeline))
	return float64(op.Count*int64(o.pipeline)) / r.Phases.Steady.Seconds(), r.CPU.Seconds() / cmds * 1e6, nil
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
