package scaleout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/driver/respc"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

func values(t *testing.T, quick bool, over map[string]string) workload.Values {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), over, quick)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// twoCores is this development machine: 2 CPUs, 24 GiB.
var twoCores = Machine{CPUs: 2, MemTotal: 24 << 30, MemAvail: 22 << 30, DiskAvail: 100 << 30}

func TestResolve(t *testing.T) {
	big := Machine{CPUs: 64, MemTotal: 512 << 30, MemAvail: 500 << 30}
	tests := []struct {
		name                    string
		m                       Machine
		quick                   bool
		over                    map[string]string
		redis, proxies, drivers int
		keyspace                int64
		note                    string // in the scaled note; "" means no note
	}{
		{"2 cores", twoCores, false, nil, 2, 1, 2, 24 << 30 / 4 / 121, "2 Redis (one per CPU; the seed: 8)"},
		{"2 cores, capped", twoCores, false, map[string]string{"keyspace_max": "5000000"}, 2, 1, 2, 5000000, "5000000 keys (keyspace_max"},
		{"2 cores, quick", twoCores, true, nil, 2, 1, 2, 200000, "2 driver processes (one per Redis; the seed: 8)"},
		{"big machine", big, false, nil, 8, 2, 8, SeedKeyspace, ""},
		{"seed sizes", twoCores, false, map[string]string{"sizes": "seed"}, 8, 2, 8, SeedKeyspace, ""},
		{"explicit", twoCores, false, map[string]string{"redis": "3", "twemproxies": "3", "drivers": "5", "keyspace": "1000"}, 3, 3, 5, 1000, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Resolve(values(t, tt.quick, tt.over), tt.m)
			if s.Redis != tt.redis || s.Twemproxies != tt.proxies || s.Drivers != tt.drivers || s.Keyspace != tt.keyspace {
				t.Errorf("redis %d, twemproxies %d, drivers %d, keyspace %d; want %d, %d, %d, %d",
					s.Redis, s.Twemproxies, s.Drivers, s.Keyspace, tt.redis, tt.proxies, tt.drivers, tt.keyspace)
			}
			if s.Pipeline != SeedPipeline || s.Clients != SeedClients || s.GetRatio != SeedGetRatio || s.ValueSize != SeedValueSize {
				t.Errorf("pipeline %d, clients %d, get ratio %g, value %d: not the seed's", s.Pipeline, s.Clients, s.GetRatio, s.ValueSize)
			}
			note := s.ScaledNote()
			if tt.note == "" && note != "" || !strings.Contains(note, tt.note) {
				t.Errorf("scaled note %q, want it to contain %q", note, tt.note)
			}
		})
	}
}

// TestValidate checks issue 14's bad input: each refused before anything
// starts with one line that states the limit.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		over map[string]string
		m    Machine
		want string // "" accepts
	}{
		{"defaults", nil, twoCores, ""},
		{"pinned, N = cores", map[string]string{"pin": "spread"}, twoCores, ""},
		{"pinned, N > cores", map[string]string{"pin": "spread", "redis": "3"}, twoCores,
			"parameter pin spread: 3 Redis need a core each, but this machine has 2 CPU(s) left after driver_cpus: set redis to at most 2, or do not pin"},
		{"pinned, driver cores taken", map[string]string{"pin": "spread", "driver_cpus": "0"}, twoCores,
			"1 CPU(s) left after driver_cpus: set redis to at most 1, or do not pin"},
		{"key space beyond memory", map[string]string{"keyspace": "100000000"}, twoCores,
			"parameter keyspace 100000000: the key space does not fit in memory with AOF"},
		{"more proxies than Redis", map[string]string{"redis": "2", "twemproxies": "3"}, twoCores,
			"parameter twemproxies 3: more twemproxies than the 2 Redis they shard over"},
		{"fewer keys than Redis", map[string]string{"redis": "4", "keyspace": "3"}, twoCores,
			"parameter keyspace 3: fewer keys than the 4 Redis servers"},
		{"get ratio above 1", map[string]string{"get_ratio": "1.5"}, twoCores, "parameter get_ratio 1.5: want a share from 0 to 1"},
		{"bad driver cpus", map[string]string{"driver_cpus": "x"}, twoCores, "parameter driver_cpus"},
		{"too many connections", map[string]string{"drivers": "700", "clients": "100"}, twoCores, "70000 connections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Resolve(values(t, false, tt.over), tt.m).Validate(tt.m)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("more than one line: %q", err)
			}
		})
	}
	// The memory refusal says how many keys fit.
	err := Resolve(values(t, false, map[string]string{"keyspace": "100000000"}), twoCores).Validate(twoCores)
	if err == nil || !strings.Contains(err.Error(), "set keyspace to at most 65") {
		t.Errorf("memory refusal without the limit: %v", err)
	}
}

// TestPipelineZero checks that a pipeline depth of 0 is refused with its
// limit when the parameters are read, before the workload exists.
func TestPipelineZero(t *testing.T) {
	_, err := workload.Resolve(Workload{}.Params(), map[string]string{"pipeline": "0"}, false)
	if err == nil || err.Error() != "parameter pipeline: 0 is below the minimum 1" {
		t.Errorf("pipeline 0: %v", err)
	}
}

