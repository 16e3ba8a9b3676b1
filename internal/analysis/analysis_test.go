package analysis

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

const (
	ops = "ops_per_sec" // higher is better
	lat = "latency_ms"  // lower is better
)

// trial builds a counted trial of workload w on platform p in round r with
// the given ops and latency values.
func trial(w, p string, r int, opsV, latV float64) store.Trial {
	return store.Trial{Workload: w, Platform: p, Round: r, Metrics: []store.Metric{
		{Name: ops, Unit: "ops/s", HigherIsBetter: true, Value: opsV},
		{Name: lat, Unit: "ms", HigherIsBetter: false, Value: latV},
	}}
}

func warmup(t store.Trial) store.Trial { t.Warmup = true; return t }

func failed(w, p string, r int) store.Trial {
	return store.Trial{Workload: w, Platform: p, Round: r, Error: "redis-benchmark exited 1"}
}

// fixture is six rounds of one workload on four platforms:
//   - native (baseline): every round; ops 100+r, latency 10+r/10.
//   - docker-nat: ops exactly half and latency exactly double every round
//     (worse on both); round 3 failed.
//   - docker-host: ops double and latency half (better on both); no trial
//     in round 6.
//   - docker-proxy: ops noisy around the baseline (~), latency equal (~).
//
// plus a warm-up round 0 with absurd values on every platform and a failed
// warm-up, neither of which may count.
func fixture() []store.Trial {
	var ts []store.Trial
	noise := []float64{0, 0.9, 1.1, 0.95, 1.05, 1.0, 1.0}
	for _, p := range []string{"native", "docker-nat", "docker-host", "docker-proxy"} {
		ts = append(ts, warmup(trial("redis", p, 0, 1e9, 1e9)))
	}
	ts = append(ts, warmup(failed("redis", "docker-proxy", 0)))
	for r := 1; r <= 6; r++ {
		b, l := 100+float64(r), 10+float64(r)/10
		ts = append(ts, trial("redis", "native", r, b, l))
		if r == 3 {
			ts = append(ts, failed("redis", "docker-nat", r))
		} else {
			ts = append(ts, trial("redis", "docker-nat", r, b/2, l*2))
		}
		if r != 6 {
			ts = append(ts, trial("redis", "docker-host", r, b*2, l/2))
		}
		ts = append(ts, trial("redis", "docker-proxy", r, b*noise[r], l))
	}
	return ts
}

func cell(t *testing.T, res Result, w, m, p string) Cell {
	t.Helper()
	for _, tab := range res.Tables {
		if tab.Workload != w || tab.Metric != m {
			continue
		}
		for _, c := range tab.Cells {
			if c.Platform == p {
				return c
			}
		}
	}
	t.Fatalf("no cell %s/%s/%s", w, m, p)
	return Cell{}
}

