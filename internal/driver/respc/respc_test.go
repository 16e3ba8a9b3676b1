package respc

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
)

// The test binary doubles as a child driver process.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := driver.ChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const childEnv = "NEARNATIVE_RESPC_TEST_CHILD"

func TestAppendKey(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "key:000000000000"},
		{42, "key:000000000042"},
		{999_999_999_999, "key:999999999999"},
	}
	for _, tt := range tests {
		if got := Key(tt.n); got != tt.want {
			t.Errorf("Key(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestParseMix(t *testing.T) {
	ok := map[string]string{ParamAddrs: "127.0.0.1:1", ParamKeyspace: "100"}
	with := func(k, v string) map[string]string {
		p := map[string]string{}
		for a, b := range ok {
			p[a] = b
		}
		if v == "" {
			delete(p, k)
		} else {
			p[k] = v
		}
		return p
	}
	tests := []struct {
		name    string
		params  map[string]string
		wantErr string
	}{
		{"defaults", ok, ""},
		{"no address", with(ParamAddrs, ""), "no address"},
		{"bad address", with(ParamAddrs, "localhost"), "not host:port"},
		{"pipeline 0", with(ParamPipeline, "0"), "at least 1 command"},
		{"pipeline text", with(ParamPipeline, "many"), "pipeline"},
		{"ratio above 1", with(ParamGetRatio, "1.5"), "share from 0 to 1"},
		{"ratio NaN", with(ParamGetRatio, "NaN"), "share from 0 to 1"},
		{"no keyspace", with(ParamKeyspace, ""), "keyspace is required"},
		{"empty keyspace", with(ParamKeyspace, "0"), "want 1 to"},
		{"keyspace beyond 12 digits", with(ParamKeyspace, "1000000000001"), "want 1 to"},
		{"negative value", with(ParamValue, "-1"), "want 0 to"},
		{"bad timeout", with(ParamTimeout, "soon"), "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMix(tt.params)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantErr == "" && (m.Pipeline != 1 || m.GetRatio != 0.75 || m.ValueSize != 1 || m.Timeout != 10*time.Second) {
				t.Errorf("defaults: %+v", m)
			}
		})
	}
	// Params and ParseMix round-trip.
	m := Mix{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Pipeline: 30, GetRatio: 0.25, Keyspace: 7, ValueSize: 3, Timeout: time.Second, AllowMiss: true}
	back, err := ParseMix(m.Params())
	if err != nil || strings.Join(back.Addrs, ",") != "127.0.0.1:1,127.0.0.1:2" || back.Pipeline != 30 || back.GetRatio != 0.25 ||
		back.Keyspace != 7 || back.ValueSize != 3 || back.Timeout != time.Second || !back.AllowMiss {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// redisServer starts a real redis-server on the native platform (labelled
// with the test's run, removed when the test ends) with extra arguments.
func redisServer(t *testing.T, extra ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts redis-server")
	}
	run := runid.New()
	plats := testenv.Platforms(t, run, t.TempDir(), platform.Native)
	spec := platform.Spec{Name: "redis", Ports: []string{"redis"}, Command: func(l platform.Listen) []string {
		return append([]string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
			"--save", "", "--appendonly", "no", "--dir", l.Dir}, extra...)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := plats[platform.Native].Start(ctx, "t", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	addr := srv.Addr("redis")
	if err := redisproto.WaitReady(ctx, addr, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return addr
}

// load writes keys 0..n-1 with value v.
func load(t *testing.T, addr string, n int, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := redisproto.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var buf []byte
	for i := 0; i < n; i++ {
		buf = redisproto.AppendCommand(buf, "SET", Key(uint64(i)), v)
	}
	if err := c.Pipeline(ctx, buf, n); err != nil {
		t.Fatal(err)
	}
}

func commandCalls(t *testing.T, addr string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	c, err := redisproto.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Info(ctx, "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for k, v := range info {
		cmd, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				out[cmd], _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	return out
}

func mixConfig(addr string, keyspace uint64, users, drivers int) driver.Config {
	m := Mix{Addrs: []string{addr}, Pipeline: 10, GetRatio: 0.75, Keyspace: keyspace, ValueSize: 1}
	return driver.Config{Behaviour: MixBehaviour, Params: m.Params(), Mode: driver.Closed, Users: users,
		Pacing: driver.Pacing{Mode: driver.Think, Delay: driver.Distribution{Kind: driver.Fixed}}, Drivers: drivers,
		Phases: driver.Phases{RampUp: 200 * time.Millisecond, Steady: time.Second}, Seed: 1}
}

// TestMixAgainstRedis drives a real Redis: every GET hits, the server sees
// 75% GETs, and the driver's pipelines times P are the commands it served.
func TestMixAgainstRedis(t *testing.T) {
	addr := redisServer(t)
	load(t, addr, 1000, "x")
	for _, drivers := range []int{0, 2} {
		t.Run(fmt.Sprintf("drivers=%d", drivers), func(t *testing.T) {
			if drivers > 0 {
				old := driver.ChildCommand
				driver.ChildCommand = func() ([]string, error) { return []string{os.Args[0], "-test.run=^$"}, nil }
				t.Setenv(childEnv, "1")
				t.Cleanup(func() { driver.ChildCommand = old })
			}
			before := commandCalls(t, addr)
			r, err := driver.Run(context.Background(), mixConfig(addr, 1000, 8, drivers))
			if err != nil {
				t.Fatal(err)
			}
			after := commandCalls(t, addr)
			op := r.Ops[OpPipeline]
			if op == nil || op.Count < 10 {
				t.Fatalf("pipelines: %+v", op)
			}
			if op.Failed() > 0 {
				t.Fatalf("failures %v: %v", op.Failures, op.Examples)
			}
			gets, sets := after["get"]-before["get"], after["set"]-before["set"]
			share := float64(gets) / float64(gets+sets)
			if math.Abs(share-0.75) > 0.03 {
				t.Errorf("the server saw %d GET and %d SET: %.3f GETs, want 0.75", gets, sets, share)
			}
			// Every pipeline of the run (ramp-up and drain included) sent 10
			// commands; the steady count is a part of them.
			if gets+sets < op.Count*10 || (gets+sets)%10 != 0 {
				t.Errorf("the server saw %d commands for %d steady pipelines of 10", gets+sets, op.Count)
			}
			t.Logf("%d pipelines in the steady second, %.0f commands/s, driver CPU %v", op.Count, float64(op.Count*10)/r.Phases.Steady.Seconds(), r.CPU)
		})
	}
}

// TestMixFailures: a GET of a key never loaded and an error reply (a
// Redis out of memory) fail the pipeline with their cause, and a server
// that is gone fails with the connection's.
func TestMixFailures(t *testing.T) {
	addr := redisServer(t)
	load(t, addr, 10, "x")
	// GETs only: SETs would fill the key space within the ramp-up.
	c := mixConfig(addr, 1000, 2, 0)
	c.Params[ParamGetRatio] = "1"
	r, err := driver.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Ops[OpPipeline].Failures[CauseMiss]; n == 0 {
		t.Errorf("keys beyond the loaded ones: failures %v, want %q", r.Ops[OpPipeline].Failures, CauseMiss)
	}

	oom := redisServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
	r, err = driver.Run(context.Background(), mixConfig(oom, 1000, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	op := r.Ops[OpPipeline]
	if op.Failures[CauseServer] == 0 || !strings.Contains(op.Examples[CauseServer], "OOM") {
		t.Errorf("a Redis out of memory: failures %v %v, want %q naming OOM", op.Failures, op.Examples, CauseServer)
	}

	c = mixConfig("127.0.0.1:1", 1000, 2, 0)
	c.Phases = driver.Phases{Steady: 200 * time.Millisecond}
	r, err = driver.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Ops[OpPipeline].Failures[driver.CauseRefused]; n == 0 {
		t.Errorf("no server: failures %v, want %q", r.Ops[OpPipeline].Failures, driver.CauseRefused)
	}
}

// TestPipelineAllocs: the hot path allocates nothing per pipeline, GETs and
// SETs alike (an allocation per reply once cost more CPU per command than
// redis-benchmark uses; BENCH.md, issue 14).
func TestPipelineAllocs(t *testing.T) {
	addr := redisServer(t)
	load(t, addr, 1000, "x")
	for _, ratio := range []string{"0", "0.75", "1"} {
		t.Run("get_ratio="+ratio, func(t *testing.T) {
			m := Mix{Addrs: []string{addr}, Pipeline: 30, Keyspace: 1000, ValueSize: 1}
			p := m.Params()
			p[ParamGetRatio] = ratio
			f, err := NewMixFactory(p, driver.DefaultDial)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			u, err := f.NewUser(ctx, 0, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			defer u.(driver.Closer).Close()
			_, op := u.Next()
			if err := op(ctx); err != nil { // connects
				t.Fatal(err)
			}
			var failed error
			allocs := testing.AllocsPerRun(200, func() {
				if err := op(ctx); err != nil && failed == nil {
					failed = err
				}
			})
			if failed != nil {
				t.Fatal(failed)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per pipeline of 30, want 0", allocs)
			}
		})
	}
}
