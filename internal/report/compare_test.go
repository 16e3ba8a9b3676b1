package report

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/report/reporttest"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

func compareFixture(t *testing.T, scale float64) analysis.Comparison {
	t.Helper()
	a, trialsA := reporttest.Run(reporttest.RunA, 1)
	b, trialsB := reporttest.Run(reporttest.RunB, scale)
	b.Started = reporttest.T0.Add(time.Hour)
	c, err := analysis.Compare([]analysis.RunData{{Run: a, Trials: trialsA}, {Run: b, Trials: trialsB}}, analysis.CompareOptions{Stats: stats.Options{Seed: 1, Resamples: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompareGolden(t *testing.T) {
	c := compareFixture(t, 0.88)
	var b bytes.Buffer
	if err := CompareText(&b, c); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.txt", b.Bytes())
}

func TestCompareSlower(t *testing.T) {
	tests := []struct {
		name  string
		scale float64 // run B's native throughput relative to run A's
		pct   float64
		want  []string // substrings of the listed regressions, in order
	}{
		{"12% slower, 5% allowed", 0.88, 5, []string{"redis-set ops_per_sec on native", "redis-set cpu_us_per_op"}},
		{"12% slower, 15% allowed", 0.88, 15, nil},
		{"same", 1, 0, nil},
		{"faster", 1.2, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := compareFixture(t, tc.scale).Slower(tc.pct)
			if tc.want == nil && len(got) > 0 {
				t.Fatalf("got %q, want none", got)
			}
			if len(tc.want) > 0 && (len(got) == 0 || !strings.Contains(got[0], tc.want[0])) {
				t.Fatalf("got %q, want first %q", got, tc.want[0])
			}
			for _, g := range got {
				if strings.Contains(g, "client_cpu_pct") {
					t.Errorf("diagnostic metric listed: %q", g)
				}
			}
		})
	}
}

func TestCompareNothingInCommon(t *testing.T) {
	a, trialsA := reporttest.Run(reporttest.RunA, 1)
	b := a
	b.ID = reporttest.RunB
	trialsB := []store.Trial{{RunID: reporttest.RunB, Round: 1, Workload: "other", Platform: "native",
		Metrics: []store.Metric{{Name: "ops_per_sec", Value: 1}}}}
	_, err := analysis.Compare([]analysis.RunData{{Run: a, Trials: trialsA}, {Run: b, Trials: trialsB}}, analysis.CompareOptions{})
	if !errors.Is(err, analysis.ErrNothingInCommon) {
		t.Fatalf("err = %v, want analysis.ErrNothingInCommon", err)
	}
}

// TestCompareCeiling: a run whose find-max trials stopped at a limit of
// their own has no ratio to the other run, and the table says ">= mean
// (limit)" for it, or "< mean (limit)" when the bounds are upper ones.
func TestCompareCeiling(t *testing.T) {
	for _, tc := range []struct {
		is    string
		below bool
		want  string
	}{
		{"the data's limit", false, ">= 3003.0 (the data's limit)"},
		{"the lowest rate tried", true, "< 3003.0 (the lowest rate tried)"},
	} {
		mk := func(id runid.ID, v float64, ceiling bool) (store.Run, []store.Trial) {
			r := store.Run{ID: id, Study: "auction", Baseline: "native", Status: "done", Started: reporttest.T0}
			var ts []store.Trial
			for round := 1; round <= 5; round++ {
				tr := store.Trial{RunID: id, Round: round, Workload: "auction", Platform: "native",
					Metrics: []store.Metric{{Name: "peak_users", Unit: "users", HigherIsBetter: true, Value: v + float64(round)}}}
				if ceiling {
					tr.Notes = []string{search.Ceiling{Metric: "peak_users", Value: v + float64(round), Is: tc.is, Below: tc.below}.Note()}
				}
				ts = append(ts, tr)
			}
			return r, ts
		}
		a, ta := mk(reporttest.RunA, 2000, false)
		b, tb := mk(reporttest.RunB, 3000, true)
		c, err := analysis.Compare([]analysis.RunData{{Run: a, Trials: ta}, {Run: b, Trials: tb}}, analysis.CompareOptions{Stats: stats.Options{Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		row := c.Rows[0]
		if row.Verdicts[0] != "n/a" || !math.IsNaN(row.Ratios[0].Ratio) || row.Ceilings[1] != tc.is || row.Ceilings[0] != "" || row.Below[1] != tc.below || row.Below[0] {
			t.Errorf("row %+v: want no ratio and run B's bound (%s, below %v)", row, tc.is, tc.below)
		}
		var out bytes.Buffer
		if err := CompareText(&out, c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("comparison lacks %q:\n%s", tc.want, out.String())
		}
	}
}
