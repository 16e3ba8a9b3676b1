// Command driverbench cross-checks nearnative's load driver against the
// standard tools Debian packages, on the same nginx serving the http-max
// page natively:
//
//   - at equal rates, the latency percentiles of nearnative's open-loop
//     driver next to hey's (hey -q paces each of its workers with a ticker
//     and times each request from its send; it is a paced closed loop, so
//     the comparable figure of ours is the service time from the actual
//     send; our latency from the due time is shown beside it);
//   - at full speed, requests per second of driver CPU time: wrk (C, one
//     event loop per thread, closed loop), hey (Go net/http, closed loop)
//     and nearnative's closed-loop driver with zero think time.
//
// Ours runs with both HTTP clients of the http-get behaviour: net/http,
// hey's client, shows whether the timing agrees with hey's; fasthttp is what
// http-max uses.
//
// Runs are interleaved (the tools' order rotates per repetition) and the
// table is printed as Markdown for BENCH.md:
//
//	go run ./bench/driverbench -rates 1000,4000 -duration 10s -reps 3
//
// wrk2, the open-loop fork of wrk, is not packaged in Debian.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/driver/httpc"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/httpmax"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "driverbench:", err)
		os.Exit(1)
	}
}

type options struct {
	rates    []float64
	duration time.Duration
	reps     int
	conns    int
	full     bool
	raw      string
}