func TestAnalyse(t *testing.T) {
	res := Analyse(fixture(), Options{Baseline: "native"})
	if res.Baseline != "native" {
		t.Errorf("Baseline = %q", res.Baseline)
	}
	if res.Rounds != 6 {
		t.Errorf("Rounds = %d, want 6 (warm-up round 0 not counted)", res.Rounds)
	}
	if want := map[string]int{"redis/docker-nat": 1}; !reflect.DeepEqual(res.Failed, want) {
		t.Errorf("Failed = %v, want %v (failed warm-ups not counted)", res.Failed, want)
	}
	if len(res.Tables) != 2 || res.Tables[0].Metric != ops || res.Tables[1].Metric != lat {
		t.Fatalf("tables: %+v", res.Tables)
	}
	for _, tab := range res.Tables {
		if tab.Workload != "redis" {
			t.Errorf("table workload %q", tab.Workload)
		}
		var order []string
		for _, c := range tab.Cells {
			order = append(order, c.Platform)
		}
		if want := []string{"docker-host", "docker-nat", "docker-proxy", "native"}; !reflect.DeepEqual(order, want) {
			t.Errorf("%s: platforms %v, want sorted %v", tab.Metric, order, want)
		}
	}
	if tab := res.Tables[0]; tab.Unit != "ops/s" || !tab.HigherIsBetter {
		t.Errorf("ops table meta: %q %v", tab.Unit, tab.HigherIsBetter)
	}
	if tab := res.Tables[1]; tab.Unit != "ms" || tab.HigherIsBetter {
		t.Errorf("latency table meta: %q %v", tab.Unit, tab.HigherIsBetter)
	}

	tests := []struct {
		metric, platform string
		n                int     // values in the cell
		pairs            int     // pairs in the ratio
		ratio            float64 // NaN = don't check exactly
		verdict          string
	}{
		{ops, "native", 6, 6, 1, "baseline"},
		{lat, "native", 6, 6, 1, "baseline"},
		{ops, "docker-nat", 5, 5, 0.5, "worse"},
		{lat, "docker-nat", 5, 5, 2, "worse"},   // lower is better: a higher latency is worse
		{ops, "docker-host", 5, 5, 2, "better"}, // round 6 missing: 5 pairs
		{lat, "docker-host", 5, 5, 0.5, "better"},
		{ops, "docker-proxy", 6, 6, math.NaN(), "~"},
		{lat, "docker-proxy", 6, 6, 1, "~"},
	}
	for _, tt := range tests {
		c := cell(t, res, "redis", tt.metric, tt.platform)
		name := tt.metric + "/" + tt.platform
		if len(c.Values) != tt.n || c.Summary.N != tt.n {
			t.Errorf("%s: %d values (summary N %d), want %d", name, len(c.Values), c.Summary.N, tt.n)
		}
		for _, v := range c.Values {
			if v >= 1e9 {
				t.Errorf("%s: warm-up value %v counted", name, v)
			}
		}
		if c.Ratio.N != tt.pairs {
			t.Errorf("%s: ratio over %d pairs, want %d", name, c.Ratio.N, tt.pairs)
		}
		if !math.IsNaN(tt.ratio) && math.Abs(c.Ratio.Ratio-tt.ratio) > 1e-12 {
			t.Errorf("%s: ratio %v, want %v", name, c.Ratio.Ratio, tt.ratio)
		}
		if c.Verdict != tt.verdict {
			t.Errorf("%s: verdict %q, want %q (ratio %+v)", name, c.Verdict, tt.verdict, c.Ratio)
		}
		if c.IsBaseline != (tt.platform == "native") {
			t.Errorf("%s: IsBaseline %v", name, c.IsBaseline)
		}
		if c.Workload != "redis" || c.Metric != tt.metric || c.Platform != tt.platform {
			t.Errorf("%s: cell names %q %q %q", name, c.Workload, c.Metric, c.Platform)
		}
	}

	// The baseline's ratio is exactly 1 with a zero-width interval.
	b := cell(t, res, "redis", ops, "native")
	if b.Ratio.Ratio != 1 || b.Ratio.Lo != 1 || b.Ratio.Hi != 1 || b.Ratio.N != 6 {
		t.Errorf("baseline ratio %+v, want exactly 1", b.Ratio)
	}
	// Values are in round order.
	if want := []float64{101, 102, 103, 104, 105, 106}; !reflect.DeepEqual(b.Values, want) {
		t.Errorf("baseline values %v, want %v", b.Values, want)
	}
	if want := []float64{50.5, 51, 52, 52.5, 53}; !reflect.DeepEqual(cell(t, res, "redis", ops, "docker-nat").Values, want) {
		t.Errorf("docker-nat values %v, want %v (round 3 failed)", cell(t, res, "redis", ops, "docker-nat").Values, want)
	}
	// Exact ratios give a zero-width interval at the ratio.
	if r := cell(t, res, "redis", ops, "docker-nat").Ratio; r.Lo != 0.5 || r.Hi != 0.5 || r.HalfWidthPct != 0 {
		t.Errorf("docker-nat ops ratio %+v, want [0.5, 0.5]", r)
	}
	if r := cell(t, res, "redis", ops, "docker-proxy").Ratio; !(r.Lo < 1 && r.Hi > 1) || r.HalfWidthPct <= 0 {
		t.Errorf("docker-proxy ops ratio %+v, want an interval around 1", r)
	}

	// One warning for the failure; none about few pairs (5 and 6 >= 5).
	if got := res.Warnings.Of(KindFailed); len(got) != 1 || got[0].Text != "redis/docker-nat: 1 counted trial(s) failed and are left out" {
		t.Errorf("failure warnings %+v", got)
	}
	if got := res.Warnings.Of(KindFewPairs); len(got) != 0 {
		t.Errorf("few-pairs warnings with 5-6 pairs: %+v", got)
	}
	if got := res.Warnings.Of(KindNoisy); len(got) != 0 {
		t.Errorf("docker-proxy's CV is below 10%% but warned: %+v", got)
	}
	if res.MinPairs != stats.DefaultMinPairs {
		t.Errorf("MinPairs %d, want the default %d", res.MinPairs, stats.DefaultMinPairs)
	}
}

