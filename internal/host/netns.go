package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/subnet"
)

// Label is the prefix of the alias on every link and of the comment on
// every iptables rule a netns host makes; the run ID follows.
const Label = runid.Label + "="

// teardownTimeout bounds a Close detached from the caller's context.
const teardownTimeout = 30 * time.Second

// seq numbers the netns hosts of this process, so that two of one run (a
// test's) get distinct names.
var seq atomic.Uint32

// NS is a client host in a network namespace of its own, joined to this
// machine by a veth pair: the host side holds the first address of the
// link's subnet, the namespace side the second.
type NS struct {
	run      runid.ID
	name     string // the namespace, under /run/netns
	hostLink string // the veth end on this machine
	nsLink   string // the veth end in the namespace
	subnet   netip.Prefix
	picked   bool // the subnet came from Pool (else the study named it)
	hostAddr netip.Addr
	nsAddr   netip.Addr
	mtu      int

	mu     sync.Mutex
	fd     *os.File   // the namespace, for DialContext
	rules  [][]string // made iptables rules: table, then the rule as -D takes it
	routes map[netip.Prefix]bool
	closed bool
}

// NewNS makes the network namespace nn-<short>-c<n> for run, a veth pair
// into it with s's MTU on s's subnet (or a free /30 of Pool), and the
// iptables rules that keep it a host-only link: nothing is forwarded into
// the namespace but replies, and the host-side address answers only on the
// link and on loopback. On error whatever was made is removed again.
func NewNS(ctx context.Context, run runid.ID, s Setting) (_ *NS, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := Check(); err != nil {
		return nil, err
	}
	n := seq.Add(1)
	tag := "c" + string("0123456789abcdefghijklmnopqrstuvwxyz"[n%36])
	h := &NS{run: run, name: runid.Prefix + run.Short() + "-" + tag, hostLink: "nn" + run.Short() + tag + "h",
		nsLink: "nn" + run.Short() + tag + "n", mtu: s.MTUOrDefault(), routes: map[netip.Prefix]bool{}}
	if s.Subnet.IsValid() {
		if err := subnet.Reserve(ctx, s.Subnet); err != nil {
			if errors.Is(err, subnet.ErrCollides) {
				return nil, settingf("client_subnet %s collides with this machine's routes (%v): name a free private subnet or leave client_subnet out", s.Subnet, err)
			}
			return nil, err
		}
		h.subnet = s.Subnet
	} else {
		if h.subnet, err = subnet.Pick(ctx, Pool, 30); err != nil {
			return nil, fmt.Errorf("client host: %w", err)
		}
		h.picked = true
	}
	h.hostAddr = h.subnet.Addr().Next()
	h.nsAddr = h.hostAddr.Next()
	defer func() {
		if err != nil {
			if cerr := h.Close(context.WithoutCancel(ctx)); cerr != nil {
				err = errors.Join(err, fmt.Errorf("removing the half-made client host: %w", cerr))
			}
		}
	}()
	if err := h.make(ctx); err != nil {
		return nil, fmt.Errorf("making the client host %s: %w", h.name, err)
	}
	return h, nil
}

// Check says whether this machine can make a netns client host.
func Check() error {
	if os.Geteuid() != 0 {
		return unavailablef("client: netns needs root to make a network namespace and a veth pair: run nearnative as root, or use --client host")
	}
	for _, t := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(t); err != nil {
			pkg := map[string]string{"ip": "iproute2", "iptables": "iptables", "nsenter": "util-linux"}[t]
			return unavailablef("client: netns needs %s: install %s, or use --client host", t, pkg)
		}
	}
	return nil
}

// make builds the namespace, the link and the rules.
func (h *NS) make(ctx context.Context) error {
	alias := Label + string(h.run)
	steps := [][]string{
		{"ip", "netns", "add", h.name},
		// The loopback's alias is how cleanup knows the namespace's run.
		{"ip", "-n", h.name, "link", "set", "dev", "lo", "alias", alias},
		{"ip", "-n", h.name, "link", "set", "dev", "lo", "up"},
		{"ip", "link", "add", h.hostLink, "type", "veth", "peer", "name", h.nsLink, "netns", h.name},
		{"ip", "link", "set", "dev", h.hostLink, "alias", alias},
		{"ip", "-n", h.name, "link", "set", "dev", h.nsLink, "alias", alias},
		{"ip", "link", "set", "dev", h.hostLink, "mtu", strconv.Itoa(h.mtu)},
		{"ip", "-n", h.name, "link", "set", "dev", h.nsLink, "mtu", strconv.Itoa(h.mtu)},
		{"ip", "addr", "add", netip.PrefixFrom(h.hostAddr, h.subnet.Bits()).String(), "dev", h.hostLink},
		{"ip", "-n", h.name, "addr", "add", netip.PrefixFrom(h.nsAddr, h.subnet.Bits()).String(), "dev", h.nsLink},
		{"ip", "link", "set", "dev", h.hostLink, "up"},
		{"ip", "-n", h.name, "link", "set", "dev", h.nsLink, "up"},
	}
	for _, argv := range steps {
		if _, err := command(ctx, argv...); err != nil {
			return err
		}
	}
	// IPv4 only: no link-local IPv6 address for a server to bind by
	// accident on either end.
	os.WriteFile("/proc/sys/net/ipv6/conf/"+h.hostLink+"/disable_ipv6", []byte("1"), 0o644)
	if err := h.addRules(ctx); err != nil {
		return err
	}
	f, err := os.Open("/run/netns/" + h.name)
	if err != nil {
		return fmt.Errorf("opening the namespace: %w", err)
	}
	h.fd = f
	return nil
}

