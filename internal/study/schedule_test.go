package study

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// units returns n units named u0, u1, ...
func units(n int) []Unit {
	us := make([]Unit, n)
	for i := range us {
		us[i] = Unit{Workload: Workload{Name: fmt.Sprintf("u%d", i)}, Platform: Platform{Name: "p"}}
	}
	return us
}

func names(us []Unit) string {
	var b strings.Builder
	for i, u := range us {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(u.Workload.Name)
	}
	return b.String()
}

func TestScheduleIsPermutation(t *testing.T) {
	for n := 0; n <= 12; n++ {
		in := units(n)
		orig := names(in)
		for round := -2; round < 20; round++ {
			out := Schedule(in, round, 99, OrderRandom)
			if names(in) != orig {
				t.Fatalf("Schedule modified its input")
			}
			got := strings.Fields(names(out))
			want := strings.Fields(orig)
			slices.Sort(got)
			slices.Sort(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("n=%d round=%d: %v is not a permutation of %v", n, round, names(out), orig)
			}
		}
	}
}

func TestScheduleDeterministic(t *testing.T) {
	in := units(10)
	for _, seed := range []int64{0, 1, -5, 1 << 40} {
		for round := 0; round < 5; round++ {
			a, b := Schedule(in, round, seed, OrderRandom), Schedule(in, round, seed, OrderRandom)
			if names(a) != names(b) {
				t.Errorf("seed %d round %d: %s then %s", seed, round, names(a), names(b))
			}
		}
	}
}

func TestScheduleVaries(t *testing.T) {
	in := units(10)
	tests := []struct {
		name          string
		seedA, roundA int64
		seedB, roundB int64
	}{
		{"next round", 1, 0, 1, 1},
		{"later round", 1, 1, 1, 7},
		{"next seed", 1, 3, 2, 3},
		{"seed and round swapped", 1, 2, 2, 1},
	}
	for _, tt := range tests {
		a := Schedule(in, int(tt.roundA), tt.seedA, OrderRandom)
		b := Schedule(in, int(tt.roundB), tt.seedB, OrderRandom)
		if names(a) == names(b) {
			t.Errorf("%s: (seed %d, round %d) and (seed %d, round %d) give the same order %s",
				tt.name, tt.seedA, tt.roundA, tt.seedB, tt.roundB, names(a))
		}
	}
	seen := map[string]bool{}
	for round := 0; round < 20; round++ {
		seen[names(Schedule(in, round, 7, OrderRandom))] = true
	}
	if len(seen) < 20 {
		t.Errorf("20 rounds of 10 units gave only %d distinct orders", len(seen))
	}
}

func TestScheduleFixed(t *testing.T) {
	in := units(6)
	for round := 0; round < 3; round++ {
		if got := names(Schedule(in, round, 5, OrderFixed)); got != names(in) {
			t.Errorf("fixed round %d = %s, want %s", round, got, names(in))
		}
	}
}

// TestScheduleGolden pins the orders: a change here means resumed runs
// recorded by an older binary would run in a different order.
func TestScheduleGolden(t *testing.T) {
	in := units(5)
	want := []string{
		"u3 u4 u2 u0 u1",
		"u2 u0 u3 u1 u4",
		"u4 u3 u1 u2 u0",
		"u2 u3 u4 u1 u0",
	}
	for round, w := range want {
		if got := names(Schedule(in, round, 20240601, OrderRandom)); got != w {
			t.Errorf("round %d = %q, want %q", round, got, w)
		}
	}
}

// TestScheduleUniform checks that every order of three units is about
// equally likely.
func TestScheduleUniform(t *testing.T) {
	in := units(3)
	counts := map[string]int{}
	const rounds = 12000
	for round := 0; round < rounds; round++ {
		counts[names(Schedule(in, round, 3, OrderRandom))]++
	}
	if len(counts) != 6 {
		t.Fatalf("saw %d orders of 3 units, want 6: %v", len(counts), counts)
	}
	for order, n := range counts {
		if n < rounds/6*9/10 || n > rounds/6*11/10 {
			t.Errorf("order %s came %d times in %d rounds, want about %d", order, n, rounds, rounds/6)
		}
	}
}
