package study

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

// fakeWorkload declares parameters like a real workload and runs nothing.
type fakeWorkload struct {
	name   string
	params []workload.Param
}

func (f fakeWorkload) Name() string                                   { return f.name }
func (f fakeWorkload) Description() string                            { return "fake " + f.name }
func (f fakeWorkload) Params() []workload.Param                       { return f.params }
func (f fakeWorkload) New(workload.Values) (workload.Instance, error) { return fakeInstance{}, nil }

type fakeInstance struct{}

func (fakeInstance) Metrics() []workload.Metric { return nil }
func (fakeInstance) Run(context.Context, workload.Trial) (workload.Result, error) {
	return workload.Result{}, errors.New("fake workload: not runnable")
}

func intParam(name, def string, min float64) workload.Param {
	return workload.Param{Name: name, Type: workload.Int, Default: def, Min: min, HasMin: true}
}

// testRegistry holds a redis workload declared as the real one is, and a
// sleep workload with a quick default.
func testRegistry() *workload.Registry {
	redis := fakeWorkload{name: "redis", params: []workload.Param{
		{Name: "op", Type: workload.String, Default: "set", Enum: []string{"set", "get"}},
		intParam("clients", "1000", 1),
		intParam("pipeline", "1", 1),
		intParam("keyspace", "2000000000", 1),
		intParam("datasize", "1", 1),
		intParam("threads", "1", 1),
		intParam("requests", "0", 0),
	}}
	sleep := fakeWorkload{name: "sleep", params: []workload.Param{
		{Name: "length", Type: workload.Duration, Default: "10s", Quick: "1s"},
		{Name: "label", Type: workload.String, Default: "x"},
	}}
	return workload.NewRegistry(redis, sleep)
}

var redisDefaults = workload.Values{
	"op": "set", "clients": "1000", "pipeline": "1", "keyspace": "2000000000",
	"datasize": "1", "threads": "1", "requests": "0",
}

func TestBuiltinsParse(t *testing.T) {
	// Only the studies of the fake registry's workloads are loaded here;
	// internal/cli tests every built-in against the real registry.
	reg := testRegistry()
	infos, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		if info.Description == "" {
			t.Errorf("%s: no description", info.Name)
		}
		if info.Name != "aa" && info.Name != "cost" && info.Name != "redis" {
			continue
		}
		names = append(names, info.Name)
		s, err := Load(info.Name, reg)
		if err != nil {
			t.Errorf("Load(%s): %v", info.Name, err)
			continue
		}
		if s.Name != info.Name {
			t.Errorf("studies/%s.yaml: name is %q, want the file's name", info.Name, s.Name)
		}
		if s.Source != "studies/"+info.Name+".yaml" {
			t.Errorf("%s: Source = %q", info.Name, s.Source)
		}
		if err := s.Validate(reg); err != nil {
			t.Errorf("%s: Validate: %v", info.Name, err)
		}
		if err := s.Apply(Overrides{Quick: true}, reg); err != nil {
			t.Errorf("%s: Apply(quick): %v", info.Name, err)
		}
	}
	if want := []string{"aa", "cost", "redis"}; !reflect.DeepEqual(names, want) {
		t.Errorf("built-in studies = %v, want %v", names, want)
	}
}

