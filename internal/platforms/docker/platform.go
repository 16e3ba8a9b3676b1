package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// exitGrace is how long Start watches a fresh container for an immediate
// exit (a bad flag, a port in use) so that the error comes from Start, with
// the log tail, instead of as a connection timeout in the workload.
const exitGrace = 150 * time.Millisecond

// stopTimeout is how long Stop lets the server shut down after SIGTERM.
const stopTimeout = 2 // seconds

// logTailLines is how many log lines an error about an exited container quotes.
const logTailLines = 15

// dockerPlatform runs servers in containers reached through one network path.
type dockerPlatform struct {
	kind string // the network path: DockerNAT, DockerProxy, DockerBridge, DockerHost or DockerNetwork
	// runtime is the OCI runtime that runs the containers ("" for
	// dockerd's default, runc).
	runtime string
	name    string
	env     platform.Env
	eng     *Daemon
	opt     platform.Options

	// pickPorts chooses the port numbers; tests replace it to provoke
	// "port in use".
	pickPorts func(ctx context.Context, spec platform.Spec, host string) (map[string]int, error)
	// site is the remote host the engine runs on (NewOn), nil here.
	site *Site

	mu     sync.Mutex
	bridge string // name of the default bridge's interface, once known
	routed bool   // the client host has its route to the default bridge
	// unroute removes what routing made on a sut host and its driver
	// hosts (docker-bridge there), when the platform closes.
	unroute undos
	nets    []netip.Prefix // the containers' network's subnets, once known
	gvisor  *Gvisor        // how runsc sandboxes, once Check has read it

	net userNetwork // the run's own network, for kind DockerNetwork
}

// client is the platform's client host (env.Client, or loopback).
func (p *dockerPlatform) client() host.Host { return p.env.ClientHost() }

// serverAddr is the address servers are published on or listen on (on the
// host network) for the platform's client: never a wildcard, never the
// machine's primary address.
func (p *dockerPlatform) serverAddr() string { return p.client().ServerAddr() }

// New returns the Docker platform of the given kind (platform.DockerNAT,
// DockerProxy, DockerBridge, DockerHost or DockerNetwork, or one of those
// paths under another OCI runtime: the docker-runsc-* and docker-crun-*
// kinds) named name in the study, running env.Image on engine eng with the
// resource options opt. The engine stays the caller's to close.
func New(kind string, name string, env platform.Env, eng *Daemon, opt platform.Options) (platform.Platform, error) {
	v, ok := variants[kind]
	if !ok {
		return nil, fmt.Errorf("docker platform %q: unknown kind %q (want one of %s)", name, kind, strings.Join(Kinds(), ", "))
	}
	if name == "" {
		name = kind
	}
	if eng == nil {
		return nil, fmt.Errorf("docker platform %s: no Docker engine", name)
	}
	if env.Image == "" {
		return nil, fmt.Errorf("docker platform %s: no workload image", name)
	}
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("docker platform %s: %w", name, err)
	}
	return &dockerPlatform{kind: v.path, runtime: v.runtime, name: name, env: env, eng: eng, opt: opt,
		pickPorts: func(_ context.Context, spec platform.Spec, host string) (map[string]int, error) {
			return platform.AssignPorts(spec, host)
		}}, nil
}

// Name is the platform's name in the study.
func (p *dockerPlatform) Name() string { return p.name }

