package oltp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/workload"
)

// resolve returns the workload's values with overrides, as a study gives
// them.
func resolve(t *testing.T, quick bool, over map[string]string) workload.Values {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), over, quick)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNewDefaults(t *testing.T) {
	for _, quick := range []bool{false, true} {
		inst, err := Workload{}.New(resolve(t, quick, nil))
		if err != nil {
			t.Fatalf("quick=%v: defaults refused: %v", quick, err)
		}
		in := inst.(*Instance)
		if in.mode != ModeHTTP || in.threads != SeedThreads || !in.perInst || in.drivers != in.base.Instances {
			t.Errorf("quick=%v: mode %s, %d threads, per-instance %v with %d drivers for %d instances", quick, in.mode, in.threads, in.perInst, in.drivers, in.base.Instances)
		}
		if in.base.Layout != "container-per-instance" || in.base.Instances < 2 || in.base.Instances > SeedInstances {
			t.Errorf("quick=%v: layout %s, %d instances", quick, in.base.Layout, in.base.Instances)
		}
		if quick && (in.base.Instances != 2 || in.rampUp != 5*time.Second) {
			t.Errorf("quick: %d instances, ramp-up %v; want 2 and 5s", in.base.Instances, in.rampUp)
		}
		if in.users() != in.base.Instances*SeedThreads {
			t.Errorf("users %d", in.users())
		}
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		over map[string]string
		want string
	}{
		{"too few Apache processes", map[string]string{"threads": "8", "web_workers": "4"}, "parameter web_workers: 4 Apache processes per instance for 8 threads"},
		{"drivers not a number", map[string]string{"drivers": "many"}, `parameter drivers: "many": want per-instance or a number`},
		{"more drivers than users", map[string]string{"drivers": "9", "instances": "2", "threads": "4"}, "parameter drivers: 9 driver processes for 8 users"},
		{"memory beyond the machine", map[string]string{"instances": "16", "db_memory": "64g"}, "more than 80% of this machine's"},
		{"db memory too small", map[string]string{"db_memory": "16m"}, "parameter db_memory: 16777216 bytes: want at least 64m"},
		{"db memory not a size", map[string]string{"db_memory": "lots"}, "parameter db_memory: size \"lots\""},
		{"scale too small", map[string]string{"scale": "0.0001"}, "is too small"},
		{"cpus the machine lacks", map[string]string{"instance_cpusets": "0;4096"}, "CPU"},
		{"vms beyond instances", map[string]string{"instances": "2", "vms": "3"}, "vms 3 exceeds the 2 instance(s)"},
		{"all new customers and no login", map[string]string{"pct_new": "101"}, "new customers 101%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Workload{}.New(resolve(t, true, tt.over))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%v) = %v, want an error containing %q", tt.over, err, tt.want)
			}
		})
	}
}

func TestHalves(t *testing.T) {
	tests := []struct {
		cpus []int
		want string
		err  bool
	}{
		{[]int{0, 1}, "0;1", false},
		{[]int{3, 0, 2, 1}, "0-1;2-3", false},
		{[]int{0, 1, 2, 3, 4}, "0-1;2-4", false},
		{[]int{0}, "", true},
	}
	for _, tt := range tests {
		got, err := halves(tt.cpus)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("halves(%v) = %q, %v; want %q (error %v)", tt.cpus, got, err, tt.want, tt.err)
		}
	}
	inst, err := Workload{}.New(resolve(t, true, map[string]string{"instance_cpusets": "halves", "pin_platforms": "docker-pinned, vm"}))
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	if len(in.base.Placement.Instances) != 2 {
		t.Errorf("halves gave instance CPU sets %v", in.base.Placement.Instances)
	}
	if !in.pinnedOn("docker-pinned") || !in.pinnedOn("vm") || in.pinnedOn("docker-bridge") {
		t.Errorf("pin_platforms %v", in.pinOn)
	}
}