func TestBuiltinContents(t *testing.T) {
	reg := testRegistry()
	tests := []struct {
		name      string
		platforms []Platform
		workloads []string
		rounds    int
		trial     time.Duration
		quick     Quick
	}{
		{
			name: "redis",
			platforms: []Platform{
				{Name: "native", Base: "native"}, {Name: "docker-nat", Base: "docker-nat"},
				{Name: "docker-proxy", Base: "docker-proxy"}, {Name: "docker-bridge", Base: "docker-bridge"},
				{Name: "docker-host", Base: "docker-host"},
			},
			workloads: []string{"redis-set op=set", "redis-get op=get"},
			rounds:    5, trial: 20 * time.Second,
			quick: Quick{Rounds: 5, Warmup: ptr(1), Trial: 1500 * time.Millisecond},
		},
		{
			name:      "aa",
			platforms: []Platform{{Name: "native", Base: "native"}, {Name: "native-b", Base: "native"}},
			workloads: []string{"redis op=set"},
			rounds:    8, trial: 5 * time.Second,
			quick: Quick{Rounds: 5, Trial: 3 * time.Second},
		},
		{
			name: "cost",
			platforms: []Platform{
				{Name: "native", Base: "native"},
				{Name: "native-0.8cpu", Base: "native", Options: platform.Options{CPUs: 0.8}},
			},
			workloads: []string{"redis op=set"},
			rounds:    8, trial: 5 * time.Second,
			quick: Quick{Rounds: 5, Trial: 3 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Load(tt.name, reg)
			if err != nil {
				t.Fatal(err)
			}
			var ps []Platform
			for _, p := range s.Platforms {
				ps = append(ps, Platform{Name: p.Name, Base: p.Base, Options: p.Options})
			}
			if !reflect.DeepEqual(ps, tt.platforms) {
				t.Errorf("platforms = %+v, want %+v", ps, tt.platforms)
			}
			var ws []string
			for _, w := range s.Workloads {
				ws = append(ws, w.Name+" op="+w.Values["op"])
			}
			if !reflect.DeepEqual(ws, tt.workloads) {
				t.Errorf("workloads = %v, want %v", ws, tt.workloads)
			}
			if s.Baseline != "native" || s.Rounds != tt.rounds || s.Warmup != 1 || s.Trial != tt.trial || s.Order != OrderRandom {
				t.Errorf("baseline %s rounds %d warmup %d trial %v order %s", s.Baseline, s.Rounds, s.Warmup, s.Trial, s.Order)
			}
			if !reflect.DeepEqual(s.Quick, tt.quick) {
				t.Errorf("quick = %+v, want %+v", s.Quick, tt.quick)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseDefaults(t *testing.T) {
	src := "name: x\nplatforms: [native]\nworkloads:\n  - workload: redis\n"
	s, err := Parse([]byte(src), "x.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if s.Baseline != "native" || s.Rounds != 5 || s.Warmup != 1 || s.Trial != 20*time.Second ||
		s.Order != "random" || s.Seed != 0 || s.UntilCI != 0 || s.MaxRounds != 40 || s.MaxTime != time.Hour {
		t.Errorf("defaults: %+v", s)
	}
	if w := s.Workloads[0]; w.Name != "redis" || !reflect.DeepEqual(w.Values, redisDefaults) {
		t.Errorf("workload = %+v", w)
	}
}

// base is a valid study; bad files below are edits of it.
const base = `name: t
description: test
baseline: native
rounds: 5
warmup: 1
trial: 20s
order: random
seed: 0
until_ci: 0
max_rounds: 40
max_time: 1h
platforms:
  - native
  - docker-nat
  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: "0", memory: 512m}}
workloads:
  - workload: redis
    name: redis-set
    params: {op: set, clients: 1000}
quick:
  rounds: 6
  warmup: 1
  trial: 5s
  max_rounds: 10
  max_time: 4m
`

// edit replaces old (which must occur once) with new in base.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(base, old) != 1 {
		t.Fatalf("%q does not occur exactly once in base", old)
	}
	return strings.Replace(base, old, new, 1)
}

func TestParseBase(t *testing.T) {
	s, err := Parse([]byte(base), "t.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	want := Platform{Name: "native-q08", Base: "native", Options: platform.Options{CPUs: 0.8, CPUSet: "0", Memory: "512m"}}
	if p := s.Platforms[2]; p.Name != want.Name || p.Base != want.Base || p.Options != want.Options {
		t.Errorf("platforms[2] = %+v, want %+v", p, want)
	}
	if q := s.Quick; q.Rounds != 6 || *q.Warmup != 1 || q.Trial != 5*time.Second || q.MaxRounds != 10 || q.MaxTime != 4*time.Minute {
		t.Errorf("quick = %+v", q)
	}
	if got := s.Workloads[0].Params; !reflect.DeepEqual(got, map[string]string{"op": "set", "clients": "1000"}) {
		t.Errorf("params = %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	builtins := strings.Join(platform.BuiltinNames(), ", ")
	tests := []struct {
		name string
		src  func(t *testing.T) string
		want string
	}{
		{"unknown top-level key", func(t *testing.T) string { return edit(t, "warmup: 1\ntrial", "warmup: 1\nfoo: 2\ntrial") },
			`t.yaml:6: unknown key "foo" in study (known: name, description, baseline, rounds, warmup, trial, order, seed, min_pairs, outside_cpu_max, client, client_mtu, client_subnet, hosts, until_ci, until_ci_metrics, max_rounds, max_time, platforms, workloads, quick)`},
		{"unknown platform key", func(t *testing.T) string { return edit(t, "base: native,", "base: native, foo: 1,") },
			`t.yaml:15: unknown key "foo" in platforms[2] (known: name, base, options)`},
		{"unknown option", func(t *testing.T) string { return edit(t, "cpus: 0.8", "cpu: 0.8") },
			`t.yaml:15: unknown key "cpu" in platforms[2].options (known: cpus, cpuset, memory, vcpus, vm_memory, pin, place)`},
		{"unknown workload key", func(t *testing.T) string { return edit(t, "    name: redis-set", "    label: redis-set") },
			`t.yaml:18: unknown key "label" in workloads[0] (known: workload, name, params)`},
		{"unknown quick key", func(t *testing.T) string { return edit(t, "  max_time: 4m", "  maxtime: 4m") },
			`t.yaml:25: unknown key "maxtime" in quick (known: rounds, warmup, trial, max_rounds, max_time, workloads, platforms)`},
		{"quick platform not a name", func(t *testing.T) string {
			return edit(t, "  max_time: 4m\n", "  max_time: 4m\n  platforms:\n    - native\n    - {a: 1}\n")
		}, `t.yaml:28: quick.platforms[1]: want a string, got a mapping`},
		{"quick workloads not a list", func(t *testing.T) string {
			return edit(t, "  max_time: 4m\n", "  max_time: 4m\n  workloads: redis-set\n")
		},
			`t.yaml:26: quick.workloads: want a list, got "redis-set"`},
		{"duplicate key", func(t *testing.T) string { return edit(t, "warmup: 1\ntrial", "warmup: 1\nrounds: 6\ntrial") },
			`t.yaml:6: duplicate key "rounds" in study (first at line 4)`},
		{"rounds not an integer", func(t *testing.T) string { return edit(t, "rounds: 5", "rounds: five") },
			`t.yaml:4: rounds: "five" is not an integer`},
		{"rounds a list", func(t *testing.T) string { return edit(t, "rounds: 5", "rounds: [5]") },
			`t.yaml:4: rounds: want an integer, got a list`},
		{"quick rounds not an integer", func(t *testing.T) string { return edit(t, "  rounds: 6", "  rounds: 6.5") },
			`t.yaml:21: quick.rounds: "6.5" is not an integer`},
		{"trial without unit", func(t *testing.T) string { return edit(t, "trial: 20s", "trial: 20") },
			`t.yaml:6: trial: "20" is not a duration (e.g. 20s, 5m, 1h)`},
		{"until_ci not a number", func(t *testing.T) string { return edit(t, "until_ci: 0", "until_ci: 5%") },
			`t.yaml:9: until_ci: "5%" is not a number`},
		{"cpus not a number", func(t *testing.T) string { return edit(t, "cpus: 0.8", "cpus: most") },
			`t.yaml:15: platforms[2].options.cpus: "most" is not a number`},
		{"name missing", func(t *testing.T) string { return edit(t, "name: t\n", "") },
			`t.yaml:1: name is required`},
		{"name bad", func(t *testing.T) string { return edit(t, "name: t\n", "name: My_Study\n") },
			`t.yaml:1: name: "My_Study" must be lower-case letters, digits and '-'`},
		{"rounds below 2", func(t *testing.T) string { return edit(t, "rounds: 5", "rounds: 1") },
			`t.yaml:4: rounds: 1 is below the minimum 2`},
		{"warmup negative", func(t *testing.T) string { return edit(t, "warmup: 1\ntrial", "warmup: -1\ntrial") },
			`t.yaml:5: warmup: -1 is below the minimum 0`},
		{"trial zero", func(t *testing.T) string { return edit(t, "trial: 20s", "trial: 0s") },
			`t.yaml:6: trial: 0s is not positive: a trial must run its load for some time (e.g. 20s)`},
		{"order unknown", func(t *testing.T) string { return edit(t, "order: random", "order: shuffle") },
			`t.yaml:7: order: "shuffle" is not one of random, fixed`},
		{"until_ci negative", func(t *testing.T) string { return edit(t, "until_ci: 0", "until_ci: -2") },
			`t.yaml:9: until_ci: -2 is below the minimum 0`},
		{"until_ci above rounds cap", func(t *testing.T) string { return edit(t, "until_ci: 0\nmax_rounds: 40", "until_ci: 5\nmax_rounds: 4") },
			`t.yaml:10: max_rounds: 4 is below rounds (5)`},
		{"max_time zero", func(t *testing.T) string { return edit(t, "max_time: 1h", "max_time: 0s") },
			`t.yaml:11: max_time: 0s is not positive`},
		{"quick rounds below 2", func(t *testing.T) string { return edit(t, "  rounds: 6", "  rounds: 1") },
			`t.yaml:21: quick.rounds: 1 is below the minimum 2`},
		{"quick rounds below min_pairs", func(t *testing.T) string { return edit(t, "  rounds: 6", "  rounds: 3") },
			`t.yaml:21: quick.rounds: 3 is below min_pairs (5), so --quick could give no verdict: shorten quick.trial instead of cutting rounds`},
		{"min_pairs above rounds", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nmin_pairs: 6\n") },
			`t.yaml:9: min_pairs: 6 is above rounds (5), so no verdict could ever be given: lower min_pairs or raise rounds`},
		{"min_pairs above max_rounds with until_ci", func(t *testing.T) string {
			return edit(t, "seed: 0\nuntil_ci: 0\nmax_rounds: 40", "seed: 0\nmin_pairs: 8\nuntil_ci: 2\nmax_rounds: 6")
		}, `t.yaml:9: min_pairs: 8 is above max_rounds (6), so no verdict could ever be given: lower min_pairs or raise max_rounds`},
		{"min_pairs below 2", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nmin_pairs: 1\n") },
			`t.yaml:9: min_pairs: 1 is below the minimum 2 (an interval needs two pairs)`},
		{"outside_cpu_max zero", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\noutside_cpu_max: 0\n") },
			`t.yaml:9: outside_cpu_max: 0 is not a positive percentage of one core (default 5)`},
		{"client unknown", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nclient: vm\n") },
			`t.yaml:9: client "vm": want netns or host`},
		{"client_mtu too small", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nclient: netns\nclient_mtu: 500\n") },
			`t.yaml:10: client_mtu 500: want 576 to 65535 (1500 is Ethernet's, 9000 jumbo frames)`},
		{"client_mtu too large", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nclient_mtu: 70000\n") },
			`t.yaml:9: client_mtu 70000: want 576 to 65535 (1500 is Ethernet's, 9000 jumbo frames)`},
		{"client_subnet public", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nclient_subnet: 8.8.8.0/30\n") },
			`t.yaml:9: client_subnet 8.8.8.0/30: want a private IPv4 subnet of /24 to /30 (e.g. 10.214.7.0/30)`},
		{"client_subnet not a subnet", func(t *testing.T) string { return edit(t, "seed: 0\n", "seed: 0\nclient_subnet: here\n") },
			`t.yaml:9: client_subnet "here": want a subnet such as 10.214.7.0/30`},
		{"vcpus out of range", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: vm-big, base: vm, options: {vcpus: 300}}\n")
		}, `t.yaml:15: platforms[2].options: vcpus 300: want 1 to 255`},
		{"pin mode", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: native-pinned, base: native, options: {pin: tight}}\n")
		}, `t.yaml:15: platforms[2].options: pin "tight": want "spread" (each server of a topology on a core of its own) or nothing`},
		{"place on a platform that is not Kubernetes", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: native-there, base: native, options: {place: {redis: node-b}}}\n")
		}, `t.yaml:15: platforms[2].options.place: place names Kubernetes nodes, so only k8s-* platforms take it (base is native); to run servers on other machines, name them in a hosts file (--hosts) with its own place:`},
		{"place of the driver on hostNetwork", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: k8s-hn, base: k8s-hostnet, options: {place: {driver: node-b}}}\n")
		}, `t.yaml:15: platforms[2].options.place: driver: a hostNetwork pod listens on this machine's client link, which a driver pod does not reach; place the driver on k8s-pod, k8s-service, k8s-nodeport or k8s-guaranteed`},
		{"place on a node name Kubernetes cannot have", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: k8s-spread, base: k8s-pod, options: {place: {redis: Node_B}}}\n")
		}, `t.yaml:15: platforms[2].options: place: redis on "Node_B": not a Kubernetes node name (lower-case letters, digits, '-' and '.')`},
		{"place not a mapping", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: k8s-spread, base: k8s-pod, options: {place: node-b}}\n")
		}, `t.yaml:15: platforms[2].options.place: want a mapping of role to node, e.g. {db: node-a, web: node-b}, got "node-b"`},
		{"place of a role twice", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - name: k8s-spread\n    base: k8s-pod\n    options:\n      place:\n        redis: node-a\n        redis: node-b\n")
		}, `t.yaml:20: platforms[2].options.place: role redis placed twice`},
		{"vm_memory too small", func(t *testing.T) string {
			return edit(t, "  - docker-nat\n", "  - docker-nat\n  - {name: vm-small, base: vm, options: {vm_memory: 64m}}\n")
		}, `t.yaml:15: platforms[2].options: vm_memory 64m: a guest needs at least 128m`},
		{"platforms not a list", func(t *testing.T) string {
			return edit(t, "platforms:\n  - native\n  - docker-nat\n  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: \"0\", memory: 512m}}\n", "platforms:\n  native: 1\n")
		}, `t.yaml:12: platforms: want a list, got a mapping`},
		{"platforms empty", func(t *testing.T) string {
			return edit(t, "platforms:\n  - native\n  - docker-nat\n  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: \"0\", memory: 512m}}\n", "platforms: []\n")
		}, `t.yaml:12: platforms: at least one platform is required`},
		{"platform item a list", func(t *testing.T) string { return edit(t, "  - docker-nat\n", "  - [docker-nat]\n") },
			`t.yaml:14: platforms[1]: want a platform name or {name, base, options}, got a list`},
		{"unknown platform", func(t *testing.T) string { return edit(t, "  - docker-nat\n", "  - docker-foo\n") },
			`t.yaml:14: platforms[1]: unknown platform "docker-foo" (built-in: ` + builtins + `)`},
		{"unknown base", func(t *testing.T) string { return edit(t, "base: native,", "base: vmware,") },
			`t.yaml:15: platforms[2].base: unknown platform "vmware" (built-in: ` + builtins + `)`},
		{"variant without base", func(t *testing.T) string { return edit(t, "base: native, ", "") },
			`t.yaml:15: platforms[2]: base is required (built-in: ` + builtins + `)`},
		{"variant named as a built-in", func(t *testing.T) string { return edit(t, "name: native-q08", "name: docker-host") },
			`t.yaml:15: platforms[2].name: "docker-host" is a built-in platform; give the variant its own name`},
		{"variant named as its base", func(t *testing.T) string { return edit(t, "name: native-q08", "name: native") },
			`t.yaml:15: platforms[2]: platform "native" is listed twice (first at line 13)`},
		{"variant name bad", func(t *testing.T) string { return edit(t, "name: native-q08", "name: Native Q") },
			`t.yaml:15: platforms[2].name: "Native Q" must be lower-case letters, digits, '.', '_' and '-'`},
		{"platform listed twice", func(t *testing.T) string { return edit(t, "  - docker-nat\n", "  - docker-nat\n  - docker-nat\n") },
			`t.yaml:15: platforms[2]: platform "docker-nat" is listed twice (first at line 14)`},
		{"cpus negative", func(t *testing.T) string { return edit(t, "cpus: 0.8", "cpus: -1") },
			`t.yaml:15: platforms[2].options: cpus -1: must be positive`},
		{"cpuset bad", func(t *testing.T) string {
			return edit(t, "  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: \"0\", memory: 512m}}\n",
				"  - name: native-q08\n    base: native\n    options:\n      cpus: 0.8\n      cpuset: 3-1\n")
		}, `t.yaml:19: platforms[2].options: cpuset "3-1": bad range "3-1" (want low-high)`},
		{"memory bad", func(t *testing.T) string { return edit(t, "memory: 512m", "memory: lots") },
			`t.yaml:15: platforms[2].options: size "lots": want a positive number with an optional k, m, g or t suffix (e.g. 512m)`},
		{"baseline not among platforms", func(t *testing.T) string { return edit(t, "baseline: native", "baseline: docker-host") },
			`t.yaml:3: baseline: "docker-host" is not among the platforms (native, docker-nat, native-q08)`},
		{"default baseline missing", func(t *testing.T) string {
			s := edit(t, "baseline: native\n", "")
			return strings.Replace(s, "  - native\n", "", 1)
		}, `t.yaml:11: baseline: "native" is not among the platforms (docker-nat, native-q08)`},
		{"workloads empty", func(t *testing.T) string {
			return edit(t, "  - workload: redis\n    name: redis-set\n    params: {op: set, clients: 1000}\n", "  []\n")
		}, `t.yaml:16: workloads: at least one workload is required`},
		{"workload item a string", func(t *testing.T) string {
			return edit(t, "  - workload: redis\n    name: redis-set\n    params: {op: set, clients: 1000}\n", "  - redis\n")
		}, `t.yaml:17: workloads[0]: want a mapping with keys workload, name, params, got "redis"`},
		{"workload kind missing", func(t *testing.T) string { return edit(t, "  - workload: redis\n    name", "  - name") },
			`t.yaml:17: workloads[0]: workload is required (known: redis, sleep)`},
		{"unknown workload", func(t *testing.T) string { return edit(t, "workload: redis", "workload: memcached") },
			`t.yaml:17: workloads[0].workload: unknown workload "memcached" (known: redis, sleep)`},
		{"workload name taken", func(t *testing.T) string {
			return edit(t, "    params: {op: set, clients: 1000}\n", "    params: {op: set, clients: 1000}\n  - workload: sleep\n    name: redis-set\n")
		}, `t.yaml:21: workloads[1]: name "redis-set" is already used by workloads[0]; set name: to tell them apart`},
		{"workload default name taken", func(t *testing.T) string {
			return edit(t, "    params: {op: set, clients: 1000}\n", "    params: {op: set, clients: 1000}\n  - workload: redis\n  - workload: redis\n")
		}, `t.yaml:21: workloads[2]: name "redis" is already used by workloads[1]; set name: to tell them apart`},
		{"param bad enum", func(t *testing.T) string { return edit(t, "op: set,", "op: put,") },
			`t.yaml:19: workloads[0].params: parameter op: "put" is not one of set, get`},
		{"param below minimum", func(t *testing.T) string {
			return edit(t, "    params: {op: set, clients: 1000}\n", "    params:\n      op: set\n      clients: 0\n")
		}, `t.yaml:21: workloads[0].params: parameter clients: 0 is below the minimum 1`},
		{"param not an integer", func(t *testing.T) string { return edit(t, "clients: 1000", "clients: many") },
			`t.yaml:19: workloads[0].params: parameter clients: "many" is not an integer`},
		{"param unknown", func(t *testing.T) string {
			return edit(t, "    params: {op: set, clients: 1000}\n", "    params:\n      op: set\n      conns: 10\n")
		}, `t.yaml:21: workloads[0].params: unknown parameter "conns" (known: op, clients, pipeline, keyspace, datasize, threads, requests)`},
		{"param a list", func(t *testing.T) string { return edit(t, "op: set,", "op: [set, get],") },
			`t.yaml:19: workloads[0].params.op: want a single value, got a list`},
		{"params a list", func(t *testing.T) string { return edit(t, "params: {op: set, clients: 1000}", "params: [op]") },
			`t.yaml:19: workloads[0].params: want a mapping of parameter names to values, got a list`},
		{"first problem in the file wins", func(t *testing.T) string {
			s := edit(t, "max_time: 1h", "max_time: 0s")
			return strings.Replace(s, "order: random", "order: none", 1)
		}, `t.yaml:7: order: "none" is not one of random, fixed`},
		{"syntax error", func(t *testing.T) string { return edit(t, "order: random", "order: [random") },
			`t.yaml:7: invalid YAML: did not find expected ',' or ']'`},
		{"tab indentation", func(t *testing.T) string { return edit(t, "  rounds: 6", "\trounds: 6") },
			`t.yaml:21: invalid YAML: found character that cannot start any token`},
		{"list item in a mapping", func(t *testing.T) string { return "name: t\n- native\n" },
			`t.yaml:2: invalid YAML: did not find expected key`},
		{"not a mapping", func(t *testing.T) string { return "- native\n- docker-nat\n" },
			`t.yaml:1: want a mapping with keys name, description, baseline, rounds, warmup, trial, order, seed, min_pairs, outside_cpu_max, client, client_mtu, client_subnet, hosts, until_ci, until_ci_metrics, max_rounds, max_time, platforms, workloads, quick, got a list`},
		{"empty", func(t *testing.T) string { return "# nothing\n" },
			`t.yaml:1: the study file is empty`},
		{"two documents", func(t *testing.T) string { return base + "---\nname: u\n" },
			`t.yaml:26: a study file holds one YAML document; a second starts here`},
	}
	reg := testRegistry()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src(t)), "t.yaml", reg)
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Line <= 0 {
				t.Errorf("error %v is not a *Error with a line", err)
			}
		})
	}
}

