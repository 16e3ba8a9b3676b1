// Package host is where a load generator runs and how it reaches the servers
// it loads: a client host. The seeds' clients ran on machines of their own
// and reached native and Docker servers alike through a NIC; a client on
// the same host as its servers, talking over loopback, measures a different
// system (DESIGN.md, round 3). Two kinds exist:
//
//   - loopback: the client runs on this machine beside the servers and
//     reaches them at 127.0.0.1 (today's behaviour, `client: host`);
//   - netns: the client runs in a network namespace made for the run,
//     joined to this machine by a veth pair on a private host-only subnet
//     (MTU 1500 unless client_mtu says otherwise); servers listen on, or
//     are published on, the link's host-side address, and the platforms'
//     own subnets (docker0, the guests' bridge, pods) are routed to from
//     the namespace through this machine, as an outside client's packets
//     would be.
//
// A client host runs external tools (Wrap: redis-benchmark, iperf3, child
// driver processes) and opens nearnative's own connections (DialContext)
// inside itself; the processes stay this machine's, so their CPU is read
// from their rusage as before. A remote kind (a machine reached over SSH,
// its processes run by nearnative's agent, issue 27) would implement Host
// with a Wrap that hands the argv to the agent and a CPU reading of its own;
// nothing outside this package assumes the client shares this kernel except
// through Wrap, DialContext and Route.
//
// Everything a netns host makes carries the run: the namespace's name starts
// with runid.Prefix and the run's short ID and its loopback link has the
// alias nearnative.run=<id>, the veth pair has that alias, iptables rules
// have that comment. Close removes them; after a crash `nearnative cleanup
// <run>` finds them by those labels (cleanup's namespace, link and iptables
// sweepers).
package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Kind is a kind of client host.
type Kind string

// Kinds of client host.
const (
	// Loopback runs the client on this machine beside the servers.
	Loopback Kind = "loopback"
	// Netns runs the client in a network namespace joined by a veth pair.
	Netns Kind = "netns"
)

// Values of the study setting `client` (and of --client).
const (
	// SettingHost is today's behaviour: the client on this machine, the
	// servers on 127.0.0.1.
	SettingHost = "host"
	// SettingNetns runs the client in a network namespace of its own.
	SettingNetns = "netns"
)

// Settings lists the values of the `client` setting.
var Settings = []string{SettingNetns, SettingHost}

// MTU bounds and default of the client's link (client_mtu).
const (
	DefaultMTU = 1500
	MinMTU     = 576
	MaxMTU     = 65535
)

// Pool is the range a netns client's /30 comes from when the study names
// none: apart from 10.213.0.0/16, which the inter-container platforms and
// the guests' bridges use.
var Pool = netip.MustParsePrefix("10.214.0.0/16")

// Subnet sizes a study may name for the client's link (client_subnet).
const (
	MinSubnetBits = 24
	MaxSubnetBits = 30
)

// ErrSetting is matched by errors about what a study asks of its client
// host (a client_subnet that collides with a route of this machine): bad
// input, not a missing piece of the machine.
var ErrSetting = errors.New("bad client host setting")

// ErrUnavailable is matched by errors saying that this machine cannot make
// the client host asked for (not root, a tool missing, IP forwarding off).
var ErrUnavailable = errors.New("client host unavailable")

type wrapped struct {
	err  error
	kind error
}

func (w wrapped) Error() string   { return w.err.Error() }
func (w wrapped) Unwrap() []error { return []error{w.err, w.kind} }

func settingf(format string, args ...any) error {
	return wrapped{fmt.Errorf(format, args...), ErrSetting}
}

func unavailablef(format string, args ...any) error {
	return wrapped{fmt.Errorf(format, args...), ErrUnavailable}
}

// Setting is what a study asks of its client host.
type Setting struct {
	// Client is SettingNetns or SettingHost; "" is SettingHost (a study
	// built in code, a run stored before client hosts existed).
	Client string
	// MTU of the netns client's link; 0 is DefaultMTU.
	MTU int
	// Subnet of the netns client's link; the zero prefix picks a free /30
	// in Pool.
	Subnet netip.Prefix
}

// Validate checks the setting's values (not the machine: a subnet that
// collides with a route is found when the host is made).
func (s Setting) Validate() error {
	switch s.Client {
	case "", SettingHost, SettingNetns:
	default:
		return settingf("client %q: want %s", s.Client, strings.Join(Settings, " or "))
	}
	if s.MTU != 0 && (s.MTU < MinMTU || s.MTU > MaxMTU) {
		return settingf("client_mtu %d: want %d to %d (1500 is Ethernet's, 9000 jumbo frames)", s.MTU, MinMTU, MaxMTU)
	}
	if s.Subnet.IsValid() {
		if err := checkSubnet(s.Subnet); err != nil {
			return err
		}
	}
	return nil
}

// checkSubnet checks the form of a client_subnet.
func checkSubnet(p netip.Prefix) error {
	if !p.Addr().Is4() || !p.Addr().IsPrivate() || p.Bits() < MinSubnetBits || p.Bits() > MaxSubnetBits {
		return settingf("client_subnet %s: want a private IPv4 subnet of /%d to /%d (e.g. 10.214.7.0/30)", p, MinSubnetBits, MaxSubnetBits)
	}
	if p != p.Masked() {
		return settingf("client_subnet %s: host bits are set; did you mean %s?", p, p.Masked())
	}
	return nil
}