// forwardChain is where the link's forwarding rules go: Docker's
// DOCKER-USER chain when it exists (the place Docker documents for rules of
// one's own, evaluated before its own), else FORWARD.
func forwardChain(ctx context.Context) string {
	if _, err := command(ctx, "iptables", "-w", "-S", "DOCKER-USER"); err == nil {
		return "DOCKER-USER"
	}
	return "FORWARD"
}

// addRules inserts the link's rules, each first in its chain, labelled with
// the run:
//
//   - filter: forwarded packets from the namespace are accepted (the
//     namespace's own routes say where it may go: only to the prefixes
//     Route adds); forwarded packets into it only when they belong to a
//     connection it opened; anything else forwarded into it is dropped.
//   - mangle PREROUTING: a packet for the host-side address that arrives
//     on neither the link nor this machine's own loopback path (a
//     non-local source) and opens a connection is dropped before NAT: with
//     the weak host model Linux would otherwise accept it on the uplink,
//     and the servers listening or published on that address (docker-nat's
//     DNAT happens in nat PREROUTING, after this) would be reachable from
//     outside. Not raw PREROUTING, which comes before connection tracking:
//     a container's replies to this machine's own connections to a port
//     published there (they leave with the host-side address as source)
//     arrive on docker0 and must pass.
func (h *NS) addRules(ctx context.Context) error {
	comment := []string{"-m", "comment", "--comment", Label + string(h.run)}
	chain := forwardChain(ctx)
	// Inserted at the top in reverse order of evaluation.
	rules := [][]string{
		append([]string{"filter", chain, "-o", h.hostLink}, append(comment, "-j", "DROP")...),
		append([]string{"filter", chain, "-o", h.hostLink, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"}, append(comment, "-j", "ACCEPT")...),
		append([]string{"filter", chain, "-i", h.hostLink}, append(comment, "-j", "ACCEPT")...),
		append([]string{"mangle", "PREROUTING", "-d", h.hostAddr.String() + "/32", "!", "-i", h.hostLink, "-m", "addrtype", "!", "--src-type", "LOCAL",
			"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED"}, append(comment, "-j", "DROP")...),
	}
	for _, r := range rules {
		argv := append([]string{"iptables", "-w", "-t", r[0], "-I", r[1], "1"}, r[2:]...)
		if _, err := command(ctx, argv...); err != nil {
			return err
		}
		h.mu.Lock()
		h.rules = append(h.rules, r)
		h.mu.Unlock()
	}
	return nil
}

// Name is the namespace's name (under /run/netns).
func (h *NS) Name() string { return h.name }

// HostLink is the name of the veth end on this machine.
func (h *NS) HostLink() string { return h.hostLink }

// Kind implements Host.
func (h *NS) Kind() Kind { return Netns }

// Describe implements Host.
func (h *NS) Describe() string { return fmt.Sprintf("netns veth MTU %d", h.mtu) }

// Detail implements Host.
func (h *NS) Detail() string {
	return fmt.Sprintf("namespace %s, veth %s %s (this machine, servers) <-> %s %s (the client) on %s",
		h.name, h.hostLink, h.hostAddr, h.nsLink, h.nsAddr, h.subnet)
}

// ServerAddr implements Host: the link's host-side address.
func (h *NS) ServerAddr() string { return h.hostAddr.String() }

// ClientAddr implements Host: the link's namespace-side address.
func (h *NS) ClientAddr() string { return h.nsAddr.String() }

// Subnet implements Host.
func (h *NS) Subnet() netip.Prefix { return h.subnet }

// MTU is the link's MTU.
func (h *NS) MTU() int { return h.mtu }

// Wrap implements Host: nsenter joins the namespace and execs argv, so the
// tool keeps nsenter's pid, process group and rusage.
func (h *NS) Wrap(argv []string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + h.name, "--"}, argv...)
}