func TestAnalysePairingByRound(t *testing.T) {
	// The baseline misses round 2, the platform misses round 4: only rounds
	// 1, 3 and 5 pair. Pairing by position would give other numbers.
	var ts []store.Trial
	for _, r := range []int{1, 3, 4, 5} {
		ts = append(ts, trial("w", "base", r, 10*float64(r), 1))
	}
	for _, r := range []int{1, 2, 3, 5} {
		ts = append(ts, trial("w", "x", r, 20*float64(r), 1))
	}
	res := Analyse(ts, Options{Baseline: "base"})
	c := cell(t, res, "w", ops, "x")
	if c.Ratio.N != 3 {
		t.Errorf("pairs = %d, want 3 (rounds 1, 3, 5)", c.Ratio.N)
	}
	if c.Ratio.Ratio != 2 {
		t.Errorf("ratio = %v, want 2", c.Ratio.Ratio)
	}
	if len(c.Values) != 4 {
		t.Errorf("x keeps its 4 values in its summary, got %v", c.Values)
	}
	if res.Rounds != 5 {
		t.Errorf("Rounds = %d, want 5", res.Rounds)
	}
	want := []stats.Pair{{Base: 10, X: 20}, {Base: 30, X: 60}, {Base: 50, X: 100}}
	if got := Pairs(ts, "w", ops, "base", "x"); !reflect.DeepEqual(got, want) {
		t.Errorf("Pairs = %v, want %v", got, want)
	}
}

// TestMinPairs: no verdict from fewer pairs than the minimum, in every
// cell, whatever the interval says; n (the pairs) is on every cell.
func TestMinPairs(t *testing.T) {
	tests := []struct {
		pairs, minPairs int
		verdict         string
	}{
		{1, 0, "n<5"},
		{2, 0, "n<5"},
		{4, 0, "n<5"},
		{5, 0, "worse"},
		{8, 0, "worse"},
		{2, 2, "worse"},
		{4, 5, "n<5"},
		{5, 6, "n<6"},
		{6, 6, "worse"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d pairs, min %d", tt.pairs, tt.minPairs), func(t *testing.T) {
			var ts []store.Trial
			for r := 1; r <= tt.pairs; r++ {
				// x is clearly worse: 0.8 of the baseline with 1% noise.
				ts = append(ts, trial("w", "base", r, 100, 1), trial("w", "x", r, 80*(1+0.01*float64(r%3-1)), 1))
			}
			res := Analyse(ts, Options{Baseline: "base", MinPairs: tt.minPairs})
			c := cell(t, res, "w", ops, "x")
			if c.Verdict != tt.verdict || c.N() != tt.pairs || c.Ratio.N != tt.pairs {
				t.Errorf("verdict %q n %d, want %q and %d", c.Verdict, c.N(), tt.verdict, tt.pairs)
			}
			few := res.Warnings.Of(KindFewPairs)
			if below := strings.HasPrefix(tt.verdict, "n<"); below != (c.NoVerdict != "") || below != (len(few) == 2) {
				t.Errorf("NoVerdict %q, few-pairs warnings %+v (one per metric expected when below)", c.NoVerdict, few)
			}
			if b := cell(t, res, "w", ops, "base"); b.N() != tt.pairs || b.Verdict != VerdictBaseline {
				t.Errorf("baseline n %d verdict %q", b.N(), b.Verdict)
			}
			// --until-ci never stops below the minimum.
			if _, ok := res.MaxHalfWidth(nil); ok == strings.HasPrefix(tt.verdict, "n<") {
				t.Errorf("MaxHalfWidth ok = %v with %d pairs, min %d", ok, tt.pairs, res.MinPairs)
			}
		})
	}
	// No counted rounds at all: the failures, nothing else.
	res := Analyse([]store.Trial{failed("w", "base", 1), failed("w", "x", 1), failed("w", "x", 2)}, Options{Baseline: "base"})
	if res.Rounds != 0 || len(res.Tables) != 0 {
		t.Errorf("all failed: rounds %d, tables %d", res.Rounds, len(res.Tables))
	}
	if want := map[string]int{"w/base": 1, "w/x": 2}; !reflect.DeepEqual(res.Failed, want) {
		t.Errorf("Failed = %v, want %v", res.Failed, want)
	}
	want := []string{
		"w/base: 1 counted trial(s) failed and are left out",
		"w/x: 2 counted trial(s) failed and are left out",
	}
	if !reflect.DeepEqual(res.Warnings.Texts(), want) {
		t.Errorf("Warnings = %q, want %q", res.Warnings.Texts(), want)
	}
	if got := res.Warnings.Summary(); len(got) != 1 || got[0] != "failed trials left out in 2 workload/platforms, most 2 (w/x)" {
		t.Errorf("Summary = %q", got)
	}
}

