package study

import "math/rand/v2"

// Schedule returns the order in which a round runs its units. With
// OrderRandom it is a permutation drawn from a generator seeded by (seed,
// round) alone, so a resumed run repeats each round's order; any other order
// (OrderFixed) keeps units as given. round is any number that identifies the
// round within the run (warm-up rounds included). units is not modified.
//
// The shuffle is written out here rather than taken from math/rand so that
// the order for a given (seed, round) cannot change with the Go version:
// recorded runs must resume identically.
func Schedule(units []Unit, round int, seed int64, order string) []Unit {
	out := make([]Unit, len(units))
	copy(out, units)
	if order != OrderRandom {
		return out
	}
	r := rand.NewPCG(splitmix64(uint64(seed)), splitmix64(uint64(int64(round))^0x6a09e667f3bcc909))
	for i := len(out) - 1; i > 0; i-- {
		j := uniform(r, uint64(i)+1)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// uniform returns a uniformly distributed number in [0, n) by rejection.
func uniform(r *rand.PCG, n uint64) uint64 {
	limit := -n % n // 2^64 mod n: values below it would bias the result
	for {
		if x := r.Uint64(); x >= limit {
			return x % n
		}
	}
}

// splitmix64 scrambles a seed so that neighbouring seeds and rounds give
// unrelated generator states.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