func TestParseWrapsCauses(t *testing.T) {
	// Errors from platform.Options.Validate and workload.Resolve stay
	// reachable through the file:line wrapper.
	_, err := Parse([]byte(edit(t, "cpus: 0.8", "cpus: -1")), "t.yaml", testRegistry())
	var e *Error
	if !errors.As(err, &e) || errors.Unwrap(e.Err) == nil {
		t.Errorf("options error %v does not wrap its cause", err)
	}
}

func TestParseAliasesAndNulls(t *testing.T) {
	src := `name: t
description:
seed: ~
platforms: &ps [native, docker-host]
workloads:
  - workload: redis
    params: &p {op: get}
  - workload: redis
    name: again
    params: *p
`
	s, err := Parse([]byte(src), "t.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if s.Description != "" || s.Seed != 0 || len(s.Platforms) != 2 || s.Workloads[1].Values["op"] != "get" {
		t.Errorf("study = %+v", s)
	}
}

func TestUnits(t *testing.T) {
	s, err := Load("redis", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range s.Units() {
		got = append(got, u.String())
	}
	want := []string{
		"redis-set/native", "redis-set/docker-nat", "redis-set/docker-proxy", "redis-set/docker-bridge", "redis-set/docker-host",
		"redis-get/native", "redis-get/docker-nat", "redis-get/docker-proxy", "redis-get/docker-bridge", "redis-get/docker-host",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Units = %v, want %v", got, want)
	}
}

func TestLoad(t *testing.T) {
	reg := testRegistry()
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(file, reg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "t" || s.Source != file {
		t.Errorf("Load(%s): name %q source %q", file, s.Name, s.Source)
	}

	_, err = Load("nope", reg)
	if want := "no built-in study or file named nope (built-in: aa, auction, cost, "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load(nope) = %v, want %s", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(nope) error does not wrap fs.ErrNotExist")
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(edit(t, "rounds: 5", "rounds: five")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, reg)
	if want := bad + `:4: rounds: "five" is not an integer`; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}
}

