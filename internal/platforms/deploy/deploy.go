// Package deploy starts a topology on a platform and tears it down again.
// The topology (package topology) says what runs and who talks to whom; the
// platform says how: each platform that can hold many servers implements
// Backend, which opens a Site for one trial. Deploy walks the plan wave by
// wave: it renders each server's spec once the peers it names have started,
// starts it in its place, probes it at the protocol level, and records where
// it ran. The load driver on the host uses Deployment.Entry for the entry
// points' host addresses; servers use the addresses the Site gives for their
// peers, which is how one topology runs natively (loopback, distinct ports),
// in containers (the run's network, or loopback inside one container), in
// guests (addresses inside the guest) and, later, in pods.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/ready"
	"github.com/nearnative/nearnative/internal/topology"
)

// Member is one server of a group with its rendered spec.
type Member struct {
	Server topology.Server
	Spec   platform.Spec
}

// Place describes where a group of servers ran (see package placement).
type Place = placement.Place

// Site is one trial's topology on one platform. Deploy calls OpenGroup once
// per group before the group's first server starts, then Start for each
// server in start order; PeerAddr may be asked for any server of an open
// group (ports are fixed when the site opens) and for any started server.
type Site interface {
	// Port is the port number server s listens on for the named port.
	Port(s topology.ServerID, port string) int
	// OpenGroup prepares the place of a group (a container holding several
	// servers, say) with the specs of all its members.
	OpenGroup(ctx context.Context, group string, members []Member) error
	// Start starts one server in its group's place.
	Start(ctx context.Context, m Member) (platform.Server, error)
	// PeerAddr is the address (host:port) by which server from reaches
	// port of server to on this platform.
	PeerAddr(from, to topology.Server, port string) (string, error)
	// Places describes where the servers ran.
	Places() []Place
	// Close removes the places (containers of groups, guests). The
	// servers are stopped before.
	Close(ctx context.Context) error
}

// Backend is implemented by platforms that can deploy topologies.
type Backend interface {
	// Machine is what planning needs: the host's CPUs and, on vm
	// platforms, the vCPUs of each guest.
	Machine() topology.Machine
	// Open assigns every server of the plan its ports and prepares what
	// the whole plan needs (guests boot here).
	Open(ctx context.Context, trial string, plan *topology.Plan) (Site, error)
}

// LogTailer is implemented by servers that can show the last lines of their
// output (for errors).
type LogTailer interface {
	LogTail(ctx context.Context, lines int) string
}

// Exiter is implemented by servers that can tell whether they have exited.
type Exiter interface {
	// Exited returns a non-nil error describing the exit when the server
	// is no longer running.
	Exited(ctx context.Context) error
}

// Running is a started server of a deployment.
type Running struct {
	topology.Server
	Spec platform.Spec
	// Srv is the server as the platform started it.
	Srv platform.Server
}

// Deployment is a topology running on a platform.
type Deployment struct {
	plan     *topology.Plan
	platform string
	site     Site
	host     Site       // the OnHost roles' site, nil without any
	servers  []*Running // by plan index; nil until started
	stopOnce sync.Once
	stopErr  error
}

// Plan returns the plan the deployment follows.
func (d *Deployment) Plan() *topology.Plan { return d.plan }

