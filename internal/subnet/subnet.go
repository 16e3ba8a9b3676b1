// Package subnet finds private IPv4 subnets that this machine neither routes
// nor holds addresses in, for the links nearnative makes (the inter-container
// networking platforms' bridges, the client host's link), and checks a subnet
// a user names against the machine's routes.
package subnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// Used lists the IPv4 prefixes this machine routes or holds addresses in,
// from `ip -4 route show table all` and `ip -4 addr`; default routes are
// left out (they overlap everything).
func Used(ctx context.Context) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, argv := range [][]string{{"ip", "-4", "route", "show", "table", "all"}, {"ip", "-4", "-o", "addr", "show"}} {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
		ps = append(ps, Parse(string(out))...)
	}
	return ps, nil
}

// Parse reads the IPv4 prefixes and addresses (as /32) named in the output
// of `ip route` or `ip addr`, skipping default routes.
func Parse(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		for _, f := range strings.Fields(line) {
			if !strings.Contains(f, "/") && !strings.Contains(f, ".") {
				continue
			}
			if !strings.Contains(f, "/") {
				f += "/32"
			}
			if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() && p.Bits() > 0 {
				ps = append(ps, p.Masked())
			}
		}
	}
	return ps
}

// Overlap returns the first of used that overlaps p, and whether one does.
func Overlap(used []netip.Prefix, p netip.Prefix) (netip.Prefix, bool) {
	for _, u := range used {
		if u.Bits() > 0 && u.Overlaps(p) {
			return u, true
		}
	}
	return netip.Prefix{}, false
}

// taken remembers the subnets this process has handed out, so that two
// links of one run never share one even before either is routed.
var taken = struct {
	sync.Mutex
	set map[netip.Prefix]bool
}{set: map[netip.Prefix]bool{}}

// Pick chooses a subnet of bits bits inside pool (from a random start) that
// no route or address of the machine overlaps and this process has not
// handed out; Release gives it back.
func Pick(ctx context.Context, pool netip.Prefix, bits int) (netip.Prefix, error) {
	if !pool.Addr().Is4() || bits < pool.Bits() || bits > 30 {
		return netip.Prefix{}, fmt.Errorf("subnet: cannot cut /%d subnets from %s", bits, pool)
	}
	used, err := Used(ctx)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("reading the machine's routes: %w", err)
	}
	return pick(used, pool.Masked(), bits)
}

func pick(used []netip.Prefix, pool netip.Prefix, bits int) (netip.Prefix, error) {
	n := 1 << (bits - pool.Bits())
	base := pool.Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	size := uint32(1) << (32 - bits)
	taken.Lock()
	defer taken.Unlock()
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		a := b + uint32((start+i)%n)*size
		c := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits)
		if taken.set[c] {
			continue
		}
		if _, clash := Overlap(used, c); !clash {
			taken.set[c] = true
			return c, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d left in %s", bits, pool)
}

// ErrCollides is matched by Reserve's error when the subnet overlaps a
// route or address of the machine.
var ErrCollides = errors.New("subnet collides with the machine's routes")

// Reserve checks that p overlaps no route or address of the machine and no
// subnet this process handed out, and marks it handed out; Release gives it
// back.
func Reserve(ctx context.Context, p netip.Prefix) error {
	used, err := Used(ctx)
	if err != nil {
		return fmt.Errorf("reading the machine's routes: %w", err)
	}
	return reserve(used, p.Masked())
}

func reserve(used []netip.Prefix, p netip.Prefix) error {
	if u, clash := Overlap(used, p); clash {
		return fmt.Errorf("%w: %s overlaps %s", ErrCollides, p, u)
	}
	taken.Lock()
	defer taken.Unlock()
	for t := range taken.set {
		if t.Overlaps(p) {
			return fmt.Errorf("%w: %s overlaps %s, which this run already uses", ErrCollides, p, t)
		}
	}
	taken.set[p] = true
	return nil
}

// Release returns a subnet handed out by Pick or Reserve.
func Release(p netip.Prefix) {
	taken.Lock()
	defer taken.Unlock()
	delete(taken.set, p)
}