func TestApply(t *testing.T) {
	reg := testRegistry()
	type want struct {
		platforms []string
		rounds    int
		warmup    int
		trial     time.Duration
		untilCI   float64
		maxRounds int
		maxTime   time.Duration
		seed      int64 // 0: any non-zero seed
		values    []workload.Values
	}
	redisOp := func(op string) workload.Values {
		v := workload.Values{}
		for k, x := range redisDefaults {
			v[k] = x
		}
		v["op"] = op
		return v
	}
	redisAll := []string{"native", "docker-nat", "docker-proxy", "docker-bridge", "docker-host"}
	tests := []struct {
		name  string
		study string // built-in name, or YAML
		o     Overrides
		want  want
		err   string
	}{
		{name: "nothing", study: "redis", o: Overrides{},
			want: want{platforms: redisAll, rounds: 5, warmup: 1, trial: 20 * time.Second, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{redisOp("set"), redisOp("get")}}},
		{name: "quick", study: "redis", o: Overrides{Quick: true, Seed: 42},
			want: want{platforms: redisAll, rounds: 5, warmup: 1, trial: 1500 * time.Millisecond, maxRounds: 40, maxTime: time.Hour, seed: 42,
				values: []workload.Values{redisOp("set"), redisOp("get")}}},
		{name: "quick with the whole block", study: base, o: Overrides{Quick: true},
			want: want{platforms: []string{"native", "docker-nat", "native-q08"}, rounds: 6, warmup: 1, trial: 5 * time.Second,
				maxRounds: 10, maxTime: 4 * time.Minute,
				values: []workload.Values{func() workload.Values { v := redisOp("set"); return v }()}}},
		{name: "flags win over quick", study: "redis", o: Overrides{Quick: true, Rounds: 7, Trial: time.Second, UntilCI: 3},
			want: want{platforms: redisAll, rounds: 7, warmup: 1, trial: time.Second, untilCI: 3, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{redisOp("set"), redisOp("get")}}},
		{name: "quick param defaults", study: "name: q\nplatforms: [native]\nworkloads: [{workload: sleep}, {workload: sleep, name: long, params: {length: 1m}}]\n",
			o: Overrides{Quick: true},
			want: want{platforms: []string{"native"}, rounds: 5, warmup: 1, trial: 20 * time.Second, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{{"length": "1s", "label": "x"}, {"length": "1m", "label": "x"}}}},
		{name: "platforms subset and order", study: "redis", o: Overrides{Platforms: []string{"docker-host", "native"}},
			want: want{platforms: []string{"docker-host", "native"}, rounds: 5, warmup: 1, trial: 20 * time.Second, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{redisOp("set"), redisOp("get")}}},
		{name: "platforms adds a built-in", study: "cost", o: Overrides{Platforms: []string{"native", "native-0.8cpu", "docker-host"}},
			want: want{platforms: []string{"native", "native-0.8cpu", "docker-host"}, rounds: 8, warmup: 1, trial: 5 * time.Second, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{func() workload.Values {
					v := redisOp("set")
					v["clients"], v["pipeline"] = "50", "16" // pipelined: the server is CPU-bound
					return v
				}()}}},
		{name: "rounds", study: "aa", o: Overrides{Rounds: 12},
			want: want{platforms: []string{"native", "native-b"}, rounds: 12, warmup: 1, trial: 5 * time.Second, maxRounds: 40, maxTime: time.Hour,
				values: []workload.Values{redisOp("set")}}},
		{name: "platforms drops the baseline", study: "redis", o: Overrides{Platforms: []string{"docker-host"}},
			err: "--platforms: the baseline native must be among the platforms (given: docker-host)"},
		{name: "platforms unknown", study: "aa", o: Overrides{Platforms: []string{"native", "native-c"}},
			err: `--platforms: unknown platform "native-c" (in the study: native, native-b; built-in: ` + strings.Join(platform.BuiltinNames(), ", ") + `)`},
		{name: "platforms twice", study: "aa", o: Overrides{Platforms: []string{"native", "native"}},
			err: `--platforms: "native" is listed twice`},
		{name: "rounds below 2", study: "aa", o: Overrides{Rounds: 1},
			err: "--rounds 1: below the minimum 2"},
		{name: "trial negative", study: "aa", o: Overrides{Trial: -time.Second},
			err: "--trial -1s: not positive"},
		{name: "until-ci too large", study: "aa", o: Overrides{UntilCI: 100},
			err: "--until-ci 100: want a percentage above 0 and below 100"},
		{name: "rounds above the until_ci cap", study: "aa", o: Overrides{UntilCI: 5, Rounds: 50},
			err: "--rounds 50: above the study's max_rounds (40)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *Study
			var err error
			if strings.Contains(tt.study, "\n") {
				s, err = Parse([]byte(tt.study), "t.yaml", reg)
			} else {
				s, err = Load(tt.study, reg)
			}
			if err != nil {
				t.Fatal(err)
			}
			before, _ := s.YAML()
			err = s.Apply(tt.o, reg)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Apply = %v, want %s", err, tt.err)
				}
				if after, _ := s.YAML(); string(after) != string(before) {
					t.Errorf("a failed Apply changed the study:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if got := s.PlatformNames(); !reflect.DeepEqual(got, w.platforms) {
				t.Errorf("platforms = %v, want %v", got, w.platforms)
			}
			if s.Rounds != w.rounds || s.Warmup != w.warmup || s.Trial != w.trial || s.UntilCI != w.untilCI ||
				s.MaxRounds != w.maxRounds || s.MaxTime != w.maxTime {
				t.Errorf("rounds %d warmup %d trial %v until_ci %g max_rounds %d max_time %v, want %+v",
					s.Rounds, s.Warmup, s.Trial, s.UntilCI, s.MaxRounds, s.MaxTime, w)
			}
			if w.seed != 0 && s.Seed != w.seed || s.Seed == 0 {
				t.Errorf("seed = %d, want %d (0: any but 0)", s.Seed, w.seed)
			}
			var values []workload.Values
			for _, wl := range s.Workloads {
				values = append(values, wl.Values)
			}
			if !reflect.DeepEqual(values, w.values) {
				t.Errorf("values = %v, want %v", values, w.values)
			}
		})
	}
}