// Check says whether the platform can run here: the daemon answers, the image
// is present, and the network path it measures exists.
func (p *dockerPlatform) Check(ctx context.Context) error {
	if err := p.eng.Ping(ctx); err != nil {
		return err // DaemonError already matches ErrUnavailable
	}
	if err := p.eng.CheckImage(ctx, p.name, p.env.Image); err != nil {
		return err
	}
	if err := p.checkRuntime(ctx); err != nil {
		return err
	}
	switch p.kind {
	case platform.DockerNAT:
		if net.ParseIP(p.serverAddr()).IsLoopback() {
			// Docker's DNAT rules serve no loopback address (127.0.0.1
			// would be the userland proxy, docker-proxy's path).
			return platform.Unavailablef("%s publishes on an address of a link nearnative made (its client host's), and was given a client on loopback", p.name)
		}
	case platform.DockerBridge, platform.DockerNetwork:
		if p.site != nil && p.kind == platform.DockerBridge {
			// The driver hosts are routed through the sut host now, so
			// that a driver host that routes the bridge's subnet
			// otherwise is refused before the first trial.
			return p.ensureRoute(ctx)
		}
		if err := p.client().CanRoute(); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	case platform.DockerProxy:
		if p.eng.local() && userlandProxy("/proc") == "off" {
			return platform.Unavailablef("dockerd runs with userland-proxy=false, so 127.0.0.1 is served by iptables, not docker-proxy: " +
				"remove that setting and restart dockerd")
		}
	}
	return nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ContainerName is the name of the container of server spec in trial of run.
func ContainerName(run runid.ID, trial, spec string) string {
	return unsafeName.ReplaceAllString(runid.Prefix+string(run)+"-"+trial+"-"+spec, "_")
}

// plan is what Start decided before creating anything.
type plan struct {
	listen     platform.Listen
	publishOn  string // host address ports are published on, "" for none
	clientHost string // host part of client addresses, "" until the container is inspected
}

// plan chooses where the server listens and how the client reaches it.
func (p *dockerPlatform) plan(ctx context.Context, spec platform.Spec) (plan, error) {
	pl := plan{listen: platform.Listen{Dir: platform.ContainerDir}}
	var pickOn string
	switch p.kind {
	case platform.DockerHost:
		a := p.serverAddr()
		pl.listen.Host, pickOn, pl.clientHost = a, a, a
	case platform.DockerNAT:
		// Published on the client link's host-side address: the client's
		// packets take PREROUTING DNAT, as an outside client's do (and
		// under client: host the OUTPUT chain's, as before), while no one
		// beyond this machine reaches the port.
		a := p.serverAddr()
		pl.listen.Host, pickOn, pl.publishOn, pl.clientHost = "0.0.0.0", a, a, a
	case platform.DockerProxy:
		pl.listen.Host, pickOn, pl.publishOn, pl.clientHost = "0.0.0.0", "127.0.0.1", "127.0.0.1", "127.0.0.1"
		if p.site != nil {
			// The sut host's address, kept from DNAT (viaProxy).
			a := p.serverAddr()
			pickOn, pl.publishOn, pl.clientHost = a, a, a
		}
	case platform.DockerBridge, platform.DockerNetwork:
		// The container has its own network namespace, so any number is
		// free there; taking one free on the host keeps numbers distinct.
		pl.listen.Host, pickOn = "0.0.0.0", "127.0.0.1"
	}
	ports, err := p.pickPorts(ctx, spec, pickOn)
	if err != nil {
		return pl, err
	}
	pl.listen.Ports = ports
	return pl, nil
}

// containerConfig builds the create request for spec.
func (p *dockerPlatform) containerConfig(trial string, spec platform.Spec, pl plan, argv []string, cpuset string) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:      p.env.Image,
		Entrypoint: strslice.StrSlice{argv[0]},
		Cmd:        strslice.StrSlice(argv[1:]),
		Env:        EnvList(spec.Env),
		User:       spec.User,
		WorkingDir: platform.ContainerDir,
		Labels: map[string]string{
			runid.Label:     string(p.env.Run),
			runid.LabelRole: spec.Name,
			LabelTrial:      trial,
			LabelPlatform:   p.name,
		},
		ExposedPorts: nat.PortSet{},
	}
	hc := p.hostConfig()
	hc.Resources.CpusetCpus = cpuset
	if p.eng.flavor.LimitsByTrack {
		hc.Resources.CpusetCpus, hc.Resources.NanoCPUs, hc.Resources.Memory, hc.Resources.MemorySwap = "", 0, 0, 0
	}
	for _, name := range spec.Ports {
		port := nat.Port(strconv.Itoa(pl.listen.Ports[name]) + "/tcp")
		if p.kind != platform.DockerHost {
			cfg.ExposedPorts[port] = struct{}{}
		}
		if pl.publishOn != "" {
			if hc.PortBindings == nil {
				hc.PortBindings = nat.PortMap{}
			}
			hc.PortBindings[port] = []nat.PortBinding{{HostIP: pl.publishOn, HostPort: strconv.Itoa(pl.listen.Ports[name])}}
		}
	}
	for _, v := range spec.Volumes {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: v.HostPath, Target: v.Path, ReadOnly: v.ReadOnly})
	}
	return cfg, hc
}

