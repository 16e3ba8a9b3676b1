package lxc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/subnet"
)

// Pool is the range the containers' /24 comes from: the range of the
// guests' bridges and the inter-container platforms, picked free of this
// machine's routes.
var Pool = netip.MustParsePrefix("10.213.0.0/16")

// alias labels every link this package makes with its run; cleanup's link
// sweeper removes the links of a crashed run by it.
func alias(run runid.ID) string { return runid.Label + "=" + string(run) }

// bridge is the run's Linux bridge: the host holds the subnet's first
// address, each container one of the others on its own veth.
type bridge struct {
	name   string
	subnet netip.Prefix
	host   netip.Addr
	used   map[netip.Addr]bool
	// forward is the iptables rule that lets the containers reach each
	// other (vm.AllowForward; nil: none needed or none made), isolated
	// why they cannot when it was refused.
	forward  []string
	isolated string
}

// newBridge makes the bridge nnx<short> of run on a free /24 of Pool.
func newBridge(ctx context.Context, run runid.ID) (_ *bridge, err error) {
	p, err := subnet.Pick(ctx, Pool, 24)
	if err != nil {
		return nil, fmt.Errorf("lxc: %w", err)
	}
	b := &bridge{name: "nnx" + run.Short(), subnet: p, host: p.Addr().Next(), used: map[netip.Addr]bool{}}
	for k := 0; ; k++ {
		if _, err := net.InterfaceByName(b.name); err != nil {
			break
		}
		if k > 30 {
			subnet.Release(p)
			return nil, fmt.Errorf("lxc: too many bridges for run %s", run)
		}
		b.name = fmt.Sprintf("nnx%s%d", run.Short(), k)
	}
	defer func() {
		if err != nil {
			b.remove()
		}
	}()
	for _, args := range [][]string{
		{"link", "add", b.name, "type", "bridge"},
		{"link", "set", "dev", b.name, "alias", alias(run)},
		{"addr", "add", netip.PrefixFrom(b.host, 24).String(), "dev", b.name},
		{"link", "set", "dev", b.name, "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return nil, err
		}
	}
	b.forward, b.isolated = vm.AllowForward(b.name, run)
	return b, nil
}

// take returns a free address of the subnet for a container.
func (b *bridge) take() (netip.Addr, error) {
	for a := b.host.Next(); b.subnet.Contains(a); a = a.Next() {
		if !b.used[a] && a != b.broadcast() {
			b.used[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("lxc: no free address left on %s (%s)", b.name, b.subnet)
}

// give returns an address taken before.
func (b *bridge) give(a netip.Addr) { delete(b.used, a) }

// broadcast is the subnet's broadcast address.
func (b *bridge) broadcast() netip.Addr {
	a := b.subnet.Addr().As4()
	a[3] = 255
	return netip.AddrFrom4(a)
}

// remove deletes the bridge (the containers' veths went with their
// namespaces) and its forward rule, and releases the subnet.
func (b *bridge) remove() error {
	if b == nil {
		return nil
	}
	defer subnet.Release(b.subnet)
	ferr := vm.RemoveForward(b.forward)
	b.forward = nil
	if _, err := net.InterfaceByName(b.name); err != nil {
		return ferr
	}
	return errors.Join(ferr, ip(context.Background(), "link", "del", "dev", b.name))
}

// ip runs ip(8); its error quotes the command and what it printed.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
