package auction

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	app "github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/qos"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// newInstance builds an instance from the defaults (quick ones when quick)
// and the given overrides.
func newInstance(t *testing.T, params map[string]string, quick bool) (*Instance, error) {
	t.Helper()
	w := Workload{}
	v, err := workload.Resolve(w.Params(), params, quick)
	if err != nil {
		return nil, err
	}
	in, err := w.New(v)
	if err != nil {
		return nil, err
	}
	return in.(*Instance), nil
}

func TestNewRefusesWhatCannotRun(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"max_users": "300", "search_max": "500"}, "search_max 500 is beyond the data loaded for max_users 300"},
		{map[string]string{"max_users": "1500", "start_users": "2000"}, "start_users 2000 is above the most users the search may try (1500)"},
		{map[string]string{"instances": "2"}, "the auction runs one instance"},
		{map[string]string{"app_heap": "lots"}, "heap"},
		{map[string]string{"item_idle": "10ms"}, "at least 100ms"},
		{map[string]string{"tolerance": "0.7"}, "below 0.5"},
		{map[string]string{"mix_tolerance": "1.5"}, "below 1"},
		{map[string]string{"layout": "container-per-instance", "cpusets": "nope:0"}, "no role"},
		{map[string]string{"drivers": "2", "start_users": "1"}, "users cannot be shared by 2 driver processes"},
	}
	for _, tt := range tests {
		_, err := newInstance(t, tt.params, false)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("params %v: error %v, want one containing %q", tt.params, err, tt.want)
		}
	}
	for _, quick := range []bool{false, true} {
		in, err := newInstance(t, nil, quick)
		if err != nil {
			t.Fatalf("defaults (quick %v): %v", quick, err)
		}
		if in.searchMax != in.size.MaxUsers {
			t.Errorf("search_max 0 should be max_users, got %d", in.searchMax)
		}
		if n := len(in.Metrics()); n != 2+6+4+3 {
			t.Errorf("%d metrics", n)
		}
	}
}