// hostConfig is what every container of the platform gets: docker-init as
// PID 1, its network mode, its runtime, CPU quota and memory limit, and
// the engine's ulimits.
func (p *dockerPlatform) hostConfig() *container.HostConfig {
	// docker-init as PID 1 forwards signals: a server that ignores SIGTERM
	// as PID 1 (sockperf does) would otherwise wait out the stop timeout.
	useInit := true
	hc := &container.HostConfig{
		Init:        &useInit,
		NetworkMode: network.NetworkBridge,
		Runtime:     p.runtime,
		Resources: container.Resources{
			NanoCPUs: int64(math.Round(p.opt.CPUs * 1e9)),
			Ulimits:  p.eng.flavor.Ulimits,
		},
	}
	if m := p.opt.MemoryBytes(); m > 0 {
		hc.Resources.Memory, hc.Resources.MemorySwap = m, m
	}
	switch {
	case p.kind == platform.DockerHost:
		hc.NetworkMode = network.NetworkHost
	case p.kind == platform.DockerNetwork:
		hc.NetworkMode = container.NetworkMode(p.net.name)
	case p.eng.flavor.NetworkMode != "":
		hc.NetworkMode = container.NetworkMode(p.eng.flavor.NetworkMode)
	}
	return hc
}

// EnvList turns an environment map into sorted KEY=value strings.
func EnvList(env map[string]string) []string {
	l := make([]string, 0, len(env))
	for k, v := range env {
		l = append(l, k+"="+v)
	}
	sort.Strings(l)
	return l
}

// Start creates and starts the container of spec and returns once it runs.
// Whatever it made is removed again when it fails.
func (p *dockerPlatform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	pl, err := p.plan(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", p.name, spec.Name, err)
	}
	if err := p.putVolumes(ctx, spec.Volumes); err != nil {
		return nil, err
	}
	s, err := p.start(ctx, trial, spec, pl, p.opt.CPUSet)
	if err != nil {
		return nil, err
	}
	if p.site != nil && p.kind == platform.DockerProxy {
		ports := make([]int, 0, len(spec.Ports))
		for _, name := range spec.Ports {
			ports = append(ports, pl.listen.Ports[name])
		}
		if err := p.viaProxy(ctx, s, ports); err != nil {
			return nil, errors.Join(err, s.Stop(ctx))
		}
	}
	return p.served(s), nil
}

// halfMadeWait is how long a container whose create request was cancelled
// is looked for: the daemon may finish making it after the request ended.
const halfMadeWait = 3 * time.Second

// removeHalfMade removes container name, made by a create request that was
// cancelled: it tries until the removal succeeds, or until halfMadeWait has
// passed with no such container.
func removeHalfMade(ctx context.Context, cli *client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	deadline := time.Now().Add(halfMadeWait)
	for {
		err := cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			return nil
		case !gone(err):
			return fmt.Errorf("removing the half-made container %s: %w", name, err)
		case time.Now().After(deadline):
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// start creates and starts the container of spec as planned, confined to
// cpuset ("" for none). A plan without a client host gets the container's
// address on its network.
func (p *dockerPlatform) start(ctx context.Context, trial string, spec platform.Spec, pl plan, cpuset string) (_ *server, err error) {
	if err := p.ensureNetwork(ctx); err != nil {
		return nil, err
	}
	if pl.listen.From, err = p.from(ctx); err != nil {
		return nil, err
	}
	argv := spec.Command(pl.listen)
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: starting %s: empty command", p.name, spec.Name)
	}
	if err := p.ensureRoute(ctx); err != nil {
		return nil, err
	}
	s, err := p.create(ctx, trial, spec, pl, argv, cpuset)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if serr := s.Stop(ctx); serr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up after the failed start: %w", serr))
			}
		}
	}()
	if err := p.copyFiles(ctx, s, spec, pl); err != nil {
		return nil, err
	}
	insp, err := p.run(ctx, s, spec, pl)
	if err != nil {
		return nil, err
	}
	if err := p.track(ctx, s, insp, cpuset); err != nil {
		return nil, err
	}
	if err := p.address(s, insp, &pl); err != nil {
		return nil, err
	}
	s.addrs = make(map[string]string, len(spec.Ports))
	for _, port := range spec.Ports {
		s.addrs[port] = net.JoinHostPort(pl.clientHost, strconv.Itoa(pl.listen.Ports[port]))
	}
	s.desc = p.describe(ctx, s, spec, pl)
	return s, nil
}