func TestAnalyseNoBaseline(t *testing.T) {
	var ts []store.Trial
	for r := 1; r <= 5; r++ {
		ts = append(ts, trial("w", "a", r, 100, 1), trial("w", "b", r, 90, 1))
	}
	// Baseline "native" ran nothing.
	res := Analyse(ts, Options{Baseline: "native"})
	for _, p := range []string{"a", "b"} {
		c := cell(t, res, "w", ops, p)
		if c.Verdict != "n/a" || !math.IsNaN(c.Ratio.Ratio) || !math.IsNaN(c.Ratio.HalfWidthPct) || c.IsBaseline {
			t.Errorf("%s without baseline: verdict %q ratio %+v", p, c.Verdict, c.Ratio)
		}
	}
	if _, ok := res.MaxHalfWidth(nil); ok {
		t.Error("MaxHalfWidth ok without a baseline")
	}
}

func TestAnalyseSinglePair(t *testing.T) {
	// One paired round: a ratio but no interval, so no verdict.
	ts := []store.Trial{trial("w", "base", 1, 100, 1), trial("w", "x", 1, 50, 1), trial("w", "x", 2, 50, 1)}
	res := Analyse(ts, Options{Baseline: "base"})
	c := cell(t, res, "w", ops, "x")
	if c.Ratio.N != 1 || c.Ratio.Ratio != 0.5 || c.Verdict != "n<5" {
		t.Errorf("single pair: ratio %+v verdict %q", c.Ratio, c.Verdict)
	}
}

func TestAnalyseCVWarning(t *testing.T) {
	var ts []store.Trial
	vals := []float64{100, 60, 140, 80, 120}
	for r := 1; r <= 5; r++ {
		ts = append(ts, trial("w", "base", r, 100, 1), trial("w", "noisy", r, vals[r-1], 1))
	}
	res := Analyse(ts, Options{Baseline: "base"})
	got := res.Warnings.Of(KindNoisy).Texts()
	if len(got) != 1 || !strings.HasPrefix(got[0], "noisy w "+ops+": CV 31.6% > 10%") {
		t.Errorf("CV warnings %q, want one for w/ops/noisy", got)
	}
}

func TestAnalyseOrder(t *testing.T) {
	var ts []store.Trial
	for r := 1; r <= 5; r++ {
		for _, w := range []string{"redis", "micro"} {
			for _, p := range []string{"docker-nat", "native", "docker-host", "vm"} {
				ts = append(ts, trial(w, p, r, 100, 1))
			}
		}
	}
	tests := []struct {
		name                 string
		o                    Options
		workloads, platforms []string
	}{
		{"sorted by default", Options{Baseline: "native"},
			[]string{"micro", "redis"}, []string{"docker-host", "docker-nat", "native", "vm"}},
		{"given order first, then the rest sorted",
			Options{Baseline: "native", Workloads: []string{"redis"}, Platforms: []string{"native", "vm"}},
			[]string{"redis", "micro"}, []string{"native", "vm", "docker-host", "docker-nat"}},
		{"absent and repeated names ignored",
			Options{Baseline: "native", Workloads: []string{"fio", "micro", "micro", "redis"}, Platforms: []string{"docker-proxy", "vm", "native", "vm", "docker-nat", "docker-host"}},
			[]string{"micro", "redis"}, []string{"vm", "native", "docker-nat", "docker-host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Analyse(ts, tt.o)
			var ws []string
			for _, tab := range res.Tables {
				if len(ws) == 0 || ws[len(ws)-1] != tab.Workload {
					ws = append(ws, tab.Workload)
				}
				var ps []string
				for _, c := range tab.Cells {
					ps = append(ps, c.Platform)
				}
				if !reflect.DeepEqual(ps, tt.platforms) {
					t.Errorf("%s/%s: platforms %v, want %v", tab.Workload, tab.Metric, ps, tt.platforms)
				}
			}
			if !reflect.DeepEqual(ws, tt.workloads) {
				t.Errorf("workloads %v, want %v", ws, tt.workloads)
			}
			if len(res.Tables) != 4 {
				t.Errorf("%d tables, want 4", len(res.Tables))
			}
		})
	}
}