func TestTopology(t *testing.T) {
	in, err := newInstance(t, map[string]string{"app_servers": "3", "db_pool": "15"}, false)
	if err != nil {
		t.Fatal(err)
	}
	topo := in.stack([]byte("war"), "/tmp/nn-x-pgdata").topology()
	p, err := topo.Plan(topology.Machine{CPUs: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	var names, groups []string
	for _, s := range p.Servers {
		names = append(names, s.ID.Name())
		if !slices.Contains(groups, s.Group) {
			groups = append(groups, s.Group)
		}
		if s.Entry != (s.ID.Role == RoleWeb) {
			t.Errorf("%s entry %v: only nginx is the driver's", s.ID.Name(), s.Entry)
		}
	}
	if got := strings.Join(names, ","); got != "i0-db-0,i0-broker-0,i0-app-0,i0-app-1,i0-app-2,i0-web-0" {
		t.Errorf("start order %s", got)
	}
	if len(groups) != 6 {
		t.Errorf("groups %v: want a container per server", groups)
	}
	if len(p.Waves) != 3 {
		t.Errorf("%d waves, want db and broker, then the app servers, then nginx", len(p.Waves))
	}
	db, _ := topo.Role(RoleDB)
	spec, err := db.Spec(topology.ServerID{Role: RoleDB}, fakePeers{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0] != (platform.Volume{HostPath: "/tmp/nn-x-pgdata", Path: "/tmp/nn-x-pgdata", Own: true}) {
		t.Errorf("db volumes %+v: want the trial's copy at the same path everywhere, owned by postgres", spec.Volumes)
	}
	argv := strings.Join(spec.Command(listenOf(spec)), " ")
	var conf string
	for _, f := range spec.Files {
		if f.Path == "postgresql.conf" {
			conf = string(f.Content)
		}
	}
	if !strings.Contains(argv, " /tmp/nn-x-pgdata ") || !strings.Contains(conf, "max_connections = 55\n") {
		t.Errorf("postgres %s with\n%s: want the copy and 3 x 15 + 10 connections", argv, conf)
	}
	web, _ := topo.Role(RoleWeb)
	if !slices.Equal(web.After, []string{RoleApp}) || !web.Entry {
		t.Errorf("web role %+v", web)
	}
}

// listenOf is where a spec's server would listen in a container.
func listenOf(spec platform.Spec) platform.Listen {
	ports := map[string]int{}
	for i, p := range spec.Ports {
		ports[p] = 40000 + i
	}
	return platform.Listen{Host: "0.0.0.0", Ports: ports, Dir: platform.ContainerDir}
}

func TestMixRule(t *testing.T) {
	m := MainMix()
	var sum float64
	for op, p := range m {
		sum += p
		if slices.Contains(FollowerOps, op) {
			t.Errorf("the main mix holds %s", op)
		}
	}
	if math.Abs(sum-100) > 1e-9 {
		t.Errorf("main mix sums to %v", sum)
	}
	// GetActiveAuctions: 15.33 of the 53.93 the main chain has.
	if got := m[OpGetActiveAuctions]; math.Abs(got-15.33*100/53.93) > 0.01 {
		t.Errorf("GetActiveAuctions target %.3f", got)
	}
	r := MixRule{Target: m, Tolerance: 0.1, Sigmas: 3}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	// A 28% share among 1000 operations: 3 standard errors are 13.6%
	// relative; among a million the seed's 10% holds.
	if tol := r.Tol(28.4, 1000); math.Abs(tol-3*math.Sqrt(0.284*0.716/1000)/0.284) > 1e-9 {
		t.Errorf("tolerance at 1000 ops %v", tol)
	}
	if tol := r.Tol(28.4, 1_000_000); tol != 0.1 {
		t.Errorf("tolerance at a million ops %v, want the seed's 0.1", tol)
	}
	if tol := (MixRule{Target: m, Tolerance: 0.1}).Tol(0.5, 100); tol != 0.1 {
		t.Errorf("sigmas 0: tolerance %v, want 0.1", tol)
	}
	// Operations exactly at their targets pass; doubling one fails it.
	in := qos.Input{Ops: map[string]qos.Op{}}
	for op, p := range m {
		in.Ops[op] = qos.Op{Count: int64(math.Round(p * 1000))}
	}
	in.Ops[OpGetNextBid] = qos.Op{Count: 1e6} // not judged
	if v := (qos.Set{r}).Evaluate(in); !v.Pass {
		t.Errorf("the target mix fails: %s", v.Summary())
	}
	o := in.Ops[OpJoinAuction]
	o.Count *= 2
	in.Ops[OpJoinAuction] = o
	v := (qos.Set{r}).Evaluate(in)
	if v.Pass || !strings.Contains(v.Summary(), "JoinAuction share") {
		t.Errorf("twice the joins: %s", v.Summary())
	}
}

// hist is a latency distribution for rule tests: a share fast within every
// limit, the rest at 10 s.
type hist struct{ fast float64 }

func (h hist) Quantile(q float64) time.Duration {
	if q <= h.fast {
		return time.Millisecond
	}
	return 10 * time.Second
}
func (h hist) FractionWithin(d time.Duration) float64 {
	if d >= 10*time.Second {
		return 1
	}
	return h.fast
}

func TestCoarseAndPresentRules(t *testing.T) {
	in := qos.Input{Ops: map[string]qos.Op{
		OpGetActiveAuctions: {Count: 998, Latency: hist{1}},
		OpPlaceBid:          {Count: 1, Failures: 1, Latency: hist{1}},
	}}
	// 999 of 1000 within, one failed: 99.9% passes; a second failure not.
	v := CoarseRules().Evaluate(in)
	if !strings.Contains(v.Summary(), "PlaceBid 1 of 2 failed") {
		t.Errorf("coarse rules: %s", v.Summary())
	}
	all := AllWithin{Fraction: 0.999, Limits: Limits()}
	if o := all.Check(in)[0]; !o.Pass || math.Abs(o.Value-0.999) > 1e-9 {
		t.Errorf("all-within %+v", o)
	}
	in.Ops[OpGetActiveAuctions] = qos.Op{Count: 998, Latency: hist{0.99}}
	if o := all.Check(in)[0]; o.Pass {
		t.Errorf("1%% slow passed the 99.9%% rule: %+v", o)
	}
	// Operations never attempted are the mix rule's business: within and
	// failures judge only what ran.
	for _, o := range Rules(0.1, 3).Evaluate(in).Outcomes {
		if (o.Rule == "within" || o.Rule == "failures") && o.Op != OpGetActiveAuctions && o.Op != OpPlaceBid {
			t.Errorf("%s judged %s, which never ran", o.Rule, o.Op)
		}
	}
	if err := Rules(0.1, 3).Validate(Workload{}.opNames()); err != nil {
		t.Error(err)
	}
}

func (Workload) opNames() []string {
	var ops []string
	for _, o := range Ops {
		ops = append(ops, o.Name)
	}
	return ops
}

func TestFactoryAccountsAndSessions(t *testing.T) {
	params := map[string]string{ParamAddr: "127.0.0.1:1", ParamMaxUsers: "100", ParamRegistered: "500"}
	for _, bad := range []map[string]string{
		{ParamAddr: "nginx", ParamMaxUsers: "1", ParamRegistered: "5"},
		{ParamAddr: "127.0.0.1:1", ParamMaxUsers: "0", ParamRegistered: "5"},
		{ParamAddr: "127.0.0.1:1", ParamMaxUsers: "10", ParamRegistered: "5"},
	} {
		if _, err := driver.Lookup(Behaviour, bad); err == nil {
			t.Errorf("params %v accepted", bad)
		}
	}
	f, err := driver.Lookup(Behaviour, params)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[int64]int{}
	for id := 0; id < 100; id++ {
		u, err := f.NewUser(context.Background(), id, rand.New(rand.NewPCG(1, uint64(id))))
		if err != nil {
			t.Fatal(err)
		}
		acc := u.(*simUser).accounts
		if len(acc.free) != 5 {
			t.Errorf("user %d has %d registered users, want 5", id, len(acc.free))
		}
		for _, r := range acc.free {
			if prev, dup := seen[r]; dup {
				t.Errorf("registered user %d given to users %d and %d", r, prev, id)
			}
			seen[r] = id
		}
	}
	if _, err := f.NewUser(context.Background(), 100, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("user 100 of 100 was made")
	}
	// In a session the same user comes back from one run to the next.
	params[ParamSession] = "test-session"
	defer ReleaseSession("test-session")
	f1, _ := driver.Lookup(Behaviour, params)
	u1, _ := f1.NewUser(context.Background(), 7, rand.New(rand.NewPCG(1, 7)))
	f1.Close()
	f2, _ := driver.Lookup(Behaviour, params)
	u2, _ := f2.NewUser(context.Background(), 7, rand.New(rand.NewPCG(2, 7)))
	if u1 != u2 {
		t.Error("a session's user 7 did not come back")
	}
	other := map[string]string{ParamAddr: "127.0.0.1:2", ParamMaxUsers: "100", ParamRegistered: "500", ParamSession: "test-session"}
	if _, err := driver.Lookup(Behaviour, other); err == nil {
		t.Error("a session reopened with another address")
	}
	ReleaseSession("test-session")
	f3, _ := driver.Lookup(Behaviour, params)
	u3, _ := f3.NewUser(context.Background(), 7, rand.New(rand.NewPCG(1, 7)))
	if u3 == u1 {
		t.Error("a released session's user came back")
	}
}

func TestDriverConfig(t *testing.T) {
	in, err := newInstance(t, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c := in.driverConfig(120, "127.0.0.1:8080", 9*time.Second, "", "s")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Users != 120 || c.Mode != driver.Closed || c.Pacing.Delay.Kind != driver.NormalClips || c.Pacing.Mode != driver.Cycle {
		t.Errorf("config %+v", c)
	}
	if c.Phases.Steady != 9*time.Second || c.Phases.Warmup != in.warmup || c.Phases.RampUp != in.rampUp {
		t.Errorf("phases %+v", c.Phases)
	}
	u := MachineUsers()
	if c.Params[ParamMaxUsers] != strconv.Itoa(u) || c.Params[ParamRegistered] != strconv.Itoa(u*app.UsersPerMaxUser) || !in.sized {
		t.Errorf("params %v: want the data sized from the machine, %d users and their registered users (a quick search should reach a failing step)", c.Params, u)
	}
	notes := strings.Join(in.quickNotes(20*time.Second), " ")
	for _, want := range []string{"shorter than Weathervane's", "within 20%", "20s decision intervals", "3s ramp and 5s warm-up", "mix within 90%", fmt.Sprintf("data for %d users (sized from the machine", u)} {
		if !strings.Contains(notes, want) {
			t.Errorf("quick notes %q lack %q", notes, want)
		}
	}
	full, _ := newInstance(t, map[string]string{"ramp_up": "120s", "step_warmup": "180s", "coarse_interval": "60s", "tolerance": "0.01"}, false)
	if n := full.quickNotes(5 * time.Minute); len(n) != 0 {
		t.Errorf("Weathervane's settings noted as shorter: %q", n)
	}
	def, _ := newInstance(t, nil, false)
	if n := strings.Join(def.quickNotes(time.Minute), " "); !strings.Contains(n, "within 5%") || !strings.Contains(n, "24s ramp and 36s warm-up") || strings.Contains(n, "mix") {
		t.Errorf("the defaults' notes %q: want the 5%% search and the fifth of Weathervane's intervals, not the mix", n)
	}
	if got := in.size.Users(); got != u*app.UsersPerMaxUser {
		t.Errorf("registered users %d", got)
	}
	set, err := newInstance(t, map[string]string{"max_users": "300"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if set.sized || set.size.MaxUsers != 300 || strings.Contains(strings.Join(set.quickNotes(time.Second), " "), "sized from the machine") {
		t.Errorf("max_users 300: size %d, sized %v", set.size.MaxUsers, set.sized)
	}
}

// TestEstimate: the search as search.Simulate plays it against the peak the
// machine's size assumes (peakShare of MachineUsers, or the search's
// maximum if lower), coarse steps deciding over the coarse interval.
func TestEstimate(t *testing.T) {
	tests := []struct {
		params        map[string]string
		quick         bool
		trial         time.Duration
		coarse, steps int // steps: 0 = not checked
	}{
		// From a quarter of the machine-sized data (1700 of 6800 on 2
		// CPUs): it passes, 1.5 times it fails, fine steps back to the
		// expected peak (0.27 of the data) as the quiet run of
		// 20261127-052428-8d4a did.
		{nil, true, 8 * time.Second, 2, 6},
		// Full: from 1700 doubling to 3400, which fails.
		{nil, false, time.Minute, 2, 0},
		// Data for 1500 users: the search passes at its maximum, below
		// the peak the machine's size assumes: 375, 750, 1500.
		{map[string]string{"max_users": "1500"}, false, time.Minute, 3, 3},
		{map[string]string{"max_users": "1500", "start_users": "1500"}, false, time.Minute, 1, 1},
	}
	for _, tt := range tests {
		in, err := newInstance(t, tt.params, tt.quick)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := search.Simulate(in.searchConfig(), in.expectedPeak())
		if err != nil {
			t.Fatal(err)
		}
		coarse := 0
		for _, st := range steps {
			if st.Phase == search.Coarse {
				coarse++
			}
		}
		if coarse != tt.coarse || tt.steps > 0 && len(steps) != tt.steps || len(steps) > in.maxSteps {
			t.Errorf("params %v quick %v: %d steps, %d coarse; want %d coarse, %d steps, at most %d", tt.params, tt.quick, len(steps), coarse, tt.coarse, tt.steps, in.maxSteps)
		}
		per := in.rampUp + in.warmup
		fails := 0
		for _, st := range steps {
			if !st.Pass {
				fails++
			}
		}
		want := bootEstimate + time.Duration(coarse)*(per+min(in.coarse, tt.trial)) + time.Duration(len(steps)-coarse)*(per+tt.trial) +
			time.Duration(len(steps))*stepOverhead + time.Duration(fails)*settleEstimate
		if got := in.Estimate(tt.trial); got != want {
			t.Errorf("params %v quick %v: estimate %v, want %v", tt.params, tt.quick, got, want)
		}
	}
}

// TestTimedOut: a swamped stack's health check (a request that ran out of
// time) is asked again; any other failure ends the platform's search.
func TestTimedOut(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("nginx 192.0.2.2:1: %w", &url.Error{Op: "Get", URL: "http://192.0.2.2:1/", Err: timeoutErr{}}), true},
		{fmt.Errorf("nginx 192.0.2.2:1: connection refused"), false},
		{fmt.Errorf("nginx 192.0.2.2:1: the home page is not the auction's"), false},
	} {
		if got := timedOut(tc.err); got != tc.want {
			t.Errorf("timedOut(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "Client.Timeout exceeded while awaiting headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
