package report

import (
	"bytes"
	"testing"

	"github.com/nearnative/nearnative/internal/store"
)

func TestTraceLine(t *testing.T) {
	step := func(phase string, v float64, pass bool) store.Step {
		return store.Step{Phase: phase, Value: v, Pass: pass}
	}
	tests := []struct {
		name string
		tr   Trace
		want string
	}{
		{"verified", Trace{Steps: []store.Step{step("coarse", 50, true), step("coarse", 100, true), step("coarse", 200, false),
			step("fine", 160, true), step("fine", 180, false), step("verify", 160, true)}},
			"coarse 50+ 100+ 200-; fine 160+ 180-; verify 160+"},
		{"fractional load", Trace{Steps: []store.Step{step("coarse", 1000, true), step("fine", 1187.5, false)}},
			"coarse 1000+; fine 1187.5-"},
		{"stopped", Trace{Error: "the auction did not start on vm: app tomcat exited", Steps: []store.Step{step("coarse", 50, false)}},
			"coarse 50- -- stopped: the auction did not start on vm: app tomcat exited"},
		{"nothing stored", Trace{}, "no step stored"},
	}
	for _, tt := range tests {
		if got := tt.tr.Line(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTraces(t *testing.T) {
	var b bytes.Buffer
	if err := Traces(&b, nil); err != nil || b.Len() != 0 {
		t.Fatalf("no traces: %q, %v; want nothing", b.String(), err)
	}
	ts := []Trace{
		{Workload: "auction", Platform: "native", Round: 0, Warmup: true, Steps: []store.Step{{Phase: "coarse", Value: 50, Pass: true}}},
		{Workload: "auction", Platform: "native", Round: 1, Steps: []store.Step{{Phase: "coarse", Value: 50, Pass: false}}},
		{Workload: "auction", Platform: "docker-nat", Round: 1, Steps: []store.Step{{Phase: "coarse", Value: 50, Pass: true}}},
	}
	if err := Traces(&b, ts); err != nil {
		t.Fatal(err)
	}
	want := `
find-max traces: the load of each step, + met the QoS, - did not (steps: nearnative series RUN --json FILE)
auction on native
  round 0 (warm-up): coarse 50+
  round 1: coarse 50-
auction on docker-nat
  round 1: coarse 50+
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