func TestAnalyseWarmupOnlyMetric(t *testing.T) {
	// A metric that only a warm-up trial reported has nothing counted: no
	// table for it.
	w := warmup(trial("w", "base", 0, 1, 1))
	w.Metrics = append(w.Metrics, store.Metric{Name: "extra", Value: 5})
	ts := []store.Trial{w, trial("w", "base", 1, 100, 1), trial("w", "x", 1, 100, 1)}
	res := Analyse(ts, Options{Baseline: "base"})
	for _, tab := range res.Tables {
		if len(tab.Cells) == 0 {
			t.Errorf("table %s/%s has no cells", tab.Workload, tab.Metric)
		}
	}
	if len(res.Tables) != 2 {
		t.Errorf("%d tables, want 2", len(res.Tables))
	}
}

func TestMaxHalfWidth(t *testing.T) {
	res := Analyse(fixture(), Options{Baseline: "native"})
	proxy := cell(t, res, "redis", ops, "docker-proxy").Ratio.HalfWidthPct
	if !(proxy > 0) {
		t.Fatalf("docker-proxy half-width %v", proxy)
	}
	isLatency := func(tab Table) bool { return tab.Metric == lat }
	isOps := func(tab Table) bool { return tab.Metric == ops }
	none := func(Table) bool { return false }
	tests := []struct {
		name    string
		include func(Table) bool
		want    float64
	}{
		{"all", nil, proxy},
		{"ops only", isOps, proxy},
		{"latency only: every interval has zero width", isLatency, 0},
		{"nothing selected", none, 0},
	}
	for _, tt := range tests {
		got, ok := res.MaxHalfWidth(tt.include)
		if !ok || got != tt.want {
			t.Errorf("%s: MaxHalfWidth = %v, %v; want %v, true", tt.name, got, ok, tt.want)
		}
	}

	// A platform with a single round has no interval yet: not ok, unless
	// the filter leaves its workload out.
	ts := append(fixture(), trial("micro", "native", 1, 1, 1), trial("micro", "native", 2, 1, 1), trial("micro", "vm", 1, 1, 1))
	res = Analyse(ts, Options{Baseline: "native"})
	if _, ok := res.MaxHalfWidth(nil); ok {
		t.Error("MaxHalfWidth ok with a one-pair ratio")
	}
	got, ok := res.MaxHalfWidth(func(tab Table) bool { return tab.Workload == "redis" })
	if !ok || got != proxy {
		t.Errorf("MaxHalfWidth(redis only) = %v, %v; want %v, true", got, ok, proxy)
	}
}

