package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/topology"
)

// DockerHost is a sut host as a Docker platform needs it: its agent and
// its dockerd's socket, reached through the SSH connection.
type DockerHost interface {
	Agent
	// DockerSocket is the path of dockerd's API socket on the host.
	DockerSocket() string
	// DialUnix opens a connection to a unix socket of the host.
	DialUnix(ctx context.Context, path string) (net.Conn, error)
}

// Engines are the run's connections to the sut hosts' Docker engines,
// made once per host, each given the workload image on first use.
//
// The engine is driven with the Docker SDK, the same code as the local
// engine's, over a channel of the host's SSH connection to its socket
// (not through the agent, not over an open TCP port): every call the
// Docker platforms make (create, copy files, start, inspect, logs,
// stats, remove) then works unchanged, and nothing of the engine is
// reachable from the network.
type Engines struct {
	// Local is this machine's engine, which holds the image to copy.
	Local func(ctx context.Context) (*docker.Daemon, error)
	// Log gets a line when an image is copied (nil: none).
	Log io.Writer

	mu     sync.Mutex
	byHost map[string]*docker.Daemon
	images map[string]bool // host + "\x00" + image: copied or found
}

// For returns host h's engine holding image, connecting and copying the
// image the first time.
func (e *Engines) For(ctx context.Context, h DockerHost, image string) (*docker.Daemon, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byHost == nil {
		e.byHost, e.images = map[string]*docker.Daemon{}, map[string]bool{}
	}
	eng := e.byHost[h.Name()]
	if eng == nil {
		sock := h.DockerSocket()
		var err error
		eng, err = docker.ConnectVia(ctx, h.Name(), sock, func(ctx context.Context) (net.Conn, error) { return h.DialUnix(ctx, sock) })
		if err != nil {
			return nil, err
		}
		e.byHost[h.Name()] = eng
	}
	if key := h.Name() + "\x00" + image; !e.images[key] {
		local, err := e.Local(ctx)
		if err != nil {
			return nil, fmt.Errorf("the image for host %s comes from this machine's Docker engine: %w", h.Name(), err)
		}
		if e.Log != nil {
			fmt.Fprintf(e.Log, "host %s: making sure its Docker engine (%s) holds image %s: copied from this machine's engine when it does not (once per image)\n", h.Name(), h.DockerSocket(), image)
		}
		if _, err := local.CopyImage(ctx, eng, image); err != nil {
			return nil, fmt.Errorf("giving host %s the image: %w", h.Name(), err)
		}
		e.images[key] = true
	}
	return eng, nil
}

// Close closes every engine connection.
func (e *Engines) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, eng := range e.byHost {
		errs = append(errs, eng.Close())
	}
	e.byHost = nil
	return errors.Join(errs...)
}

// Docker is a Docker platform (one of docker.RemoteKinds) on the sut
// hosts: each server in a container of the engine of the host its role is
// placed on, published on (or listening at) that host's address, or on its
// bridge (docker-bridge).
type Docker struct {
	kind, name string
	place      func(role string) DockerHost
	suts       []DockerHost
	env        platform.Env
	opt        platform.Options
	source     EngineSource
	clientFor  func(h DockerHost) host.Host
	// own is what the platform started and stops on Close (Podman's
	// services); nil for the hosts' dockerds.
	own io.Closer

	mu sync.Mutex
	on map[string]platform.Platform // by host name
}

// NewDocker returns the Docker platform kind named name whose servers run
// on place(spec name), one of suts, with engines.
// clientFor(h) is the client host whose servers are served at h's
// address.
func NewDocker(kind, name string, place func(role string) DockerHost, suts []DockerHost, env platform.Env, opt platform.Options, engines *Engines, clientFor func(h DockerHost) host.Host) (*Docker, error) {
	// Before any engine is reached or given the image.
	for _, h := range suts {
		if err := docker.RemoteRefusal(kind, name, h.Name()); err != nil {
			return nil, err
		}
	}
	return &Docker{kind: kind, name: name, place: place, suts: suts, env: env, opt: opt, source: engines, clientFor: clientFor, on: map[string]platform.Platform{}}, nil
}

