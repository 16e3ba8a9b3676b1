package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/platform"
)

// Site is a Docker engine on another machine: a sut host of a hosts file,
// its dockerd reached through the host's SSH connection (a forwarded unix
// socket, ConnectVia), its servers published on or listening at the
// host's own address (the platform's client host's ServerAddr).
type Site struct {
	// Host is the host's name, for messages and the record.
	Host string
	// Engine describes the host's engine for the record, e.g. "dockerd
	// 20.10.24+dfsg1" ("" when unknown).
	Engine string
	// FreePorts asks the host's kernel for n TCP ports free on addr.
	FreePorts func(ctx context.Context, addr string, n int) ([]int, error)
	// Machine names the reading MachineCPU makes (platform.MachineReporter).
	Machine string
	// MachineCPU reads the host's CPU counters.
	MachineCPU func(ctx context.Context) (platform.MachineSample, error)
	// Migrations reads the migration count of process pid of the host.
	Migrations func(ctx context.Context, pid int) (int64, error)
	// PutVolume makes the host hold the tree hostPath of this machine at
	// the same path (a volume's data, prepared here).
	PutVolume func(ctx context.Context, hostPath string) error
	// Own gives the tree path on the host to uid and gid.
	Own func(ctx context.Context, path string, uid, gid int) error
	// CPUs are the host's online CPUs (topologies are planned on them).
	CPUs []int
	// Exe is the nearnative binary on the host (a topology's supervisor).
	Exe string
	// Dial opens a TCP connection from the host (to a container's
	// supervisor, and readiness probes: platform.ProbeDialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Run runs argv on the host (as the SSH user) and returns its stdout;
	// a non-zero exit is an error with the output. docker-proxy's rules
	// and process lookups there.
	Run func(ctx context.Context, what string, argv ...string) ([]byte, error)
	// ProcCPU is the CPU time of process pid of the host.
	ProcCPU func(ctx context.Context, pid int) (time.Duration, error)
	// Peers are the addresses of the run's other sut hosts, whose servers
	// may connect to this host's (a topology over several hosts).
	Peers []netip.Addr
	// RouteDrivers makes the run's driver hosts reach dst through gw (the
	// host's address) and returns the addresses they come from and how to
	// undo it (docker-bridge there: remote.RouteDrivers).
	RouteDrivers func(ctx context.Context, dst netip.Prefix, gw netip.Addr) (from []netip.Addr, undo func(context.Context) error, err error)
}

// putVolumes copies the volumes' trees to the site's host; here they are
// in place already.
func (p *dockerPlatform) putVolumes(ctx context.Context, vols []platform.Volume) error {
	if p.site == nil {
		return nil
	}
	for _, v := range vols {
		if err := p.site.PutVolume(ctx, v.HostPath); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return nil
}

// RemoteKinds are the network paths a Docker engine on a sut host offers
// to drivers on other hosts: a port published on the host's address
// (iptables DNAT there), the same port taken by the userland proxy (a nat
// rule of the run keeps the drivers' connections from DNAT, so they reach
// docker-proxy's socket: see viaProxy), the container's own address on the
// host's default bridge (the driver hosts routed there through the host:
// routeDrivers) and the host network, under runc, runsc or crun (the
// runtime registered with the host's dockerd, checked there).
// docker-network (a bridge of the run's own) is not offered there yet.
var RemoteKinds = []string{platform.DockerNAT, platform.DockerProxy, platform.DockerBridge, platform.DockerHost}

// RemoteRefusal is why the Docker platform kind (named name in the study)
// is not offered on sut host host, or nil for RemoteKinds (under any
// runtime).
func RemoteRefusal(kind, name, host string) error {
	if v, ok := variants[kind]; ok && slices.Contains(RemoteKinds, v.path) {
		return nil
	}
	return platform.Unavailablef("%s is not offered on sut host %s: the load comes from other machines, and of Docker's paths only a port published on the host's address (docker-nat, docker-proxy), the default bridge routed through the host (docker-bridge) and the host network (docker-host) reach there; "+
		"docker-network (a bridge of the run's own) is not offered there yet", name, host)
}

// NewOn returns the Docker platform of kind, as New does, on the engine
// eng of the remote host site (eng made by ConnectVia). Only RemoteKinds
// are offered; cpus and memory become the containers' limits
// there, as here.
func NewOn(kind, name string, env platform.Env, eng *Daemon, opt platform.Options, site Site) (platform.Platform, error) {
	pl, err := New(kind, name, env, eng, opt)
	if err != nil {
		return nil, err
	}
	p := pl.(*dockerPlatform)
	if !eng.Remote() {
		return nil, fmt.Errorf("docker platform %s: the engine of host %s is not a remote one (docker.ConnectVia)", p.name, site.Host)
	}
	if err := RemoteRefusal(kind, p.name, site.Host); err != nil {
		return nil, err
	}
	p.site = &site
	p.pickPorts = func(ctx context.Context, spec platform.Spec, addr string) (map[string]int, error) {
		free, err := site.FreePorts(ctx, addr, len(spec.Ports))
		if err != nil {
			return nil, err
		}
		return platform.PortsFor(spec, free), nil
	}
	return p, nil
}

// onSite is what a server on a sut host answers from the host rather
// than from this machine: its machine's CPU, readiness probes from there,
// and no docker-proxy read here. remoteServer and remoteSupervised embed it.
type onSite struct{ site *Site }

// Machine implements platform.MachineReporter.
func (o onSite) Machine() string { return o.site.Machine }

// MachineCPU implements platform.MachineReporter.
func (o onSite) MachineCPU(ctx context.Context) (platform.MachineSample, error) {
	return o.site.MachineCPU(ctx)
}

// ProbeDial implements platform.ProbeDialer: from the host, which reaches
// the container's bridge address and its published port.
func (o onSite) ProbeDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return o.site.Dial(ctx, network, addr)
}

