package httpmax

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
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
	if in.limit != 10*time.Millisecond || in.pageBytes != 4096 || in.search.Tolerance != 0.01 || in.search.Start != 1000 {
		t.Errorf("defaults: %+v", in)
	}
	q, err := newInstance(t, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if q.search.Tolerance != 0.05 || q.warmup != 250*time.Millisecond || q.coarse != 500*time.Millisecond || q.search.MaxSteps != 12 {
		t.Errorf("quick: %+v", q)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"nginx_workers": "many"}, `nginx_workers "many"`},
		{map[string]string{"driver_cpus": "0"}, "set drivers to 1 or more"},
		{map[string]string{"drivers": "2", "driver_cpus": "0-x"}, `cpuset "0-x"`},
		{map[string]string{"drivers": "100"}, "64 connections cannot be shared by 100"},
		{map[string]string{"start_rate": "5000", "max_rate": "100"}, "maximum 100 is below its start 5000"},
		{map[string]string{"tolerance": "0.7"}, "tolerance 0.7"},
		{map[string]string{"limit": "0s"}, "not a positive duration"},
		{map[string]string{"lb": "nginx"}, `parameter lb "nginx": want none or haproxy`},
		{map[string]string{"backends": "3"}, "parameter backends 3: only with lb: haproxy"},
	}
	for _, tc := range tests {
		_, err := newInstance(t, tc.params, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.params, err, tc.want)
		}
	}
}

func TestPageAndConfig(t *testing.T) {
	for _, n := range []int{1, 50, 4096, 100000} {
		if got := len(Page(n)); got != n {
			t.Errorf("Page(%d) has %d bytes", n, got)
		}
	}
	in, _ := newInstance(t, map[string]string{"nginx_workers": "2"}, false)
	spec := in.spec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	argv := spec.Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"http": 8080}, Dir: "/nearnative"})
	conf := argv[4]
	for _, want := range []string{"worker_processes 2;", "listen 0.0.0.0:8080 reuseport", "root /nearnative/www;", "pid /nearnative/nginx.pid;", "access_log off;", "daemon off;", "tcp_nopush on;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	// bench/plateau's control: the same configuration, nginx not corking.
	off := NginxConf("auto", "/p", "10.0.0.1", 81, false)
	if want := strings.Replace(NginxConf("auto", "/p", "10.0.0.1", 81, true), "tcp_nopush on;", "tcp_nopush off;", 1); off != want || strings.Contains(off, "%!") {
		t.Errorf("NginxConf without nopush:\n%s\nwant:\n%s", off, want)
	}
	if argv[0] != "sh" || argv[5] != "/nearnative" || len(spec.Files) != 1 || len(spec.Files[0].Content) != 4096 {
		t.Errorf("command %q, files %d", argv, len(spec.Files))
	}
}

// TestRules: http-max's QoS on scripted driver results.
func TestRules(t *testing.T) {
	in, _ := newInstance(t, nil, false)
	hist := func(n int, d time.Duration) *driver.Hist {
		h := driver.NewHist()
		for i := 0; i < n; i++ {
			h.Record(d)
		}
		return h
	}
	result := func(ok int, fast, slow time.Duration, slowN int, failed int64, due int64) qos.Input {
		h := hist(ok-slowN, fast)
		h.Merge(hist(slowN, slow))
		r := &driver.Result{Ops: map[string]*driver.OpResult{"get": {Count: int64(ok), Latency: h, Failures: map[string]int64{"http 503": failed}}},
			Open: driver.OpenStats{Due: due}}
		return r.QoS()
	}
	tests := []struct {
		name string
		in   qos.Input
		pass bool
	}{
		{"fast", result(1000, time.Millisecond, 0, 0, 0, 1000), true},
		{"1% slow", result(1000, time.Millisecond, 50*time.Millisecond, 10, 0, 1000), true},
		{"1.1% slow", result(1000, time.Millisecond, 50*time.Millisecond, 11, 0, 1000), false},
		{"0.5% failed", result(995, time.Millisecond, 0, 0, 5, 1000), true},
		{"0.6% failed", result(994, time.Millisecond, 0, 0, 6, 1000), false},
		{"2% never answered", result(980, time.Millisecond, 0, 0, 0, 1000), false},
	}
	for _, tc := range tests {
		if v := in.rules().Evaluate(tc.in); v.Pass != tc.pass {
			t.Errorf("%s: %s", tc.name, v.Summary())
		}
	}
	// A step in which nothing was sent (every connection held by a stalled
	// server, seen on a loaded machine) fails, and every rule still says
	// why: the step's record keeps three outcomes.
	none := (&driver.Result{Ops: map[string]*driver.OpResult{}, Open: driver.OpenStats{Due: 9400}}).QoS()
	v := in.rules().Evaluate(none)
	if v.Pass || len(v.Outcomes) != 3 {
		t.Errorf("nothing sent: pass %v, %d outcomes (want 3): %s", v.Pass, len(v.Outcomes), v.Summary())
	}
	for _, o := range v.Outcomes {
		if o.Pass {
			t.Errorf("nothing sent: rule %s passed: %s", o.Rule, o.Text)
		}
	}
}