// Servers returns the started servers in start order.
func (d *Deployment) Servers() []*Running {
	var out []*Running
	for _, r := range d.servers {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

// Role returns the started servers of role over every instance, in instance
// then index order.
func (d *Deployment) Role(role string) []*Running {
	var out []*Running
	for _, r := range d.Servers() {
		if r.ID.Role == role {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *Running) int {
		if a.ID.Instance != b.ID.Instance {
			return a.ID.Instance - b.ID.Instance
		}
		return a.ID.Index - b.ID.Index
	})
	return out
}

// Entry returns the host-side address of port of the server id: the address
// the load driver on the host uses.
func (d *Deployment) Entry(id topology.ServerID, port string) (string, error) {
	for _, r := range d.Servers() {
		if r.ID == id {
			return r.Srv.Addr(port), nil
		}
	}
	return "", fmt.Errorf("deploy: no server %s in the deployment", id)
}

// Entries returns the host-side addresses of port of every server of role,
// instance by instance.
func (d *Deployment) Entries(role, port string) []string {
	var out []string
	for _, r := range d.Role(role) {
		out = append(out, r.Srv.Addr(port))
	}
	return out
}

// Dialers are how this machine reaches each server of role, in the
// order of Entries: the server's platform.ProbeDialer (a server on another
// machine, reached from its own host), else a net.Dialer here.
func (d *Deployment) Dialers(role string) []func(ctx context.Context, network, addr string) (net.Conn, error) {
	var out []func(ctx context.Context, network, addr string) (net.Conn, error)
	for _, r := range d.Role(role) {
		if pd, ok := r.Srv.(platform.ProbeDialer); ok {
			out = append(out, pd.ProbeDial)
		} else {
			out = append(out, (&net.Dialer{}).DialContext)
		}
	}
	return out
}

// Places describes where everything ran.
func (d *Deployment) Places() []Place {
	out := d.site.Places()
	if d.host != nil {
		for _, p := range d.host.Places() {
			p.Name, p.Detail = "host beside the driver", "OnHost roles, the same on every platform; "+p.Detail
			out = append(out, p)
		}
	}
	return out
}

func (d *Deployment) siteOf(s topology.Server) Site {
	if s.OnHost {
		return d.host
	}
	return d.site
}

// Where is one line per place, for a trial's record.
func (d *Deployment) Where() []string {
	var out []string
	for _, p := range d.Places() {
		line := fmt.Sprintf("%s %s: %s", p.Kind, p.Name, strings.Join(p.Servers, ", "))
		if p.Address != "" {
			line += " at " + p.Address
		}
		if p.CPUs != "" {
			line += " on CPUs " + p.CPUs
		}
		if p.Detail != "" {
			line += "; " + p.Detail
		}
		out = append(out, line)
	}
	for _, r := range d.Servers() {
		line := r.ID.Name() + ": " + r.Srv.Describe()
		if r.CPUSet != "" {
			line += "; pinned to CPUs " + r.CPUSet
		}
		out = append(out, line)
	}
	return out
}

// Commands is the command line of every started server, for the record.
func (d *Deployment) Commands() []string {
	var out []string
	for _, r := range d.Servers() {
		out = append(out, "server "+r.ID.Name()+": "+strings.Join(r.Srv.Command(), " "))
	}
	return out
}

// Check returns an error naming every server that has exited, with the tail
// of its log: a server that dies mid-trial fails the trial.
func (d *Deployment) Check(ctx context.Context) error {
	var errs []error
	for _, r := range d.Servers() {
		ex, ok := r.Srv.(Exiter)
		if !ok {
			continue
		}
		if err := ex.Exited(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server %s: %w%s", r.ID.Name(), err, logTail(ctx, r.Srv)))
		}
	}
	return errors.Join(errs...)
}

// Stop stops the servers wave by wave in reverse start order (the servers
// of one wave, which do not depend on each other, in parallel, so that N
// instances do not take N times as long) and closes the site. It runs
// once; teardown works after the context was cancelled.
func (d *Deployment) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		ctx = context.WithoutCancel(ctx)
		var errs []error
		for w := len(d.plan.Waves) - 1; w >= 0; w-- {
			wave := d.plan.Waves[w]
			werrs := make([]error, len(wave))
			var wg sync.WaitGroup
			for k := len(wave) - 1; k >= 0; k-- {
				r := d.servers[wave[k]]
				if r == nil {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := r.Srv.Stop(ctx); err != nil {
						werrs[k] = fmt.Errorf("stopping %s: %w", r.ID.Name(), err)
					}
				}()
			}
			wg.Wait()
			for _, err := range werrs {
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := d.site.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		if d.host != nil {
			if err := d.host.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// Options tune a deployment.
type Options struct {
	// Log receives one line per started server (nil: none).
	Log io.Writer
	// Host deploys the roles marked OnHost (the native platform): they run
	// beside the driver whatever the platform.
	Host Backend
}

// Deploy plans topology t for platform p, starts it, and returns once every
// server answers its readiness probe. On failure everything started is
// stopped again and the error names the server, with the tail of its log.
func Deploy(ctx context.Context, p platform.Platform, trial string, t topology.Topology, opt Options) (_ *Deployment, err error) {
	be, ok := p.(Backend)
	if !ok {
		return nil, fmt.Errorf("platform %s cannot deploy a topology of several servers", p.Name())
	}
	plan, err := t.Plan(be.Machine())
	if err != nil {
		return nil, err
	}
	if plan.HasOnHost() && opt.Host == nil {
		return nil, fmt.Errorf("deploy: the topology has roles that run beside the driver, but no host platform was given")
	}
	site, err := be.Open(ctx, trial, plan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	d := &Deployment{plan: plan, platform: p.Name(), site: site, servers: make([]*Running, len(plan.Servers))}
	defer func() {
		if err != nil {
			if serr := d.Stop(ctx); serr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up after the failed start: %w", serr))
			}
		}
	}()
	if plan.HasOnHost() {
		if d.host, err = opt.Host.Open(ctx, trial, plan); err != nil {
			return nil, fmt.Errorf("the host beside the driver: %w", err)
		}
	}
	opened := map[string]bool{}
	specs := map[int]platform.Spec{}
	for _, wave := range plan.Waves {
		for _, i := range wave {
			s := plan.Servers[i]
			if !opened[s.Group] {
				members, err := d.render(s.Group, specs)
				if err != nil {
					return nil, err
				}
				if err := d.siteOf(s).OpenGroup(ctx, s.Group, members); err != nil {
					return nil, fmt.Errorf("%s: opening %s: %w", p.Name(), s.Group, err)
				}
				opened[s.Group] = true
			}
			spec := specs[i]
			srv, err := d.siteOf(s).Start(ctx, Member{Server: s, Spec: spec})
			if err != nil {
				return nil, fmt.Errorf("%s: starting %s: %w", p.Name(), s.ID.Name(), err)
			}
			d.servers[i] = &Running{Server: s, Spec: spec, Srv: srv}
			if opt.Log != nil {
				fmt.Fprintf(opt.Log, "started %s: %s\n", s.ID.Name(), srv.Describe())
			}
		}
		if err := d.ready(ctx, wave); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// render builds the specs of every member of group, in start order; peers
// must have started already or belong to the same group.
func (d *Deployment) render(group string, specs map[int]platform.Spec) ([]Member, error) {
	var members []Member
	for i, s := range d.plan.Servers {
		if s.Group != group {
			continue
		}
		role, _ := d.plan.Topology.Role(s.ID.Role)
		pr := &peers{d: d, from: s, allowed: role.After}
		spec, err := role.Spec(s.ID, pr)
		if err == nil {
			err = pr.err
		}
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", s.ID.Name(), err)
		}
		spec.Name = s.ID.Name()
		if !slices.Equal(spec.Ports, s.Ports) {
			return nil, fmt.Errorf("server %s: its spec declares ports %v, the role %v", s.ID.Name(), spec.Ports, s.Ports)
		}
		if err := spec.Validate(); err != nil {
			return nil, err
		}
		specs[i] = spec
		members = append(members, Member{Server: s, Spec: spec})
	}
	return members, nil
}

// ready probes the servers of one wave in parallel.
func (d *Deployment) ready(ctx context.Context, wave []int) error {
	errs := make([]error, len(wave))
	var wg sync.WaitGroup
	for k, i := range wave {
		r := d.servers[i]
		role, _ := d.plan.Topology.Role(r.ID.Role)
		if len(role.Ports) == 0 {
			continue
		}
		port := role.ReadyPort
		if port == "" {
			port = role.Ports[0]
		}
		timeout := role.ReadyTimeout
		if timeout <= 0 {
			timeout = topology.DefaultReadyTimeout
		}
		probe := role.Ready
		if role.ReadyFor != nil {
			id := r.ID
			probe = func(ctx context.Context, addr string) error { return role.ReadyFor(ctx, id, addr) }
		}
		if probe == nil {
			probe = func(ctx context.Context, addr string) error { return platform.WaitTCP(ctx, addr, timeout) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = Wait(ctx, r.ID.Name(), r.Srv, port, timeout, probe)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Wait probes port of srv until probe succeeds or timeout passes
// (internal/ready's loop); a probe error marked final (ready.Final, or a
// method Final() bool) or the server's exit ends the wait at once. The
// error names the server and shows the tail of its log.
func Wait(ctx context.Context, name string, srv platform.Server, port string, timeout time.Duration, probe topology.ReadyFunc) error {
	addr := srv.Addr(port)
	if pd, ok := srv.(platform.ProbeDialer); ok {
		probe = probeVia(probe, pd.ProbeDial)
	}
	err := ready.Loop{Timeout: timeout, Every: 100 * time.Millisecond}.Wait(ctx, func(pctx context.Context) error {
		err := probe(pctx, addr)
		if err == nil || ready.IsFinal(err) {
			return err
		}
		if ex, ok := srv.(Exiter); ok {
			if xerr := ex.Exited(ctx); xerr != nil {
				return ready.Final(exited{xerr})
			}
		}
		return err
	})
	var (
		te *ready.TimeoutError
		x  exited
	)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &x):
		return fmt.Errorf("server %s exited before it was ready: %w%s", name, x.error, logTail(ctx, srv))
	case errors.As(err, &te):
		return fmt.Errorf("server %s was not ready at %s within %v: %w%s", name, addr, timeout, te.Last, logTail(ctx, srv))
	}
	return fmt.Errorf("server %s is not ready at %s: %w%s", name, addr, err, logTail(ctx, srv))
}

// exited is the error of a server that exited while it was waited for.
type exited struct{ error }

func (x exited) Unwrap() error { return x.error }

func logTail(ctx context.Context, srv platform.Server) string {
	lt, ok := srv.(LogTailer)
	if !ok {
		return ""
	}
	t := strings.TrimRight(lt.LogTail(context.WithoutCancel(ctx), 15), "\n")
	if t == "" {
		return ""
	}
	return "; last log lines:\n  " + strings.ReplaceAll(t, "\n", "\n  ")
}

// peers resolves a server's peers; errors are kept and reported after the
// spec function returns.
type peers struct {
	d       *Deployment
	from    topology.Server
	allowed []string
	err     error
}

func (p *peers) fail(err error) string {
	if p.err == nil {
		p.err = err
	}
	return "invalid-peer:0"
}

func (p *peers) Addr(role string, index int, port string) string {
	if !slices.Contains(p.allowed, role) && role != p.from.ID.Role {
		return p.fail(fmt.Errorf("asks for the address of role %s, which it does not start after (add it to the role's After)", role))
	}
	id := topology.ServerID{Role: role, Instance: p.from.ID.Instance, Index: index}
	for i, s := range p.d.plan.Servers {
		if s.ID != id {
			continue
		}
		if !slices.Contains(s.Ports, port) {
			return p.fail(fmt.Errorf("asks for port %q of %s, which declares %v", port, id.Name(), s.Ports))
		}
		if p.d.servers[i] == nil && s.Group != p.from.Group {
			return p.fail(fmt.Errorf("needs %s, which has not started yet: roles that share a container must only name peers outside it that start earlier", id.Name()))
		}
		switch {
		case p.from.OnHost && !s.OnHost:
			// Beside the driver, a server reaches the platform's as the
			// driver does.
			return p.d.servers[i].Srv.Addr(port)
		case !p.from.OnHost && s.OnHost:
			return p.fail(fmt.Errorf("asks for %s, which runs beside the driver: servers on the platform cannot name host roles", id.Name()))
		}
		addr, err := p.d.siteOf(s).PeerAddr(p.from, s, port)
		if err != nil {
			return p.fail(err)
		}
		return addr
	}
	return p.fail(fmt.Errorf("asks for %s, which the topology does not have", id.Name()))
}

func (p *peers) All(role, port string) []string {
	r, ok := p.d.plan.Topology.Role(role)
	if !ok {
		p.fail(fmt.Errorf("asks for role %s, which the topology does not have", role))
		return nil
	}
	var out []string
	for i := 0; i < max(r.Count, 1); i++ {
		out = append(out, p.Addr(role, i, port))
	}
	return out
}

// Scheduler is implemented by servers that can count how often their
// threads have moved between CPUs (the seeds' explanation of scale-out
// results).
type Scheduler interface {
	Migrations(ctx context.Context) (int64, error)
}

// Migrations reads the migration counter of every server that has one, by
// server name; take it before and after the load and subtract.
func (d *Deployment) Migrations(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, r := range d.Servers() {
		sc, ok := r.Srv.(Scheduler)
		if !ok {
			continue
		}
		n, err := sc.Migrations(ctx)
		if err != nil {
			return nil, fmt.Errorf("migrations of %s: %w", r.ID.Name(), err)
		}
		out[r.ID.Name()] = n
	}
	return out, nil
}
