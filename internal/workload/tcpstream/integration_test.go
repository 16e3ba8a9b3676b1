package tcpstream

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// testPlatforms returns native, docker-nat and docker-host for one run whose
// leftovers are checked when the test ends (testenv.Platforms: the Docker
// ones use the current workload image and fail the test when it is missing).
func testPlatforms(t *testing.T) (runid.ID, []platform.Platform) {
	t.Helper()
	run := runid.New()
	kinds := []string{platform.Native, platform.DockerNAT, platform.DockerHost}
	byKind := testenv.Platforms(t, run, t.TempDir(), kinds...)
	ps := make([]platform.Platform, 0, len(kinds))
	for _, k := range kinds {
		ps = append(ps, byKind[k])
	}
	return run, ps
}

// TestTrialOnPlatforms runs one short trial per platform and direction and
// checks that the values are plausible.
func TestTrialOnPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 natively and in containers")
	}
	run, ps := testPlatforms(t)
	for _, dir := range []string{Send, Recv} {
		in := newInstance(t, map[string]string{"direction": dir})
		for _, p := range ps {
			// The receive direction only natively: the send direction
			// already covers each container path.
			if dir == Recv && p.Name() != platform.Native {
				continue
			}
			t.Run(dir+"/"+p.Name(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				raw := t.TempDir()
				res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t1", Platform: p, Duration: 2 * time.Second, RawDir: raw, Log: testenv.Log{T: t}})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				for _, m := range in.Metrics() {
					if _, ok := res.Values[m.Name]; !ok {
						t.Errorf("metric %s missing", m.Name)
					}
				}
				if g := res.Values[MetricGbps]; g < 0.01 || g > 1000 {
					t.Errorf("%s = %v Gbit/s, want 0.01..1000", MetricGbps, g)
				}
				if c := res.Values[MetricCPUPerGB]; !(c > 0) {
					t.Errorf("%s = %v, want > 0", MetricCPUPerGB, c)
				}
				if s := res.Values[workload.MetricServerCPU]; !(s > 0 && s < 250) {
					t.Errorf("%s = %v%%, want 0..250", workload.MetricServerCPU, s)
				}
				// The CPU account: the run's own CPU per GB (server, its
				// platform helpers, the client) is part of the machine's,
				// give or take /proc/stat's 10 ms ticks; every server
				// states how its CPU was read (a cgroup natively and in a
				// container).
				own, machine := res.Values[workload.RunCPUPrefix+MetricCPUPerGB], res.Values[MetricCPUPerGB]
				if !(own > 0 && own < machine*1.25) {
					t.Errorf("run's own CPU %v ms/GB, machine %v ms/GB: want 0 < own <~ machine", own, machine)
				}
				if c := res.Values[workload.MetricClientCPU]; !(c > 0) {
					t.Errorf("%s = %v, want > 0", workload.MetricClientCPU, c)
				}
				if !strings.Contains(strings.Join(res.Where, "\n"), "server CPU: ") || (os.Geteuid() == 0 && !strings.Contains(strings.Join(res.Where, "\n"), "cgroup")) {
					t.Errorf("Where %q does not say the server's CPU came from its cgroup", res.Where)
				}
				if r := res.Values[MetricRetransmits]; r < 0 {
					t.Errorf("%s = %v", MetricRetransmits, r)
				}
				if b, err := os.ReadFile(raw + "/t1-iperf3.json"); err != nil || !strings.Contains(string(b), `"sum_received"`) {
					t.Errorf("raw output t1-iperf3.json: %v", err)
				}
				if len(res.Commands) != 2 || !strings.Contains(strings.Join(res.Notes, "\n"), "iperf3 --version: iperf 3.") {
					t.Errorf("commands %q, notes %q", res.Commands, res.Notes)
				}
				t.Logf("%s %s: %.2f Gbit/s, %.0f ms CPU/GB (run's own %.0f), server %.0f%%, client %.0f%%, outside %.0f%%, steal %.0f%%, %v retransmits; %s",
					p.Name(), dir, res.Values[MetricGbps], res.Values[MetricCPUPerGB], own, res.Values[workload.MetricServerCPU],
					res.Values[workload.MetricClientCPU], res.Values[workload.MetricOutsideCPU], res.Values[workload.MetricStealCPU],
					res.Values[MetricRetransmits], res.Where)
			})
		}
	}
}

// TestServerNotListening checks that a client that never reaches its
// server is retried through the readiness window, then fails with iperf3's
// error and the raw output's path rather than a zero.
func TestServerNotListening(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3")
	}
	ports, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, nil)
	in.readyTimeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := t.TempDir()
	argv := in.clientArgv("127.0.0.1:"+strconv.Itoa(ports[0]), 1)
	_, _, attempts, err := in.drive(ctx, workload.Trial{Run: runid.New(), Name: "t1", RawDir: raw}, argv, zeroCPU{})
	if err == nil {
		t.Fatal("drive succeeded without a server")
	}
	for _, want := range []string{"Connection refused", raw + "/t1-iperf3.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if attempts < 2 {
		t.Errorf("%d attempts, want retries within the readiness window", attempts)
	}

	// A cancelled context ends the retries with the context's error.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	in.readyTimeout = time.Minute
	if _, _, _, err := in.drive(ctx, workload.Trial{Run: runid.New(), Name: "t2", RawDir: raw}, argv, zeroCPU{}); !errors.Is(err, context.Canceled) {
		t.Errorf("drive with a cancelled context = %v", err)
	}
}

// zeroCPU is a server that is not there, whose CPU time stays 0.
type zeroCPU struct{}

func (zeroCPU) CPUTime(context.Context) (time.Duration, error) { return 0, nil }
func (zeroCPU) Addr(string) string                             { return "" }
func (zeroCPU) Command() []string                              { return []string{"none"} }
func (zeroCPU) Describe() string                               { return "no server" }
func (zeroCPU) Stop(context.Context) error                     { return nil }