// TestDiagnostics: metrics that explain results go to their own tables
// without verdicts, whether the trial says so or (for old trials) the name
// does.
func TestDiagnostics(t *testing.T) {
	var ts []store.Trial
	for r := 1; r <= 5; r++ {
		for _, p := range []string{"base", "x"} {
			tr := trial("w", p, r, 100, 1)
			v := 50.0
			if p == "x" {
				v = 30 // "better" if it were judged
			}
			tr.Metrics = append(tr.Metrics,
				store.Metric{Name: "server_share", Unit: "%", Value: v, Diagnostic: true},
				store.Metric{Name: "client_cpu_pct", Unit: "%", Value: v}) // an old trial: no attribute
			ts = append(ts, tr)
		}
	}
	res := Analyse(ts, Options{Baseline: "base"})
	if len(res.Tables) != 2 || len(res.Diagnostics) != 2 {
		t.Fatalf("%d result and %d diagnostic tables, want 2 and 2", len(res.Tables), len(res.Diagnostics))
	}
	for _, tab := range res.Diagnostics {
		if !tab.Diagnostic {
			t.Errorf("%s not marked diagnostic", tab.Metric)
		}
		for _, c := range tab.Cells {
			if c.Verdict != "" || (!c.IsBaseline && !math.IsNaN(c.Ratio.Lo)) {
				t.Errorf("%s/%s: verdict %q interval [%v, %v], want none", tab.Metric, c.Platform, c.Verdict, c.Ratio.Lo, c.Ratio.Hi)
			}
			if !c.IsBaseline && (c.Ratio.Ratio != 0.6 || c.N() != 5) {
				t.Errorf("%s/%s: ratio %v n %d, want 0.6 and 5", tab.Metric, c.Platform, c.Ratio.Ratio, c.N())
			}
		}
	}
	// A caller that knows the workload's declarations decides for old trials.
	res = Analyse(ts, Options{Baseline: "base", Diagnostic: func(_, m string) bool { return false }})
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Metric != "server_share" {
		t.Errorf("with a declaration saying client_cpu_pct is a result: diagnostics %+v", res.Diagnostics)
	}
}

// TestTailRule: a percentile gets a verdict only when every trial behind it
// (the platform's and the baseline's) had at least MinTailSamples(q)
// observations.
func TestTailRule(t *testing.T) {
	tests := []struct {
		name         string
		base, x      int64
		q            float64
		verdict      string
		minSamples   int64
		fewSamples   bool
		maxHalfWidth bool // MaxHalfWidth may still be ok: such cells never qualify
	}{
		{"enough", 5000, 1000, 0.99, "worse", 1000, false, true},
		{"platform short", 5000, 999, 0.99, "p99<1000", 999, true, true},
		{"baseline short", 500, 5000, 0.99, "p99<1000", 500, true, true},
		{"p99.9 needs 10000", 20000, 9000, 0.999, "p99.9<10000", 9000, true, true},
		{"unknown counts (old trials)", 0, 0, 0.99, "worse", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ts []store.Trial
			for r := 1; r <= 5; r++ {
				for _, p := range []string{"base", "x"} {
					v, n := 10.0, tt.base
					if p == "x" {
						v, n = 13+0.1*float64(r), tt.x
					}
					ts = append(ts, store.Trial{Workload: "w", Platform: p, Round: r, Metrics: []store.Metric{
						{Name: "p99", Unit: "ms", Value: v, Quantile: tt.q, Samples: n}}})
				}
			}
			res := Analyse(ts, Options{Baseline: "base"})
			c := cell(t, res, "w", "p99", "x")
			if c.Verdict != tt.verdict || c.MinSamples != tt.minSamples {
				t.Errorf("verdict %q min samples %d, want %q and %d", c.Verdict, c.MinSamples, tt.verdict, tt.minSamples)
			}
			if got := len(res.Warnings.Of(KindFewSamples)) == 1; got != tt.fewSamples {
				t.Errorf("few-samples warning %v, want %v: %+v", got, tt.fewSamples, res.Warnings)
			}
			if _, ok := res.MaxHalfWidth(nil); ok != tt.maxHalfWidth {
				t.Errorf("MaxHalfWidth ok %v", ok)
			}
			if tt.q > 0 && res.Tables[0].Quantile != tt.q {
				t.Errorf("table quantile %v", res.Tables[0].Quantile)
			}
		})
	}
}

