// Package reporttest holds the stored-run fixture that the report and
// HTML report tests share: one run of a small redis study on three
// platforms, with a failed trial and a saturated-driver note.
package reporttest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/redis"
)

// spec is the fixture's study file (Study parses it; Run stores it).
const spec = `name: fixture
description: "Fixture: native, docker-nat and a CPU-limited native variant"
baseline: native
rounds: 5
warmup: 1
trial: 2s
platforms:
  - native
  - docker-nat
  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: "0", memory: 512m}}
workloads:
  - workload: redis
    name: redis-set
    params: {op: set}
`

// Run IDs of the fixtures: RunA for a single run, RunB for the second run
// of a comparison.
const (
	RunA runid.ID = "20261121-120000-abcd"
	RunB runid.ID = "20261121-130000-bcde"
)

// T0 is when the fixture run started.
var T0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// Run is a stored run: three platforms, a warm-up round and five
// counted rounds of redis-set, three metrics, one failed trial, a saturated
// driver note. scale multiplies native's throughput (for comparisons).
func Run(id runid.ID, scale float64) (store.Run, []store.Trial) {
	env, _ := json.Marshal(sysinfo.Env{Hostname: "bench1", Kernel: "6.1.0-27-amd64", OS: "Debian GNU/Linux 12 (bookworm)",
		CPUModel: "Intel(R) Xeon(R) CPU @ 2.20GHz", CPUs: 2, Sockets: 1, NUMANodes: 1, MemoryBytes: 8 << 30,
		CgroupVersion: "hybrid", Virtualization: "kvm", Docker: map[string]string{"version": "20.10.24", "api_version": "1.41"},
		Tools:             []sysinfo.Tool{{Name: "redis", Binary: "/usr/bin/redis-server", Package: "redis-server", Version: "5:7.0.15-1~deb12u1"}},
		NearnativeVersion: "0.1.0", Commit: "abc1234",
		Extra: map[string]string{"arch": "x86_64", "kvm": "true", "image": "nearnative/workload:deadbeef", "vm_accel": "tcg"}})
	run := store.Run{ID: id, Study: "fixture", Spec: []byte(spec), Seed: 42,
		Baseline: "native", Status: store.StatusDone, StopReason: "rounds done", Started: T0, Finished: T0.Add(10 * time.Minute),
		Env: env, Version: "0.1.0 (abc1234)", Trials: 18}
	var trials []store.Trial
	start := T0
	add := func(round, index int, p string, ops, cpu, client float64, errText string, notes ...string) {
		tr := store.Trial{RunID: run.ID, Round: round, Index: index, Warmup: round == 0, Workload: "redis-set", Platform: p,
			Started: start, Duration: 2500 * time.Millisecond, Error: errText, Notes: notes,
			Commands: []string{"redis-server --bind 127.0.0.1 --port 4" + p[:1] + "01", "redis-benchmark -t set -c 50 -n 100000"},
			Where:    []string{"redis-server on " + p}}
		if errText == "" {
			tr.Metrics = []store.Metric{
				{Name: "ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: ops},
				{Name: "cpu_us_per_op", Unit: "us", Value: cpu},
				{Name: "client_cpu_pct", Unit: "%", Value: client, Diagnostic: true},
			}
		}
		start = start.Add(3 * time.Second)
		trials = append(trials, tr)
	}
	add(0, 0, "native", 40000, 25, 80, "")
	add(0, 1, "docker-nat", 30000, 30, 80, "")
	add(0, 2, "native-q08", 30000, 26, 80, "")
	orders := [][]string{{"docker-nat", "native", "native-q08"}, {"native", "native-q08", "docker-nat"},
		{"native-q08", "docker-nat", "native"}, {"native", "docker-nat", "native-q08"}, {"docker-nat", "native-q08", "native"}}
	base := []float64{50000, 52000, 51000, 49500, 50500}
	for r, order := range orders {
		for i, p := range order {
			b := base[r]
			switch p {
			case "native":
				add(r+1, i, p, b*scale, 20+float64(r)*0.1, 70, "")
			case "docker-nat":
				add(r+1, i, p, b*0.8, 25+float64(r)*0.2, 95, "", "redis-benchmark used 95% of its 1 thread(s): the driver may be the bottleneck (raise threads)")
			case "native-q08":
				if r == 2 {
					add(r+1, i, p, 0, 0, 0, "redis-benchmark: connection refused (raw output in trial dir)")
					continue
				}
				add(r+1, i, p, b*(0.95+0.03*float64(r%2)), 21, 72, "")
			}
		}
	}
	return run, trials
}

// Study is the fixture's study, parsed (the test fails if it does not
// parse).
func Study(t testing.TB) *study.Study {
	t.Helper()
	st, err := study.Parse([]byte(spec), "fixture.yaml", workload.NewRegistry(redis.Workload{}))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
