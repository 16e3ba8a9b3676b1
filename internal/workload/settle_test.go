package workload

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSettle scripts the servers' CPU: busy readings go on until one
// interval is below SettleBusy cores, or the limit passes.
func TestSettle(t *testing.T) {
	const tick = 20 * time.Millisecond
	for _, tc := range []struct {
		name    string
		busy    []float64 // cores over each interval
		drained bool
		reads   int
	}{
		{"idle at once", []float64{0.05}, true, 2},
		{"drains after three busy intervals", []float64{1.8, 1.2, 0.6, 0.1}, true, 5},
		{"never drains", []float64{1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var total time.Duration
			reads := 0
			cpu := func(context.Context) (time.Duration, error) {
				if reads > 0 {
					i := min(reads-1, len(tc.busy)-1)
					// a little below the interval's share, as a slow timer
					// stretches the interval
					total += time.Duration(tc.busy[i] * float64(tick) * 0.98)
				}
				reads++
				return total, nil
			}
			waited, drained, err := settle(context.Background(), cpu, tick, 5*tick)
			if err != nil {
				t.Fatal(err)
			}
			if drained != tc.drained || tc.reads > 0 && reads != tc.reads {
				t.Errorf("drained %v after %d reads (%v), want %v after %d", drained, reads, waited, tc.drained, tc.reads)
			}
			if !tc.drained && waited < 5*tick {
				t.Errorf("gave up after %v, before the limit", waited)
			}
		})
	}
	boom := errors.New("gone")
	if _, _, err := settle(context.Background(), func(context.Context) (time.Duration, error) { return 0, boom }, tick, tick); !errors.Is(err, boom) {
		t.Errorf("error %v, want the reader's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := settle(ctx, func(context.Context) (time.Duration, error) { return 0, nil }, tick, tick); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestSettleTiersTotal: the tiers settle together, their CPU summed, a
// reading's error passed on.
func TestSettleTiersTotal(t *testing.T) {
	read := total(func(context.Context) (map[string]time.Duration, error) {
		return map[string]time.Duration{"web": 2 * time.Second, "db": 3 * time.Second}, nil
	})
	if got, err := read(context.Background()); got != 5*time.Second || err != nil {
		t.Errorf("total = %v, %v; want 5s", got, err)
	}
	boom := errors.New("boom")
	read = total(func(context.Context) (map[string]time.Duration, error) { return nil, boom })
	if _, err := read(context.Background()); !errors.Is(err, boom) {
		t.Errorf("error %v, want the reading's", err)
	}
}
