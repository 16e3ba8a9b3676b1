package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture is a small run: native and docker-nat, three counted rounds and a
// warm-up, two metrics, one failed trial.
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
			t.Metrics = []store.Metric{
				{Name: "ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: ops},
				{Name: "cpu_us_per_op", Unit: "us", HigherIsBetter: false, Value: cpu},
			}
		}
		trials = append(trials, t)
	}
	add(0, true, "native", 1, 1, "")
	add(0, true, "docker-nat", 1, 1, "")
	for r, v := range []float64{50000, 52000, 51000} {
		add(r+1, false, "native", v, 20+float64(r)*0.1, "")
		add(r+1, false, "docker-nat", v*0.8, (20+float64(r)*0.1)*1.25, "")
	}
	add(4, false, "docker-nat", 0, 0, "redis-benchmark failed")
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
	return Header{Run: run, StopReason: "rounds done"}, res
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
	for _, k := range []string{"platform", "workload", "metric", "unit", "higher_is_better", "n", "mean", "median", "min", "max", "cv", "ratio", "ratio_ci_low", "ratio_ci_high", "significant"} {
		if _, ok := row[k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
	if row["platform"] != "docker-nat" || row["significant"] != true {
		t.Errorf("docker-nat at 0.8x over 3 rounds should be significant: %v", row)
	}
}
