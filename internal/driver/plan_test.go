package driver

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPlanOffsets(t *testing.T) {
	tests := []struct {
		name string
		plan Plan
		at   []time.Duration // offsets of requests 0, 1, 2, ... checked
		i    []int64
	}{
		{"constant 1000/s", Constant(1000), []time.Duration{0, time.Millisecond, time.Second}, []int64{0, 1, 1000}},
		// 100/s for 1 s (requests 0..99), then 1000/s.
		{"steps", Steps(time.Second, 100, 1000), []time.Duration{990 * time.Millisecond, time.Second, time.Second + time.Millisecond}, []int64{99, 100, 101}},
		// 0..2 s ramp from 100 to 300/s: count(t) = 100t + 50t^2; 150
		// requests by t=1 s, 400 by 2 s; then 300/s.
		{"ramp", Ramp(100, 300, 2*time.Second), []time.Duration{time.Second, 2 * time.Second, 2*time.Second + 10*time.Millisecond}, []int64{150, 400, 403}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plan.Validate(); err != nil {
				t.Fatal(err)
			}
			for k, i := range tc.i {
				got := tc.plan.Offset(i)
				if d := got - tc.at[k]; d > time.Microsecond || d < -time.Microsecond {
					t.Errorf("Offset(%d) = %v, want %v", i, got, tc.at[k])
				}
			}
			// Count inverts Offset everywhere.
			for i := int64(0); i < 5000; i += 7 {
				if c := tc.plan.Count(tc.plan.Offset(i)); math.Abs(c-float64(i)) > 1e-3 {
					t.Fatalf("Count(Offset(%d)) = %g", i, c)
				}
			}
		})
	}
}

func TestPlanScaleAndRate(t *testing.T) {
	p := Ramp(100, 300, 2*time.Second).Scale(0.5)
	if r := p.RateAt(time.Second); math.Abs(r-100) > 1e-9 {
		t.Errorf("half of a 100..300 ramp at 1 s: %g/s, want 100", r)
	}
	if r := p.RateAt(time.Hour); r != 150 {
		t.Errorf("after the ramp: %g/s, want 150", r)
	}
	if s := Steps(time.Second, 100, 200).String(); s != "100/s for 1s, then 200/s for 1s" {
		t.Errorf("String = %q", s)
	}
}

func TestPlanValidate(t *testing.T) {
	tests := []struct {
		plan Plan
		want string
	}{
		{Plan{}, "no segments"},
		{Constant(0), "segment 1: rate 0..0 requests/s: rates must be positive"},
		{Constant(-5), "rates must be positive"},
		{Ramp(0, 100, time.Second), "rate 0..100"},
		{Steps(time.Second, 100, -1), "segment 2"},
		{Plan{Segments: []Segment{{From: 1, To: 1}, {Duration: time.Second, From: 1, To: 1}}}, "only the last segment may be open-ended"},
		{Constant(math.Inf(1)), "rates must be positive"},
		{Constant(math.NaN()), "rates must be positive"},
	}
	for _, tc := range tests {
		err := tc.plan.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.plan, err, tc.want)
		}
	}
}

// TestOffsetAtPhaseEnds: a request due exactly at a phase's end is due at
// that instant, not a nanosecond before it (floating point made 1025/125 s
// 8.199999999 s, and the steady phase then counted one request more sent
// than due).
func TestOffsetAtPhaseEnds(t *testing.T) {
	p := Constant(125)
	for _, tc := range []struct {
		i    int64
		want time.Duration
	}{{25, 200 * time.Millisecond}, {1025, 8200 * time.Millisecond}, {3, 24 * time.Millisecond}} {
		if got := p.Offset(tc.i); got != tc.want {
			t.Errorf("Offset(%d) = %v, want %v", tc.i, got, tc.want)
		}
	}
	if n := dueIn(p, 200*time.Millisecond, 8200*time.Millisecond); n != 1000 {
		t.Errorf("due in the steady phase: %d, want 1000", n)
	}
}
