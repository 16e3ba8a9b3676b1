package sshhost

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Name implements host.Runner.
func (c *Conn) Name() string { return c.Host.Name }

// Self implements host.Runner: the pushed binary.
func (c *Conn) Self() string { return c.bin }

// ClockOffset implements host.Runner.
func (c *Conn) ClockOffset() time.Duration { return c.offset.Offset }

// RunJob implements host.Runner: argv runs on the host through its agent.
// A dropped connection fails the job with the host's name (the agent kills
// the job when the request's channel goes).
func (c *Conn) RunJob(ctx context.Context, argv []string, stdin []byte) (host.Job, error) {
	if stdin == nil {
		stdin = []byte{}
	}
	r, err := c.agent.Run(ctx, vmagent.Proc{Name: "job", Argv: argv, Dir: "/", Stdin: stdin})
	if err != nil {
		if ctx.Err() != nil {
			return host.Job{}, ctx.Err()
		}
		return host.Job{}, c.errorf("running %s: %w", argv[0], err)
	}
	if r.Error != "" && r.ExitCode == 0 {
		return host.Job{}, c.errorf("running %s: %s", argv[0], r.Error)
	}
	return host.Job{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, Wall: r.Wall, CPU: r.CPU}, nil
}

// Addr is the host's address as an IP (the zero Addr for a DNS name).
func (c *Conn) Addr() netip.Addr {
	a, _ := netip.ParseAddr(c.Host.Address)
	return a
}

// ClientHost is the client host of a run whose load comes from driver
// hosts over SSH and whose servers run on the sut host at server: it
// implements host.Remote.
type ClientHost struct {
	drivers []*Conn
	server  string
}

// NewClientHost returns the client host made of drivers (at least one) for
// servers listening on serverAddr.
func NewClientHost(drivers []*Conn, serverAddr string) *ClientHost {
	return &ClientHost{drivers: drivers, server: serverAddr}
}

// Kind implements host.Host.
func (h *ClientHost) Kind() host.Kind { return host.SSH }

// Describe implements host.Host: "driver host client1 (10.215.0.3) over SSH".
func (h *ClientHost) Describe() string {
	var names []string
	for _, d := range h.drivers {
		names = append(names, d.Host.Name+" ("+d.Host.Address+")")
	}
	if len(names) == 1 {
		return "driver host " + names[0] + " over SSH"
	}
	return "driver hosts " + strings.Join(names, ", ") + " over SSH, one load spread over them"
}

// Detail implements host.Host.
func (h *ClientHost) Detail() string {
	var parts []string
	for _, d := range h.drivers {
		parts = append(parts, fmt.Sprintf("%s %s@%s:%d clock offset %v ± %v", d.Host.Name, d.Host.User, d.Host.Address, d.Host.Port,
			d.offset.Offset.Round(time.Microsecond), (d.offset.RTT/2).Round(time.Microsecond)))
	}
	return strings.Join(parts, "; ") + "; servers on " + h.server
}

// ServerAddr implements host.Host: the sut host's address.
func (h *ClientHost) ServerAddr() string { return h.server }

// ClientAddr implements host.Host: the first driver host's address.
func (h *ClientHost) ClientAddr() string { return h.drivers[0].Host.Address }

// Subnet implements host.Host: the first driver host's address alone (a
// server's access rules name every driver host: Sources).
func (h *ClientHost) Subnet() netip.Prefix {
	if a := h.drivers[0].Addr(); a.IsValid() {
		return netip.PrefixFrom(a, a.BitLen())
	}
	return netip.Prefix{}
}

// Sources implements host.Sourcer: every driver host's address, as the
// load comes from all of them.
func (h *ClientHost) Sources() []netip.Prefix {
	var out []netip.Prefix
	for _, d := range h.drivers {
		if a := d.Addr(); a.IsValid() {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// Wrap implements host.Host. A remote host's tools are not exec'd here:
// workloads run them through Drivers (workload.RunClientOn does); one that
// still wraps gets a command that fails with a line saying so.
func (h *ClientHost) Wrap(argv []string) []string {
	return []string{"sh", "-c", `echo "nearnative: this client cannot run on the driver host ` + h.drivers[0].Host.Name + ` yet (it is exec'd locally); run this workload without --hosts" >&2; exit 3`}
}

// DialContext implements host.Host: connections open from the first driver
// host, through its SSH connection.
func (h *ClientHost) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return h.drivers[0].DialContext(ctx, network, addr)
}

// Route implements host.Host: the sut host's address is reached over the
// hosts' own network; nothing is routed.
func (h *ClientHost) Route(context.Context, netip.Prefix) error { return nil }

// CanRoute implements host.Host.
func (h *ClientHost) CanRoute() error {
	return fmt.Errorf("%w: servers on a platform subnet of their own cannot be reached from driver hosts over SSH yet", host.ErrSetting)
}

// Close implements host.Host: the connections belong to the run's Set.
func (h *ClientHost) Close(context.Context) error { return nil }

// Drivers implements host.Remote.
func (h *ClientHost) Drivers() []host.Runner {
	out := make([]host.Runner, len(h.drivers))
	for i, d := range h.drivers {
		out[i] = d
	}
	return out
}
