package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/store"
)

const aaSpec = `name: aa
baseline: native
rounds: 5
warmup: 1
trial: 3s
platforms:
  - native
  - {name: native-b, base: native, options: {cpuset: "0"}}
workloads:
  - workload: redis
    params: {op: set}
`

// seedRuns stores two aa runs; in the second, native-b's throughput is
// scale times the first's.
func seedRuns(t *testing.T, db string, scale float64) (a, b runid.ID) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := []runid.ID{"20261121-100000-aaaa", "20261121-110000-bbbb"}
	for k, id := range ids {
		start := time.Date(2026, 11, 21, 10+k, 0, 0, 0, time.UTC)
		if err := st.CreateRun(ctx, store.Run{ID: id, Study: "aa", Spec: []byte(aaSpec), Seed: 7, Baseline: "native", Started: start}); err != nil {
			t.Fatal(err)
		}
		for r := 0; r <= 5; r++ {
			for i, p := range []string{"native", "native-b"} {
				ops := 10000 + 100*float64(r%3)
				if p == "native-b" && k == 1 {
					ops *= scale
				}
				tr := store.Trial{RunID: id, Round: r, Index: i, Warmup: r == 0, Workload: "redis", Platform: p,
					Started: start.Add(time.Duration(r*2+i) * time.Second), Duration: 3 * time.Second,
					Metrics: []store.Metric{{Name: "ops_per_sec", Unit: "ops/s", HigherIsBetter: true, Value: ops},
						{Name: "client_cpu_pct", Unit: "%", Value: 50 / scale}},
					Commands: []string{"redis-benchmark -t set"}, Where: []string{"redis-server on " + p}}
				if err := st.AddTrial(ctx, tr); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.FinishRun(ctx, id, store.StatusDone, "rounds done", start.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return ids[0], ids[1]
}

func exitCode(err error) int { return ExitCode(err) }

func TestReportCommands(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	a, b := seedRuns(t, db, 0.8)
	out := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   string   // substring of stdout
		files    []string // files that must exist afterwards
		absent   []string // files that must not
	}{
		{"html", []string{"report", "last", "--html", out("r.html")}, ExitOK, "", []string{"r.html"}, nil},
		{"html needs --html", []string{"report", "last"}, ExitBadInput, "", nil, nil},
		{"unknown run", []string{"report", "nope", "--html", out("nope.html")}, ExitBadInput, "", nil, []string{"nope.html"}},
		{"unwritable", []string{"report", "last", "--html", out("no/such/dir/r.html")}, ExitBadInput, "", nil, nil},
		{"export both", []string{"export", string(a), "--csv", out("t.csv"), "--json", out("t.json")}, ExitOK, "", []string{"t.csv", "t.json"}, nil},
		{"export all or nothing", []string{"export", string(a), "--csv", out("u.csv"), "--json", out("no/such/u.json")}, ExitBadInput, "", nil, []string{"u.csv"}},
		{"compare", []string{"compare", string(a), string(b)}, ExitOK, "native-b", nil, nil},
		{"compare within threshold", []string{"compare", string(a), string(b), "--fail-if-slower", "25%"}, ExitOK, "no primary metric", nil, nil},
		{"compare slower", []string{"compare", string(a), string(b), "--fail-if-slower", "5%"}, ExitFailure, "ops_per_sec on native-b", nil, nil},
		{"compare faster is fine", []string{"compare", string(b), string(a), "--fail-if-slower", "5"}, ExitOK, "", nil, nil},
		{"compare bad threshold", []string{"compare", string(a), string(b), "--fail-if-slower", "x"}, ExitBadInput, "", nil, nil},
		{"compare one run", []string{"compare", string(a)}, ExitBadInput, "", nil, nil},
		{"compare same run", []string{"compare", string(a), "last", "last"}, ExitBadInput, "", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), append([]string{"--db", db}, tc.args...), &stdout, &stderr)
			if got := exitCode(err); got != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tc.wantCode, stdout.String())
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout.String())
			}
			for _, f := range tc.files {
				if fi, err := os.Stat(out(f)); err != nil || fi.Size() == 0 {
					t.Errorf("%s not written: %v", f, err)
				}
			}
			for _, f := range tc.absent {
				if _, err := os.Stat(out(f)); err == nil {
					t.Errorf("%s written although the command failed", f)
				}
			}
		})
	}
	// The export carries the variant's options from the stored study.
	f, err := os.Open(out("t.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 13 || recs[0][8] != "cpuset" || recs[2][6] != "native-b" || recs[2][8] != "0" {
		t.Errorf("export: %d rows, header %v, row 2 %v", len(recs), recs[0], recs[2])
	}
}

func TestCompareNothingInCommonCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	a, _ := seedRuns(t, db, 1)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	other := runid.ID("20261121-120000-cccc")
	if err := st.CreateRun(ctx, store.Run{ID: other, Study: "x", Baseline: "native", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddTrial(ctx, store.Trial{RunID: other, Round: 1, Workload: "fio", Platform: "native",
		Metrics: []store.Metric{{Name: "iops", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var stdout, stderr bytes.Buffer
	err = Run(ctx, []string{"--db", db, "compare", string(a), string(other)}, &stdout, &stderr)
	if exitCode(err) != ExitBadInput || !strings.Contains(err.Error(), "in common") {
		t.Fatalf("err = %v (exit %d), want exit %d and 'in common'", err, exitCode(err), ExitBadInput)
	}
	if stdout.Len() != 0 {
		t.Errorf("printed output although nothing compares:\n%s", stdout.String())
	}
}
