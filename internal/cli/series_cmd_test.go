package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/store"
)

func TestSeriesCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	t.Setenv("NEARNATIVE_HOME", dir)
	a, _ := seedRuns(t, db, 1)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	key := store.TrialKey{Run: a, Round: 1, Workload: "redis", Platform: "native"}
	if err := st.(store.StepStore).AddStep(ctx, key, store.Step{Seq: 0, Phase: "coarse", Value: 1000, Pass: true,
		Started: time.Date(2026, 11, 21, 10, 0, 1, 0, time.UTC), Duration: time.Second, Summary: "ok", Detail: []byte(`{"p99_ms":1.5}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.(store.SeriesStore).PutSeries(ctx, key, 0, []store.SeriesPoint{{Sec: 3, Phase: "steady", Op: "get", Count: 999, P99Us: 1500}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	out := filepath.Join(dir, "series.json")
	var stdout, stderr bytes.Buffer
	if err := Run(ctx, []string{"series", string(a)[:12], "--json", out, "--db", db}, &stdout, &stderr); err != nil {
		t.Fatalf("series: %v (%s)", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc seriesDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Run != string(a) || len(doc.Trials) != 12 {
		t.Fatalf("run %s, %d trials", doc.Run, len(doc.Trials))
	}
	var found bool
	for _, tr := range doc.Trials {
		if tr.Round == 1 && tr.Platform == "native" {
			var d struct {
				P99 float64 `json:"p99_ms"`
			}
			found = len(tr.Steps) == 1 && tr.Steps[0].Value == 1000 && json.Unmarshal(tr.Steps[0].Detail, &d) == nil && d.P99 == 1.5 &&
				len(tr.Series) == 1 && tr.Series[0].Count == 999
		} else if len(tr.Steps) != 0 || len(tr.Series) != 0 {
			t.Errorf("trial %d/%s has steps or series of another", tr.Round, tr.Platform)
		}
	}
	if !found {
		t.Errorf("round 1 native: %s", b)
	}

	if err := Run(ctx, []string{"series", "nosuchrun", "--json", out, "--db", db}, &stdout, &stderr); exitCode(err) != ExitBadInput {
		t.Errorf("unknown run: %v", err)
	}
	// The new spelling writes the same document, to standard output by
	// default; the old one says what replaced it.
	if !strings.Contains(stderr.String(), "it is now --format json -o FILE") {
		t.Errorf("--json does not say what replaced it: %q", stderr.String())
	}
	stdout.Reset()
	if err := Run(ctx, []string{"series", string(a), "--db", db}, &stdout, &stderr); err != nil {
		t.Fatalf("series to stdout: %v", err)
	}
	if !bytes.Equal(stdout.Bytes(), b) {
		t.Errorf("series to standard output differs from --json FILE's")
	}
	for _, args := range [][]string{{"--format", "csv"}, {"--json", out, "-o", "-"}} {
		if err := Run(ctx, append([]string{"series", string(a), "--db", db}, args...), &stdout, &stderr); exitCode(err) != ExitBadInput {
			t.Errorf("%v: %v, want bad input", args, err)
		}
	}
}

// TestShowTraces: show and report --html read the stored find-max steps
// and show them per workload and platform, in the study's platform order
// and by round, skipping trials that did not search.
func TestShowTraces(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	t.Setenv("NEARNATIVE_HOME", dir)
	a, _ := seedRuns(t, db, 1)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		round    int
		platform string
		value    float64
		pass     bool
	}{{2, "native-b", 300, false}, {1, "native", 100, true}, {0, "native", 50, true}, {1, "native-b", 200, true}} {
		key := store.TrialKey{Run: a, Round: s.round, Workload: "redis", Platform: s.platform}
		if err := st.(store.StepStore).AddStep(ctx, key, store.Step{Seq: 0, Phase: "coarse", Value: s.value, Pass: s.pass, Summary: "step"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	var stdout, stderr bytes.Buffer
	if err := Run(ctx, []string{"show", string(a), "--db", db}, &stdout, &stderr); err != nil {
		t.Fatalf("show: %v (%s)", err, stderr.String())
	}
	want := "redis on native\n  round 0 (warm-up): coarse 50+\n  round 1: coarse 100+\nredis on native-b\n  round 1: coarse 200+\n  round 2: coarse 300-\n"
	if !strings.Contains(stdout.String(), "find-max traces") || !strings.Contains(stdout.String(), want) {
		t.Errorf("show lacks the traces %q:\n%s", want, stdout.String())
	}
	out := filepath.Join(dir, "r.html")
	if err := Run(ctx, []string{"report", string(a), "--html", out, "--db", db}, &stdout, &stderr); err != nil {
		t.Fatalf("report: %v (%s)", err, stderr.String())
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `id="traces"`) || !strings.Contains(string(html), `title="step">300-</span>`) {
		t.Errorf("the HTML report lacks the traces")
	}
}