func TestGuestMemoryNeed(t *testing.T) {
	s := Resolve(values(t, false, map[string]string{"keyspace": "5000000"}), twoCores)
	// The study's cap: the baseline's keys, one shard of 2, a rewrite's
	// worst case and the guest's system fit the default 2 GiB guest.
	if need := s.GuestMemoryNeed(); need > 2<<30 {
		t.Errorf("5 M keys need %s in the first guest, more than the default 2 GiB", gib(need))
	}
	s.Guests = GuestsOne
	if one, per := s.GuestMemoryNeed(), Resolve(values(t, false, map[string]string{"keyspace": "5000000"}), twoCores).GuestMemoryNeed(); one <= per {
		t.Errorf("one guest for all needs %d, no more than a guest per Redis (%d)", one, per)
	}
}

func TestTopology(t *testing.T) {
	s := Resolve(values(t, false, map[string]string{"redis": "4", "keyspace": "1000"}), twoCores)
	top := s.Topology(Data{Base: "/b", Shards: []string{"/0", "/1", "/2", "/3"}}, "")
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	if top.VMs != 4 || top.Roles[1].Count != 4 || !top.Roles[1].GuestPerServer || top.Roles[2].Count != 1 {
		t.Errorf("vms %d, redis %d (guest each %v), twemproxies %d", top.VMs, top.Roles[1].Count, top.Roles[1].GuestPerServer, top.Roles[2].Count)
	}
	if !top.Roles[2].OnHost || !top.Roles[3].OnHost {
		t.Error("the proxies are not beside the driver by default")
	}
	s.Guests, s.Pin = GuestsOne, topology.PinSpread
	top = s.Topology(Data{Base: "/b", Shards: []string{"/0", "/1", "/2", "/3"}}, "1")
	if top.VMs != 1 || top.Placement.Pin != topology.PinSpread || top.Placement.Roles[RoleBase] != "1" {
		t.Errorf("one guest: vms %d, placement %+v", top.VMs, top.Placement)
	}
}

func TestProxyConf(t *testing.T) {
	got := proxyConf(testListen(), []string{"10.0.0.1:6379", "10.0.0.2:6379"})
	for _, want := range []string{"hash: fnv1a_64", "distribution: ketama", "redis: true", "auto_eject_hosts: false",
		"   - 10.0.0.1:6379:1 redis0\n", "   - 10.0.0.2:6379:1 redis1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("nutcracker.yml lacks %q:\n%s", want, got)
		}
	}
	lb := lbConf(testListen(), []string{"127.0.0.1:1", "127.0.0.1:2"}, 1200)
	for _, want := range []string{"mode tcp", "balance roundrobin", "server t0 127.0.0.1:1 maxconn 1200", "server t1 127.0.0.1:2"} {
		if !strings.Contains(lb, want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, lb)
		}
	}
}

// statsJSON is nutcracker 0.5's statistics (the fields read), one pool of
// two servers, the second of which failed.
const statsJSON = `{"service":"nutcracker", "source":"h", "version":"0.5.0", "uptime":7, "timestamp":1,
"total_connections":5, "curr_connections":4,
"scaleout": {"client_eof":0, "client_err":0, "client_connections":3, "server_ejects":%d, "forward_error":%d, "fragments":0,
"redis0": {"server_eof":0, "server_err":0, "server_timedout":0, "server_connections":1, "server_ejected_at":0, "requests":1000, "request_bytes":1, "responses":1000, "response_bytes":1, "in_queue":0, "in_queue_bytes":0, "out_queue":0, "out_queue_bytes":0},
"redis1": {"server_eof":%d, "server_err":%d, "server_timedout":%d, "server_connections":1, "server_ejected_at":0, "requests":900, "request_bytes":1, "responses":890, "response_bytes":1, "in_queue":0, "in_queue_bytes":0, "out_queue":0, "out_queue_bytes":0}}}`