// Name implements platform.Platform.
func (d *Docker) Name() string { return d.name }

// platformOn is the Docker platform on host h, built on first use.
func (d *Docker) platformOn(ctx context.Context, h DockerHost) (platform.Platform, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.on[h.Name()]; p != nil {
		return p, nil
	}
	eng, ref, err := d.source.Engine(ctx, h, d.env.Image)
	if err != nil {
		return nil, err
	}
	env := d.env
	env.Client, env.Image = d.clientFor(h), ref
	site := d.site(h)
	if info, err := eng.Info(ctx); err == nil {
		if eng.Kind() == "dockerd" { // another engine's description names it
			site.Engine = "dockerd " + info.Version
		}
	}
	p, err := docker.NewOn(d.kind, d.name, env, eng, d.opt, site)
	if err != nil {
		return nil, err
	}
	d.on[h.Name()] = p
	return p, nil
}

// site is what the Docker platform asks of host h through its agent.
func (d *Docker) site(h DockerHost) docker.Site {
	o := on{&Platform{name: d.name, kind: kindSUT}, h}
	return docker.Site{
		Host: h.Name(),
		FreePorts: func(ctx context.Context, addr string, n int) ([]int, error) {
			return o.freePortsOn(ctx, addr, n)
		},
		Machine: kindSUT + " " + h.Name(),
		MachineCPU: func(ctx context.Context) (platform.MachineSample, error) {
			return o.machineCPU(ctx)
		},
		Migrations: func(ctx context.Context, pid int) (int64, error) { return h.Agent().Migrations(ctx, pid) },
		PutVolume:  o.copyVolume,
		Own:        o.own,
		CPUs:       h.CPUs(),
		Exe:        h.Self(),
		Dial:       h.DialContext,
		Run:        o.run,
		RouteDrivers: func(ctx context.Context, dst netip.Prefix, gw netip.Addr) ([]netip.Addr, func(context.Context) error, error) {
			return RouteDrivers(ctx, d.clientFor(h), d.env.Run, dst, gw)
		},
		ProcCPU: func(ctx context.Context, pid int) (time.Duration, error) { return h.Agent().CPUTime(ctx, pid) },
		Peers:   d.peersOf(h),
	}
}

// peersOf are the addresses of the sut hosts other than h.
func (d *Docker) peersOf(h DockerHost) []netip.Addr {
	var out []netip.Addr
	for _, o := range d.suts {
		if o.Name() != h.Name() {
			out = append(out, o.Addr())
		}
	}
	return out
}

// Check implements platform.Checker: every sut host's engine answers,
// holds the image (copied from here when it did not) and offers the
// platform's path.
func (d *Docker) Check(ctx context.Context) error {
	for _, h := range d.suts {
		p, err := d.platformOn(ctx, h)
		if err != nil {
			return err
		}
		if c, ok := p.(platform.Checker); ok {
			if err := c.Check(ctx); err != nil {
				return fmt.Errorf("host %s: %w", h.Name(), err)
			}
		}
	}
	return nil
}

// Start implements platform.Platform: spec runs in a container on the
// host its name is placed on.
func (d *Docker) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	p, err := d.platformOn(ctx, d.place(spec.Name))
	if err != nil {
		return nil, err
	}
	return p.Start(ctx, trial, spec)
}

// RunJob implements platform.JobRunner: the job runs in a container on
// the host its name is placed on.
func (d *Docker) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	p, err := d.platformOn(ctx, d.place(spec.Name))
	if err != nil {
		return platform.JobResult{}, err
	}
	jr, ok := p.(platform.JobRunner)
	if !ok {
		return platform.JobResult{}, fmt.Errorf("%s cannot run jobs", d.name)
	}
	return jr.RunJob(ctx, trial, spec)
}