func TestBehaviourParamsRoundTrip(t *testing.T) {
	inst, err := Workload{}.New(resolve(t, true, map[string]string{"pct_new": "30", "scale": "0.5", "data_seed": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	c := in.driverConfig([]string{"127.0.0.1:1", "127.0.0.1:2"}, 10*time.Second, "20260101-000000-abcd")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bc, err := parseBehaviour(c.Params)
	if err != nil {
		t.Fatal(err)
	}
	if bc.Mode != ModeHTTP || len(bc.Addrs) != 2 || bc.Threads != 4 || bc.Order.PctNewCustomer != 30 || bc.Dataset != in.dataset {
		t.Errorf("round trip: %+v", bc)
	}
	if c.Users != 8 || c.Drivers != 2 || c.Mode != driver.Closed || c.Pacing.Mode != driver.Think || c.Phases.RampUp != 5*time.Second {
		t.Errorf("driver config %+v", c)
	}
	for _, bad := range []map[string]string{
		{ParamMode: "smtp"}, {ParamAddrs: ""}, {ParamThreads: "0"}, {ParamSize: "5gb"}, {ParamScale: "x"},
	} {
		p := bc.Params()
		for k, v := range bad {
			p[k] = v
		}
		if _, err := parseBehaviour(p); err == nil {
			t.Errorf("parseBehaviour accepted %v", bad)
		}
	}
}

// TestMetricsDeclared checks that the transaction metrics follow pct_new.
func TestMetricsDeclared(t *testing.T) {
	names := func(over map[string]string) string {
		inst, err := Workload{}.New(resolve(t, true, over))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range inst.Metrics() {
			out = append(out, m.Name)
			if strings.HasSuffix(m.Name, MetricP95Suffix) && m.Quantile != 0.95 {
				t.Errorf("%s: quantile %v", m.Name, m.Quantile)
			}
		}
		return strings.Join(out, " ")
	}
	all := names(nil)
	for _, want := range []string{"opm", "order_ms", "login_ms", "newcust_ms", "browse_ms", "purchase_ms", "purchase_p95_ms", "cpu_us_per_order", "run_cpu_us_per_order", "rollback_pct", "commits_per_s", "hit_ratio_pct", "db_cpu_pct", "web_cpu_pct", "server_migrations_per_order"} {
		if !strings.Contains(" "+all+" ", " "+want+" ") {
			t.Errorf("metric %s missing from %s", want, all)
		}
	}
	if n := names(map[string]string{"pct_new": "0"}); strings.Contains(n, "newcust") {
		t.Errorf("no new customers, yet %s", n)
	}
}

// result is a driver result of a trial with the given outcome.
func result(orders, purchases, rollbacks, exhausted, failedBrowses int64) *driver.Result {
	r := &driver.Result{Ops: map[string]*driver.OpResult{}, Counters: map[string]int64{}, Phases: driver.Phases{Steady: 10 * time.Second}, Users: 8}
	for _, op := range Ops {
		h := driver.NewHist()
		n := map[string]int64{OpLogin: purchases * 4 / 5, OpNewCustomer: purchases / 5, OpBrowse: 3 * purchases, OpPurchase: purchases}[op]
		for i := int64(0); i < n; i++ {
			h.Record(time.Duration(5+i%10) * time.Millisecond)
		}
		r.Ops[op] = &driver.OpResult{Count: n, Latency: h, Failures: map[string]int64{}, Examples: map[string]string{}}
	}
	if exhausted > 0 {
		r.Ops[OpPurchase].Failures[CauseRetriesExhausted] = exhausted
		r.Ops[OpPurchase].Examples[CauseRetriesExhausted] = "purchase: deadlock retries exhausted (10): deadlock"
	}
	if failedBrowses > 0 {
		r.Ops[OpBrowse].Failures["error"] = failedBrowses
		r.Ops[OpBrowse].Examples["error"] = "GET /browse.php: HTTP 500"
	}
	r.Counters[CountOrders], r.Counters[CountPurchases], r.Counters[CountRollbacks] = orders, purchases, rollbacks
	// The per-second series: the measured purchases, and as many again in
	// the ramp-up, over which CPU per order is reckoned.
	r.Series = []driver.Second{
		{Sec: 0, Phase: driver.PhaseRampUp, Ops: map[string]driver.SecondOp{OpPurchase: {Count: purchases, Latency: driver.NewHist()}}},
		{Sec: 1, Phase: driver.PhaseSteady, Ops: map[string]driver.SecondOp{OpPurchase: {Count: purchases, Latency: driver.NewHist()}}},
	}
	return r
}

// TestRecordMarks checks the figures of a trial and that a trial with too
// many rollbacks, exhausted deadlock retries or too many failures is marked
// failed (an error) with its figures in the notes, never averaged.
func TestRecordMarks(t *testing.T) {
	inst, err := Workload{}.New(resolve(t, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	tests := []struct {
		name string
		r    *driver.Result
		want string // "" = accepted
	}{
		{"normal", result(1000, 1000, 19, 0, 0), ""},
		{"rollbacks above 10%", result(1000, 1000, 150, 0, 0), "15.0% of the purchases rolled back"},
		{"deadlock retries exhausted", result(1000, 1000, 10, 2, 0), "2 purchase(s) still deadlocked after 10 retries"},
		{"too many failures", result(1000, 1000, 10, 0, 100), "of the transactions failed"},
		{"a few failures are noted only", result(1000, 1000, 10, 0, 5), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res workload.Result
			acct := workload.CPUAccount{Clients: 2 * time.Second, Servers: 18 * time.Second}
			acct.Machine.Interval, acct.Machine.BusySeconds = 20*time.Second, 30
			m := measured{r: tt.r, acct: acct, tiers: map[string]time.Duration{RoleDB: 12 * time.Second, RoleWeb: 6 * time.Second}, migrations: 500, layout: "container-per-instance"}
			err := in.record(m, &res)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("record: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "marked failed, not averaged") {
					t.Fatalf("record = %v, want it marked failed: %q", err, tt.want)
				}
				if !strings.Contains(strings.Join(res.Notes, "\n"), "marked failed, not averaged: ") {
					t.Errorf("notes do not say the trial was marked: %q", res.Notes)
				}
			}
			if got := res.Values[MetricOPM]; got != 6000 {
				t.Errorf("opm %v, want floor(60 x 1000 / 10 s) = 6000", got)
			}
			wantRollback := 100 * float64(tt.r.Counters[CountRollbacks]) / 1000
			if got := res.Values[MetricRollbackPct]; got != wantRollback {
				t.Errorf("rollback %v%%, want %v%%", got, wantRollback)
			}
			if res.Samples[OpPurchase+MetricP95Suffix] != 1000 || res.Values[OpPurchase+MetricP95Suffix] < 13 {
				t.Errorf("purchase p95 %v ms from %d samples", res.Values[OpPurchase+MetricP95Suffix], res.Samples[OpPurchase+MetricP95Suffix])
			}
			// CPU per order over every order of the load (2000: the series).
			if got := res.Values[CPU.Metric]; got != 30.0/2000*1e6 {
				t.Errorf("cpu per order %v us, want 15000", got)
			}
			if got := res.Values[MetricMigrations]; got != 0.25 {
				t.Errorf("migrations per order %v, want 500 over the load's 2000 orders = 0.25", got)
			}
			if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "new customers, layout container-per-instance (an instance's servers in one container, natively in one cgroup") {
				t.Errorf("the settings note does not state the layout and its grouping: %s", notes)
			}
			if db, web := res.Values[MetricDBCPU], res.Values[MetricWebCPU]; db != 60 || web != 30 {
				t.Errorf("tier CPU db %v%% web %v%%, want 60 and 30", db, web)
			}
			// An order's response time is the sum of its steps: login or
			// registration, three browses and the purchase, about 9.5 ms each.
			if got := res.Values[MetricOrderMs]; got < 5*9 || got > 5*10.5 {
				t.Errorf("order_ms %v, want about 5 steps x 9.5 ms", got)
			}
		})
	}
	// Servers that cannot count their migrations (pods) leave the
	// diagnostic unmeasured, with a note, and the trial stands.
	var res workload.Result
	acct := workload.CPUAccount{Clients: 2 * time.Second, Servers: 18 * time.Second}
	acct.Machine.Interval, acct.Machine.BusySeconds = 20*time.Second, 30
	m := measured{r: result(1000, 1000, 19, 0, 0), acct: acct, tiers: map[string]time.Duration{}, migrations: -1}
	if err := in.record(m, &res); err != nil {
		t.Fatalf("record without migrations: %v", err)
	}
	if _, ok := res.Values[MetricMigrations]; ok || !slices.Contains(res.Unmeasured, MetricMigrations) {
		t.Errorf("migrations unknown: value %v, unmeasured %v", res.Values[MetricMigrations], res.Unmeasured)
	}
}

// TestEstimate: the stack, both ramps and the trial (quick: 5 s ramp-up).
func TestEstimate(t *testing.T) {
	v, err := workload.Resolve(Workload{}.Params(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := in.(workload.Estimator).Estimate(12*time.Second), 5*time.Second+5*time.Second+12*time.Second+2*time.Second; got != want {
		t.Errorf("Estimate = %v, want %v", got, want)
	}
}

// TestPerServerPlatforms: the grouping control applies container-per-server
// on the platforms it names only, and refuses nothing else.
func TestPerServerPlatforms(t *testing.T) {
	inst, err := Workload{}.New(resolve(t, true, map[string]string{"per_server_platforms": " native-per-server, docker-host-per-server"}))
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	tests := []struct{ platform, want string }{
		{"native", "container-per-instance"},
		{"native-per-server", "container-per-server"},
		{"docker-host-per-server", "container-per-server"},
		{"docker-host", "container-per-instance"},
	}
	for _, tt := range tests {
		if got := in.layoutOn(tt.platform); got != tt.want {
			t.Errorf("layoutOn(%s) = %s, want %s", tt.platform, got, tt.want)
		}
	}
	inst, err = Workload{}.New(resolve(t, true, map[string]string{"layout": "container-per-server"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.(*Instance).layoutOn("native"); got != "container-per-server" {
		t.Errorf("layout container-per-server: layoutOn(native) = %s", got)
	}
}

func TestMigrationsOver(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]int64
		n             int
		want          int64
	}{
		{"every server", map[string]int64{"a": 10, "b": 5}, map[string]int64{"a": 30, "b": 6}, 2, 21},
		{"a counter that went back counts 0", map[string]int64{"a": 10, "b": 5}, map[string]int64{"a": 8, "b": 6}, 2, 1},
		{"a server that cannot count", map[string]int64{"a": 10}, map[string]int64{"a": 30}, 2, -1},
		{"a server missing in one reading", map[string]int64{"a": 10, "b": 5}, map[string]int64{"a": 30, "c": 6}, 2, -1},
	}
	for _, tt := range tests {
		if got := migrationsOver(tt.before, tt.after, tt.n); got != tt.want {
			t.Errorf("%s: migrationsOver = %d, want %d", tt.name, got, tt.want)
		}
	}
}
