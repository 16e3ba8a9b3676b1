package driver

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
)

// fakeDriverHost is a driver host whose child process answers with a
// result holding the given latencies, as a real child's JSON would.
type fakeDriverHost struct {
	name   string
	offset time.Duration
	lat    []time.Duration
	cpu    time.Duration // the child's CPU time, as the agent reports it
	plans  []childPlan
}

func (f *fakeDriverHost) Name() string               { return f.name }
func (f *fakeDriverHost) Self() string               { return "/var/tmp/nearnative/nearnative" }
func (f *fakeDriverHost) ClockOffset() time.Duration { return f.offset }
func (f *fakeDriverHost) RunJob(_ context.Context, argv []string, stdin []byte) (host.Job, error) {
	var p childPlan
	if err := json.Unmarshal(stdin, &p); err != nil {
		return host.Job{}, err
	}
	f.plans = append(f.plans, p)
	r := newResult()
	o := r.op("get")
	for _, d := range f.lat {
		o.Latency.Record(d)
		o.Count++
	}
	b, err := json.Marshal(r)
	return host.Job{Stdout: b, CPU: f.cpu}, err
}

// remoteClient is a host.Remote over fake driver hosts.
type remoteClient struct{ hosts []host.Runner }

func (remoteClient) Kind() host.Kind                                               { return host.SSH }
func (remoteClient) Describe() string                                              { return "fake" }
func (remoteClient) Detail() string                                                { return "fake" }
func (remoteClient) ServerAddr() string                                            { return "192.0.2.1" }
func (remoteClient) ClientAddr() string                                            { return "192.0.2.2" }
func (remoteClient) Subnet() netip.Prefix                                          { return netip.MustParsePrefix("192.0.2.2/32") }
func (remoteClient) Wrap(argv []string) []string                                   { return argv }
func (remoteClient) Route(context.Context, netip.Prefix) error                     { return nil }
func (remoteClient) CanRoute() error                                               { return nil }
func (remoteClient) Close(context.Context) error                                   { return nil }
func (r remoteClient) Drivers() []host.Runner                                      { return r.hosts }
func (remoteClient) DialContext(context.Context, string, string) (net.Conn, error) { return nil, nil }

// TestRemoteChildrenMergeExactly: the load spread over two driver hosts
// comes back as one histogram equal, count for count, to the histogram of
// every latency recorded in one place; each host's plan starts at the
// same instant in its own clock.
func TestRemoteChildrenMergeExactly(t *testing.T) {
	var a, b []time.Duration
	for i := 1; i <= 1000; i++ {
		a = append(a, time.Duration(i)*time.Microsecond)
	}
	for i := 0; i < 4000; i++ {
		b = append(b, time.Duration(1000+i*7)*time.Microsecond)
	}
	ha := &fakeDriverHost{name: "client1", lat: a, offset: 3 * time.Millisecond}
	hb := &fakeDriverHost{name: "client2", lat: b, offset: -2 * time.Millisecond}
	c := Config{Drivers: 2, Client: remoteClient{hosts: []host.Runner{ha, hb}}}
	t0 := time.Now().Add(time.Second)
	r, err := runRemoteChildren(context.Background(), c, []host.Runner{ha, hb}, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := NewHist()
	for _, d := range append(append([]time.Duration{}, a...), b...) {
		want.Record(d)
	}
	got := r.Ops["get"]
	if got.Count != 5000 || got.Latency.Count() != want.Count() {
		t.Fatalf("count %d, histogram %d, want 5000", got.Count, got.Latency.Count())
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if g, w := got.Latency.Quantile(q), want.Quantile(q); g != w {
			t.Errorf("q%v: merged %v, one histogram %v", q, g, w)
		}
	}
	if g, w := got.Latency.Mean(), want.Mean(); g != w {
		t.Errorf("mean: merged %v, one histogram %v", g, w)
	}
	if len(ha.plans) != 1 || len(hb.plans) != 1 || ha.plans[0].Of != 2 || ha.plans[0].Index == hb.plans[0].Index {
		t.Fatalf("plans: %+v %+v", ha.plans, hb.plans)
	}
	if d := ha.plans[0].T0.Sub(t0); d != 3*time.Millisecond {
		t.Errorf("client1's start moved by %v, want its offset 3ms", d)
	}
	if d := hb.plans[0].T0.Sub(t0); d != -2*time.Millisecond {
		t.Errorf("client2's start moved by %v, want its offset -2ms", d)
	}
	if len(r.Commands) != 2 || r.Commands[0][:8] != "client1:" {
		t.Errorf("commands %q", r.Commands)
	}
}

// TestRunOnDriverHostsWithoutDrivers: with driver hosts, a run that asks
// for no child processes (drivers: 0, the users in this process) still
// runs its load there, one child per host, rather than in this process
// through the first host's SSH connection; the result says child processes
// ran and carries their CPU, which the workloads add to the load
// generator's account when Result.Drivers > 0.
func TestRunOnDriverHostsWithoutDrivers(t *testing.T) {
	ha := &fakeDriverHost{name: "client1", lat: []time.Duration{time.Millisecond}, cpu: 30 * time.Millisecond}
	hb := &fakeDriverHost{name: "client2", lat: []time.Duration{2 * time.Millisecond}, cpu: 40 * time.Millisecond}
	c := Config{
		Behaviour: "test-sleep", Params: map[string]string{"sleep": "1ms"},
		Mode: Closed, Users: 4,
		Pacing: Pacing{Mode: Cycle, Delay: Distribution{Kind: Fixed, Mean: 20 * time.Millisecond}},
		Phases: Phases{Steady: 100 * time.Millisecond},
		Client: remoteClient{hosts: []host.Runner{ha, hb}},
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(ha.plans) != 1 || len(hb.plans) != 1 {
		t.Fatalf("plans run on the driver hosts: %d and %d, want one each", len(ha.plans), len(hb.plans))
	}
	if ha.plans[0].Of != 2 || ha.plans[0].Config.Drivers != 2 || r.Drivers != 2 {
		t.Fatalf("plan of %d (drivers %d), result drivers %d: want 2 processes", ha.plans[0].Of, ha.plans[0].Config.Drivers, r.Drivers)
	}
	if got := r.Ops["get"]; got == nil || got.Count != 2 {
		t.Fatalf("merged result %+v, want the hosts' two operations", r.Ops)
	}
	if r.ProcessCPU != 70*time.Millisecond {
		t.Fatalf("process CPU %v, want the hosts' children's 70ms", r.ProcessCPU)
	}
}