// create makes the container of spec; a create request cancelled midway
// has what the daemon may have made removed.
func (p *dockerPlatform) create(ctx context.Context, trial string, spec platform.Spec, pl plan, argv []string, cpuset string) (*server, error) {
	cfg, hc := p.containerConfig(trial, spec, pl, argv, cpuset)
	name := ContainerName(p.env.Run, trial, spec.Name)
	created, err := p.eng.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		err = fmt.Errorf("%s: creating container %s from %s: %w", p.name, name, p.env.Image, err)
		if ctx.Err() != nil {
			// Cancelled mid-request: the daemon may have made it anyway,
			// and may still be making it.
			if rerr := removeHalfMade(context.WithoutCancel(ctx), p.eng.cli, name); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return nil, err
	}
	return &server{
		eng:      p.eng,
		id:       created.ID,
		name:     name,
		argv:     argv,
		logPath:  LogPath(p.env.LogDir, trial, spec.Name),
		warnings: created.Warnings,
	}, nil
}

// copyFiles puts the spec's files in the server's directory, which belongs
// to the container's user so that the server may keep data there. As root
// with no files, the WorkingDir the daemon made will do.
func (p *dockerPlatform) copyFiles(ctx context.Context, s *server, spec platform.Spec, pl plan) error {
	files := spec.FilesFor(pl.listen)
	if len(files) == 0 && spec.User == "" && (p.eng.flavor.MapOwner == nil || len(spec.Volumes) == 0) {
		return nil
	}
	own, err := p.containerOwner(ctx, s.id, spec.User)
	if err != nil {
		return fmt.Errorf("%s: starting %s: %w", p.name, spec.Name, err)
	}
	if err := p.ownVolumes(ctx, spec.Volumes, own); err != nil {
		return fmt.Errorf("%s: starting %s: %w", p.name, spec.Name, err)
	}
	tarball, err := filesTar(files, own)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if err := p.eng.cli.CopyToContainer(ctx, s.id, "/", bytes.NewReader(tarball), container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("%s: copying the files of %s into %s of container %s: %w",
			p.name, spec.Name, platform.ContainerDir, s.name, err)
	}
	return nil
}

// run starts the container and, unless the context asks for a quick start,
// gives it time to exit at once; it returns the running container's state.
func (p *dockerPlatform) run(ctx context.Context, s *server, spec platform.Spec, pl plan) (container.InspectResponse, error) {
	cli := p.eng.cli
	if err := cli.ContainerStart(ctx, s.id, container.StartOptions{}); err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return container.InspectResponse{}, fmt.Errorf("%s: port %s on %s is already in use: %w", p.name, portList(spec, pl), pl.publishOn, err)
		}
		return container.InspectResponse{}, fmt.Errorf("%s: starting container %s: %w", p.name, s.name, err)
	}
	if !platform.IsQuickStart(ctx) {
		if err := p.waitExit(ctx, s); err != nil {
			return container.InspectResponse{}, err
		}
	}
	insp, err := cli.ContainerInspect(ctx, s.id)
	if err != nil {
		return insp, fmt.Errorf("%s: inspecting container %s: %w", p.name, s.name, err)
	}
	if insp.State != nil && !insp.State.Running {
		return insp, p.exitError(ctx, s, spec, pl, insp.State.ExitCode)
	}
	return insp, nil
}

// track hands the container to the runtime's CPU tracker, where the
// runtime has one.
func (p *dockerPlatform) track(ctx context.Context, s *server, insp container.InspectResponse, cpuset string) (err error) {
	if p.eng.flavor.Track == nil {
		return nil
	}
	c := Container{ID: s.id, Name: s.name, CPUSet: cpuset, CPUs: p.opt.CPUs, Memory: p.opt.MemoryBytes()}
	if insp.State != nil {
		c.PID = insp.State.Pid
	}
	if insp.NetworkSettings != nil {
		c.SandboxKey = insp.NetworkSettings.SandboxKey
	}
	if s.tracker, err = p.eng.flavor.Track(ctx, c); err != nil {
		return fmt.Errorf("%s: accounting for the CPU of container %s: %w", p.name, s.name, err)
	}
	return nil
}