func TestApplyKeepsVariantOptions(t *testing.T) {
	s, err := Load("cost", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Overrides{Platforms: []string{"native-0.8cpu", "native"}}, testRegistry()); err != nil {
		t.Fatal(err)
	}
	if p := s.Platforms[0]; p.Name != "native-0.8cpu" || p.Base != "native" || p.Options.CPUs != 0.8 {
		t.Errorf("platforms[0] = %+v", p)
	}
}

// comparable strips what YAML() does not carry: lines, the params as
// written (YAML writes the resolved values) and the quick flag.
func comparable(s *Study) Study {
	c := *s
	c.lines, c.quick, c.Source = nil, false, ""
	c.Platforms = append([]Platform(nil), s.Platforms...)
	for i := range c.Platforms {
		c.Platforms[i].lines, c.Platforms[i].variant = nil, false
	}
	c.Workloads = append([]Workload(nil), s.Workloads...)
	for i := range c.Workloads {
		c.Workloads[i].lines, c.Workloads[i].Params = nil, nil
	}
	return c
}

func TestYAMLRoundTrip(t *testing.T) {
	reg := testRegistry()
	custom := edit(t, "description: test", `description: "tricky: text # with \"quotes\""`)
	custom = strings.Replace(custom, "until_ci: 0\nmax_rounds: 40", "until_ci: 2.5\nmax_rounds: 30", 1)
	custom = strings.Replace(custom, "order: random", "order: fixed", 1)
	custom = strings.Replace(custom, "  - docker-nat\n", "  - docker-nat\n  - {name: native-pinned, base: native, options: {pin: spread}}\n  - {name: k8s-spread, base: k8s-pod, options: {place: {web: node-b, db: node-a}}}\n", 1)
	custom = strings.Replace(custom, "quick:", "  - {workload: sleep, params: {label: \"\"}}\n  - {workload: sleep, name: s2, params: {label: 'yes', length: 90m}}\nquick:", 1)
	type source struct {
		name string
		load func() (*Study, error)
		o    Overrides
	}
	var sources []source
	for _, name := range []string{"redis", "aa", "cost"} {
		sources = append(sources,
			source{name, func() (*Study, error) { return Load(name, reg) }, Overrides{}},
			source{name + " quick", func() (*Study, error) { return Load(name, reg) }, Overrides{Quick: true}},
		)
	}
	sources = append(sources,
		source{"custom", func() (*Study, error) { return Parse([]byte(custom), "c.yaml", reg) }, Overrides{Seed: -7}},
		source{"custom quick", func() (*Study, error) { return Parse([]byte(custom), "c.yaml", reg) },
			Overrides{Quick: true, Platforms: []string{"native-q08", "native", "docker-bridge"}}},
	)
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			s, err := src.load()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(src.o, reg); err != nil {
				t.Fatal(err)
			}
			out, err := s.YAML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(out, "run.yaml", reg)
			if err != nil {
				t.Fatalf("Parse(YAML()): %v\n%s", err, out)
			}
			if got, want := comparable(back), comparable(s); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the study\n got: %+v\nwant: %+v\n%s", got, want, out)
			}
			again, err := back.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(out) {
				t.Errorf("YAML not stable:\n%s\n---\n%s", out, again)
			}
		})
	}
}

