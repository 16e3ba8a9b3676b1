package lxc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Start implements platform.Platform: a container of its own for the
// server, which its agent starts listening on the container's address.
func (p *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (_ platform.Server, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	// Any port is free in the container's own namespace; taking ones free
	// on this machine keeps the numbers distinct across servers.
	ports, err := platform.AssignPorts(spec, "127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", p.name, spec.Name, err)
	}
	c, err := p.boot(ctx, trial, spec.Name, spec.Volumes)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.halt(context.WithoutCancel(ctx), c)
		}
	}()
	l := p.listen(c, ports)
	argv := spec.Command(l)
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: starting %s: empty command", p.name, spec.Name)
	}
	pid, err := c.agent.Start(ctx, p.proc(spec, l, argv))
	if err != nil {
		return nil, fmt.Errorf("%s: starting %s in container %s: %w", p.name, spec.Name, c.name, err)
	}
	return &server{p: p, c: c, ports: ports, Process: &vmagent.Process{Agent: c.agent, PID: pid, Argv: argv,
		LogPath: docker.LogPath(p.env.LogDir, trial, spec.Name), Grace: stopTimeout, Bound: haltTimeout}}, nil
}

// listen is where a server of container c listens: the container's own
// address on the run's bridge.
func (p *Platform) listen(c *container, ports map[string]int) platform.Listen {
	return platform.Listen{Host: c.ip.String(), Ports: ports, Dir: platform.ContainerDir,
		From: platform.Nets(platform.Loopback, p.env.ClientHost().Subnet(), p.br.subnet)}
}

// proc is the agent's description of spec's process.
func (p *Platform) proc(spec platform.Spec, l platform.Listen, argv []string) vmagent.Proc {
	pr := vmagent.Proc{Name: spec.Name, Argv: argv, Env: spec.Env, Dir: l.Dir, User: spec.User}
	for _, f := range spec.FilesFor(l) {
		pr.Files = append(pr.Files, vmagent.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	for _, v := range spec.Volumes {
		if v.Own {
			pr.Own = append(pr.Own, v.Path)
		}
	}
	return pr
}

// RunJob implements platform.JobRunner: the job runs to completion in a
// container of its own, which is removed after.
func (p *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (res platform.JobResult, err error) {
	if err := spec.Validate(); err != nil {
		return res, err
	}
	spec.Ports = nil
	c, err := p.boot(ctx, trial, spec.Name, spec.Volumes)
	if err != nil {
		return res, err
	}
	defer func() {
		if herr := p.halt(context.WithoutCancel(ctx), c); herr != nil {
			err = errors.Join(err, herr)
		}
	}()
	l := p.listen(c, map[string]int{})
	res.Command = spec.Command(l)
	res.Where = fmt.Sprintf("LXC container %s (%s)", c.name, c.ip)
	if o := p.opt.String(); o != "" {
		res.Where += " (" + o + ")"
	}
	if len(res.Command) == 0 {
		return res, fmt.Errorf("%s: job %s: empty command", p.name, spec.Name)
	}
	r, err := c.agent.Run(ctx, p.proc(spec, l, res.Command))
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%s: job %s in container %s: %w", p.name, spec.Name, c.name, err)
	}
	res.Stdout, res.Stderr, res.ExitCode, res.Wall = r.Stdout, r.Stderr, r.ExitCode, r.Wall
	if r.Error != "" {
		return res, fmt.Errorf("%s: job %s: %s", p.name, spec.Name, r.Error)
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%s: job %s exited with code %d", p.name, spec.Name, res.ExitCode)
	}
	return res, nil
}

// server is a server in its container: the process the container's agent
// started (its command, output, exit and Stop are vmagent.Process's), and
// the container, which goes when the server stops.
type server struct {
	*vmagent.Process
	p     *Platform
	c     *container
	ports map[string]int
}

// Addr implements platform.Server: the container's address, routed from
// the client host through this machine.
func (s *server) Addr(port string) string {
	n, ok := s.ports[port]
	if !ok {
		panic(fmt.Sprintf("lxc: port %q not declared in the spec", port))
	}
	return net.JoinHostPort(s.c.ip.String(), strconv.Itoa(n))
}

// Describe implements platform.Server.
func (s *server) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "LXC container %s", s.c.name)
	if v := version(); v != "" {
		fmt.Fprintf(&b, " (lxc %s)", v)
	}
	fmt.Fprintf(&b, " on %s %s, booted in %v, server pid %d started by the agent", s.p.br.name, s.c.ip, s.c.booted.Round(time.Millisecond), s.PID)
	var parts []string
	for name, n := range s.ports {
		parts = append(parts, fmt.Sprintf("client to %s:%d (%s; veth, routed, no NAT)", s.c.ip, n, name))
	}
	if len(parts) > 0 {
		b.WriteString(", " + strings.Join(parts, ", "))
	}
	if o := s.p.opt.String(); o != "" {
		b.WriteString("; " + o)
	}
	return b.String()
}

// CPUTime implements platform.CPUReporter from the container's cgroup.
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	d, found, err := cgroup.UsageAt(cgroup.Root, s.c.cgroup)
	if !found {
		return 0, fmt.Errorf("lxc: container %s has no CPU accounting group %s", s.c.name, s.c.cgroup)
	}
	return d, err
}

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string {
	return "the LXC container's cgroup " + s.c.cgroup + " (the server, and the agent that started it, idle during the load)"
}

// Stop implements platform.Server: the agent stops the server (SIGTERM,
// then SIGKILL), its output goes to the log file, and the container goes.
// A second call does nothing.
func (s *server) Stop(ctx context.Context) error {
	var errs []error
	if err := s.Process.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stopping the server in container %s: %w", s.c.name, err))
	}
	errs = append(errs, s.p.halt(ctx, s.c))
	return errors.Join(errs...)
}
