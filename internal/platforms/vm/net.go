package vm

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/nearnative/nearnative/internal/runid"
)

// AliasPrefix starts the alias of every link the vm platform creates; the
// run ID follows, so cleanup finds a run's links.
const AliasPrefix = runid.Label + "="

// Name prefixes of the links this package makes.
const (
	bridgePrefix = "nnb-"
	tapPrefix    = "nnt-"
)

// subnetBase is the /16 guest subnets are taken from (10.213.N.0/24).
const subnetBase = "10.213."

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// bridge is the host side of a run's guest network.
type bridge struct {
	name   string
	hostIP net.IP // .1
	prefix string // "10.213.N."
	// forward is the iptables rule that lets guests reach each other
	// (nil: none needed or none made); isolated says why guests cannot.
	forward  []string
	isolated string
}

// bridgeNetfilter is the sysctl that sends bridged frames through
// iptables' FORWARD chain (set once br_netfilter is loaded, as Docker does).
const bridgeNetfilter = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// AllowForward lets the hosts on the Linux bridge name (guests on their
// taps, containers on their veths) reach each other. With
// bridge-nf-call-iptables on, frames from one port to another pass the
// FORWARD chain, whose policy Docker sets to DROP: traffic between them (a
// web tier in one guest, its database in another) then times out while the
// host still reaches each. A rule accepting the bridge's own traffic,
// labelled with the run in its comment, goes first in FORWARD; the caller
// deletes it with the bridge (RemoveForward), and nearnative cleanup's sweep
// of run-labelled rules (cleanup.IPTables) after a crash. It returns the
// rule (nil: none needed, or refused), and when refused why the hosts
// cannot reach each other.
func AllowForward(name string, run runid.ID) (rule []string, isolated string) {
	if v, err := os.ReadFile(bridgeNetfilter); err != nil || strings.TrimSpace(string(v)) != "1" {
		return nil, ""
	}
	rule = forwardRule(name, run)
	out, err := exec.Command("iptables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput()
	if err != nil {
		return nil, fmt.Sprintf("%s is on, and the iptables rule that would let the bridge's hosts reach each other was refused (iptables -I %s: %v: %s)",
			bridgeNetfilter, strings.Join(rule, " "), err, bytes.TrimSpace(out))
	}
	return rule, ""
}

// RemoveForward deletes a rule AllowForward made; nil does nothing.
func RemoveForward(rule []string) error {
	if rule == nil {
		return nil
	}
	if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -D %s: %w: %s", strings.Join(rule, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// forwardRule is the FORWARD rule accepting bridge name's own traffic.
func forwardRule(name string, run runid.ID) []string {
	return []string{"FORWARD", "-i", name, "-o", name, "-m", "comment", "--comment", AliasPrefix + string(run), "-j", "ACCEPT"}
}

// pickSubnet chooses N in 10.213.N.0/24 for run: derived from the run ID,
// moved past any /24 already routed or addressed on this machine.
func pickSubnet(run runid.ID, taken string) (string, error) {
	h := fnv.New32a()
	h.Write([]byte(run))
	start := int(h.Sum32() % 250)
	for i := 0; i < 250; i++ {
		n := (start+i)%250 + 1
		p := fmt.Sprintf("%s%d.", subnetBase, n)
		if !strings.Contains(taken, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no free /24 in %s0.0/16", subnetBase)
}

// newBridge creates the bridge nnb-<short><k> with the host address .1.
func newBridge(run runid.ID) (*bridge, error) {
	routes, _ := exec.Command("ip", "-4", "route").Output()
	addrs, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	prefix, err := pickSubnet(run, string(routes)+string(addrs))
	if err != nil {
		return nil, err
	}
	var name string
	for k := 0; ; k++ {
		name = fmt.Sprintf(bridgePrefix+"%s-%d", run.Short(), k)
		if _, err := net.InterfaceByName(name); err != nil {
			break
		}
		if k > 50 {
			return nil, fmt.Errorf("too many bridges for run %s", run)
		}
	}
	b := &bridge{name: name, hostIP: net.ParseIP(prefix + "1"), prefix: prefix}
	if err := ipCmd("link", "add", name, "type", "bridge"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "set", "dev", name, "alias", AliasPrefix + string(run)},
		{"addr", "add", prefix + "1/24", "dev", name},
		{"link", "set", "dev", name, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			b.remove()
			return nil, err
		}
	}
	b.forward, b.isolated = AllowForward(name, run) // the guests reach each other
	return b, nil
}

// subnet is the guests' /24.
func (b *bridge) subnet() netip.Prefix {
	return netip.MustParsePrefix(b.prefix + "0/24")
}

func (b *bridge) remove() error {
	if b == nil {
		return nil
	}
	ferr := RemoveForward(b.forward)
	b.forward = nil
	return errors.Join(ferr, delLink(b.name))
}

// newTap creates a tap device on the bridge for one guest.
func newTap(run runid.ID, b *bridge, n int) (string, error) {
	name := fmt.Sprintf(tapPrefix+"%s-%d", run.Short(), n)
	if len(name) > 15 {
		return "", fmt.Errorf("tap name %s too long", name)
	}
	delLink(name) // a leftover of a crashed process with the same run would block us
	if err := ipCmd("tuntap", "add", "dev", name, "mode", "tap"); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"link", "set", "dev", name, "alias", AliasPrefix + string(run)},
		{"link", "set", "dev", name, "master", b.name},
		{"link", "set", "dev", name, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			delLink(name)
			return "", err
		}
	}
	return name, nil
}

// delLink deletes a link; one already gone is not an error.
func delLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	return ipCmd("link", "del", "dev", name)
}

// RunLinks lists the links whose alias names a run (any run when run is
// empty), mapped to their run.
func RunLinks(run runid.ID) (map[string]runid.ID, error) {
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip link show: %w", err)
	}
	links := map[string]runid.ID{}
	for _, line := range strings.Split(string(out), "\n") {
		i := strings.Index(line, "alias "+AliasPrefix)
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+len("alias "+AliasPrefix):])
		if len(f) == 0 {
			continue
		}
		id, err := runid.Parse(strings.TrimSuffix(f[0], "\\"))
		if err != nil || (run != "" && id != run) {
			continue
		}
		// "527: nnb-1a2b-0: <...>"; tap names may carry "@..." suffixes.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(parts[1]), "@")
		// Other platforms tag their links the same way; sweep only ours.
		if !strings.HasPrefix(name, bridgePrefix) && !strings.HasPrefix(name, tapPrefix) {
			continue
		}
		links[name] = id
	}
	return links, nil
}
