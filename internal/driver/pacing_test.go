package driver

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestDistributionDraw(t *testing.T) {
	const n = 200000
	tests := []struct {
		name     string
		d        Distribution
		lo, hi   time.Duration
		mean     time.Duration // expected mean of the draws
		tolerant float64       // relative tolerance of the mean
	}{
		// Olio: negative exponential, mean 5 s, capped at 5x: the clamp at
		// 25 s leaves a mean of 5 s * (1 - e^-5) = 4.966 s.
		{"olio negexp", Distribution{Kind: NegExp, Mean: 5 * time.Second}, 0, 25 * time.Second,
			time.Duration(5e9 * (1 - math.Exp(-5))), 0.01},
		{"negexp truncated at min", Distribution{Kind: NegExp, Mean: time.Second, Min: 500 * time.Millisecond, Max: 2 * time.Second},
			500 * time.Millisecond, 2 * time.Second, 0, 0},
		// Weathervane: normal(5 s, 1.25 s) clipped to [2.5 s, 7.5 s]:
		// symmetric, so the mean stays 5 s.
		{"weathervane normal", Distribution{Kind: NormalClips, Mean: 5 * time.Second, SD: 1250 * time.Millisecond, Min: 2500 * time.Millisecond, Max: 7500 * time.Millisecond},
			2500 * time.Millisecond, 7500 * time.Millisecond, 5 * time.Second, 0.01},
		{"normal default clip", Distribution{Kind: NormalClips, Mean: time.Second, SD: time.Second},
			0, 3 * time.Second, 0, 0},
		// DVD Store: think time U[0, 2*think).
		{"dvdstore uniform", Distribution{Kind: Uniform, Min: 0, Max: 2 * time.Second}, 0, 2*time.Second - 1, time.Second, 0.01},
		{"fixed", Distribution{Kind: Fixed, Mean: 3 * time.Second}, 3 * time.Second, 3 * time.Second, 3 * time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.d.Validate(); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var sum float64
			for i := 0; i < n; i++ {
				v := tc.d.Draw(rng)
				if v < tc.lo || v > tc.hi {
					t.Fatalf("draw %v outside [%v, %v]", v, tc.lo, tc.hi)
				}
				sum += float64(v)
			}
			if tc.mean > 0 {
				got := sum / n
				if tc.tolerant == 0 && got != float64(tc.mean) || math.Abs(got-float64(tc.mean)) > tc.tolerant*float64(tc.mean) {
					t.Errorf("mean of %d draws %v, want %v", n, time.Duration(got), tc.mean)
				}
			}
		})
	}
}

func TestDistributionValidate(t *testing.T) {
	tests := []struct {
		d    Distribution
		want string
	}{
		{Distribution{Kind: "gamma"}, `delay distribution "gamma"`},
		{Distribution{Kind: NegExp}, "mean 0s must be positive"},
		{Distribution{Kind: NegExp, Mean: time.Second, Max: time.Millisecond}, "want min 0s <= mean 1s <= max 1ms"},
		{Distribution{Kind: Uniform, Min: 2, Max: 1}, "max 1ns is below min 2ns"},
		{Distribution{Kind: NormalClips, Mean: time.Second}, "sd 0s must be positive"},
		{Distribution{Kind: NormalClips, Mean: time.Second, SD: 1, Min: 2 * time.Second, Max: 3 * time.Second}, "want min 2s <= mean 1s"},
		{Distribution{Kind: Fixed, Mean: -1}, "must not be negative"},
	}
	for _, tc := range tests {
		err := tc.d.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.d, err, tc.want)
		}
	}
	for _, p := range []Pacing{{Mode: "later"}, {Mode: Cycle, Delay: Distribution{Kind: Fixed}}} {
		if p.Validate() == nil {
			t.Errorf("pacing %+v accepted", p)
		}
	}
}

// TestSchedule replays users' operations on a virtual clock through the
// pacing rules: cycle time from the previous start, think time from the
// previous end, a late operation followed at once, no catch-up afterwards.
func TestSchedule(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name      string
		mode      string
		delay     int   // ms, every cycle
		durations []int // ms each operation takes
		starts    []int // ms each operation starts
		late      []bool
	}{
		{"cycle: from the start", Cycle, 10, []int{3, 3, 3}, []int{0, 10, 20}, []bool{false, false, false}},
		// The second operation takes 25 ms of a 10 ms cycle: the third
		// starts when it ends (35), late; the fourth is 10 ms after the
		// third's start, not at 30 or 40: nothing is caught up.
		{"cycle: late, no catch-up", Cycle, 10, []int{3, 25, 3, 3}, []int{0, 10, 35, 45}, []bool{false, true, false, false}},
		{"think: from the end", Think, 10, []int{3, 25, 3}, []int{0, 13, 48}, []bool{false, false, false}},
		{"think zero: back to back", Think, 0, []int{4, 4, 4}, []int{0, 4, 8}, []bool{false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := 0
			for i, d := range tc.durations {
				if now != tc.starts[i] {
					t.Fatalf("operation %d starts at %d ms, want %d", i, now, tc.starts[i])
				}
				start, end := at(now), at(now+d)
				if i == len(tc.durations)-1 {
					break
				}
				due, late := schedule(tc.mode, start, end, time.Duration(tc.delay)*time.Millisecond, end)
				if late != tc.late[i] {
					t.Errorf("operation %d late = %v, want %v", i, late, tc.late[i])
				}
				now = int(due.Sub(at(0)) / time.Millisecond)
			}
		})
	}
}
