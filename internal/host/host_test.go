package host

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

func TestSettingValidate(t *testing.T) {
	for _, c := range []struct {
		s    Setting
		want string // "" = valid
	}{
		{Setting{}, ""},
		{Setting{Client: SettingNetns, MTU: 9000}, ""},
		{Setting{Client: SettingHost}, ""},
		{Setting{Client: "vm"}, `client "vm": want netns or host`},
		{Setting{Client: SettingNetns, MTU: 575}, "client_mtu 575: want 576 to 65535"},
		{Setting{Client: SettingNetns, MTU: 65536}, "client_mtu 65536: want 576 to 65535"},
		{Setting{Client: SettingNetns, Subnet: netip.MustParsePrefix("10.214.7.0/30")}, ""},
		{Setting{Client: SettingNetns, Subnet: netip.MustParsePrefix("8.8.8.0/30")}, "client_subnet 8.8.8.0/30: want a private IPv4 subnet"},
		{Setting{Client: SettingNetns, Subnet: netip.MustParsePrefix("10.214.0.0/16")}, "client_subnet 10.214.0.0/16: want a private IPv4 subnet of /24 to /30"},
		{Setting{Client: SettingNetns, Subnet: netip.MustParsePrefix("10.214.7.1/30")}, "host bits are set; did you mean 10.214.7.0/30?"},
	} {
		err := c.s.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.s, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrSetting)):
			t.Errorf("%+v: %v, want ErrSetting containing %q", c.s, err, c.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	h := Or(nil)
	if h.Kind() != Loopback || h.ServerAddr() != "127.0.0.1" || h.Describe() != "host loopback" {
		t.Fatalf("loopback: %s %s %q", h.Kind(), h.ServerAddr(), h.Describe())
	}
	if got := h.Wrap([]string{"a", "b"}); strings.Join(got, " ") != "a b" {
		t.Fatalf("Wrap = %v", got)
	}
}

// needRoot skips unless the test may make namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes a network namespace; skipped in -short mode")
	}
	if err := Check(); err != nil {
		t.Skip(err)
	}
}

// testRun is a run ID of this test process.
func testRun() runid.ID { return runid.New() }

// leftovers lists what of run is left on this machine: namespaces, links
// with its alias, iptables rules with its comment.
func leftovers(t *testing.T, h *NS, run runid.ID) []string {
	t.Helper()
	var out []string
	if b, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(b), h.Name()) {
		out = append(out, "namespace "+h.Name())
	}
	if b, _ := exec.Command("ip", "-d", "link", "show").Output(); strings.Contains(string(b), Label+string(run)) {
		out = append(out, "link with the run's alias")
	}
	if b, _ := exec.Command("iptables-save").Output(); strings.Contains(string(b), Label+string(run)) {
		out = append(out, "iptables rule with the run's comment")
	}
	return out
}

func TestNSLifecycle(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	run := testRun()
	h, err := NewNS(ctx, run, Setting{Client: SettingNetns, MTU: 1400})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if !strings.HasPrefix(h.Name(), runid.Prefix+run.Short()+"-") {
		t.Errorf("namespace %s does not start with %s", h.Name(), runid.Prefix+run.Short()+"-")
	}
	if !Pool.Contains(h.subnet.Addr()) || h.subnet.Bits() != 30 {
		t.Errorf("subnet %s: want a /30 of %s", h.subnet, Pool)
	}
	if d := h.Describe(); d != "netns veth MTU 1400" {
		t.Errorf("Describe = %q", d)
	}
	save, _ := exec.Command("iptables-save").Output()
	for _, want := range []string{"-A PREROUTING -d " + h.ServerAddr() + "/32 ! -i " + h.HostLink(), "-o " + h.HostLink() + " -m comment", "-i " + h.HostLink() + " -m comment"} {
		if !strings.Contains(string(save), want) {
			t.Errorf("iptables-save has no rule with %q", want)
		}
	}

	// A server on the host side, reached from the namespace by our own
	// dialer: the connection comes from the namespace's address.
	l, err := net.Listen("tcp", net.JoinHostPort(h.ServerAddr(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- err.Error()
			return
		}
		accepted <- c.RemoteAddr().String()
		c.Close()
	}()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := h.DialContext(dctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if from := <-accepted; !strings.HasPrefix(from, h.ClientAddr()+":") {
		t.Errorf("the server saw the client at %s, want %s", from, h.ClientAddr())
	}
	// The namespace is not this machine: its 127.0.0.1 is its own. (A
	// listener on this machine's 127.0.0.1, which a dial made outside the
	// namespace would reach.)
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	if c, err := h.DialContext(dctx, "tcp", lo.Addr().String()); err == nil {
		c.Close()
		t.Error("dialing 127.0.0.1 from the namespace reached this machine's listener")
	}
	if _, err := h.DialContext(dctx, "tcp", "localhost:80"); err == nil || !strings.Contains(err.Error(), "IP address") {
		t.Errorf("dialing a name = %v, want a refusal", err)
	}

	// A tool run through Wrap is in the namespace, with its MTU.
	argv := h.Wrap([]string{"ip", "-o", "link", "show", "dev", h.nsLink})
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mtu 1400") {
		t.Errorf("ip link in the namespace: %v: %s", err, out)
	}

	// A route to a prefix through this machine.
	dst := netip.MustParsePrefix("192.0.2.0/24")
	if err := h.Route(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if err := h.Route(ctx, dst); err != nil {
		t.Fatalf("routing twice: %v", err)
	}
	out, _ = exec.Command("ip", "-n", h.Name(), "route").CombinedOutput()
	if !strings.Contains(string(out), "192.0.2.0/24 via "+h.ServerAddr()) {
		t.Errorf("routes in the namespace:\n%s", out)
	}

	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("closing twice: %v", err)
	}
	if left := leftovers(t, h, run); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}
}

