package web20

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/workload"
)

func newInstance(t *testing.T, params map[string]string, quick bool) (*Instance, error) {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), params, quick)
	if err != nil {
		return nil, err
	}
	in, err := Workload{}.New(v)
	if err != nil {
		return nil, err
	}
	return in.(*Instance), nil
}

func TestNewDefaults(t *testing.T) {
	in, err := newInstance(t, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s := in.s
	if s.Users != 1500 || s.RampUp != 5*time.Minute || s.RampDown != 5*time.Minute || s.Cycle != 5*time.Second ||
		s.Children != 16 || s.Workers != 4 || s.Connections != 4096 || s.Mix != TargetMix || s.Matrix != DefaultMatrix {
		t.Errorf("defaults are not the seed's: %+v", s)
	}
	if got := s.dataSize(); got.Users != 1500 || got.Seed != 1 {
		t.Errorf("data size %v, want the users", got)
	}
	if s.Topology.Instances != DefaultInstances() || s.Topology.Layout != "container-per-server" || len(s.Topology.Roles) != 0 {
		t.Errorf("topology %+v", s.Topology)
	}
	q, err := newInstance(t, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if q.s.Users != QuickUsers || q.s.RampUp != 10*time.Second || q.s.Topology.Instances != 2 {
		t.Errorf("quick: %+v", q.s)
	}
	f, err := newInstance(t, map[string]string{"mode": "find-max"}, true)
	if err != nil {
		t.Fatal(err)
	}
	// Quick: the search's maximum, and the data, sized from the machine for
	// its 2 instances; the search from a quarter of it; the sample-aware
	// rules. The full study's are the seed's.
	if u := MachineUsers(2); f.s.dataSize().Users != u || f.s.Search.Max != float64(u) || f.s.Search.Start != math.Round(float64(u)/4) || !f.s.Search.Integer || f.s.Sigmas != QuickSigmas {
		t.Errorf("find-max quick: data %v, search %+v, sigmas %g; want %d users sized from the machine", f.s.dataSize(), f.s.Search, f.s.Sigmas, u)
	}
	full, err := newInstance(t, map[string]string{"mode": "find-max"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if full.s.Search.Max != 3000 || full.s.Search.Start != 200 || full.s.Sigmas != 0 || full.s.MaxSized || full.s.Search.Step != search.DefaultStep {
		t.Errorf("find-max full: search %+v sigmas %g, want the seed's rules and Weathervane's steps", full.s.Search, full.s.Sigmas)
	}
	for _, r := range full.rules() {
		switch r := r.(type) {
		case qos.MixPoints:
			if r.Sigmas != 0 || r.Points != 2 {
				t.Errorf("full mix rule %+v, want Faban's ±2 points exactly", r)
			}
		case qos.Percentile:
			if r.Sigmas != 0 {
				t.Errorf("full p90 rule %+v, want Faban's exactly", r)
			}
		}
	}
	if ms := f.Metrics(); ms[0].Name != MetricMaxUsers || !ms[0].HigherIsBetter {
		t.Errorf("find-max metrics start with %+v", ms[0])
	}
}

// TestNewRejects: bad input is refused before anything starts, with what
// to change.
func TestNewRejects(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"users": "300", "data_users": "200"}, "parameters users and data_users: 300 users per instance exceed the 200 the Olio data is loaded for"},
		{map[string]string{"mode": "find-max", "max_users": "900", "data_users": "500"}, "parameters max_users and data_users: 900 users"},
		{map[string]string{"mix": "26,10,33,24,2,1,1"}, "web20 mix sums to 97.00%, want 100%"},
		{map[string]string{"mix": "26,10,33"}, "3 values, want 7"},
		{map[string]string{"mix": "26,10,33,24,2,1,x"}, `AddEvent: "x" is not a number`},
		{map[string]string{"matrix": "0,11,52,36,0,1,0;0,0,60,20,0,0,20;21,6,41,31,0,1,0;72,21,0,0,6,1,0;52,6,0,31,11,0,0;0,0,0,0,100,0,0;0,0,0,90,0,0,0"},
			"row AddEvent sums to 90.00%"},
		{map[string]string{"matrix": "1,2"}, "1 rows, want 7"},
		{map[string]string{"buffer_pool": "1k"}, "at least 16m"},
		{map[string]string{"data_users": "10"}, "want 25 to 150000 concurrent users"},
		{map[string]string{"max_failures": "1"}, "max_failures 1"},
		{map[string]string{"conditional_share": "2"}, "conditional_share 2"},
		{map[string]string{"drivers": "2", "users": "1", "data_users": "25"}, "1 users cannot be shared by 2 driver processes"},
		{map[string]string{"pin": "spread", "instances": "8"}, "spread needs one core"},
		{map[string]string{"mode": "find-max", "start_users": "500", "max_users": "100"}, "maximum 100 is below its start 500"},
	}
	for _, tc := range tests {
		_, err := newInstance(t, tc.params, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.params, err, tc.want)
		}
	}
}

