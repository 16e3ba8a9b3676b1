// Package netns runs servers and jobs in containers that Docker starts with
// no network (--network none) and that nearnative then joins with one of the
// inter-container networking techniques of the seed "Docker network
// performance":
//
//   - veth: a veth pair per container into a Linux bridge (the pipework way);
//   - ovs: a veth pair per container into an Open vSwitch bridge;
//   - routed: a veth pair per container, a /32 address in the container and
//     the host routing between them (proxy ARP, iptables FORWARD rules);
//   - macvlan: a macvlan (bridge mode) per container on a parent link
//     nearnative makes (one end of a veth pair), never the machine's uplink.
//
// Each container's network namespace is named nn-<short>-<tag><n> under
// /run/netns (ip netns attach) so that ip -n can configure it. Every host
// object carries the run: links an alias nearnative.run=<id> (the namespace's
// lo too), OVS bridges and ports external_ids:nearnative-run=<id>, iptables
// rules a comment nearnative.run=<id>. Addresses come from a private /24 in
// 10.213.0.0/16 that no route of the machine overlaps; the machine's own
// interfaces, routes and settings are never changed.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/subnet"
)

// Alias is the prefix of the alias put on every link nearnative makes; the
// run ID follows.
const Alias = runid.Label + "="

// OVSExternalID is the external_ids key on OVS bridges and ports.
const OVSExternalID = "nearnative-run"

// Comment is the prefix of the iptables comment on every rule; the run ID
// follows.
const Comment = runid.Label + "="

// Pool is the range the platforms' /24s come from.
var Pool = netip.MustParsePrefix("10.213.0.0/16")

// NamespacePrefix starts the name of every namespace nearnative makes.
const NamespacePrefix = runid.Prefix

// OVSCtl starts and stops the Open vSwitch daemons on machines without an
// init system that does.
const OVSCtl = "/usr/share/openvswitch/scripts/ovs-ctl"

// teardownTimeout bounds teardown detached from the caller's context.
const teardownTimeout = 30 * time.Second

// Kinds lists the platform kinds this package implements.
var Kinds = []string{platform.Veth, platform.OVS, platform.Routed, platform.Macvlan}

// kindLetter starts the tag of a platform's names.
var kindLetter = map[string]string{platform.Veth: "v", platform.OVS: "o", platform.Routed: "r", platform.Macvlan: "m"}

// seq numbers the platforms of this process so that two of one kind in a run
// get distinct names.
var seq atomic.Uint32

// Platform joins containers with one technique.
type Platform struct {
	kind, name string
	env        platform.Env
	api        client.APIClient
	eng        *docker.Daemon
	opt        platform.Options
	prefix     string // "nn" + run short ID + tag: starts every link name

	mu     sync.Mutex
	fab    *fabric
	next   int          // next endpoint number
	inUse  map[int]bool // host numbers (last octet) in use
	lastIP int
}

// fabric is what a platform shares between its endpoints: the /24, the
// bridge or parent link, the iptables rules, and whether it started OVS.
type fabric struct {
	subnet     netip.Prefix
	bridge     string // veth, ovs: the bridge; macvlan: the parent link
	peer       string // macvlan: the parent's veth peer
	rules      [][]string
	ovsStarted bool
}

// New returns the platform of kind (platform.Veth, OVS, Routed or Macvlan)
// named name, running env.Image on engine eng with options opt. Nothing is
// made on the host before the first Start or RunJob.
func New(kind, name string, env platform.Env, eng *docker.Daemon, opt platform.Options) (*Platform, error) {
	letter, ok := kindLetter[kind]
	if !ok {
		return nil, fmt.Errorf("netns platform %q: unknown kind %q (want %s)", name, kind, strings.Join(Kinds, ", "))
	}
	if name == "" {
		name = kind
	}
	if eng == nil {
		return nil, fmt.Errorf("%s: no Docker engine", name)
	}
	if env.Image == "" {
		return nil, fmt.Errorf("%s: no workload image", name)
	}
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	tag := letter + string("0123456789abcdefghijklmnopqrstuvwxyz"[seq.Add(1)%36])
	return &Platform{kind: kind, name: name, env: env, api: eng.API(), eng: eng, opt: opt,
		prefix: "nn" + env.Run.Short() + tag, inUse: map[int]bool{}}, nil
}

// Name is the platform's name in the study.
func (p *Platform) Name() string { return p.name }

