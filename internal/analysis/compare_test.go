package analysis

import (
	"testing"

	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

// TestCompareVerdictRules: Compare judges each later run by Analyse's
// rules: too few trials, a percentile resting on too few observations, a
// ceiling on either side, a diagnostic metric.
func TestCompareVerdictRules(t *testing.T) {
	mk := func(rounds int, scale float64, m store.Metric, ceiling bool) []store.Trial {
		var ts []store.Trial
		for r := 1; r <= rounds; r++ {
			mm := m
			mm.Value = scale * (100 + float64(r%3))
			tr := store.Trial{Round: r, Workload: "w", Platform: "native", Metrics: []store.Metric{mm}}
			if ceiling {
				tr.Notes = []string{search.Ceiling{Metric: m.Name, Value: mm.Value, Is: "the data's limit"}.Note()}
			}
			ts = append(ts, tr)
		}
		return ts
	}
	mean := store.Metric{Name: "ops", HigherIsBetter: true}
	p99 := store.Metric{Name: "p99_ms", Quantile: 0.99, Samples: 200}
	p99Enough := store.Metric{Name: "p99_ms", Quantile: 0.99, Samples: 5000}
	p99Unknown := store.Metric{Name: "p99_ms", Quantile: 0.99}
	diag := store.Metric{Name: "client_cpu_pct", Diagnostic: true}
	tests := []struct {
		name string
		a, b []store.Trial
		want string
	}{
		{"worse", mk(6, 1, mean, false), mk(6, 0.5, mean, false), "worse"},
		{"same", mk(6, 1, mean, false), mk(6, 1, mean, false), "~"},
		{"too few trials in one run", mk(6, 1, mean, false), mk(4, 0.5, mean, false), "n<5"},
		{"p99 from too few requests", mk(6, 1, p99, false), mk(6, 2, p99Enough, false), "p99<1000"},
		{"p99 from enough requests", mk(6, 1, p99Enough, false), mk(6, 2, p99Enough, false), "worse"},
		{"p99 sample counts unknown", mk(6, 1, p99Unknown, false), mk(6, 2, p99Unknown, false), "worse"},
		{"a ceiling", mk(6, 1, mean, false), mk(6, 2, mean, true), VerdictNA},
		{"diagnostic", mk(6, 1, diag, false), mk(6, 2, diag, false), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compare([]RunData{{Run: store.Run{ID: "a"}, Trials: tc.a}, {Run: store.Run{ID: "b"}, Trials: tc.b}},
				CompareOptions{Stats: stats.Options{Seed: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Rows[0].Verdicts[0]; got != tc.want {
				t.Errorf("verdict %q, want %q (ratio %+v)", got, tc.want, c.Rows[0].Ratios[0])
			}
		})
	}
}