// TestSearchFloor: no rate is tried at which the shortest decision interval
// holds fewer than 100 requests.
func TestSearchFloor(t *testing.T) {
	in, _ := newInstance(t, map[string]string{"start_rate": "50"}, true) // coarse 500ms
	c := in.searchConfig(time.Second)
	if c.Min != 100 || c.Start != 100 {
		t.Errorf("quick, 1 s trials: min %g start %g, want 100 (1000 requests in the longest, 10 s, step)", c.Min, c.Start)
	}
	in, _ = newInstance(t, nil, false) // coarse 2s
	if c := in.searchConfig(5 * time.Second); c.Min != 100 || c.Start != 1000 {
		t.Errorf("full: min %g start %g, want 100 and 1000", c.Min, c.Start)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

// TestDecideAt: every step's decision holds the 1000 requests a p99 needs
// (10 beyond it), the interval lengthened at low rates up to 10 s; at
// rates that fill the interval it is unchanged.
func TestDecideAt(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		rate float64
		want time.Duration
	}{
		{500 * time.Millisecond, 2000, 500 * time.Millisecond},
		{500 * time.Millisecond, 30000, 500 * time.Millisecond},
		{500 * time.Millisecond, 1000, time.Second},
		{500 * time.Millisecond, 200, 5 * time.Second},
		{time.Second, 250, 4 * time.Second},
		{500 * time.Millisecond, 100, 10 * time.Second},
		{500 * time.Millisecond, 50, 10 * time.Second}, // below the floor: capped
		{5 * time.Second, 400, 5 * time.Second},
	} {
		if got := decideAt(tc.base, tc.rate); got != tc.want {
			t.Errorf("decideAt(%v, %g) = %v, want %v", tc.base, tc.rate, got, tc.want)
		}
	}
	if tailSamples != 1000 {
		t.Errorf("a p99 needs %d requests, want 1000 (stats.MinTailSamples)", tailSamples)
	}
}

func TestOthersBusy(t *testing.T) {
	tests := []struct {
		d    stepDetail
		want bool
	}{
		{stepDetail{MachineBusy: 1, CPUs: 2, DriverCPU: 10, ServerCPU: 2}, true},
		{stepDetail{MachineBusy: 1, CPUs: 2, DriverCPU: 60, ServerCPU: 90}, false},
		{stepDetail{MachineBusy: 0.5, CPUs: 2, DriverCPU: 1, ServerCPU: 1}, false},
		{stepDetail{MachineBusy: 1, CPUs: 2, DriverCPU: 10, ServerCPU: 0}, false}, // server CPU unknown
	}
	for _, tc := range tests {
		if got := tc.d.othersBusy(); got != tc.want {
			t.Errorf("%+v: %v", tc.d, got)
		}
	}
}

func TestLBConfig(t *testing.T) {
	in, err := newInstance(t, map[string]string{"lb": "haproxy"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if in.backends != 2 {
		t.Errorf("lb haproxy: %d backends, want 2 by default", in.backends)
	}
	topo := in.topology()
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(topo.Roles) != 2 || topo.Roles[0].Count != 2 || !topo.Roles[1].Entry || topo.Roles[0].Entry {
		t.Errorf("roles %+v", topo.Roles)
	}
	conf := haproxyConf(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{PortHTTP: 8080, PortStats: 8081}, Dir: "/nearnative"},
		[]string{"10.0.0.2:80", "10.0.0.3:80"})
	for _, want := range []string{"mode http", "balance roundrobin", "bind 0.0.0.0:8080", "server web0 10.0.0.2:80", "server web1 10.0.0.3:80",
		"bind 0.0.0.0:8081", "stats uri /stats", "http-reuse always"} {
		if !strings.Contains(conf, want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, " check") {
		t.Errorf("health checks configured (a dead backend must fail the step, not be hidden):\n%s", conf)
	}
	in, err = newInstance(t, map[string]string{"lb": "haproxy", "backends": "5"}, false)
	if err != nil || in.backends != 5 {
		t.Errorf("backends 5: %v, %+v", err, in)
	}
}

func TestParseStats(t *testing.T) {
	csv := "# pxname,svname,qcur,stot,hrsp_1xx,hrsp_2xx,status,\n" +
		"web,FRONTEND,,100,0,100,OPEN,\n" +
		"nginx,web0,0,50,0,49,no check,\n" +
		"nginx,web1,0,51,0,51,no check,\n" +
		"nginx,BACKEND,0,101,0,100,UP,\n" +
		"stats,FRONTEND,,1,0,0,OPEN,\n"
	got, err := parseStats(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["web0"] != 49 || got["web1"] != 51 {
		t.Errorf("parsed %v", got)
	}
	for _, bad := range []string{"", "# pxname,svname\nnginx,web0\n", "# pxname,svname,hrsp_2xx\nnginx,web0,many\n"} {
		if _, err := parseStats(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestEstimate: the search as search.Simulate plays it to typicalMax,
// coarse steps deciding over the coarse interval, every step at least as
// long as its rate needs for a p99 (decideAt): one nginx (about 1550 req/s)
// fails a quick search's first rate, 2000, and passes 1000; a full search
// passes 1000 and fails 2000; behind HAProxy (about 5000) a quick search
// ramps 2000, 4000, 8000; a cap of 7 steps ends a full search early.
func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		name           string
		over           map[string]string
		quick          bool
		trial, coarseD time.Duration
		coarse, steps  int // steps: 0 = not checked
	}{
		{"quick", nil, true, time.Second, 500 * time.Millisecond, 2, 0},
		{"full", nil, false, 5 * time.Second, 2 * time.Second, 2, 0},
		{"quick haproxy", map[string]string{"lb": LBHAProxy}, true, time.Second, 500 * time.Millisecond, 3, 0},
		{"cap 7", map[string]string{"max_steps": "7"}, false, 5 * time.Second, 2 * time.Second, 2, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := newInstance(t, tc.over, tc.quick)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := search.Simulate(in.searchConfig(tc.trial), in.typicalMax())
			if err != nil {
				t.Fatal(err)
			}
			coarse := 0
			want := time.Second
			for _, st := range steps {
				decide := tc.trial
				if st.Phase == search.Coarse {
					coarse++
					decide = tc.coarseD
				}
				want += decideAt(decide, st.Value) + in.warmup + stepOverhead
			}
			if coarse != tc.coarse || tc.steps > 0 && len(steps) != tc.steps {
				t.Errorf("%d steps (%v), %d coarse; want %d coarse, %d steps", len(steps), steps, coarse, tc.coarse, tc.steps)
			}
			if got := in.Estimate(tc.trial); got != want {
				t.Errorf("Estimate = %v, want %v", got, want)
			}
		})
	}
}

// nsHost is a client over a link of the given MTU, as cliffNote sees it.
type nsHost struct {
	host.Host
	mtu int
}

func (nsHost) Kind() host.Kind    { return host.Netns }
func (h nsHost) Describe() string { return fmt.Sprintf("netns veth MTU %d", h.mtu) }
func (h nsHost) MTU() int         { return h.mtu }

// linkHost is a client over a link whose MTU it does not say.
type linkHost struct{ host.Host }

func (linkHost) Kind() host.Kind { return host.Netns }

// guest is a platform whose servers run in a VM guest.
type guest struct{ platform.Platform }

func (guest) Acceleration(context.Context) string { return "KVM" }

// TestCliffNote: the note names TCP's hold only where everything BENCH.md
// found behind it holds on the trial; anywhere else it claims nothing.
func TestCliffNote(t *testing.T) {
	step := func(pass bool, rate, p99 float64) search.Step {
		b, _ := json.Marshal(stepDetail{Rate: rate, P99Ms: p99})
		return search.Step{Pass: pass, Value: rate, Detail: b}
	}
	steps := []search.Step{step(true, 500, 3), step(false, 1000, 43.8), step(false, 2000, 120)}
	old := congestionControl
	t.Cleanup(func() { congestionControl = old })
	in, err := newInstance(t, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := newInstance(t, map[string]string{"lb": LBHAProxy}, false)
	if err != nil {
		t.Fatal(err)
	}
	small, err := newInstance(t, map[string]string{"page_bytes": "1400"}, false)
	if err != nil {
		t.Fatal(err)
	}
	link := nsHost{host.LoopbackHost(), 1500}
	native := platform.Platform(nil)
	congestionControl = func() string { return "bbr" }
	got := in.cliffNote(link, native, steps)
	if !strings.HasPrefix(got, workload.CliffNote+"p99 43.8 ms at 1000 req/s over netns veth MTU 1500 is TCP's, not the platform's: over this 1500-byte link nginx's 4096-byte page leaves in two packets or more") ||
		!strings.Contains(got, "tcp_congestion_control bbr") {
		t.Errorf("note %q", got)
	}
	for _, tc := range []struct {
		name  string
		in    *Instance
		c     host.Host
		p     platform.Platform
		cc    string
		steps []search.Step
	}{
		{"cubic (BENCH.md: no hold; the delayed ACK was ruled out)", in, link, native, "cubic", steps},
		{"loopback (a response is one segment)", in, host.LoopbackHost(), native, "bbr", steps},
		{"a p99 of 120 ms", in, link, native, "bbr", steps[2:]},
		{"the page fits in one packet of the link", in, nsHost{host.LoopbackHost(), 9000}, native, "bbr", steps},
		{"a 1400-byte page over MTU 1500", small, link, native, "bbr", steps},
		{"a link of unknown MTU", in, linkHost{host.LoopbackHost()}, native, "bbr", steps},
		{"HAProxy in front (its sending not examined)", lb, link, native, "bbr", steps},
		{"nginx in a VM guest (the guest's TCP)", in, link, guest{}, "bbr", steps},
		{"nginx behind gVisor's own network stack", in, link, sandboxed{network: "sandbox"}, "bbr", steps},
	} {
		congestionControl = func() string { return tc.cc }
		if n := tc.in.cliffNote(tc.c, tc.p, tc.steps); n != "" {
			t.Errorf("%s: %q, want no note", tc.name, n)
		}
	}
	congestionControl = func() string { return "bbr" }
	if n := in.cliffNote(link, sandboxed{network: "host"}, steps); n == "" {
		t.Error("gVisor's host network (the host kernel's sockets): no note")
	}
}

// sandboxed is a platform in a sandbox with the given network stack.
type sandboxed struct {
	platform.Platform
	network string
}

func (s sandboxed) Sandbox() (platform.Sandbox, bool) {
	return platform.Sandbox{Name: "gVisor", Platform: "ptrace", Network: s.network}, true
}

func TestRefusesHostinet(t *testing.T) {
	in := &Instance{}
	if err := in.RefusePlatform(platform.DockerRunscBridge, sandboxed{network: "host"}); err == nil || !strings.Contains(err.Error(), "SO_REUSEPORT") {
		t.Errorf("gVisor with hostinet: %v, want a refusal naming SO_REUSEPORT", err)
	}
	for _, p := range []platform.Platform{sandboxed{network: "sandbox"}, nil} {
		if err := in.RefusePlatform(platform.DockerRunscBridge, p); err != nil {
			t.Errorf("%v: refused: %v", p, err)
		}
	}
}