// ParseSubnet parses a client_subnet value.
func ParseSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, settingf("client_subnet %q: want a subnet such as 10.214.7.0/30", s)
	}
	return p, checkSubnet(p)
}

// Kind is the kind of client host the setting asks for.
func (s Setting) Kind() Kind {
	if s.Client == SettingNetns {
		return Netns
	}
	return Loopback
}

// MTUOrDefault is the link's MTU.
func (s Setting) MTUOrDefault() int {
	if s.MTU == 0 {
		return DefaultMTU
	}
	return s.MTU
}

// Host is where a load generator runs.
type Host interface {
	// Kind says which kind of client host this is.
	Kind() Kind
	// Describe says where the client runs and over what, for tables:
	// "host loopback", "netns veth MTU 1500".
	Describe() string
	// Detail adds the names and addresses, for a trial's record.
	Detail() string
	// ServerAddr is the IP address servers of this machine listen on, or
	// are published on, so that this client reaches them: 127.0.0.1, or
	// the host side of the client's link. Never a wildcard, never an
	// address of a link that leads off the machine.
	ServerAddr() string
	// ClientAddr is the IP address the client's connections come from
	// (127.0.0.1, or the client side of its link); servers that run
	// beside the client (a topology's roles beside the driver) listen on
	// it.
	ClientAddr() string
	// Subnet is the subnet the client's connections come from, for a
	// server's access rules (pg_hba): 127.0.0.0/8 or the link's subnet.
	Subnet() netip.Prefix
	// Wrap returns the argv that runs argv on the client host, exec'ing it
	// in place (the process keeps its pid, its process group and its
	// rusage); argv itself on loopback.
	Wrap(argv []string) []string
	// DialContext opens a connection from the client host, as
	// net.Dialer.DialContext; addr must hold an IP literal.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	// Route makes the client host reach dst through this machine (a
	// platform's subnet: docker0's, the guests' bridge, pod IPs). On
	// loopback there is nothing to do. Routing an already routed prefix
	// again is not an error.
	Route(ctx context.Context, dst netip.Prefix) error
	// CanRoute says, before anything starts, whether Route can work here
	// (a platform whose servers sit on a subnet of their own checks it):
	// nil, or an error matching ErrSetting that says why and how to fix it.
	CanRoute() error
	// Close removes what the host made; closing twice, or after what it
	// made is gone, is not an error.
	Close(ctx context.Context) error
}

// loopback is the client on this machine.
type loopback struct {
	// via is the server address when it is not 127.0.0.1 (docker-nat
	// under client: host publishes on the host side of a link nearnative
	// made, never on 127.0.0.1 nor on the machine's primary address);
	// link describes that link.
	via  netip.Addr
	link string
}

// LoopbackHost returns the client on this machine, reaching servers on
// 127.0.0.1.
func LoopbackHost() Host { return loopback{} }

var localhost = netip.MustParseAddr("127.0.0.1")

func (l loopback) Kind() Kind { return Loopback }

func (l loopback) Describe() string {
	if l.via.IsValid() {
		return "host to " + l.via.String() + " on a link nearnative made"
	}
	return "host loopback"
}

func (l loopback) Detail() string {
	if l.via.IsValid() {
		return "on this machine, servers on " + l.via.String() + ", " + l.link
	}
	return "on this machine"
}

func (l loopback) ServerAddr() string {
	if l.via.IsValid() {
		return l.via.String()
	}
	return localhost.String()
}

func (l loopback) ClientAddr() string {
	if l.via.IsValid() {
		return l.via.String()
	}
	return localhost.String()
}

func (l loopback) Subnet() netip.Prefix {
	if l.via.IsValid() {
		return netip.PrefixFrom(l.via, 32)
	}
	return netip.MustParsePrefix("127.0.0.0/8")
}

func (loopback) Wrap(argv []string) []string { return argv }

func (loopback) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (loopback) Route(context.Context, netip.Prefix) error { return nil }
func (loopback) CanRoute() error                           { return nil }
func (loopback) Close(context.Context) error               { return nil }

// Or returns h, or the loopback host when h is nil: a trial or platform
// given no client host runs its client on this machine.
func Or(h Host) Host {
	if h == nil {
		return LoopbackHost()
	}
	return h
}

// Need says which client host a platform needs.
type Need int

// Needs of platforms.
const (
	// Any: the client host the study's setting asks for.
	Any Need = iota
	// LoopbackOnly: the client on this machine whatever the setting
	// (docker-proxy measures the userland proxy on 127.0.0.1).
	LoopbackOnly
	// LinkAddress: the study's client host, and with client: host still a
	// non-loopback address of a link nearnative made (docker-nat's DNAT
	// path does not serve 127.0.0.1).
	LinkAddress
	// None: the platform's clients run inside it (the inter-container
	// techniques run theirs in containers); no client host.
	None
)
