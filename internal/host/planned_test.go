package host

import (
	"context"
	"net/netip"
	"testing"
)

// TestPlannedFor: a check made without a run sees the client host a run
// would make, with a link address wherever the run would have one, and
// nothing is made.
func TestPlannedFor(t *testing.T) {
	netns := Setting{Client: SettingNetns}
	loop := Setting{Client: SettingHost}
	for _, c := range []struct {
		name     string
		set      Setting
		need     Need
		kind     Kind
		loopback bool
		none     bool
	}{
		{"netns, any", netns, Any, Netns, false, false},
		{"netns, loopback only", netns, LoopbackOnly, Loopback, true, false},
		{"host, any", loop, Any, Loopback, true, false},
		{"host, link address (docker-nat)", loop, LinkAddress, Netns, false, false},
		{"none", netns, None, "", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := PlannedFor(c.set, c.need)
			if c.none {
				if h != nil {
					t.Fatalf("PlannedFor = %v, want nil", h)
				}
				return
			}
			if h.Kind() != c.kind {
				t.Errorf("Kind = %s, want %s", h.Kind(), c.kind)
			}
			if a := netip.MustParseAddr(h.ServerAddr()); a.IsLoopback() != c.loopback {
				t.Errorf("ServerAddr %s: loopback %v, want %v", a, a.IsLoopback(), c.loopback)
			}
		})
	}
	h := Planned(Setting{Client: SettingNetns, MTU: 9000, Subnet: netip.MustParsePrefix("10.214.7.0/30")})
	if h.ServerAddr() != "10.214.7.1" || h.ClientAddr() != "10.214.7.2" || h.Describe() != "netns veth MTU 9000" {
		t.Errorf("planned host: %s %s %q", h.ServerAddr(), h.ClientAddr(), h.Describe())
	}
	if err := h.Route(context.Background(), netip.MustParsePrefix("172.17.0.0/16")); err == nil {
		t.Error("a planned host routed: it must make nothing")
	}
}