// Check says whether the technique can run here without changing the
// machine's configuration.
func (p *Platform) Check(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return platform.Unavailablef("%s needs root to make namespaces and links: run nearnative as root", p.name)
	}
	need := []string{"ip"}
	switch p.kind {
	case platform.Veth, platform.Routed:
		need = append(need, "iptables", "iptables-save")
	case platform.OVS:
		need = append(need, "ovs-vsctl")
	}
	for _, t := range need {
		if _, err := exec.LookPath(t); err != nil {
			return platform.Unavailablef("%s needs %s: install it (apt-get install %s)", p.name, t, pkgOf(t))
		}
	}
	if p.kind == platform.OVS && !ovsRunning(ctx) {
		if _, err := os.Stat(OVSCtl); err != nil {
			return platform.Unavailablef("%s: the Open vSwitch daemons are not running and %s is missing: install openvswitch-switch", p.name, OVSCtl)
		}
	}
	if p.kind == platform.Routed {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		if err != nil || strings.TrimSpace(string(b)) != "1" {
			return platform.Unavailablef("%s needs IP forwarding (net.ipv4.ip_forward=1, which dockerd sets); nearnative does not change it", p.name)
		}
	}
	if _, err := p.api.ImageInspect(ctx, p.env.Image); err != nil {
		return platform.Unavailablef("%s: image %s: %w: run `nearnative image build`", p.name, p.env.Image, err)
	}
	return nil
}

func pkgOf(tool string) string {
	switch tool {
	case "ip":
		return "iproute2"
	case "ovs-vsctl":
		return "openvswitch-switch"
	}
	return "iptables"
}

