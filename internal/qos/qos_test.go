package qos

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

// samples is a Latencies over a list of values, exact, for tests.
type samples []time.Duration

func (s samples) Quantile(q float64) time.Duration {
	c := append(samples(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[max(i, 0)]
}

func (s samples) FractionWithin(d time.Duration) float64 {
	n := 0
	for _, v := range s {
		if v <= d {
			n++
		}
	}
	return float64(n) / float64(len(s))
}

// spread is n latencies: n-slow of them at fast, slow at the slow value.
func spread(n, slow int, fast, slowV time.Duration) samples {
	s := make(samples, n)
	for i := range s {
		s[i] = fast
		if i < slow {
			s[i] = slowV
		}
	}
	return s
}

func op(count, failures int, lat samples) Op {
	return Op{Count: int64(count), Failures: int64(failures), Latency: lat}
}

const ms_ = time.Millisecond

func olioInput(home, login int, homeP90 time.Duration, cycle time.Duration) Input {
	return Input{
		Ops: map[string]Op{
			"HomePage": op(home, 0, spread(100, 10, 50*ms_, homeP90)),
			"Login":    op(login, 0, spread(100, 5, 20*ms_, 400*ms_)),
		},
		CycleTarget: 5 * time.Second, CycleAchieved: cycle,
	}
}

func olio() Set {
	return Faban(FabanSpec{
		Mix:    map[string]float64{"HomePage": 60, "Login": 40},
		Limits: map[string]time.Duration{"HomePage": 250 * ms_, "Login": 250 * ms_},
	})
}

func TestFaban(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		pass   bool
		failed []string // rule/op of the failed outcomes
	}{
		{"all within", olioInput(600, 400, 300*ms_, 5*time.Second), true, nil},
		// 61.9% vs 60%: 1.9 points, inside; 62.1%: outside on both ops.
		{"mix edge inside", olioInput(619, 381, 300*ms_, 5*time.Second), true, nil},
		{"mix off by 2.1 points", olioInput(621, 379, 300*ms_, 5*time.Second), false, []string{"mix/HomePage", "mix/Login"}},
		// 10% of HomePage at the slow value: the p90 is the fast value when
		// exactly 10% are slow, so make 11 of 100 slow via the limit instead.
		{"p90 over the limit", Input{Ops: map[string]Op{
			"HomePage": op(600, 0, spread(100, 11, 50*ms_, 300*ms_)),
			"Login":    op(400, 0, spread(100, 5, 20*ms_, 400*ms_)),
		}, CycleTarget: 5 * time.Second, CycleAchieved: 5 * time.Second}, false, []string{"p90/HomePage"}},
		{"cycle 1.9% long", olioInput(600, 400, 300*ms_, 5095*ms_), true, nil},
		{"cycle 2.1% long", olioInput(600, 400, 300*ms_, 5105*ms_), false, []string{"cycle/"}},
		{"no cycle measured", olioInput(600, 400, 300*ms_, 0), false, []string{"cycle/"}},
		{"nothing ran", Input{Ops: map[string]Op{}, CycleTarget: time.Second, CycleAchieved: time.Second}, false,
			[]string{"mix/HomePage", "mix/Login", "p90/HomePage", "p90/Login"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := olio().Evaluate(tc.in)
			if v.Pass != tc.pass {
				t.Errorf("pass = %v, want %v: %s", v.Pass, tc.pass, v.Summary())
			}
			var failed []string
			for _, o := range v.Failed() {
				failed = append(failed, o.Rule+"/"+o.Op)
			}
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed %v, want %v: %s", failed, tc.failed, v.Summary())
			}
			if len(v.Outcomes) != 5 {
				t.Errorf("%d outcomes, want 5 (2 mix, 2 p90, 1 cycle): every rule's outcome is kept", len(v.Outcomes))
			}
		})
	}
}