// procsCPU sums the CPU time of processes pids of the host (a server's
// docker-proxy processes there, on docker-proxy: they carry every byte);
// one that has exited counts nothing. On the other paths a server has
// none: docker-nat's load takes the host's DNAT rule, not the proxies.
func (o onSite) procsCPU(ctx context.Context, pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := o.site.ProcCPU(ctx, pid); err == nil {
			sum += d
		}
	}
	return sum
}

// remoteServer is a container on a sut host.
type remoteServer struct {
	*server
	onSite
}

// OverheadCPUTime implements platform.OverheadReporter: its docker-proxy
// processes there (on docker-proxy; none on the other paths), not the
// embedded server's reading of this machine's /proc.
func (s remoteServer) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
	return s.procsCPU(ctx, s.proxyPIDs), nil
}

// Migrations implements deploy.Scheduler: every process the engine lists
// in the container (the host's PIDs), read by the host's agent.
func (s remoteServer) Migrations(ctx context.Context) (int64, error) {
	pids, err := s.pids(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, pid := range pids {
		if m, err := s.site.Migrations(ctx, pid); err == nil {
			n += m
		}
	}
	return n, nil
}

// CPUSource implements platform.CPUDescriber.
func (s remoteServer) CPUSource() string {
	src := "the container's cgroup on sut host " + s.site.Host + " (the engine's stats API)"
	if len(s.proxyPIDs) > 0 {
		src += ", and its docker-proxy processes there (read by the host's agent)"
	}
	return src
}

// remoteSupervised is a server started by a supervisor in a container on
// a sut host.
type remoteSupervised struct {
	*supervised
	onSite
}

// OverheadCPUTime implements platform.OverheadReporter, as remoteServer's:
// the docker-proxy processes of its own ports (on docker-proxy).
func (s remoteSupervised) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
	var pids []int
	for _, port := range s.supervised.site.memberPorts(s.m.Server) {
		pids = append(pids, s.g.proxyPIDs[port]...)
	}
	return s.procsCPU(ctx, pids), nil
}

// served is server s as the platform hands it out: on a sut host, with
// the host's answers (onSite).
func (p *dockerPlatform) served(s *server) platform.Server {
	if p.site != nil {
		return remoteServer{server: s, onSite: onSite{p.site}}
	}
	return s
}

// ConnectVia connects to the dockerd of host name whose API socket is at
// socket there, through dial (a channel of the host's SSH connection to
// that socket: no port of the engine is opened on any network), and pings
// it. The engine is remote: nothing of it is read from this machine's
// /proc or cgroups.
func ConnectVia(ctx context.Context, name, socket string, dial func(ctx context.Context) (net.Conn, error)) (*Daemon, error) {
	return ConnectViaFlavor(ctx, name, socket, dial, Flavor{})
}

// ConnectViaFlavor is ConnectVia to an engine of flavor f (a Podman
// service on the host: package podman's RootfulFlavor).
func ConnectViaFlavor(ctx context.Context, name, socket string, dial func(ctx context.Context) (net.Conn, error), f Flavor) (*Daemon, error) {
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+socket), client.WithAPIVersionNegotiation(),
		client.WithDialContext(func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }))
	if err != nil {
		return nil, fmt.Errorf("configuring the Docker client of host %s: %w", name, err)
	}
	e := &Daemon{cli: cli, remote: name, flavor: f}
	if err := e.ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return e, nil
}

// Remote reports whether the engine runs on another machine (ConnectVia).
func (e *Daemon) Remote() bool { return e.remote != "" }

// Kind names the engine's software for the record: its flavor's name
// ("Podman 4.3.1"), else "dockerd".
func (e *Daemon) Kind() string {
	if e.flavor.Name != "" {
		return e.flavor.Name
	}
	return "dockerd"
}

// CopyImage makes the engine to hold image ref as e holds it: when to
// lacks it, or holds another image under that name, e saves it and to
// loads the stream (over the host's SSH connection for a remote engine).
// It reports whether it copied.
func (e *Daemon) CopyImage(ctx context.Context, to *Daemon, ref string) (bool, error) {
	here, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("inspecting image %s here: %w", ref, err)
	}
	there, err := to.cli.ImageInspect(ctx, ref)
	if err == nil && there.ID == here.ID {
		return false, nil
	}
	out, err := e.SaveInto(ctx, to, ref)
	if err != nil {
		return false, err
	}
	if strings.Contains(out, `"error"`) {
		return false, fmt.Errorf("loading image %s into %s: %s", ref, to.Host(), oneLine(out))
	}
	if there, err = to.cli.ImageInspect(ctx, ref); err != nil || there.ID != here.ID {
		return false, fmt.Errorf("loading image %s into %s: the engine holds %q after the load, not %s (%v)", ref, to.Host(), there.ID, here.ID, err)
	}
	return true, nil
}

// SaveInto streams image ref from e (docker save) into the engine to
// (its load) and returns what the load said; callers check that to holds
// the image as they need it.
func (e *Daemon) SaveInto(ctx context.Context, to *Daemon, ref string) (string, error) {
	rc, err := e.cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return "", fmt.Errorf("saving image %s: %w", ref, err)
	}
	defer rc.Close()
	resp, err := to.cli.ImageLoad(ctx, rc, client.ImageLoadWithQuiet(true))
	if err != nil {
		return "", fmt.Errorf("loading image %s into %s: %w", ref, to.Host(), err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("loading image %s into %s: %w", ref, to.Host(), err)
	}
	return string(out), nil
}
