package driver

import (
	"testing"
	"time"
)

// TestSeriesLateCompletion: a completion filed under a second that was
// already closed (its goroutine reached the lock late) is merged into that
// second, not stored as a second entry with the same number (which broke
// the series' primary key and failed a find-max trial).
func TestSeriesLateCompletion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newSeriesRec(t0, Phases{Steady: 10 * time.Second})
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	s.add("op", at(0.5), time.Millisecond, false)
	s.add("op", at(3.5), time.Millisecond, false) // closes second 0 and 1
	s.add("op", at(0.9), 2*time.Millisecond, false)
	s.add("op", at(0.7), 0, true)
	got := s.close()
	seen := map[int]bool{}
	for _, sec := range got {
		if seen[sec.Sec] {
			t.Fatalf("second %d twice: %+v", sec.Sec, got)
		}
		seen[sec.Sec] = true
	}
	if len(got) != 2 || got[0].Sec != 0 || got[1].Sec != 3 {
		t.Fatalf("seconds %+v, want 0 and 3", got)
	}
	if o := got[0].Ops["op"]; o.Count != 2 || o.Failures != 1 || o.Latency == nil || o.Latency.Count() != 2 {
		t.Errorf("second 0: count %d failures %d latency %v, want 2, 1 and two latencies", o.Count, o.Failures, o.Latency)
	}
	keys := map[[2]any]bool{}
	for _, p := range Points(got) {
		k := [2]any{p.Sec, p.Op}
		if keys[k] {
			t.Errorf("point (%d, %s) twice", p.Sec, p.Op)
		}
		keys[k] = true
	}
}