func TestWeathervane(t *testing.T) {
	set := Weathervane(WeathervaneSpec{
		Mix:    map[string]float64{"Login": 20, "GetCurrentItem": 80, "GetNextBid": 0},
		PerOp:  map[string]float64{"Login": 0.2},
		Limits: map[string]time.Duration{"Login": 2 * time.Second, "GetCurrentItem": 3 * time.Second, "GetNextBid": 5 * time.Second},
	})
	if err := set.Validate([]string{"Login", "GetCurrentItem", "GetNextBid"}); err != nil {
		t.Fatal(err)
	}
	base := func() map[string]Op {
		return map[string]Op{
			"Login":          op(200, 0, spread(1000, 10, 100*ms_, 2500*ms_)), // 99.0% within
			"GetCurrentItem": op(800, 4, spread(1000, 5, 100*ms_, 4*time.Second)),
			// GetNextBid: 0% target share: its long polls, failures and share
			// are not checked.
			"GetNextBid": op(500, 400, spread(10, 10, time.Minute, time.Minute)),
		}
	}
	tests := []struct {
		name   string
		edit   func(map[string]Op)
		failed string
	}{
		{"pass", func(map[string]Op) {}, ""},
		{"Login 98.9% within", func(m map[string]Op) { m["Login"] = op(200, 0, spread(1000, 11, 100*ms_, 2500*ms_)) }, "within/Login"},
		// Login's share: target 20%, per-op tolerance 20% -> 16%..24%.
		{"Login share 23.9%", func(m map[string]Op) {
			m["Login"] = op(239, 0, spread(1000, 0, ms_, ms_))
			m["GetCurrentItem"] = op(761, 0, spread(1000, 0, ms_, ms_))
		}, ""},
		{"Login share 26%", func(m map[string]Op) {
			m["Login"] = op(260, 0, spread(1000, 0, ms_, ms_))
			m["GetCurrentItem"] = op(740, 0, spread(1000, 0, ms_, ms_))
		}, "mix/Login"},
		// GetCurrentItem at 74% is 7.5% off its 80%: inside the default 10%.
		{"failures 0.6%", func(m map[string]Op) { m["GetCurrentItem"] = op(795, 5, spread(1000, 0, ms_, ms_)) }, "failures/GetCurrentItem"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			v := set.Evaluate(Input{Ops: m})
			var failed []string
			for _, o := range v.Failed() {
				failed = append(failed, o.Rule+"/"+o.Op)
				if o.Op == "GetNextBid" {
					t.Errorf("GetNextBid has a 0%% target share but was checked: %s", o.Text)
				}
			}
			sort.Strings(failed)
			want := strings.Split(tc.failed, ",")
			sort.Strings(want)
			if tc.failed == "" {
				want = nil
			}
			if strings.Join(failed, ",") != strings.Join(want, ",") || v.Pass != (tc.failed == "") {
				t.Errorf("pass %v, failed %v, want %v: %s", v.Pass, failed, want, v.Summary())
			}
			for _, o := range v.Outcomes {
				if o.Op == "GetNextBid" {
					t.Errorf("GetNextBid outcome recorded: %+v", o)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ops := []string{"get", "put"}
	tests := []struct {
		name string
		set  Set
		want string
	}{
		{"unknown op in limits", Set{Percentile{Q: 0.99, Limits: map[string]time.Duration{"gte": ms_}}},
			`qos rule p99 names operation "gte", which the workload does not perform (operations: get, put)`},
		{"unknown op in mix", Faban(FabanSpec{Mix: map[string]float64{"get": 50, "post": 50}, Limits: map[string]time.Duration{"get": ms_}}),
			`operation "post"`},
		{"mix not 100", Faban(FabanSpec{Mix: map[string]float64{"get": 50, "put": 40}, Limits: map[string]time.Duration{"get": ms_}}),
			"add up to 90.00%"},
		{"zero limit", Set{Within{Fraction: 0.99, Limits: map[string]time.Duration{"get": 0}}}, "limit of get is 0s"},
		{"quantile 99", Set{Percentile{Q: 99, Limits: map[string]time.Duration{"get": ms_}}}, "quantile 99"},
		{"failures 2", Set{Failures{Max: 2}}, "share 2"},
		{"failures unknown op", Set{Failures{Max: 0.01, Only: []string{"x"}}}, `operation "x"`},
		{"ok", Set{Percentile{Q: 0.99, Limits: map[string]time.Duration{"get": 10 * ms_}}, Failures{Max: 0.005}}, ""},
	}
	for _, tc := range tests {
		err := tc.set.Validate(ops)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestPercentileHTTPMax is http-max's rule: p99 under 10 ms and at most
// 0.5% failures.
func TestPercentileHTTPMax(t *testing.T) {
	set := Set{Percentile{Q: 0.99, Limits: map[string]time.Duration{"get": 10 * ms_}}, Failures{Max: 0.005}}
	pass := set.Evaluate(Input{Ops: map[string]Op{"get": op(1000, 0, spread(1000, 10, ms_, 50*ms_))}})
	fail := set.Evaluate(Input{Ops: map[string]Op{"get": op(1000, 0, spread(1000, 11, ms_, 50*ms_))}})
	if !pass.Pass || fail.Pass {
		t.Errorf("10 of 1000 slow: %s; 11 of 1000 slow: %s", pass.Summary(), fail.Summary())
	}
	if got := fail.Summary(); got != "fail: get p99 50ms (limit 10ms)" {
		t.Errorf("summary %q", got)
	}
}

func TestDelivered(t *testing.T) {
	r := Set{Delivered{Min: 0.99}}
	in := Input{Due: 1000, Ops: map[string]Op{"get": op(985, 5, spread(10, 0, ms_, ms_))}}
	if v := r.Evaluate(in); !v.Pass {
		t.Errorf("990 of 1000: %s", v.Summary())
	}
	in.Ops["get"] = op(980, 5, spread(10, 0, ms_, ms_))
	if v := r.Evaluate(in); v.Pass || v.Summary() != "fail: 985 of 1000 requests due were answered (98.50%, want >= 99%)" {
		t.Errorf("985 of 1000: %s", v.Summary())
	}
	if v := r.Evaluate(Input{Ops: in.Ops}); v.Pass {
		t.Error("a closed-loop input passed the open-loop delivery rule")
	}
}

func TestOutcomeJSON(t *testing.T) {
	v := Set{Percentile{Q: 0.99, Limits: map[string]time.Duration{"get": ms_}}}.Evaluate(Input{Ops: map[string]Op{}})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("a verdict with nothing measured does not encode: %v", err)
	}
	var back Verdict
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Outcomes[0].Value) || back.Outcomes[0].Text != v.Outcomes[0].Text || back.Outcomes[0].Limit != 1 {
		t.Errorf("round trip: %s -> %+v", b, back)
	}
}

// TestFabanSampleSize scripts short and long intervals through Faban's
// rules as the seed has them (Sigmas 0) and as a quick study uses them
// (Sigmas 3.5): chance among a few hundred operations fails the seed's rules
// but not the sample-aware ones; a gross break fails both; and with many
// operations the sample-aware rules are the seed's again (never looser
// than ±2 points, a p90 allowance that shrinks to 10%).
func TestFabanSampleSize(t *testing.T) {
	mix := map[string]float64{"Home": 26, "Search": 34, "Other": 39, "Rare": 1}
	limits := map[string]time.Duration{"Home": 250 * ms_, "Search": 250 * ms_, "Other": 250 * ms_, "Rare": 500 * ms_}
	fast := func(n int) Op { return op(n, 0, spread(max(n, 1), 0, 50*ms_, 50*ms_)) }
	// interval has total operations with Home's share at home percent and
	// Rare's count and slow ones given; Search and Other share the rest.
	interval := func(total int, home float64, rare, rareSlow int) Input {
		h := int(math.Round(float64(total) * home / 100))
		s := (total - h - rare) * 34 / 73
		in := Input{Ops: map[string]Op{"Home": fast(h), "Search": fast(s), "Other": fast(total - h - rare - s)},
			CycleTarget: 5 * time.Second, CycleAchieved: 5 * time.Second}
		if rare > 0 {
			in.Ops["Rare"] = op(rare, 0, spread(rare, rareSlow, 50*ms_, 900*ms_))
		}
		return in
	}
	tests := []struct {
		name         string
		in           Input
		seed, sample []string // failed rule/op under Sigmas 0 and 3.5
	}{
		{"800 operations, Home 2.5 points low by chance", interval(800, 23.5, 8, 0), []string{"mix/Home"}, nil},
		{"100000 operations, Home 2.5 points low", interval(100000, 23.5, 1000, 0), []string{"mix/Home"}, []string{"mix/Home"}},
		{"800 operations, Home 8 points low", interval(800, 18, 8, 0), []string{"mix/Home", "mix/Other", "mix/Search"}, []string{"mix/Home"}},
		{"one slow Rare of 7", interval(800, 26, 7, 1), []string{"p90/Rare"}, nil},
		{"four slow Rare of 7", interval(800, 26, 7, 4), []string{"p90/Rare"}, []string{"p90/Rare"}},
		{"no Rare in the interval", interval(800, 26, 0, 0), []string{"p90/Rare"}, nil},
		{"10000 Search, 12% over the limit", func() Input {
			in := interval(30000, 26, 300, 0)
			in.Ops["Search"] = op(10000, 0, spread(10000, 1200, 50*ms_, 300*ms_))
			return in
		}(), []string{"p90/Search"}, []string{"p90/Search"}},
		{"10000 Search, 10.5% over the limit", func() Input {
			in := interval(30000, 26, 300, 0)
			in.Ops["Search"] = op(10000, 0, spread(10000, 1050, 50*ms_, 300*ms_))
			return in
		}(), []string{"p90/Search"}, nil},
	}
	for _, tc := range tests {
		for _, sigmas := range []float64{0, 3.5} {
			set := Faban(FabanSpec{Mix: mix, Limits: limits, Sigmas: sigmas})
			if err := set.Validate([]string{"Home", "Search", "Other", "Rare"}); err != nil {
				t.Fatal(err)
			}
			v := set.Evaluate(tc.in)
			var failed []string
			for _, o := range v.Failed() {
				failed = append(failed, o.Rule+"/"+o.Op)
			}
			sort.Strings(failed)
			want := tc.seed
			if sigmas > 0 {
				want = tc.sample
			}
			if strings.Join(failed, ",") != strings.Join(want, ",") || v.Pass != (len(want) == 0) {
				t.Errorf("%s, sigmas %g: failed %v, want %v: %s", tc.name, sigmas, failed, want, v.Summary())
			}
			if sigmas > 0 {
				for _, o := range v.Outcomes {
					if o.Rule == "mix" && o.Limit < 2 {
						t.Errorf("%s: mix tolerance %v below the seed's 2 points", tc.name, o.Limit)
					}
				}
			}
		}
	}
}

func TestSampleSizeTolerances(t *testing.T) {
	m := MixPoints{Points: 2, Sigmas: 3.5}
	for _, tc := range []struct {
		p    float64
		n    int64
		want float64
	}{
		{33.37, 800, 3.5 * 100 * math.Sqrt(0.3337*0.6663/800)}, // 5.83 points
		{33.37, 1000000, 2}, // the seed's
		{33.37, 0, 2},
		{0, 800, 2},
	} {
		if got := m.Tol(tc.p, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Tol(%g, %d) = %g, want %g", tc.p, tc.n, got, tc.want)
		}
	}
	if got := (MixPoints{Points: 2}).Tol(33.37, 800); got != 2 {
		t.Errorf("Sigmas 0: tolerance %g, want the seed's 2", got)
	}
	p := Percentile{Q: 0.9, Sigmas: 3.5}
	if got, want := p.Allowed(7), 0.1+3.5*math.Sqrt(0.09/7); math.Abs(got-want) > 1e-12 {
		t.Errorf("Allowed(7) = %g, want %g", got, want)
	}
	if got := (Percentile{Q: 0.9}).Allowed(7); math.Abs(got-0.1) > 1e-12 {
		t.Errorf("Sigmas 0: Allowed(7) = %g, want 0.1", got)
	}
	for _, bad := range []Rule{MixPoints{Target: map[string]float64{"a": 100}, Points: 2, Sigmas: -1},
		Percentile{Q: 0.9, Limits: map[string]time.Duration{"a": ms_}, Sigmas: math.NaN()}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "sigmas") {
			t.Errorf("%T with bad sigmas: error %v", bad, err)
		}
	}
}