// address records the container's address on its network and, where the
// plan has none, the host a client dials: the container's name on the run's
// network (its embedded DNS), its address on the default bridge.
func (p *dockerPlatform) address(s *server, insp container.InspectResponse, pl *plan) error {
	s.bridgeIP = p.containerIP(insp)
	switch p.kind {
	case platform.DockerNetwork:
		if s.bridgeIP == "" {
			return fmt.Errorf("%s: container %s has no address on network %s", p.name, s.name, p.net.name)
		}
		pl.clientHost = s.name
	case platform.DockerBridge:
		if s.bridgeIP == "" {
			return fmt.Errorf("%s: container %s has no address on the default bridge", p.name, s.name)
		}
		pl.clientHost = s.bridgeIP
	}
	if pl.clientHost == "" {
		pl.clientHost = s.bridgeIP
	}
	return nil
}

// containerIP is the container's address on the platform's network: the
// run's own network on docker-network, else the default bridge.
func (p *dockerPlatform) containerIP(insp container.InspectResponse) string {
	if p.kind == platform.DockerNetwork {
		return p.networkIP(insp)
	}
	return p.eng.bridgeIP(insp)
}

// waitExit gives the container exitGrace to exit, so that a server that
// dies at once (bad flag, port taken) is reported by Start, with its log
// tail, instead of as a connection timeout in the workload. It returns early
// when the container exits; the caller inspects the state.
func (p *dockerPlatform) waitExit(ctx context.Context, s *server) error {
	wctx, cancel := context.WithTimeout(ctx, exitGrace)
	defer cancel()
	waitC, errC := p.eng.cli.ContainerWait(wctx, s.id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
		return nil
	case err := <-errC:
		if ctx.Err() != nil {
			return fmt.Errorf("%s: starting %s: %w", p.name, s.name, ctx.Err())
		}
		if wctx.Err() != nil {
			return nil // still running after the grace period
		}
		return fmt.Errorf("%s: watching container %s: %w", p.name, s.name, err)
	}
}

// exitError describes a container that exited during Start: its exit code,
// the port when the log says it was taken, and the last lines of its log.
func (p *dockerPlatform) exitError(ctx context.Context, s *server, spec platform.Spec, pl plan, code int) error {
	tail := s.logTail(context.WithoutCancel(ctx), logTailLines)
	msg := fmt.Sprintf("%s: container %s exited at once with code %d", p.name, s.name, code)
	if strings.Contains(strings.ToLower(tail), "address already in use") {
		msg += fmt.Sprintf(" because port %s on %s is already in use", portList(spec, pl), pl.listen.Host)
	}
	if tail != "" {
		msg += "; last log lines:\n" + indent(tail)
	}
	return errors.New(msg)
}