func TestProxyStats(t *testing.T) {
	tests := []struct {
		name                           string
		ejects, fwd, eof, err, timeout int
		want                           string // "" passes
	}{
		{"healthy", 0, 0, 0, 0, 0, ""},
		{"a Redis closed its connections", 0, 0, 2, 0, 0, "twemproxy: t0 saw server redis1 fail: 2 closed connections"},
		{"errors and timeouts", 0, 0, 0, 3, 1, "saw server redis1 fail: 3 errors, 1 timeouts (over 10s)"},
		{"marked dead", 1, 40, 0, 0, 0, "t0: 40 requests could not be forwarded, 1 server ejections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := parseStats([]byte(sprintf(statsJSON, tt.ejects, tt.fwd, tt.eof, tt.err, tt.timeout)))
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 2 || st[0].Server != "redis0" || st[1].Requests != 900 {
				t.Fatalf("parsed %+v", st)
			}
			for i := range st {
				st[i].Proxy = "t0"
			}
			rep := proxyReport(st)
			if n := rep.note(); n != "twemproxy requests per shard over the trial: t0->redis0 1000, t0->redis1 900" {
				t.Errorf("note %q", n)
			}
			err = rep.problem()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("problem() = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := parseStats([]byte(`{"other": {}}`)); err == nil || !strings.Contains(err.Error(), `no pool "scaleout"`) {
		t.Errorf("stats without the pool: %v", err)
	}
}

// TestCheck checks that an experiment whose driver saw failures fails with
// their causes, as a Redis out of memory answers (an error reply).
func TestCheck(t *testing.T) {
	in := &Instance{s: Settings{Pipeline: 30}}
	oom := "OOM command not allowed when used memory > 'maxmemory'."
	tests := []struct {
		name string
		r    *driver.Result
		want string
	}{
		{"fine", result(10, 0, "", ""), ""},
		{"out of memory", result(10, 3, "error reply", oom), "scale-out: 3 pipelines failed: 3 error reply (" + oom + ")"},
		{"nothing completed", result(0, 5, "closed connection", "EOF"), "scale-out: no pipeline completed in the measured interval (5 failed over the run): 5 closed connection (EOF)"},
		{"no connection", &driver.Result{SetupFailures: 2, SetupExample: "connection refused"}, "scale-out: 2 driver connections could not start: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := in.check("scale-out", tt.r)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
				t.Errorf("check = %v, want %q", err, tt.want)
			}
		})
	}
}

func testListen() platform.Listen {
	return platform.Listen{Host: "127.0.0.1", Ports: map[string]int{PortProxy: 22121, PortStats: 22222, PortLB: 6000, PortRedis: 6379}, Dir: "/tmp/x"}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// result is a driver result of ok pipelines and failed ones of one cause.
func result(ok, failed int64, cause, example string) *driver.Result {
	op := &driver.OpResult{Count: ok}
	if failed > 0 {
		op.Failures = map[string]int64{cause: failed}
		op.Examples = map[string]string{cause: example}
	}
	return &driver.Result{Ops: map[string]*driver.OpResult{respc.OpPipeline: op}}
}

// TestCheckPlatform checks that a platform variant's pin: spread with more
// Redis than cores is refused when the study is read (the vm platforms pin
// nothing in their guests).
func TestCheckPlatform(t *testing.T) {
	cpus := ThisMachine().CPUs
	tests := []struct {
		name, base string
		o          platform.Options
		redis      int
		want       string
	}{
		{"native-pinned", platform.Native, platform.Options{Pin: platform.PinSpread}, cpus, ""},
		{"native-pinned", platform.Native, platform.Options{Pin: platform.PinSpread}, cpus + 1,
			fmt.Sprintf("option pin: spread: %d Redis need a core each, but this machine has %d CPU(s) left after driver_cpus: set redis to at most %d, or do not pin", cpus+1, cpus, cpus)},
		{"docker-pinned", platform.DockerNAT, platform.Options{Pin: platform.PinSpread}, cpus + 1, "option pin: spread"},
		{"native", platform.Native, platform.Options{}, cpus + 1, ""},
		{"vm-big", platform.VM, platform.Options{Pin: platform.PinSpread}, cpus + 1, ""},
	}
	for _, tt := range tests {
		in := &Instance{s: Settings{Redis: tt.redis, Keyspace: 1000, ValueSize: 1, Guests: GuestsPerRedis}}
		err := in.CheckPlatform(tt.base, tt.o)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s with %d Redis: %v, want %q", tt.name, tt.redis, err, tt.want)
		}
	}
}

func TestEstimate(t *testing.T) {
	in := &Instance{s: Settings{Warmup: 500 * time.Millisecond, Keyspace: 200000}}
	// Two experiments of 0.5 s + 2 s, 3 s of starts, 400000 keys loaded
	// at 400000 a second: about the 8 s measured per native trial under
	// --quick (the platform's start-up comes on top).
	if got := in.Estimate(2 * time.Second); got != 9*time.Second {
		t.Errorf("Estimate = %v, want 9s", got)
	}
}

// TestCheckGuestMemory checks that a key space that does not fit the first
// guest's vm_memory is refused when the study is read.
func TestCheckGuestMemory(t *testing.T) {
	tests := []struct {
		keyspace int64
		base     string
		mem      string
		want     string
	}{
		{5000000, platform.VM, "", ""}, // the study's cap fits the default 2 GiB
		{20000000, platform.VMDocker, "", "the key space does not fit a guest: its first guest holds the baseline's 20000000 keys and its shard(s), 5.9 GiB with an AOF rewrite's worst case and the guest's system, but vm_memory is 2.0 GiB: raise vm_memory or lower keyspace"},
		{20000000, platform.VM, "8g", ""},
		{20000000, platform.Native, "", ""},
	}
	for _, tt := range tests {
		in := &Instance{s: Settings{Redis: 2, Keyspace: tt.keyspace, ValueSize: 1, Guests: GuestsPerRedis}}
		err := in.CheckPlatform(tt.base, platform.Options{VMMemory: tt.mem})
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
			t.Errorf("%d keys on %s (vm_memory %q): %v, want %q", tt.keyspace, tt.base, tt.mem, err, tt.want)
		}
	}
}
