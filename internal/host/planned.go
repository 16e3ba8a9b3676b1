package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// errPlanned is what a planned host answers to anything that needs it made.
var errPlanned = errors.New("a planned client host is only described: nothing was made")

// planned is the netns client host a run with its setting would make,
// described without making anything: checks made before or instead of a
// run (`nearnative platforms`, `nearnative studies`) ask platforms
// whether they could serve it.
type planned struct {
	mtu    int
	subnet netip.Prefix
}

// Planned is the client host a run with setting s would have, for checks
// made without a run: the loopback host for `client: host`, otherwise a
// netns host that is only described (its addresses are the first of s's
// subnet or of Pool; DialContext and Route fail, Wrap leaves a command as
// it is, CanRoute checks this machine as NewNS would). It makes nothing.
func Planned(s Setting) Host {
	if s.Kind() == Loopback {
		return LoopbackHost()
	}
	p := planned{mtu: s.MTUOrDefault(), subnet: s.Subnet}
	if !p.subnet.IsValid() {
		p.subnet = netip.PrefixFrom(Pool.Addr(), MaxSubnetBits)
	}
	return p
}

// PlannedFor is the client host Hosts.For would give a platform that needs
// need under setting s, planned as Planned is: nil for None.
func PlannedFor(s Setting, need Need) Host {
	switch {
	case need == None:
		return nil
	case need == LoopbackOnly:
		return LoopbackHost()
	case s.Kind() == Netns, need == LinkAddress:
		return Planned(Setting{Client: SettingNetns, MTU: s.MTU, Subnet: s.Subnet})
	}
	return LoopbackHost()
}

func (p planned) Kind() Kind         { return Netns }
func (p planned) Describe() string   { return fmt.Sprintf("netns veth MTU %d", p.mtu) }
func (p planned) Detail() string     { return p.Describe() + " (planned, not made)" }
func (p planned) ServerAddr() string { return p.subnet.Addr().Next().String() }
func (p planned) ClientAddr() string { return p.subnet.Addr().Next().Next().String() }
func (p planned) Subnet() netip.Prefix {
	return p.subnet
}
func (p planned) Wrap(argv []string) []string { return argv }
func (p planned) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errPlanned
}
func (p planned) Route(context.Context, netip.Prefix) error { return errPlanned }
func (p planned) CanRoute() error                           { return Check() }
func (p planned) Close(context.Context) error               { return nil }