// ensureFabric makes the shared part of the technique on first use.
func (p *Platform) ensureFabric(ctx context.Context) (*fabric, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fab != nil {
		return p.fab, nil
	}
	sn, err := subnet.Pick(ctx, Pool, 24)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	f := &fabric{subnet: sn}
	if err := p.makeFabric(ctx, f); err != nil {
		if terr := p.teardownFabric(context.WithoutCancel(ctx), f); terr != nil {
			err = errors.Join(err, fmt.Errorf("removing the half-made %s fabric: %w", p.kind, terr))
		}
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	p.fab = f
	return f, nil
}

// tagLink puts the run's alias on a host link.
func (p *Platform) tagLink(ctx context.Context, args ...string) error {
	_, err := run(ctx, append(append([]string{"ip"}, args...), "alias", Alias+string(p.env.Run))...)
	return err
}

func (p *Platform) makeFabric(ctx context.Context, f *fabric) error {
	run0 := string(p.env.Run)
	switch p.kind {
	case platform.Veth:
		f.bridge = p.prefix + "br"
		if _, err := run(ctx, "ip", "link", "add", f.bridge, "type", "bridge"); err != nil {
			return err
		}
		if err := p.tagLink(ctx, "link", "set", "dev", f.bridge); err != nil {
			return err
		}
		if _, err := run(ctx, "ip", "link", "set", "dev", f.bridge, "up"); err != nil {
			return err
		}
		// With br_netfilter (loaded by dockerd) bridged frames cross the
		// FORWARD chain, whose policy Docker sets to DROP.
		return p.addRule(ctx, f, "FORWARD", "-i", f.bridge, "-o", f.bridge, "-j", "ACCEPT")
	case platform.Routed:
		s := f.subnet.String()
		return p.addRule(ctx, f, "FORWARD", "-s", s, "-d", s, "-j", "ACCEPT")
	case platform.Macvlan:
		// A parent with carrier that is not the uplink: one end of a veth
		// pair (this kernel may lack the dummy driver).
		f.bridge, f.peer = p.prefix+"pa", p.prefix+"pb"
		if _, err := run(ctx, "ip", "link", "add", f.bridge, "type", "veth", "peer", "name", f.peer); err != nil {
			return err
		}
		for _, l := range []string{f.bridge, f.peer} {
			if err := p.tagLink(ctx, "link", "set", "dev", l); err != nil {
				return err
			}
			if _, err := run(ctx, "ip", "link", "set", "dev", l, "up"); err != nil {
				return err
			}
		}
		return nil
	case platform.OVS:
		if !ovsRunning(ctx) {
			if err := ovsStart(ctx, p.env.Run); err != nil {
				return err
			}
			f.ovsStarted = true
		}
		f.bridge = p.prefix + "br"
		dp := "netdev" // userspace datapath
		if _, err := os.Stat("/sys/module/openvswitch"); err == nil {
			dp = "system"
		}
		if _, err := run(ctx, "ovs-vsctl", "--timeout=10", "add-br", f.bridge, "--", "set", "bridge", f.bridge,
			"datapath_type="+dp, "external_ids:"+OVSExternalID+"="+run0); err != nil {
			return err
		}
		// The bridge's own internal port is a host link too.
		if err := p.tagLink(ctx, "link", "set", "dev", f.bridge); err != nil && !notFound(err) {
			return err
		}
		return nil
	}
	return fmt.Errorf("unknown kind %q", p.kind)
}

// addRule inserts an iptables filter rule first in chain, tagged with the run.
func (p *Platform) addRule(ctx context.Context, f *fabric, chain string, spec ...string) error {
	rule := append([]string{chain}, spec...)
	rule = append(rule, "-m", "comment", "--comment", Comment+string(p.env.Run))
	if _, err := run(ctx, append([]string{"iptables", "-w", "-I", chain, "1"}, rule[1:]...)...); err != nil {
		return err
	}
	f.rules = append(f.rules, rule)
	return nil
}

// teardownFabric removes what makeFabric made; already gone is success.
func (p *Platform) teardownFabric(ctx context.Context, f *fabric) error {
	var errs []error
	for _, r := range f.rules {
		if _, err := run(ctx, append([]string{"iptables", "-w", "-D"}, r...)...); err != nil && !notFound(err) {
			errs = append(errs, err)
		}
	}
	f.rules = nil
	switch p.kind {
	case platform.OVS:
		if f.bridge != "" {
			if _, err := run(ctx, "ovs-vsctl", "--timeout=10", "--if-exists", "del-br", f.bridge); err != nil {
				errs = append(errs, err)
			}
		}
		if f.ovsStarted {
			if err := ovsStopIfIdle(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		if f.bridge != "" {
			if _, err := run(ctx, "ip", "link", "del", "dev", f.bridge); err != nil && !notFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if f.subnet.IsValid() {
		subnet.Release(f.subnet)
	}
	return errors.Join(errs...)
}

// Close removes the technique's shared part (bridge, parent link, rules) and
// stops the OVS daemons if this platform started them. Endpoints are removed
// by their own Stop; Close is for the end of the run.
func (p *Platform) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fab == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	err := p.teardownFabric(ctx, p.fab)
	p.fab = nil
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// ovsRunning reports whether ovsdb-server answers.
func ovsRunning(ctx context.Context) bool {
	if _, err := exec.LookPath("ovs-vsctl"); err != nil {
		return false
	}
	_, err := run(ctx, "ovs-vsctl", "--timeout=2", "show")
	return err == nil
}

// OVSMarker is the file saying which run started the OVS daemons; cleanup
// stops them when it removes that run's bridges.
const OVSMarker = "/run/nearnative-ovs-started"

// ovsStart starts ovsdb-server and ovs-vswitchd with ovs-ctl.
func ovsStart(ctx context.Context, id runid.ID) error {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := run(cctx, OVSCtl, "start", "--system-id=random"); err != nil && !ovsRunning(ctx) {
		return fmt.Errorf("starting Open vSwitch: %w", err)
	}
	if !ovsRunning(ctx) {
		return errors.New("starting Open vSwitch: ovsdb-server does not answer after ovs-ctl start")
	}
	// Without the marker a crashed run's cleanup would leave the daemons
	// running: no marker, no run.
	if err := os.WriteFile(OVSMarker, []byte(id), 0o644); err != nil {
		return fmt.Errorf("recording that this run started Open vSwitch (%s): %w", OVSMarker, err)
	}
	return nil
}

// OVSStopIfIdle stops the OVS daemons when no bridge is left; they were
// started by nearnative.
func ovsStopIfIdle(ctx context.Context) error {
	out, err := run(ctx, "ovs-vsctl", "--timeout=5", "list-br")
	if err != nil || strings.TrimSpace(out) != "" {
		return nil // others use it, or it is already gone
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := run(cctx, OVSCtl, "stop"); err != nil {
		return fmt.Errorf("stopping Open vSwitch: %w", err)
	}
	os.Remove(OVSMarker)
	return nil
}

// StopOVSIfStartedBy stops the OVS daemons when run started them (the
// marker says so) and no bridge is left; cleanup calls it.
func StopOVSIfStartedBy(ctx context.Context, id runid.ID) (bool, error) {
	b, err := os.ReadFile(OVSMarker)
	if err != nil || strings.TrimSpace(string(b)) != string(id) {
		return false, nil
	}
	if !ovsRunning(ctx) {
		os.Remove(OVSMarker)
		return false, nil
	}
	if err := ovsStopIfIdle(ctx); err != nil {
		return false, err
	}
	_, err = os.Stat(OVSMarker)
	return os.IsNotExist(err), nil
}