func TestNSSubnetCollides(t *testing.T) {
	needRoot(t)
	// A /30 around a private address this machine holds.
	b, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		t.Skip(err)
	}
	var taken netip.Prefix
	for _, f := range strings.Fields(string(b)) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Addr().IsPrivate() && p.Bits() <= 30 {
			taken = netip.PrefixFrom(p.Addr(), 30).Masked()
			break
		}
	}
	if !taken.IsValid() {
		t.Skip("no private IPv4 address on this machine to collide with")
	}
	run := testRun()
	h, err := NewNS(context.Background(), run, Setting{Client: SettingNetns, Subnet: taken})
	if err == nil {
		h.Close(context.Background())
		t.Fatalf("client_subnet %s (an address of this machine) was accepted", taken)
	}
	if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), "collides") {
		t.Fatalf("error %v: want ErrSetting saying it collides", err)
	}
	if b, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(b), runid.Prefix+run.Short()) {
		t.Fatalf("a namespace was left: %s", b)
	}
}

func TestHostsHandOut(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	hs := NewHosts(testRun(), Setting{Client: SettingHost})
	defer hs.Close(ctx)
	lo, err := hs.For(ctx, Any)
	if err != nil || lo.Kind() != Loopback || lo.ServerAddr() != "127.0.0.1" {
		t.Fatalf("native under client: host = %v, %v", lo, err)
	}
	nat, err := hs.For(ctx, LinkAddress)
	if err != nil {
		t.Fatal(err)
	}
	if nat.Kind() != Loopback || nat.ServerAddr() == "127.0.0.1" || !Pool.Contains(netip.MustParseAddr(nat.ServerAddr())) {
		t.Fatalf("docker-nat under client: host: %s at %s, want the client on this machine and a link address", nat.Kind(), nat.ServerAddr())
	}
	if h, err := hs.For(ctx, None); h != nil || err != nil {
		t.Fatalf("None = %v, %v", h, err)
	}
	uses := Uses(map[string]Host{"native": lo, "docker-bridge": lo, "docker-nat": nat, "veth": nil})
	if len(uses) != 3 || uses[0].String() != "host loopback (docker-bridge, native)" ||
		uses[1].String() != "host to "+nat.ServerAddr()+" on a link nearnative made (docker-nat)" || uses[2].String() != Inside+" (veth)" {
		t.Fatalf("Uses = %v", uses)
	}
	if err := hs.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNSOutsideCannotReach plays a machine on the uplink: a second
// namespace joined to this machine by its own veth, with a route to the
// client link's host-side address through this machine (what a neighbour on
// the LAN could set up). A server listening on the host-side address
// answers the client's namespace and never that neighbour, which the weak
// host model would otherwise let in.
func TestNSOutsideCannotReach(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	run := testRun()
	h, err := NewNS(ctx, run, Setting{Client: SettingNetns})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	// The neighbour: another client host of the same run, its own link.
	out, err := NewNS(ctx, run, Setting{Client: SettingNetns})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	if _, err := command(ctx, "ip", "-n", out.Name(), "route", "add", h.ServerAddr()+"/32", "via", out.ServerAddr()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.ServerAddr(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(from *NS) error {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := from.DialContext(dctx, "tcp", l.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(h); err != nil {
		t.Fatalf("the client host cannot reach its server: %v", err)
	}
	if err := dial(out); err == nil {
		t.Fatal("a neighbour reached a server on the client link's host-side address")
	}
	// The same neighbour reaches it once the rule is gone: the test
	// proves the rule, not a missing route.
	rule := h.rules[len(h.rules)-1]
	if rule[0] != "mangle" {
		t.Fatalf("last rule %v, want the mangle PREROUTING drop", rule)
	}
	if _, err := command(ctx, append([]string{"iptables", "-w", "-t", rule[0], "-D", rule[1]}, rule[2:]...)...); err != nil {
		t.Fatal(err)
	}
	if err := dial(out); err != nil {
		t.Fatalf("without the drop rule the neighbour still cannot reach the server (%v): the test shows nothing", err)
	}
}

// TestSources: a client host of one address answers its Subnet.
func TestSources(t *testing.T) {
	l := LoopbackHost()
	if got := Sources(l); len(got) != 1 || got[0] != l.Subnet() {
		t.Errorf("Sources(loopback) = %v, want [%v]", got, l.Subnet())
	}
}