// Close implements platform.Closer.
func (d *Docker) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.on {
		if c, ok := p.(platform.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	if d.own != nil {
		// The hosts' engines go with it: a later use starts them again.
		errs = append(errs, d.own.Close())
		d.on = map[string]platform.Platform{}
	}
	return errors.Join(errs...)
}

// Degradations implements platform.Degrader: every sut host's platform's
// (gVisor's platform and network stack under runsc), once each.
func (d *Docker) Degradations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, h := range d.suts {
		if dg, ok := d.on[h.Name()].(platform.Degrader); ok {
			for _, s := range dg.Degradations() {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// Sandbox implements platform.Sandboxed: how runsc sandboxes on the first
// sut host that says (known once Check has run).
func (d *Docker) Sandbox() (platform.Sandbox, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.suts {
		if sb, ok := d.on[h.Name()].(platform.Sandboxed); ok {
			if s, ok := sb.Sandbox(); ok {
				return s, true
			}
		}
	}
	return platform.Sandbox{}, false
}

// Machine implements deploy.Backend: the CPUs of the host the first role
// is placed on.
func (d *Docker) Machine() topology.Machine {
	return topology.Machine{CPUs: d.place("").CPUs(), Pin: d.opt.Pin}
}

// Open implements deploy.Backend: each server runs on the engine of the
// sut host its role is placed on (see spread for servers on several).
func (d *Docker) Open(ctx context.Context, trial string, plan *topology.Plan) (deploy.Site, error) {
	hostOf, err := d.hostsOf(plan)
	if err != nil {
		return nil, err
	}
	var hosts []DockerHost
	seen := map[string]bool{}
	for _, srv := range plan.Servers {
		if h := hostOf[srv.ID]; h != nil && !seen[h.Name()] {
			seen[h.Name()] = true
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		hosts = []DockerHost{d.place("")}
	}
	if len(hosts) == 1 {
		return d.openOn(ctx, hosts[0], trial, plan)
	}
	return d.openSpread(ctx, trial, plan, hostOf, hosts)
}

// hostsOf is the sut host of every server of plan beside the driver's, by
// placement, and refuses (deploy names the platform) what Docker cannot
// span: a container (a group of
// several servers) holds servers of one host only, and a container on
// docker-bridge reaches no bridge of another host.
func (d *Docker) hostsOf(plan *topology.Plan) (map[topology.ServerID]DockerHost, error) {
	hostOf := map[topology.ServerID]DockerHost{}
	groupHost := map[string]DockerHost{}
	var first DockerHost
	for _, srv := range plan.Servers {
		if srv.OnHost {
			continue
		}
		h := d.place(srv.ID.Role)
		hostOf[srv.ID] = h
		if first == nil {
			first = h
		}
		if g, ok := groupHost[srv.Group]; ok && g.Name() != h.Name() {
			return nil, platform.Unavailablef("container %s would hold servers placed on sut hosts %s and %s (layout %s puts their roles in one container): place its roles on one host, or use layout container-per-server", srv.Group, g.Name(), h.Name(), plan.Layout)
		}
		groupHost[srv.Group] = h
		if h.Name() != first.Name() && docker.PathOf(d.kind) == platform.DockerBridge {
			return nil, platform.Unavailablef("the topology's roles are placed on sut hosts %s and %s, and a container on one host's default bridge does not reach another host's bridge (only the driver hosts are given routes): use docker-nat, docker-proxy or docker-host across hosts, or place the roles on one host", first.Name(), h.Name())
		}
	}
	return hostOf, nil
}

// openOn opens plan's site on the engine of host h.
func (d *Docker) openOn(ctx context.Context, h DockerHost, trial string, plan *topology.Plan) (deploy.Site, error) {
	p, err := d.platformOn(ctx, h)
	if err != nil {
		return nil, err
	}
	be, ok := p.(deploy.Backend)
	if !ok {
		return nil, fmt.Errorf("%s cannot deploy a topology of several servers", d.name)
	}
	return be.Open(ctx, trial, plan)
}

var (
	_ deploy.Backend     = (*Docker)(nil)
	_ platform.JobRunner = (*Docker)(nil)
	_ platform.Checker   = (*Docker)(nil)
	_ platform.Closer    = (*Docker)(nil)
	_ platform.Degrader  = (*Docker)(nil)
	_ platform.Sandboxed = (*Docker)(nil)
)