func TestYAMLText(t *testing.T) {
	s, err := Load("cost", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Overrides{Seed: 12345}, testRegistry()); err != nil {
		t.Fatal(err)
	}
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want := `name: cost
description: 'known injected cost: the server limited to 0.8 CPU should show ~20% less throughput'
baseline: native
rounds: 8
warmup: 1
trial: 5s
order: random
seed: 12345
min_pairs: 5
outside_cpu_max: 5
client: netns
until_ci: 0
until_ci_metrics: [ops_per_sec]
max_rounds: 40
max_time: 1h
platforms:
  - native
  - {name: native-0.8cpu, base: native, options: {cpus: 0.8}}
workloads:
  - workload: redis
    params: {clients: 50, datasize: 1, keyspace: 2000000000, op: set, pipeline: 16, requests: 0, threads: 1}
quick: {rounds: 5, trial: 3s}
`
	if string(out) != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", out, want)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[time.Duration]string{
		20 * time.Second:        "20s",
		4 * time.Minute:         "4m",
		time.Hour:               "1h",
		90 * time.Minute:        "1h30m",
		1500 * time.Millisecond: "1.5s",
		0:                       "0s",
		time.Hour + time.Second: "1h0m1s",
	}
	for d, want := range tests {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(formatDuration(d)); err != nil || back != d {
			t.Errorf("formatDuration(%v) does not parse back: %v %v", d, back, err)
		}
	}
}

