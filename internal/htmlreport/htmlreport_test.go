package htmlreport

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/redis"
)

var update = flag.Bool("update", false, "rewrite golden files")

const fixtureSpec = `name: fixture
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

// Run IDs of the fixtures.
const (
	runA runid.ID = "20261121-120000-abcd"
	runB runid.ID = "20261121-130000-bcde"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fixtureRun is a stored run: three platforms, a warm-up round and five
// counted rounds of redis-set, three metrics, one failed trial, a saturated
// driver note. scale multiplies native's throughput (for comparisons).
func fixtureRun(id runid.ID, scale float64) (store.Run, []store.Trial) {
	env, _ := json.Marshal(sysinfo.Env{Hostname: "bench1", Kernel: "6.1.0-27-amd64", OS: "Debian GNU/Linux 12 (bookworm)",
		CPUModel: "Intel(R) Xeon(R) CPU @ 2.20GHz", CPUs: 2, Sockets: 1, NUMANodes: 1, MemoryBytes: 8 << 30,
		CgroupVersion: "hybrid", Virtualization: "kvm", Docker: map[string]string{"version": "20.10.24", "api_version": "1.41"},
		Tools:             []sysinfo.Tool{{Name: "redis", Binary: "/usr/bin/redis-server", Package: "redis-server", Version: "5:7.0.15-1~deb12u1"}},
		NearnativeVersion: "0.1.0", Commit: "abc1234",
		Extra: map[string]string{"arch": "x86_64", "kvm": "true", "image": "nearnative/workload:deadbeef", "vm_accel": "tcg"}})
	run := store.Run{ID: id, Study: "fixture", Spec: []byte(fixtureSpec), Seed: 42,
		Baseline: "native", Status: store.StatusDone, StopReason: "rounds done", Started: t0, Finished: t0.Add(10 * time.Minute),
		Env: env, Version: "0.1.0 (abc1234)", Trials: 18}
	var trials []store.Trial
	start := t0
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

func parseFixtureStudy(t *testing.T) *study.Study {
	t.Helper()
	st, err := study.Parse([]byte(fixtureSpec), "fixture.yaml", workload.NewRegistry(redis.Workload{}))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func fixtureInput(t *testing.T) Input {
	t.Helper()
	run, trials := fixtureRun(runA, 1)
	st := parseFixtureStudy(t)
	res := analysis.Analyse(trials, analysis.Options{Baseline: "native", Platforms: st.PlatformNames(),
		Stats: stats.Options{Seed: uint64(run.Seed), Resamples: 2000}})
	return Input{Run: run, Trials: trials, Study: st, Result: res}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/htmlreport -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run with -update if the change is intended)\n--- got\n%s", name, got)
	}
}

func TestHTMLGolden(t *testing.T) {
	in := fixtureInput(t)
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html", b.Bytes())
	html := b.String()
	for _, want := range []string{
		"Intel(R) Xeon(R) CPU @ 2.20GHz", "6.1.0-27-amd64", "api_version 1.41", "nearnative/workload:deadbeef",
		"5:7.0.15-1~deb12u1", "VM acceleration", "512m", "lower is better", "the driver may be the bottleneck",
		"redis-benchmark -t set -c 50 -n 100000", "connection refused", `class="ref"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), banned) {
			t.Errorf("HTML contains %q: it must be self-contained", banned)
		}
	}
	cells := 0
	for _, tab := range in.Result.Tables {
		cells += len(tab.Cells)
	}
	if got := strings.Count(html, `<rect class="bar `); got != cells {
		t.Errorf("%d bars, want %d (one per platform and metric)", got, cells)
	}
	if got := strings.Count(html, "<svg "); got != len(in.Result.Tables) {
		t.Errorf("%d charts, want %d", got, len(in.Result.Tables))
	}
}

// TestHTMLTrust: the HTML report states the verdict rule and n, keeps
// diagnostics apart without verdicts, lists the run's degraded modes and
// skipped platforms, and shows one warning line per kind with the full list
// folded away.
func TestHTMLTrust(t *testing.T) {
	in := fixtureInput(t)
	in.RunNotes = []store.RunNote{{Kind: store.NoteDegraded, Subject: "vm", Text: "user-mode network"}, {Kind: store.NoteSkipped, Subject: "vm-docker", Text: "no KVM"}}
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"below 5 there is no verdict", "n&lt;5", // native-q08 has 4 pairs
		`id="diagnostics"`, "client_cpu_pct",
		"degraded: vm: user-mode network", "skipped: vm-docker: no KVM",
		"one line per kind", "all " + strconv.Itoa(len(in.Result.Warnings)) + " warning(s)",
		"Student t on the log ratio of means",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The diagnostic metric has no chart and no verdict.
	diag := html[strings.Index(html, `id="diagnostics"`):]
	diag = diag[:strings.Index(diag, "<h2>Environment")]
	for _, v := range []string{"better", "worse", `class="verdict-`, "<svg"} {
		if strings.Contains(diag, v) {
			t.Errorf("diagnostics section contains %q", v)
		}
	}
	if strings.Contains(html[:strings.Index(html, `id="diagnostics"`)], "client_cpu_pct") {
		t.Error("the diagnostic metric appears among the results")
	}
}

// TestHTMLTraces: a find-max trial's steps are shown in order, each marked
// passed or failed with its outcome on hover, and a search stopped for a
// platform says why.
func TestHTMLTraces(t *testing.T) {
	in := fixtureInput(t)
	in.Traces = []report.Trace{
		{Workload: "auction", Platform: "native", Round: 1, Steps: []store.Step{
			{Phase: "coarse", Value: 50, Pass: true, Summary: "coarse 50 users: pass"},
			{Phase: "coarse", Value: 100, Pass: false, Summary: "coarse 100 users: FAIL within"},
			{Phase: "verify", Value: 50, Pass: true}}},
		{Workload: "auction", Platform: "vm", Round: 1, Error: "the auction did not start on vm: tomcat exited", Steps: []store.Step{
			{Phase: "coarse", Value: 50, Pass: false}}},
	}
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<h2 id="traces">Find-max traces</h2>`,
		`<span class="phase">coarse</span> <span class="step-pass" title="coarse 50 users: pass">50+</span> <span class="step-fail" title="coarse 100 users: FAIL within">100-</span> <span class="phase">verify</span> <span class="step-pass" title="">50+</span>`,
		`<div class="step-fail">stopped: the auction did not start on vm: tomcat exited</div>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	in.Traces = nil
	b.Reset()
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="traces"`) {
		t.Error("a run without searches has a traces section")
	}
}