// TestDisturbed: trials whose outside CPU exceeded the limit are listed and
// warned about, one summary line with the count and the worst.
func TestDisturbed(t *testing.T) {
	outside := map[[2]any]float64{{1, "base"}: 2, {2, "x"}: 7.5, {3, "base"}: 23, {4, "x"}: 5}
	var ts []store.Trial
	for r := 1; r <= 5; r++ {
		for _, p := range []string{"base", "x"} {
			tr := trial("w", p, r, 100, 1)
			tr.Metrics = append(tr.Metrics, store.Metric{Name: OutsideMetric, Unit: "%", Value: outside[[2]any{r, p}], Diagnostic: true})
			ts = append(ts, tr)
		}
	}
	ts = append(ts, warmup(trial("w", "x", 0, 1, 1)))
	ts[len(ts)-1].Metrics = append(ts[len(ts)-1].Metrics, store.Metric{Name: OutsideMetric, Value: 90, Diagnostic: true})
	for _, tt := range []struct {
		limit float64
		want  int
		line  string
	}{
		{0, 2, "disturbed: CPU outside the run above the limit in 2 trials, worst 23% of a core (round 3 w on base)"},
		{10, 1, "disturbed: CPU outside the run above the limit: round 3 w on base (23% of a core)"},
		{50, 0, ""},
	} {
		res := Analyse(ts, Options{Baseline: "base", OutsideCPUMax: tt.limit})
		if len(res.Disturbed) != tt.want || res.Counted != 10 {
			t.Errorf("limit %v: %d disturbed of %d counted, want %d of 10 (warm-up not counted)", tt.limit, len(res.Disturbed), res.Counted, tt.want)
		}
		var line string
		for _, l := range res.Warnings.Summary() {
			if strings.HasPrefix(l, "disturbed") {
				line = l
			}
		}
		if line != tt.line {
			t.Errorf("limit %v: summary %q, want %q", tt.limit, line, tt.line)
		}
	}
}