// OnHost returns a client on this machine that reaches servers at the
// link's host-side address: what docker-nat needs under client: host (its
// iptables DNAT path serves no loopback address, and nothing of a run is
// published on the machine's primary address).
func (h *NS) OnHost() Host {
	return loopback{via: h.hostAddr, link: "veth " + h.hostLink + " of " + h.subnet.String() + ", host-only"}
}

// DialContext implements Host: the socket is made on an OS thread that has
// entered the namespace (a socket belongs to the namespace it was made in),
// which then returns to this machine's namespace. A thread that cannot
// return is never unlocked, so that it dies with its goroutine instead of
// running other goroutines in the namespace.
func (h *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ip, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("client host %s: dialing %s: %w", h.name, addr, err)
	}
	if _, err := netip.ParseAddr(ip); err != nil {
		return nil, fmt.Errorf("client host %s: dialing %s: want an IP address, not a name (names would be resolved on this machine)", h.name, addr)
	}
	h.mu.Lock()
	fd := h.fd
	h.mu.Unlock()
	if fd == nil {
		return nil, fmt.Errorf("client host %s is closed", h.name)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("client host %s: opening this thread's namespace: %w", h.name, err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("client host %s: entering the namespace: %w", h.name, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// Locked for good: the runtime ends the thread with this
			// goroutine.
			if c != nil {
				c.Close()
			}
			ch <- result{nil, fmt.Errorf("client host %s: returning from the namespace: %w", h.name, rerr)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// ErrUnreachable is matched by Route's error when this machine cannot
// forward the client's packets.
var ErrUnreachable = errors.New("unreachable from the client host")

// Route implements Host: a route in the namespace to dst via the link's
// host-side address. This machine must forward IPv4 (Docker turns it on;
// nearnative does not change it).
func (h *NS) Route(ctx context.Context, dst netip.Prefix) error {
	dst = dst.Masked()
	if !dst.Addr().Is4() {
		return fmt.Errorf("client host %s: route to %s: IPv4 only", h.name, dst)
	}
	if h.subnet.Contains(dst.Addr()) && dst.Bits() >= h.subnet.Bits() {
		return nil // on the link
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("client host %s is closed", h.name)
	}
	if h.routes[dst] {
		return nil
	}
	if err := h.CanRoute(); err != nil {
		return err
	}
	if _, err := command(ctx, "ip", "-n", h.name, "route", "replace", dst.String(), "via", h.hostAddr.String()); err != nil {
		return fmt.Errorf("client host %s: %w", h.name, err)
	}
	h.routes[dst] = true
	return nil
}

// CanRoute implements Host: the client's packets to a platform's subnet
// cross this machine, which must forward IPv4.
func (h *NS) CanRoute() error {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return wrapped{errors.New("the client host reaches this platform's servers through this machine, which does not forward IPv4 " +
			"(net.ipv4.ip_forward is not 1; Docker sets it, nearnative does not change it): set it, or run with --client host (client: host)"),
			errors.Join(ErrUnreachable, ErrSetting)}
	}
	return nil
}

// Routes lists the prefixes routed so far.
func (h *NS) Routes() []netip.Prefix {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []netip.Prefix
	for p := range h.routes {
		out = append(out, p)
	}
	return out
}

// Close implements Host: the rules, the link and the namespace go (the
// routes with the namespace), each "already gone" counting as success.
func (h *NS) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	var errs []error
	for i := len(h.rules) - 1; i >= 0; i-- {
		r := h.rules[i]
		argv := append([]string{"iptables", "-w", "-t", r[0], "-D", r[1]}, r[2:]...)
		if _, err := command(ctx, argv...); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	h.rules = nil
	if h.fd != nil {
		h.fd.Close()
		h.fd = nil
	}
	// The link first: a process left in the namespace would keep the
	// namespace, and with it the pair, alive after netns del.
	if _, err := command(ctx, "ip", "link", "del", "dev", h.hostLink); err != nil && !gone(err) {
		errs = append(errs, err)
	}
	if _, err := command(ctx, "ip", "netns", "del", h.name); err != nil && !gone(err) {
		errs = append(errs, err)
	}
	h.routes = map[netip.Prefix]bool{}
	if h.subnet.IsValid() {
		subnet.Release(h.subnet)
	}
	return errors.Join(errs...)
}

// command runs argv; its error quotes the command and what it printed.
func command(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// gone reports whether a command's error says the object does not exist.
func gone(err error) bool {
	s := err.Error()
	for _, m := range []string{"Cannot find device", "No such file", "does not exist", "not found", "Bad rule"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