func TestBehaviourParamsRoundTrip(t *testing.T) {
	m := DefaultMatrix
	m[HomePage] = [NumOps]float64{10, 10, 42, 36, 0, 1, 1}
	c := BehaviourConfig{Bases: []string{"http://127.0.0.1:1", "http://10.0.0.2:80"}, Counts: olio.Counts{Persons: 2500, Tags: 622, Events: 1866},
		UsersPerInstance: 7, Matrix: m, ConditionalShare: -1, AttendChance: 0.25, RequestTimeout: 3 * time.Second}
	got, err := parseBehaviour(c.Params())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Bases, c.Bases) || got.Counts != c.Counts || got.UsersPerInstance != 7 || got.Matrix != m ||
		got.ConditionalShare != -1 || got.AttendChance != 0.25 || got.RequestTimeout != 3*time.Second {
		t.Errorf("round trip: %+v, want %+v", got, c)
	}
	for _, bad := range []map[string]string{
		{ParamBases: ""},
		{ParamBases: "http://a:1", ParamPersons: "0", ParamTags: "1", ParamEvents: "1", ParamUsers: "1"},
	} {
		if _, err := parseBehaviour(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestFactorySpreadsUsers: user id browses instance id % N, and the
// driver's operation names are the seed's.
func TestFactorySpreadsUsers(t *testing.T) {
	c := BehaviourConfig{Bases: []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"},
		Counts: olio.Counts{Persons: 100, Tags: 10, Events: 30}, UsersPerInstance: 2, Matrix: DefaultMatrix, RequestTimeout: time.Second}
	f, err := driver.Lookup(Behaviour, c.Params())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if want := []string{"HomePage", "Login", "TagSearch", "EventDetail", "PersonDetail", "AddPerson", "AddEvent"}; !slices.Equal(f.Ops(), want) {
		t.Errorf("ops %v", f.Ops())
	}
	for id := range 6 {
		u, err := f.NewUser(t.Context(), id, rand.New(rand.NewPCG(1, uint64(id))))
		if err != nil {
			t.Fatal(err)
		}
		du := u.(*driverUser)
		if want := c.Bases[id%3]; du.u.site.base != want {
			t.Errorf("user %d browses %s, want %s", id, du.u.site.base, want)
		}
		if op, _ := du.Next(); op != "HomePage" {
			t.Errorf("user %d starts with %s", id, op)
		}
	}
}

// TestSessionKeepsUsers: in a session the users of one driver run come
// back in the next as they were (their place in the chain, their login and
// cache), a session cannot be reopened on other sites, and a released
// session's users are gone; the tag is checked and carried to the sites.
func TestSessionKeepsUsers(t *testing.T) {
	c := BehaviourConfig{Bases: []string{"http://127.0.0.1:1"}, Counts: olio.Counts{Persons: 100, Tags: 10, Events: 30},
		UsersPerInstance: 2, Matrix: DefaultMatrix, RequestTimeout: time.Second, Tag: "k1", Session: "test-run/r0"}
	defer ReleaseSession(c.Session)
	f1, err := driver.Lookup(Behaviour, c.Params())
	if err != nil {
		t.Fatal(err)
	}
	u1, err := f1.NewUser(t.Context(), 3, rand.New(rand.NewPCG(1, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if op, _ := u1.Next(); op != "HomePage" {
		t.Fatalf("a new user starts with %s", op)
	}
	f1.Close() // the end of the first run: a session's sites stay open
	f2, err := driver.Lookup(Behaviour, c.Params())
	if err != nil {
		t.Fatal(err)
	}
	u2, _ := f2.NewUser(t.Context(), 3, rand.New(rand.NewPCG(9, 9)))
	if u2 != u1 {
		t.Fatal("the session's user 3 did not come back in the next run")
	}
	// The chain never goes from HomePage to HomePage: a user that goes on
	// does not start over there.
	if op, _ := u2.Next(); op == "HomePage" {
		t.Error("the user started over at HomePage")
	}
	if u2.(*driverUser).u.site.cfg.Tag != "k1" {
		t.Errorf("the sites' tag is %q", u2.(*driverUser).u.site.cfg.Tag)
	}
	other := c
	other.Bases = []string{"http://127.0.0.1:2"}
	if _, err := driver.Lookup(Behaviour, other.Params()); err == nil {
		t.Error("a session reopened on another site")
	}
	ReleaseSession(c.Session)
	f3, err := driver.Lookup(Behaviour, c.Params())
	if err != nil {
		t.Fatal(err)
	}
	u3, _ := f3.NewUser(t.Context(), 3, rand.New(rand.NewPCG(1, 3)))
	if u3 == u1 {
		t.Error("a released session's user came back")
	}
	// Without a session every run's users are new.
	c.Session = ""
	g, _ := driver.Lookup(Behaviour, c.Params())
	defer g.Close()
	a, _ := g.NewUser(t.Context(), 3, rand.New(rand.NewPCG(1, 3)))
	b, _ := g.NewUser(t.Context(), 3, rand.New(rand.NewPCG(1, 3)))
	if a == b {
		t.Error("without a session a user came back")
	}
	bad := c.Params()
	bad[ParamTag] = "Tag_with-space"
	if _, err := parseBehaviour(bad); err == nil {
		t.Error("a tag that does not fit a user name was accepted")
	}
}

// TestRecordValues: every declared metric has a value, the per-rule
// outcomes come from the verdict, and percentiles say how many operations
// they come from.
func TestRecordValues(t *testing.T) {
	in, err := newInstance(t, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	r := &driver.Result{Ops: map[string]*driver.OpResult{}, Phases: driver.Phases{Steady: 10 * time.Second},
		Cycle: driver.CycleStats{N: 100, Target: 500 * time.Second, Achieved: 520 * time.Second, Late: 3}}
	for i, op := range Ops {
		h := driver.NewHist()
		for k := range 200 {
			h.Record(time.Duration(k+1) * time.Millisecond * time.Duration(i+1))
		}
		r.Ops[op.String()] = &driver.OpResult{Count: int64(200 * (i + 1)), Latency: h, Failures: map[string]int64{}}
	}
	r.Ops["AddEvent"].Failures["HTTP 500"] = 7
	rec := in.newRecord(r, 100, 1)
	rec.QoS = in.rules().Evaluate(r.QoS())
	v := rec.values()
	for _, m := range in.Metrics() {
		if _, ok := v[m.Name]; !ok && !strings.HasPrefix(m.Name, "cpu_") && !strings.HasPrefix(m.Name, "run_cpu_") && !strings.HasSuffix(m.Name, "_cpu_pct") {
			t.Errorf("metric %s has no value", m.Name)
		}
		if m.Quantile > 0 && rec.samples()[m.Name] <= 0 {
			t.Errorf("percentile %s without its sample count", m.Name)
		}
	}
	// The mix is far off the target (equal latencies, counts 200..1400):
	// the mix rule fails, the cycle rule (4% off) fails, AddEvent's p90
	// (about 1.26 s) fails its 500 ms limit, HomePage's (180 ms) passes.
	checks := map[string]float64{
		MetricQoSPass: 0, MetricCyclePass: 0, "HomePage.p90_pass": 1, "AddEvent.p90_pass": 0,
		"HomePage.mix_pass": 0, MetricFailuresPass: 1, "AddEvent.failed": 7, "HomePage.p90_limit_ms": 250, "AddEvent.p90_limit_ms": 500,
		MetricCycle: 5200, MetricCycleTarget: 5000, MetricLateCycles: 3,
	}
	for k, want := range checks {
		if math.Abs(v[k]-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, v[k], want)
		}
	}
	if got := v["HomePage.p90_ms"]; got < 170 || got > 190 {
		t.Errorf("HomePage p90 %v ms, want about 180", got)
	}
	if got := v["HomePage.mix_pct"]; math.Abs(got-100*200/5600.0) > 1e-9 {
		t.Errorf("HomePage share %v", got)
	}
	// A find-max step's record survives its JSON (NaN latencies as null).
	r.Ops["AddPerson"] = &driver.OpResult{Latency: driver.NewHist(), Failures: map[string]int64{"transport": 2}}
	rec = in.newRecord(r, 100, 1)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Ops["AddPerson"].P90Ms) || back.Ops["HomePage"].P90Ms != rec.Ops["HomePage"].P90Ms {
		t.Errorf("round trip: %+v", back.Ops)
	}
}

func TestRulesAreFaban(t *testing.T) {
	in, err := newInstance(t, map[string]string{"limit_frequent": "200ms"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range in.rules() {
		names = append(names, r.Name())
	}
	if want := []string{"mix", "p90", "cycle", "failures"}; !slices.Equal(names, want) {
		t.Errorf("rules %v, want %v", names, want)
	}
	p := in.rules()[1].(qos.Percentile)
	if p.Limits["Login"] != 200*time.Millisecond || p.Limits["PersonDetail"] != 500*time.Millisecond {
		t.Errorf("limits %v", p.Limits)
	}
}

// TestEstimate: a fixed trial is its ramps and the trial beside the stack's
// start; a find-max trial (quick: from a quarter of the machine-sized
// maximum, doubling past the assumed peak of 0.45 of it, in 2 coarse steps,
// then fine steps within the cap of 7) is its steps, each a step ramp, the
// trial, the ramp-down and the step's overhead.
func TestEstimate(t *testing.T) {
	fixed, err := newInstance(t, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fixed.Estimate(20*time.Second), stackEstimate+fixed.s.RampUp+20*time.Second+fixed.s.RampDown; got != want || fixed.s.RampUp == 0 {
		t.Errorf("fixed: %v, want %v", got, want)
	}
	fm, err := newInstance(t, map[string]string{"mode": ModeFindMax}, true)
	if err != nil {
		t.Fatal(err)
	}
	if fm.s.Search.Max != float64(MachineUsers(fm.s.Topology.Instances)) || fm.s.Search.Start != math.Round(fm.s.Search.Max/4) || !fm.s.MaxSized {
		t.Errorf("quick find-max: start %g, max %g (sized %v), want a quarter of %d and it", fm.s.Search.Start, fm.s.Search.Max, fm.s.MaxSized, MachineUsers(fm.s.Topology.Instances))
	}
	steps, err := search.Simulate(fm.s.Search, fm.s.expectedPeak())
	if err != nil {
		t.Fatal(err)
	}
	coarse := 0
	for _, st := range steps {
		if st.Phase == search.Coarse {
			coarse++
		}
	}
	if coarse != 2 || len(steps) <= coarse || len(steps) > fm.s.Search.MaxSteps {
		t.Errorf("find-max: %d steps, %d coarse: %v", len(steps), coarse, steps)
	}
	fails := 0
	for _, st := range steps {
		if !st.Pass {
			fails++
		}
	}
	if got, want := fm.Estimate(20*time.Second), stackEstimate+time.Duration(len(steps))*(fm.s.StepRamp+20*time.Second+fm.s.RampDown+stepOverhead)+time.Duration(fails)*settleEstimate; got != want || fails == 0 {
		t.Errorf("find-max: %v, want %v", got, want)
	}
}
