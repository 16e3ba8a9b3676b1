package subnet

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"testing"
)

func TestParse(t *testing.T) {
	out := `default via 192.0.2.1 dev eth0
10.213.4.0/24 dev nnb-1 proto kernel scope link src 10.213.4.1
local 192.0.2.7 dev eth0 table local proto kernel scope host src 192.0.2.7
2: eth0    inet 192.0.2.7/24 brd 192.0.2.255 scope global eth0`
	got := Parse(out)
	want := []string{"192.0.2.1/32", "10.213.4.0/24", "10.213.4.1/32", "192.0.2.7/32", "192.0.2.7/32", "192.0.2.0/24", "192.0.2.255/32"}
	if len(got) != len(want) {
		t.Fatalf("Parse = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("Parse[%d] = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestPickAvoidsUsedAndTaken(t *testing.T) {
	pool := netip.MustParsePrefix("10.99.0.0/28") // four /30s
	used := []netip.Prefix{netip.MustParsePrefix("10.99.0.0/30"), netip.MustParsePrefix("10.99.0.9/32")}
	seen := map[netip.Prefix]bool{}
	for i := 0; i < 2; i++ {
		p, err := pick(used, pool, 30)
		if err != nil {
			t.Fatal(err)
		}
		if _, clash := Overlap(used, p); clash || seen[p] || !pool.Contains(p.Addr()) || p.Bits() != 30 {
			t.Fatalf("pick = %s: used, repeated or outside %s", p, pool)
		}
		seen[p] = true
		defer Release(p)
	}
	if p, err := pick(used, pool, 30); err == nil {
		t.Fatalf("pick with every /30 used or taken = %s, want an error", p)
	}
}

func TestReserve(t *testing.T) {
	used := []netip.Prefix{netip.MustParsePrefix("10.98.0.0/16")}
	if err := reserve(used, netip.MustParsePrefix("10.98.3.0/30")); !errors.Is(err, ErrCollides) {
		t.Fatalf("reserve inside a route = %v, want ErrCollides", err)
	}
	p := netip.MustParsePrefix("10.97.3.0/30")
	if err := reserve(used, p); err != nil {
		t.Fatal(err)
	}
	defer Release(p)
	if err := reserve(used, netip.MustParsePrefix("10.97.3.0/24")); !errors.Is(err, ErrCollides) {
		t.Fatalf("reserve over a taken subnet = %v, want ErrCollides", err)
	}
}

func TestUsedReadsThisMachine(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
	ps, err := Used(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParsePrefix("127.0.0.1/32")
	if _, ok := Overlap(ps, lo); !ok {
		t.Fatalf("Used = %v: no route or address covers 127.0.0.1", ps)
	}
}