func run() error {
	var o options
	rates := flag.String("rates", "1000,4000", "request rates (per second) of the paced comparison, comma-separated")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each comparison, the tools' order alternating")
	flag.IntVar(&o.conns, "conns", 16, "connections (hey and wrk: workers/connections; ours: connections or users)")
	flag.BoolVar(&o.full, "full", true, "also compare throughput per driver CPU second at full speed")
	flag.Parse()
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			return fmt.Errorf("-rates: %q is not a positive rate", s)
		}
		o.rates = append(o.rates, r)
	}
	if o.reps < 1 || o.conns < 1 || o.duration <= 0 {
		return errors.New("-reps, -conns and -duration must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	id := runid.New()
	root, err := state.TempDir(id, "driverbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	o.raw = filepath.Join(root, "raw")
	env := platform.Env{Run: id, LogDir: filepath.Join(root, "logs")}
	plat, err := native.New("native", env, state.Dir{Root: root}, platform.Options{})
	if err != nil {
		return err
	}
	defer plat.Close()
	srv, err := plat.Start(ctx, "bench", httpmax.Spec(4096, "auto"))
	if err != nil {
		return err
	}
	defer srv.Stop(context.WithoutCancel(ctx))
	url := "http://" + srv.Addr("http") + httpmax.PagePath
	if err := httpmax.WaitReady(ctx, url, 4096, 30*time.Second); err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("<!-- driverbench on %s, %s, nginx %s natively, %d CPUs, load average at start %s -->\n\n",
		host, time.Now().UTC().Format(time.RFC3339), url, allowedCPUs(), loadavg())

	if err := paced(ctx, o, id, url); err != nil {
		return err
	}
	if o.full {
		if err := fullSpeed(ctx, o, id, url); err != nil {
			return err
		}
	}
	fmt.Printf("\n<!-- load average at the end %s -->\n", loadavg())
	return nil
}

// pcts are latency percentiles in milliseconds.
type pcts struct{ p50, p90, p99 float64 }

func (p pcts) String() string { return fmt.Sprintf("%.3f / %.3f / %.3f", p.p50, p.p90, p.p99) }

func fromHist(h *driver.Hist) pcts {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return pcts{ms(h.Quantile(0.5)), ms(h.Quantile(0.9)), ms(h.Quantile(0.99))}
}

// ourOpen runs our open loop at rate with the given HTTP client.
func ourOpen(ctx context.Context, o options, url, client string, rate float64) (*driver.Result, error) {
	c := driver.Config{Behaviour: httpc.GetBehaviour,
		Params: map[string]string{httpc.ParamURL: url, httpc.ParamBytes: "4096", httpc.ParamClient: client},
		Mode:   driver.Open, Plan: driver.Constant(rate), Connections: o.conns,
		Phases: driver.Phases{RampUp: time.Second, Steady: o.duration}}
	r, err := driver.Run(ctx, c)
	if err != nil {
		return nil, err
	}
	if r.Ops[httpc.GetOp] == nil {
		return nil, errors.New("our driver answered nothing")
	}
	return r, nil
}

// paced runs hey -q and our open loop (with net/http, hey's client, and
// with fasthttp, http-max's) at each rate, in a rotating order.
func paced(ctx context.Context, o options, id runid.ID, url string) error {
	fmt.Printf("### Equal rates: latency p50 / p90 / p99 (ms), %d connections, %v runs\n\n", o.conns, o.duration)
	fmt.Println("| rate (req/s) | rep | hey -q (net/http): from send | ours, net/http: from send | ours, fasthttp: from send | ours, fasthttp: from due | ours net/http / hey, p50 p90 p99 | answered/s: hey, ours net/http, ours fasthttp | driver CPU s: hey, net/http, fasthttp |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, rate := range o.rates {
		for rep := 0; rep < o.reps; rep++ {
			var hey pcts
			var heyRate float64
			var heyCPU time.Duration
			var net, fast *driver.Result
			runs := []func() error{
				func() (err error) { hey, heyRate, heyCPU, err = heyPaced(ctx, o, id, url, rate, rep); return err },
				func() (err error) { net, err = ourOpen(ctx, o, url, "nethttp", rate); return err },
				func() (err error) { fast, err = ourOpen(ctx, o, url, "fasthttp", rate); return err },
			}
			for k := range runs {
				if err := runs[(k+rep)%len(runs)](); err != nil {
					return err
				}
			}
			ns, fs := fromHist(net.Ops[httpc.GetOp].Service), fromHist(fast.Ops[httpc.GetOp].Service)
			fd := fromHist(fast.Ops[httpc.GetOp].Latency)
			fmt.Printf("| %.0f | %d | %s | %s | %s | %s | %.2f %.2f %.2f | %.0f, %.0f, %.0f | %.2f, %.2f, %.2f |\n",
				rate, rep+1, hey, ns, fs, fd, ns.p50/hey.p50, ns.p90/hey.p90, ns.p99/hey.p99,
				heyRate, net.Throughput(), fast.Throughput(), heyCPU.Seconds(), net.CPU.Seconds(), fast.CPU.Seconds())
		}
	}
	fmt.Println()
	fmt.Println("hey prints times with 0.1 ms resolution (4 decimals of a second): at sub-millisecond percentiles its figures are rounded to that.")
	return nil
}

// heyPaced runs hey at rate with o.conns workers and reads its per-request
// CSV.
func heyPaced(ctx context.Context, o options, id runid.ID, url string, rate float64, rep int) (pcts, float64, time.Duration, error) {
	q := rate / float64(o.conns)
	argv := []string{"hey", "-z", o.duration.String(), "-c", strconv.Itoa(o.conns), "-q", strconv.FormatFloat(q, 'f', -1, 64),
		"-disable-compression", "-o", "csv", url}
	cr, err := workload.RunClientOn(ctx, nil, id, o.raw, fmt.Sprintf("hey-%.0f-%d.csv", rate, rep), argv, nil)
	if err != nil {
		return pcts{}, 0, 0, err
	}
	times, err := heyCSV(cr.Output)
	if err != nil {
		return pcts{}, 0, 0, fmt.Errorf("hey output (%s): %w", cr.RawPath, err)
	}
	sort.Float64s(times)
	at := func(q float64) float64 { return times[max(0, int(q*float64(len(times)))-1)] * 1000 }
	return pcts{at(0.5), at(0.9), at(0.99)}, float64(len(times)) / o.duration.Seconds(), cr.CPU, nil
}

// heyCSV returns the response times (seconds) of hey's successful requests.
func heyCSV(out []byte) ([]float64, error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.FieldsPerRecord = -1
	var times []float64
	for i := 0; ; i++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if i == 0 || len(rec) < 7 || rec[6] != "200" {
			continue
		}
		v, err := strconv.ParseFloat(rec[0], 64)
		if err != nil {
			return nil, err
		}
		times = append(times, v)
	}
	if len(times) == 0 {
		return nil, errors.New("no successful request")
	}
	return times, nil
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
	heyOK       = regexp.MustCompile(`\[200\]\s+(\d+) responses`)
)

// fullSpeed compares throughput per driver CPU second.
func fullSpeed(ctx context.Context, o options, id runid.ID, url string) error {
	fmt.Printf("\n### Full speed: requests answered per second and per driver CPU second, %d connections, %v runs\n\n", o.conns, o.duration)
	fmt.Println("| rep | tool | answered/s | driver CPU (s) | answered per driver CPU second |")
	fmt.Println("|---|---|---|---|---|")
	type tool struct {
		name string
		run  func(rep int) (int64, time.Duration, time.Duration, error) // answered, wall, CPU
	}
	tools := []tool{
		{"wrk -t2 (C, closed loop)", func(rep int) (int64, time.Duration, time.Duration, error) {
			argv := []string{"wrk", "-t2", "-c" + strconv.Itoa(o.conns), "-d" + strconv.Itoa(int(o.duration.Seconds())) + "s", url}
			cr, err := workload.RunClientOn(ctx, nil, id, o.raw, fmt.Sprintf("wrk-%d.txt", rep), argv, nil)
			if err != nil {
				return 0, 0, 0, err
			}
			m := wrkRequests.FindSubmatch(cr.Output)
			if m == nil {
				return 0, 0, 0, fmt.Errorf("no request count in wrk's output (%s)", cr.RawPath)
			}
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return n, cr.Wall, cr.CPU, nil
		}},
		{"hey (Go net/http, closed loop)", func(rep int) (int64, time.Duration, time.Duration, error) {
			argv := []string{"hey", "-z", o.duration.String(), "-c", strconv.Itoa(o.conns), "-disable-compression", url}
			cr, err := workload.RunClientOn(ctx, nil, id, o.raw, fmt.Sprintf("hey-full-%d.txt", rep), argv, nil)
			if err != nil {
				return 0, 0, 0, err
			}
			m := heyOK.FindSubmatch(cr.Output)
			if m == nil {
				return 0, 0, 0, fmt.Errorf("no 200 count in hey's output (%s)", cr.RawPath)
			}
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return n, cr.Wall, cr.CPU, nil
		}},
		{"nearnative closed loop, think 0, fasthttp", ourClosed(ctx, o, url, "fasthttp")},
		{"nearnative closed loop, think 0, net/http", ourClosed(ctx, o, url, "nethttp")},
	}
	for rep := 0; rep < o.reps; rep++ {
		for k := range tools {
			t := tools[(k+rep)%len(tools)]
			n, wall, cpu, err := t.run(rep)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			fmt.Printf("| %d | %s | %.0f | %.2f | %.0f |\n", rep+1, t.name, float64(n)/wall.Seconds(), cpu.Seconds(), float64(n)/cpu.Seconds())
		}
	}
	return nil
}

// ourClosed is our closed loop at full speed (think time 0) with client.
func ourClosed(ctx context.Context, o options, url, client string) func(int) (int64, time.Duration, time.Duration, error) {
	return func(int) (int64, time.Duration, time.Duration, error) {
		c := driver.Config{Behaviour: httpc.GetBehaviour, Params: map[string]string{httpc.ParamURL: url, httpc.ParamBytes: "4096", httpc.ParamClient: client},
			Mode: driver.Closed, Users: o.conns, Pacing: driver.Pacing{Mode: driver.Think, Delay: driver.Distribution{Kind: driver.Fixed}},
			Phases: driver.Phases{Steady: o.duration}}
		r, err := driver.Run(ctx, c)
		if err != nil {
			return 0, 0, 0, err
		}
		n, _ := r.Ended()
		return n, r.Wall, r.CPU, nil
	}
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

func allowedCPUs() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			cpus, err := platform.ParseCPUSet(strings.TrimSpace(v))
			if err == nil {
				return len(cpus)
			}
		}
	}
	return 0
}
