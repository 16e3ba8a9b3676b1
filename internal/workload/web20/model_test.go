package web20

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// counter is the trivial Recorder of the tests: it runs fn and counts.
type counter struct {
	ops, fails map[string]int
	errs       []error
}

func newCounter() *counter { return &counter{ops: map[string]int{}, fails: map[string]int{}} }

func (c *counter) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	c.ops[op]++
	err := fn(ctx)
	if err != nil {
		c.fails[op]++
		c.errs = append(c.errs, err)
	}
	return err
}

func TestDefaultMatrixSteadyState(t *testing.T) {
	if err := DefaultMatrix.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := TargetMix.Validate(); err != nil {
		t.Fatal(err)
	}
	// workloads.md: "Its steady state is 26.15/10.22/33.45/24.68/2.61/0.84/2.04%".
	want := Mix{26.15, 10.22, 33.45, 24.68, 2.61, 0.84, 2.04}
	got := DefaultMatrix.Steady()
	for i := range got {
		if math.Abs(got[i]-want[i]) > 0.006 {
			t.Errorf("%s: steady share %.3f%%, want %.2f%%", Op(i), got[i], want[i])
		}
		if math.Abs(got[i]-TargetMix[i]) > MixTolerancePoints {
			t.Errorf("%s: the chain's %.2f%% fails the mix rule against the seed's %.2f%%", Op(i), got[i], TargetMix[i])
		}
	}
}

func TestMatrixNextFollowsTheChain(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var n [NumOps]int
	const steps = 400000
	op := HomePage
	for range steps {
		op = DefaultMatrix.Next(r, op)
		n[op]++
	}
	steady := DefaultMatrix.Steady()
	for i := range n {
		share := 100 * float64(n[i]) / steps
		if math.Abs(share-steady[i]) > 0.3 {
			t.Errorf("%s: %.2f%% of %d draws, steady state %.2f%%", Op(i), share, steps, steady[i])
		}
	}
	// A row's zero entries are never drawn.
	for range 10000 {
		if next := DefaultMatrix.Next(r, AddEvent); next != EventDetail {
			t.Fatalf("AddEvent was followed by %s", next)
		}
	}
}

func TestMatrixAndMixValidate(t *testing.T) {
	bad := DefaultMatrix
	bad[Login] = [NumOps]float64{0, 0, 60, 20, 0, 0, 10}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "row Login sums to 90.00%") {
		t.Errorf("row summing to 90: %v", err)
	}
	bad = DefaultMatrix
	bad[HomePage][0] = -1
	bad[HomePage][1] = 12
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "not a percentage") {
		t.Errorf("negative entry: %v", err)
	}
	m := TargetMix
	m[HomePage] += 5
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "sums to 104.99%") {
		t.Errorf("mix summing to 105: %v", err)
	}
}

func TestOpNames(t *testing.T) {
	for _, op := range Ops {
		got, err := ParseOp(op.String())
		if err != nil || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op, got, err)
		}
	}
	if _, err := ParseOp("Logout"); err == nil {
		t.Error("ParseOp(Logout) succeeded")
	}
}

func TestPacingAndQoSValues(t *testing.T) {
	if MaxCycle != 25*time.Second || MinCycle[AddEvent] != 3*time.Second || MinCycle[AddPerson] != 2*time.Second || MinCycle[HomePage] != 0 {
		t.Errorf("cycle times: max %v, mins %v", MaxCycle, MinCycle)
	}
	for _, op := range []Op{HomePage, Login, TagSearch, EventDetail} {
		if P90Limit[op] != 250*time.Millisecond {
			t.Errorf("%s limit %v, the seed's is 250 ms", op, P90Limit[op])
		}
	}
	for _, op := range []Op{AddEvent, AddPerson, PersonDetail} {
		if P90Limit[op] != 500*time.Millisecond {
			t.Errorf("%s limit %v, the seed's is 500 ms", op, P90Limit[op])
		}
	}
}

func TestRampNote(t *testing.T) {
	cases := []struct {
		ramp, cycle time.Duration
		want        string
	}{
		{10 * time.Second, 5 * time.Second, "ramp-up 10s is 2.0 mean cycles, under the 5"},
		{24 * time.Second, 5 * time.Second, "ramp-up 24s is 4.8 mean cycles"},
		{25 * time.Second, 5 * time.Second, ""},
		{5 * time.Minute, 5 * time.Second, ""},
	}
	for _, c := range cases {
		got := rampNote(c.ramp, c.cycle)
		if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("rampNote(%v, %v) = %q, want prefix %q", c.ramp, c.cycle, got, c.want)
		}
	}
}

// TestTransientFromHomePage checks the figures transientCycles rests on:
// from HomePage the default chain's HomePage share is within 0.5 point of
// its steady share from the 6th step on, and far from it before.
func TestTransientFromHomePage(t *testing.T) {
	steady := DefaultMatrix.Steady()[HomePage]
	var p Mix
	p[HomePage] = 100
	for step := 1; step <= 10; step++ {
		var q Mix
		for i := range p {
			for j := range q {
				q[j] += p[i] * DefaultMatrix[i][j] / 100
			}
		}
		p = q
		off := math.Abs(p[HomePage] - steady)
		if step >= transientCycles+1 && off > 0.5 {
			t.Errorf("step %d: HomePage %.2f%%, steady %.2f%%", step, p[HomePage], steady)
		}
		if step == 1 && off < 20 {
			t.Errorf("step 1: HomePage %.2f%%, want far from the steady %.2f%%", p[HomePage], steady)
		}
	}
}