// portList names the spec's ports and numbers for messages: "6379 (redis)".
func portList(spec platform.Spec, pl plan) string {
	var parts []string
	for _, name := range spec.Ports {
		parts = append(parts, fmt.Sprintf("%d (%s)", pl.listen.Ports[name], name))
	}
	return strings.Join(parts, ", ")
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// bridgeIP is the container's address on the engine's default bridge
// network.
func (e *Daemon) bridgeIP(insp container.InspectResponse) string {
	if insp.NetworkSettings == nil {
		return ""
	}
	if n, ok := insp.NetworkSettings.Networks[e.flavor.networkName()]; ok && n != nil && n.IPAddress != "" {
		return n.IPAddress
	}
	return ""
}

// ensureRoute routes the client host to the default bridge's subnet (kind
// DockerBridge, whose client connects to the container's own address) on
// first use; DockerNetwork routes to its own network's subnet when it makes
// it. The other kinds' clients reach an address of this machine.
func (p *dockerPlatform) ensureRoute(ctx context.Context) error {
	if p.kind != platform.DockerBridge {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routed {
		return nil
	}
	n, err := p.eng.cli.NetworkInspect(ctx, network.NetworkBridge, network.InspectOptions{})
	if err != nil {
		return fmt.Errorf("%s: inspecting the default bridge: %w", p.name, err)
	}
	if p.site != nil {
		err = p.routeDrivers(ctx, n)
	} else {
		err = routeTo(ctx, p.client(), n)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.routed = true
	return nil
}

// routeDrivers makes the driver hosts reach the sut host's default bridge
// n: a route on each driver host via the sut host (Site.RouteDrivers), and
// on the sut host a rule of the run, first in DOCKER-USER, accepting what
// they forward to the bridge (Docker drops forwarded connections to ports
// it did not publish); both go when the platform closes. p.mu is held.
func (p *dockerPlatform) routeDrivers(ctx context.Context, n network.Inspect) error {
	gw, err := netip.ParseAddr(p.serverAddr())
	if err != nil {
		return fmt.Errorf("the sut host's address %q: %w", p.serverAddr(), err)
	}
	for _, c := range n.IPAM.Config {
		pfx, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !pfx.Addr().Is4() {
			continue
		}
		from, undo, err := p.site.RouteDrivers(ctx, pfx.Masked(), gw)
		if err != nil {
			return err
		}
		p.unroute = append(p.unroute, undo)
		for _, src := range from {
			undo, err := p.siteAccept(ctx, fmt.Sprintf("accepting the driver host %s's connections to the bridge %s", src, pfx),
				"filter", "DOCKER-USER", "-s", src.String()+"/32", "-d", pfx.Masked().String())
			if err != nil {
				return err
			}
			p.unroute = append(p.unroute, undo)
		}
		return nil
	}
	return fmt.Errorf("network %s has no IPv4 subnet to route the driver hosts to", n.Name)
}

// from is where connections to the platform's servers come from: loopback,
// the client host's subnet and, off the host network, the containers'
// network (peers in other containers, docker-proxy, this machine's probes
// from the bridge's gateway address).
func (p *dockerPlatform) from(ctx context.Context) ([]netip.Prefix, error) {
	nets := append(append([]netip.Prefix{platform.Loopback}, host.Sources(p.client())...), p.eng.flavor.From...)
	if p.site != nil {
		// The host itself: readiness probes come from there
		// (platform.ProbeDialer), to its published ports too.
		if a, err := netip.ParseAddr(p.serverAddr()); err == nil {
			nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
		}
		// Peers on the other sut hosts, whose connections keep their
		// host's address (Docker's DNAT keeps the source; a container's
		// own connection leaves its host masqueraded).
		for _, a := range p.site.Peers {
			nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	if p.kind == platform.DockerHost {
		return platform.Nets(nets...), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nets == nil {
		id := network.NetworkBridge
		if p.kind == platform.DockerNetwork {
			id = p.net.id
		}
		n, err := p.eng.cli.NetworkInspect(ctx, id, network.InspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: inspecting the containers' network: %w", p.name, err)
		}
		for _, c := range n.IPAM.Config {
			if pfx, err := netip.ParsePrefix(c.Subnet); err == nil && pfx.Addr().Is4() {
				p.nets = append(p.nets, pfx)
			}
		}
	}
	return platform.Nets(append(nets, p.nets...)...), nil
}

// routeTo routes client to every IPv4 subnet of network n.
func routeTo(ctx context.Context, client host.Host, n network.Inspect) error {
	routed := false
	for _, c := range n.IPAM.Config {
		pfx, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !pfx.Addr().Is4() {
			continue
		}
		if err := client.Route(ctx, pfx); err != nil {
			return fmt.Errorf("routing the client host to network %s (%s): %w", n.Name, pfx, err)
		}
		routed = true
	}
	if !routed {
		return fmt.Errorf("network %s has no IPv4 subnet to route the client host to", n.Name)
	}
	return nil
}

// bridgeName is the host interface of the default bridge network (docker0).
func (p *dockerPlatform) bridgeName(ctx context.Context) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bridge != "" {
		return p.bridge
	}
	n, err := p.eng.cli.NetworkInspect(ctx, network.NetworkBridge, network.InspectOptions{})
	if err != nil {
		if p.eng.flavor.Bridge != "" {
			return p.eng.flavor.Bridge
		}
		return "docker0"
	}
	p.bridge = n.Options["com.docker.network.bridge.name"]
	if p.bridge == "" {
		p.bridge = p.eng.flavor.Bridge
	}
	if p.bridge == "" {
		p.bridge = "docker0"
	}
	return p.bridge
}

// portParts says, port by port, how a client reaches server s: published
// (and how), routed to, or, for a topology's inner server on a publishing
// path, not published at all.
func (p *dockerPlatform) portParts(s *server, spec platform.Spec, pl plan) []string {
	var parts []string
	publishes := p.kind == platform.DockerNAT || p.kind == platform.DockerProxy
	for _, name := range spec.Ports {
		n := pl.listen.Ports[name]
		switch {
		case publishes && pl.publishOn == "":
			parts = append(parts, fmt.Sprintf("port %d on %s, not published (the run's other servers reach it)", n, s.bridgeIP))
		case p.kind == platform.DockerNAT:
			via := "iptables DNAT"
			if p.eng.flavor.PublishVia != "" {
				via = p.eng.flavor.PublishVia
			}
			parts = append(parts, fmt.Sprintf("published %s:%d -> %d (%s)", pl.publishOn, n, n, via))
		case p.kind == platform.DockerProxy && p.site != nil:
			parts = append(parts, fmt.Sprintf("published %s:%d -> %d (userland docker-proxy: a nat rule of the run keeps the drivers' connections from Docker's DNAT)", pl.publishOn, n, n))
		case p.kind == platform.DockerProxy:
			parts = append(parts, fmt.Sprintf("published %s:%d -> %d (userland docker-proxy)", pl.publishOn, n, n))
		case p.kind == platform.DockerBridge && p.site != nil:
			parts = append(parts, fmt.Sprintf("client to %s:%d (routed by the driver hosts via the sut host, then its bridge; no NAT)", s.bridgeIP, n))
		case p.kind == platform.DockerBridge:
			parts = append(parts, fmt.Sprintf("client to %s:%d (veth, no NAT)", s.bridgeIP, n))
		case p.kind == platform.DockerNetwork:
			parts = append(parts, fmt.Sprintf("clients on the network to %s:%d (by name)", s.name, n))
		case p.kind == platform.DockerHost:
			parts = append(parts, fmt.Sprintf("listening %s:%d", pl.listen.Host, n))
		}
	}
	return parts
}

// describe says where the server runs and how the client reaches it.
func (p *dockerPlatform) describe(ctx context.Context, s *server, spec platform.Spec, pl plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s %s ", shortID(s.id), s.name)
	if p.site != nil {
		fmt.Fprintf(&b, "on sut host %s", p.site.Host)
		if p.site.Engine != "" {
			fmt.Fprintf(&b, " (%s)", p.site.Engine)
		}
		b.WriteString(", ")
	}
	if p.eng.flavor.Name != "" {
		fmt.Fprintf(&b, "(%s) ", p.eng.flavor.Name)
	}
	if p.runtime != "" {
		fmt.Fprintf(&b, "(runtime %s) ", p.runtime)
	}
	switch {
	case p.kind == platform.DockerHost:
		b.WriteString("on the host network")
	case p.kind == platform.DockerNetwork:
		fmt.Fprintf(&b, "on network %s %s", p.net.name, s.bridgeIP)
	case p.eng.flavor.NetworkMode != "":
		fmt.Fprintf(&b, "on its %s network", p.eng.flavor.NetworkMode)
	default:
		fmt.Fprintf(&b, "on %s %s", p.bridgeName(ctx), s.bridgeIP)
	}
	parts := p.portParts(s, spec, pl)
	if len(parts) > 0 {
		b.WriteString(", " + strings.Join(parts, ", "))
	}
	if o := p.opt.String(); o != "" {
		b.WriteString("; " + o)
	}
	for _, w := range s.warnings {
		b.WriteString("; warning: " + oneLine(w))
	}
	return b.String()
}

// demux splits a multiplexed container log stream into one text.
func demux(raw []byte) string {
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, bytes.NewReader(raw)); err != nil {
		return string(raw) // a TTY stream is not multiplexed
	}
	return out.String()
}