func TestClientSetting(t *testing.T) {
	reg := testRegistry()
	// A study file that does not say runs its load from a namespace.
	s, err := Load("cost", reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ClientSetting(); got.Kind() != host.Netns || got.MTUOrDefault() != host.DefaultMTU {
		t.Fatalf("a study file without client: %+v, want netns, MTU %d", got, host.DefaultMTU)
	}
	if err := s.Apply(Overrides{Client: host.SettingHost}, reg); err != nil {
		t.Fatal(err)
	}
	if s.Client != host.SettingHost {
		t.Fatalf("--client host: client %q", s.Client)
	}
	if err := s.Apply(Overrides{Client: "vm"}, reg); err == nil || !strings.Contains(err.Error(), `--client "vm": want netns or host`) {
		t.Fatalf("--client vm: %v", err)
	}
	// A stored run from before client hosts: its spec has no client, and
	// it ran on loopback.
	old, err := Parse([]byte(base), "run 20260101-000000-abcd", reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := old.ClientSetting(); got.Kind() != host.Loopback {
		t.Fatalf("a stored spec without client reads as %s, want loopback", got.Kind())
	}
	// The settings survive the stored spec.
	s2, err := Parse([]byte(edit(t, "seed: 0\n", "seed: 0\nclient: netns\nclient_mtu: 9000\nclient_subnet: 10.214.9.0/30\n")), "t.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	y, err := s2.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(y, "stored", reg)
	if err != nil {
		t.Fatal(err)
	}
	got := back.ClientSetting()
	if got.Kind() != host.Netns || got.MTU != 9000 || got.Subnet.String() != "10.214.9.0/30" {
		t.Fatalf("round trip: %+v from\n%s", got, y)
	}
}