// TestWarningSummary: one line per kind, with the count and the worst case,
// in a fixed order; the full list keeps every warning.
func TestWarningSummary(t *testing.T) {
	ws := Warnings{
		{Kind: KindNoisy, Subject: "a w m", Severity: 0.12, Shown: "12.0%", Text: "a"},
		{Kind: KindFewPairs, Subject: "b w m", Severity: 2, Shown: "n=3", Text: "b"},
		{Kind: KindNoisy, Subject: "c w p99", Severity: 0.18, Shown: "18.0%", Text: "c"},
		{Kind: KindNoisy, Subject: "d w m", Severity: 0.11, Shown: "11.0%", Text: "d"},
	}
	want := []string{
		"no verdict: too few pairs: b w m (n=3)",
		"CV > 10% in 3 cells, worst 18.0% (c w p99)",
	}
	if got := ws.Summary(); !reflect.DeepEqual(got, want) {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := ws.Texts(); !reflect.DeepEqual(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("Texts = %q", got)
	}
}

// TestCeiling checks the rule for find-max results that stopped at a limit
// of the search's own: such a cell is a lower bound with no ratio and no
// verdict, and so is every cell of a table whose baseline reached one.
func TestCeiling(t *testing.T) {
	const peak = "peak_users"
	// at builds a counted find-max trial; limit, when set, is the ceiling
	// the trial's search reached.
	at := func(p string, r int, v float64, limit string, below bool) store.Trial {
		tr := store.Trial{Workload: "auction", Platform: p, Round: r,
			Metrics: []store.Metric{{Name: peak, Unit: "users", HigherIsBetter: true, Value: v}}}
		if limit != "" {
			tr.Notes = []string{"find-max over users", search.Ceiling{Metric: peak, Value: v, Is: limit, Below: below}.Note()}
		}
		return tr
	}
	tests := []struct {
		name string
		// limits[p][r-1] is the ceiling trial r of platform p reached ("" none,
		// "f" the floor: every load failed).
		limits  map[string][]string
		values  map[string][]float64
		want    map[string]string // platform -> CeilingText
		noRatio map[string]bool
		op      map[string]string // platform -> BoundOp, where not ">="
	}{{
		name:    "every search at the data's limit",
		limits:  map[string][]string{"native": {"d", "d", "d", "d", "d"}, "docker-nat": {"d", "d", "d", "d", "d"}},
		values:  map[string][]float64{"native": {3000, 3000, 3000, 3000, 3000}, "docker-nat": {3000, 3000, 3000, 3000, 3000}},
		want:    map[string]string{"native": "the data's limit", "docker-nat": "the data's limit"},
		noRatio: map[string]bool{"docker-nat": true},
	}, {
		name:    "some trials of the other platform",
		limits:  map[string][]string{"native": {"", "", "", "", ""}, "docker-nat": {"", "d", "", "d", ""}},
		values:  map[string][]float64{"native": {2000, 2100, 1900, 2000, 2050}, "docker-nat": {1800, 3000, 1700, 3000, 1900}},
		want:    map[string]string{"native": "", "docker-nat": "the data's limit in 2 of 5 trials"},
		noRatio: map[string]bool{"docker-nat": true},
	}, {
		name:    "only the baseline",
		limits:  map[string][]string{"native": {"d", "", "", "", ""}, "docker-nat": {"", "", "", "", ""}},
		values:  map[string][]float64{"native": {3000, 2100, 1900, 2000, 2050}, "docker-nat": {1800, 1900, 1700, 1800, 1900}},
		want:    map[string]string{"native": "the data's limit in 1 of 5 trials", "docker-nat": ""},
		noRatio: map[string]bool{"docker-nat": true},
	}, {
		name:    "every load failed on the other platform: an upper bound",
		limits:  map[string][]string{"native": {"", "", "", "", ""}, "docker-nat": {"f", "f", "f", "f", "f"}},
		values:  map[string][]float64{"native": {7900, 7800, 8000, 7950, 7900}, "docker-nat": {166, 166, 166, 166, 166}},
		want:    map[string]string{"native": "", "docker-nat": "the lowest rate tried"},
		noRatio: map[string]bool{"docker-nat": true},
		op:      map[string]string{"docker-nat": "<"},
	}, {
		name:    "no ceiling: ratios as usual",
		limits:  map[string][]string{"native": {"", "", "", "", ""}, "docker-nat": {"", "", "", "", ""}},
		values:  map[string][]float64{"native": {2000, 2100, 1900, 2000, 2050}, "docker-nat": {1800, 1900, 1700, 1800, 1900}},
		want:    map[string]string{"native": "", "docker-nat": ""},
		noRatio: map[string]bool{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var trials []store.Trial
			for _, p := range []string{"native", "docker-nat"} {
				for i, v := range tc.values[p] {
					limit, below := "", false
					switch tc.limits[p][i] {
					case "d":
						limit = "the data's limit"
					case "f":
						limit, below = "the lowest rate tried", true
					}
					trials = append(trials, at(p, i+1, v, limit, below))
				}
			}
			res := Analyse(trials, Options{Baseline: "native", Platforms: []string{"native", "docker-nat"}})
			for _, p := range []string{"native", "docker-nat"} {
				c := cell(t, res, "auction", peak, p)
				if got := c.CeilingText(); got != tc.want[p] {
					t.Errorf("%s: CeilingText %q, want %q", p, got, tc.want[p])
				}
				wantOp := cmp.Or(tc.op[p], ">=")
				if c.BoundOp() != wantOp {
					t.Errorf("%s: BoundOp %q, want %q", p, c.BoundOp(), wantOp)
				}
				if wantOp == "<" && !strings.HasPrefix(c.NoVerdict, "an upper bound") {
					t.Errorf("%s: no verdict %q, want it called an upper bound", p, c.NoVerdict)
				}
				if c.IsBaseline {
					continue
				}
				hasRatio := !math.IsNaN(c.Ratio.Ratio)
				if hasRatio == tc.noRatio[p] {
					t.Errorf("%s: ratio %v (verdict %q, %q), want a ratio: %v", p, c.Ratio.Ratio, c.Verdict, c.NoVerdict, !tc.noRatio[p])
				}
				if tc.noRatio[p] && (c.Verdict != VerdictNA || c.NoVerdict == "" || !math.IsNaN(c.Ratio.Lo)) {
					t.Errorf("%s: verdict %q (%q), interval [%v, %v]: want n/a with the reason and no interval", p, c.Verdict, c.NoVerdict, c.Ratio.Lo, c.Ratio.Hi)
				}
			}
			ceilings := len(res.Warnings.Of(KindCeiling))
			wantWarn := 0
			for _, w := range tc.want {
				if w != "" {
					wantWarn++
				}
			}
			if ceilings != wantWarn {
				t.Errorf("%d ceiling warnings, want %d: %v", ceilings, wantWarn, res.Warnings.Texts())
			}
			if _, ok := res.MaxHalfWidth(nil); !ok && len(tc.noRatio) == 0 {
				t.Errorf("MaxHalfWidth not ready without ceilings")
			}
			if hw, ok := res.MaxHalfWidth(nil); len(tc.noRatio) > 0 && (!ok || hw != 0) {
				t.Errorf("MaxHalfWidth = %v, %v: a lower bound must be left out of --until-ci (no verdict ever)", hw, ok)
			}
		})
	}
}
