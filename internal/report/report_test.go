package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture is a small run: native, docker-nat and an emulated vm; redis-set
// with five counted rounds and a warm-up, redis-get with three (too few
// pairs for a verdict), a p99 that one platform measured from too few
// requests, the CPU shares as diagnostics, one failed trial, a degraded
// mode and a skipped platform.
func fixture() (Header, analysis.Result) {
	run := store.Run{ID: "20261121-120000-abcd", Study: "redis", Seed: 42, Baseline: "native", Status: "done",
		Env: json.RawMessage(`{"kernel":"6.1.0","cpus":2}`)}
	var trials []store.Trial
	workload := "redis-set"
	add := func(round int, warm bool, p string, ops, cpu float64, errText string) {
		t := store.Trial{RunID: run.ID, Round: round, Warmup: warm, Workload: workload, Platform: p,
			Started: time.Unix(0, 0), Error: errText}
		if p == "vm" {
			t.Where = []string{"guest 10.213.0.2, emulated (TCG), not comparable"}
		}
		if errText == "" {
			samples := int64(200000)
			if p == "docker-nat" && workload == "redis-set" {
				samples = 800 // too few behind a p99
			}
			t.Metrics = []store.Metric{
				{Name: "ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: ops},
				{Name: "cpu_us_per_op", Unit: "us", HigherIsBetter: false, Value: cpu},
				{Name: "latency_p99_ms", Unit: "ms", Value: 1e6 / ops, Quantile: 0.99, Samples: samples},
				{Name: "server_cpu_pct", Unit: "% of a core", Value: cpu * 3, Diagnostic: true},
				{Name: "outside_cpu_pct", Unit: "% of a core", Value: float64(round%4) * 2, Diagnostic: true},
			}
		}
		trials = append(trials, t)
	}
	add(0, true, "native", 1, 1, "")
	add(0, true, "docker-nat", 1, 1, "")
	for r, v := range []float64{50000, 52000, 51000, 50500, 51500} {
		add(r+1, false, "native", v, 20+float64(r)*0.1, "")
		add(r+1, false, "docker-nat", v*0.8*(1+0.01*float64(r%2)), (20+float64(r)*0.1)*1.25, "")
	}
	add(6, false, "docker-nat", 0, 0, "redis-benchmark failed")
	// A second workload and an emulated VM: the pivot view and the marks.
	workload = "redis-get"
	noise := []float64{1, 1.03, 0.98}
	for r, v := range []float64{60000, 61000, 59000} {
		add(r+1, false, "native", v, 18, "")
		add(r+1, false, "docker-nat", v*0.9*noise[r], 19*noise[r], "")
		add(r+1, false, "vm", v*0.1*noise[(r+1)%3], 180*noise[r], "")
	}
	res := analysis.Analyse(trials, analysis.Options{Baseline: "native", Platforms: []string{"native", "docker-nat", "vm"}, Workloads: []string{"redis-set", "redis-get"},
		Stats: stats.Options{Seed: 1}})
	notes := []store.RunNote{
		{Kind: store.NoteDegraded, Subject: "vm", Text: "emulated (TCG), not comparable: KVM unavailable"},
		{Kind: store.NoteSkipped, Subject: "vm-docker", Text: "no KVM and no time"},
	}
	return Header{Run: run, StopReason: "rounds done", RunNotes: notes}, res
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
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run with -update if the change is intended)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestTextGolden(t *testing.T) {
	h, res := fixture()
	var b bytes.Buffer
	if err := Text(&b, h, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", b.Bytes())
}

func TestJSONGolden(t *testing.T) {
	h, res := fixture()
	var b bytes.Buffer
	if err := JSON(&b, h, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", b.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_id", "study", "baseline", "environment", "results"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	row := doc["results"].([]any)[1].(map[string]any)
	for _, k := range []string{"platform", "workload", "metric", "unit", "higher_is_better", "n", "pairs", "mean", "median", "min", "max", "cv", "ratio", "ratio_ci_low", "ratio_ci_high", "interval_method", "significant"} {
		if _, ok := row[k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
	if row["platform"] != "docker-nat" || row["significant"] != true || row["pairs"] != 5.0 || row["verdict"] != "worse" {
		t.Errorf("docker-nat at 0.8x over 5 rounds should be significant: %v", row)
	}
	// Every result and diagnostic row says how many pairs stand behind it;
	// no row below the minimum has a verdict, an interval or significance.
	for _, key := range []string{"results", "diagnostics"} {
		for _, r := range doc[key].([]any) {
			row := r.(map[string]any)
			pairs, ok := row["pairs"].(float64)
			if !ok {
				t.Errorf("%s row without pairs: %v", key, row)
				continue
			}
			if row["verdict"] == "baseline" {
				continue
			}
			switch {
			case key == "diagnostics":
				if row["verdict"] != "" || row["ratio_ci_low"] != nil || row["significant"] != false {
					t.Errorf("diagnostic row with a verdict or interval: %v", row)
				}
			case pairs < 5:
				if row["verdict"] != "n<5" || row["ratio_ci_low"] != nil || row["significant"] != false || row["no_verdict"] != "n<5" {
					t.Errorf("row with %v pairs: %v", pairs, row)
				}
			}
		}
	}
	for _, k := range []string{"degraded", "skipped", "warnings", "all_warnings", "min_pairs", "disturbed_trials", "counted_trials"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}

// TestWarningsList: `show --warnings` lists every warning.
func TestWarningsList(t *testing.T) {
	_, res := fixture()
	var b bytes.Buffer
	if err := Warnings(&b, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(res.Warnings) || len(res.Warnings) <= len(res.Warnings.Summary()) {
		t.Errorf("%d lines for %d warnings (%d kinds):\n%s", len(lines), len(res.Warnings), len(res.Warnings.Summary()), b.String())
	}
}

func TestClientLine(t *testing.T) {
	notes := []store.RunNote{
		{Kind: store.NoteClient, Subject: "docker-bridge, docker-nat, native", Text: "netns veth MTU 1500"},
		{Kind: store.NoteSkipped, Subject: "vm", Text: "no KVM"},
		{Kind: store.NoteClient, Subject: "docker-proxy", Text: "host loopback"},
	}
	if got, want := ClientLine(notes), "client: netns veth MTU 1500 (docker-bridge, docker-nat, native); host loopback (docker-proxy)"; got != want {
		t.Errorf("ClientLine = %q, want %q", got, want)
	}
	if got := RunNoteLines(notes); len(got) != 1 || got[0] != "skipped: vm: no KVM" {
		t.Errorf("RunNoteLines = %q: the client notes belong to ClientLine", got)
	}
	// A run stored before client hosts ran its load over loopback.
	if got := ClientLine(notes[1:2]); got != "client: host loopback" {
		t.Errorf("ClientLine of a run without client notes = %q", got)
	}
}

// TestCeilingGolden: a find-max whose every search stopped at the data's
// limit on both platforms, and one whose other platform did in some rounds:
// the table says ">= value (limit)" with no ratio, interval or verdict, and
// one whose every load failed on the other platform says "< value (limit)";
// the JSON rows name the ceiling with a null ratio.
func TestCeilingGolden(t *testing.T) {
	run := store.Run{ID: "20261126-120000-abcd", Study: "auction", Seed: 7, Baseline: "native", Status: "done"}
	var trials []store.Trial
	add := func(w, p string, r int, v float64, ceiling bool) {
		tr := store.Trial{RunID: run.ID, Round: r, Workload: w, Platform: p, Started: time.Unix(0, 0),
			Metrics: []store.Metric{{Name: "peak_users", Unit: "users", HigherIsBetter: true, Value: v}}}
		if ceiling {
			tr.Notes = []string{search.Ceiling{Metric: "peak_users", Value: v, Is: "the data's limit"}.Note()}
		}
		trials = append(trials, tr)
	}
	for r := 1; r <= 5; r++ {
		add("auction", "native", r, 3000, true)
		add("auction", "docker-nat", r, 3000, true)
		add("auction-big", "native", r, 2000+float64(r)*10, false)
		add("auction-big", "docker-nat", r, []float64{1800, 6000, 1700, 6000, 1900}[r-1], r%2 == 0)
		add("http-max-lb", "native", r, 7900+float64(r)*10, false)
		tr := store.Trial{RunID: run.ID, Round: r, Workload: "http-max-lb", Platform: "docker-nat", Started: time.Unix(0, 0),
			Metrics: []store.Metric{{Name: "peak_users", Unit: "users", HigherIsBetter: true, Value: 166}}}
		tr.Notes = []string{search.Ceiling{Metric: "peak_users", Value: 166, Is: "the lowest rate tried", Below: true}.Note()}
		trials = append(trials, tr)
	}
	res := analysis.Analyse(trials, analysis.Options{Baseline: "native", Platforms: []string{"native", "docker-nat"}, Stats: stats.Options{Seed: 1}})
	h := Header{Run: run}
	var b bytes.Buffer
	if err := Text(&b, h, res); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{">= 3000 (the data's limit)", ">= 3480 (the data's limit in 2 of 5 trials)", "< 166 (the lowest rate tried)"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "1.000 [") || strings.Contains(text, "  ~") {
		t.Errorf("a ceiling got a ratio with an interval or a verdict:\n%s", text)
	}
	golden(t, "ceiling.txt", b.Bytes())
	var j bytes.Buffer
	if err := JSON(&j, h, res); err != nil {
		t.Fatal(err)
	}
	var doc JSONDoc
	if err := json.Unmarshal(j.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, row := range doc.Results {
		if row.Platform == "native" {
			continue
		}
		if row.Ratio != nil || row.RatioCILow != nil || row.Significant || (row.Ceiling == "" && !row.BaseCeiling) {
			t.Errorf("JSON row %+v: want a null ratio and the ceiling named", row)
		}
	}
}
