package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/go-connections/nat"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// AgentExe is the nearnative binary bind-mounted into supervisor containers;
// empty means the running executable. Tests whose binary is not nearnative
// set it (their TestMain must call vmagent.Entry).
var AgentExe string

// agentPort is where a supervisor listens inside a container's own network
// namespace.
const agentPort = 7977

// agentTimeout bounds how long a supervisor may take to answer.
const agentTimeout = 30 * time.Second

// Machine implements deploy.Backend.
func (p *dockerPlatform) Machine() topology.Machine {
	if p.site != nil {
		return topology.Machine{CPUs: p.site.CPUs, Pin: p.opt.Pin}
	}
	return topology.Machine{CPUs: deploy.HostCPUs(), Pin: p.opt.Pin}
}

// Open implements deploy.Backend. Under container-per-server a group of one
// server is a container running that server, as Start makes it; a group of
// several servers (roles that share a Group, or a whole instance under
// container-per-instance) is one container whose command is nearnative's
// supervisor, which starts the servers as the host asks. Servers in one
// container reach each other on 127.0.0.1; servers in different containers
// reach each other at the container's address on the platform's network
// (the default bridge, the run's own network, or the host network, where
// everything is on the client host's server address). Only the entry roles'
// ports are published on the NAT and proxy paths.
func (p *dockerPlatform) Open(ctx context.Context, trial string, plan *topology.Plan) (deploy.Site, error) {
	var ports map[topology.ServerID]map[string]int
	if p.site != nil {
		free, err := p.site.FreePorts(ctx, p.serverAddr(), deploy.PortCount(plan))
		if err != nil {
			return nil, err
		}
		ports = deploy.PortsFrom(plan, free)
	} else {
		var err error
		if ports, err = deploy.Ports(plan, p.serverAddr()); err != nil {
			return nil, err
		}
	}
	if err := p.ensureNetwork(ctx); err != nil {
		return nil, err
	}
	if err := p.ensureRoute(ctx); err != nil {
		return nil, err
	}
	return &site{p: p, trial: trial, plan: plan, ports: ports, groups: map[string]*group{}}, nil
}

type site struct {
	p     *dockerPlatform
	trial string
	plan  *topology.Plan
	ports map[topology.ServerID]map[string]int

	mu     sync.Mutex
	groups map[string]*group
	order  []string
}

// group is one container of the topology.
type group struct {
	name    string
	members []deploy.Member
	// direct: the group is one server's own container.
	direct bool
	srv    *server
	// supervised: a container running the supervisor.
	id, cname string
	ip        string // its address on the platform's network (127.0.0.1 on the host network)
	cpus      string
	agent     *vmagent.Client
	started   []string
	// proxyPIDs are the docker-proxy processes of its entry members'
	// ports on a sut host, by port; unproxy removes their nat rules.
	proxyPIDs map[int][]int
	unproxy   func(context.Context) error
}

func (s *site) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

// listenHost is where servers bind inside their container: on the host
// network, the client host's server address (never a wildcard of this
// machine's namespace).
func (s *site) listenHost() string {
	if s.p.kind == platform.DockerHost {
		return s.p.serverAddr()
	}
	return "0.0.0.0"
}

// publishOn is the host address an entry server's ports are published on,
// "" where nothing is published.
func (s *site) publishOn(entry bool) (string, error) {
	if !entry {
		return "", nil
	}
	switch s.p.kind {
	case platform.DockerNAT:
		return s.p.serverAddr(), nil
	case platform.DockerProxy:
		if s.p.site != nil {
			// The sut host's address, kept from DNAT (viaProxy).
			return s.p.serverAddr(), nil
		}
		return "127.0.0.1", nil
	}
	return "", nil
}

// proxied says whether an entry server's published ports take docker-proxy
// through the run's nat rules (docker-proxy on a sut host).
func (s *site) proxied(sv topology.Server) bool {
	return s.p.site != nil && s.p.kind == platform.DockerProxy && sv.Entry
}

// memberPorts are server sv's port numbers.
func (s *site) memberPorts(sv topology.Server) []int {
	var out []int
	for _, pn := range sv.Ports {
		out = append(out, s.Port(sv.ID, pn))
	}
	return out
}

func (s *site) cpuset(sv topology.Server) string {
	if sv.CPUSet != "" {
		return sv.CPUSet
	}
	return s.p.opt.CPUSet
}

func (s *site) OpenGroup(ctx context.Context, name string, members []deploy.Member) error {
	g := &group{name: name, members: members, direct: len(members) == 1}
	if !g.direct {
		if err := s.openSupervisor(ctx, g); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.groups[name] = g
	s.order = append(s.order, name)
	s.mu.Unlock()
	return nil
}

// openSupervisor creates and starts the container of a group of several
// servers, with every member's volumes and the entry members' published
// ports, and waits for its supervisor to answer.
func (s *site) openSupervisor(ctx context.Context, g *group) (err error) {
	exe := AgentExe
	switch {
	case s.p.site != nil:
		exe = s.p.site.Exe // the binary pushed there: this one, by checksum
	case exe == "":
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("finding the nearnative binary for the supervisor: %w", err)
		}
	}
	for _, m := range g.members {
		if err := s.p.putVolumes(ctx, m.Spec.Volumes); err != nil {
			return err
		}
	}
	token := vmagent.NewToken()
	listen, err := s.agentListen(ctx)
	if err != nil {
		return err
	}
	g.cname = ContainerName(s.p.env.Run, s.trial, g.name)
	cfg, hc, err := s.supervisorConfig(g, exe, token, listen)
	if err != nil {
		return err
	}
	cli := s.p.eng.cli
	created, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, g.cname)
	if err != nil {
		return fmt.Errorf("creating container %s: %w", g.cname, err)
	}
	g.id = created.ID
	defer func() {
		if err != nil {
			s.removeSupervisor(context.WithoutCancel(ctx), g)
		}
	}()
	if err := cli.ContainerStart(ctx, g.id, container.StartOptions{}); err != nil {
		return fmt.Errorf("starting container %s: %w", g.cname, err)
	}
	insp, err := cli.ContainerInspect(ctx, g.id)
	if err != nil {
		return fmt.Errorf("inspecting container %s: %w", g.cname, err)
	}
	g.ip = "127.0.0.1" // on the host network, the supervisor's own control address
	if s.p.kind != platform.DockerHost {
		g.ip = s.p.containerIP(insp)
	}
	if g.ip == "" {
		return fmt.Errorf("container %s has no address on its network", g.cname)
	}
	_, port, _ := strings.Cut(listen, ":")
	g.agent = vmagent.NewClientAddr(g.ip+":"+port, token)
	if s.p.site != nil {
		// The container's address is the host's to reach.
		g.agent = vmagent.NewClientDial(g.ip+":"+port, token, s.p.site.Dial)
	}
	wctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	if err := g.agent.WaitReady(wctx); err != nil {
		tail := (&server{eng: s.p.eng, id: g.id}).logTail(context.WithoutCancel(ctx), logTailLines)
		return fmt.Errorf("the supervisor in container %s did not answer within %v: %w; its log:\n%s", g.cname, agentTimeout, err, indent(tail))
	}
	var ports []int
	for _, m := range g.members {
		if s.proxied(m.Server) {
			ports = append(ports, s.memberPorts(m.Server)...)
		}
	}
	if len(ports) > 0 {
		if g.proxyPIDs, g.unproxy, err = s.p.proxyPorts(ctx, ports); err != nil {
			return err
		}
	}
	return nil
}

// agentListen is where a supervisor listens: its fixed port in the
// container's own network namespace, or a free loopback port on the host
// network.
func (s *site) agentListen(ctx context.Context) (string, error) {
	if s.p.kind != platform.DockerHost {
		return "0.0.0.0:" + strconv.Itoa(agentPort), nil
	}
	free, err := platform.FreePorts("127.0.0.1", 1)
	if s.p.site != nil {
		free, err = s.p.site.FreePorts(ctx, "127.0.0.1", 1)
	}
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(free[0]), nil
}

// supervisorConfig is the create request of a group's container: the
// supervisor as its command (the nearnative binary mounted read-only),
// every member's volumes once, the members' ports, and the union of their
// CPU sets when every member is confined.
func (s *site) supervisorConfig(g *group, exe, token, listen string) (*container.Config, *container.HostConfig, error) {
	cfg := &container.Config{
		Image:      s.p.env.Image,
		Entrypoint: strslice.StrSlice{vmagent.SupervisorPath},
		Env:        []string{vmagent.TokenEnv + "=" + token, vmagent.ListenEnv + "=" + listen},
		WorkingDir: "/",
		Labels: map[string]string{runid.Label: string(s.p.env.Run), runid.LabelRole: g.name,
			LabelTrial: s.trial, LabelPlatform: s.p.name},
		ExposedPorts: nat.PortSet{},
	}
	hc := s.p.hostConfig()
	hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: exe, Target: vmagent.SupervisorPath, ReadOnly: true}}
	var sets []string
	mounted := map[string]string{} // target -> source
	for _, m := range g.members {
		sets = append(sets, s.cpuset(m.Server))
		if err := mountOnce(hc, mounted, g.cname, m.Spec.Volumes); err != nil {
			return nil, nil, err
		}
		if err := s.exposeMember(cfg, hc, m); err != nil {
			return nil, nil, err
		}
	}
	// Every member confined: the container gets their union.
	if g.cpus = topology.GroupCPUs(sets); g.cpus != "" {
		hc.Resources.CpusetCpus = g.cpus
	}
	return cfg, hc, nil
}

// mountOnce adds volumes to hc; servers of one container may share a
// volume (nginx and PHP-FPM see one site at one path): it is mounted once.
func mountOnce(hc *container.HostConfig, mounted map[string]string, cname string, vols []platform.Volume) error {
	for _, v := range vols {
		if src, ok := mounted[v.Path]; ok {
			if src != v.HostPath {
				return fmt.Errorf("servers of container %s mount both %s and %s at %s", cname, src, v.HostPath, v.Path)
			}
			continue
		}
		mounted[v.Path] = v.HostPath
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: v.HostPath, Target: v.Path, ReadOnly: v.ReadOnly})
	}
	return nil
}

// exposeMember exposes a member's ports on the container's network and
// publishes an entry member's on the platform's host address.
func (s *site) exposeMember(cfg *container.Config, hc *container.HostConfig, m deploy.Member) error {
	if s.p.kind == platform.DockerHost {
		return nil
	}
	on, err := s.publishOn(m.Server.Entry)
	if err != nil {
		return err
	}
	for _, pn := range m.Server.Ports {
		port := nat.Port(strconv.Itoa(s.Port(m.Server.ID, pn)) + "/tcp")
		cfg.ExposedPorts[port] = struct{}{}
		if on != "" {
			if hc.PortBindings == nil {
				hc.PortBindings = nat.PortMap{}
			}
			hc.PortBindings[port] = []nat.PortBinding{{HostIP: on, HostPort: port.Port()}}
		}
	}
	return nil
}

func (s *site) removeSupervisor(ctx context.Context, g *group) error {
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	cli := s.p.eng.cli
	var errs []error
	if g.unproxy != nil {
		errs = append(errs, g.unproxy(ctx))
		g.unproxy = nil
	}
	timeout := stopTimeout
	if err := cli.ContainerStop(ctx, g.id, container.StopOptions{Timeout: &timeout}); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("stopping container %s: %w", g.cname, err))
	}
	if path := LogPath(s.p.env.LogDir, s.trial, g.name+"-supervisor"); path != "" {
		if err := s.p.eng.SaveLogs(ctx, g.id, g.cname, path); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cli.ContainerRemove(ctx, g.id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("removing container %s: %w", g.cname, err))
	}
	return errors.Join(errs...)
}

func (s *site) group(name string) (*group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return nil, fmt.Errorf("container group %s is not open", name)
	}
	return g, nil
}

func (s *site) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	g, err := s.group(m.Server.Group)
	if err != nil {
		return nil, err
	}
	if g.direct {
		return s.startDirect(ctx, g, m)
	}
	return s.startSupervised(ctx, g, m)
}

// startDirect starts a one-server group's container.
func (s *site) startDirect(ctx context.Context, g *group, m deploy.Member) (platform.Server, error) {
	pl := plan{listen: platform.Listen{Host: s.listenHost(), Ports: s.ports[m.Server.ID], Dir: platform.ContainerDir}}
	on, err := s.publishOn(m.Server.Entry)
	if err != nil {
		return nil, err
	}
	pl.publishOn, pl.clientHost = on, on
	if s.p.kind == platform.DockerHost {
		pl.clientHost = s.p.serverAddr()
	}
	if err := s.p.putVolumes(ctx, m.Spec.Volumes); err != nil {
		return nil, err
	}
	srv, err := s.p.start(ctx, s.trial, m.Spec, pl, s.cpuset(m.Server))
	if err != nil {
		return nil, err
	}
	if s.proxied(m.Server) {
		if err := s.p.viaProxy(ctx, srv, s.memberPorts(m.Server)); err != nil {
			return nil, errors.Join(err, srv.Stop(ctx))
		}
	}
	g.srv = srv
	g.ip, g.cname, g.cpus = srv.bridgeIP, srv.name, s.cpuset(m.Server)
	if s.p.kind == platform.DockerHost {
		g.ip = s.p.serverAddr()
	}
	g.started = append(g.started, m.Server.ID.Name())
	return s.p.served(srv), nil
}

// startSupervised starts a server through its container's supervisor.
func (s *site) startSupervised(ctx context.Context, g *group, m deploy.Member) (platform.Server, error) {
	spec := m.Spec
	dir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: s.listenHost(), Ports: s.ports[m.Server.ID], Dir: dir}
	from, err := s.p.from(ctx)
	if err != nil {
		return nil, err
	}
	l.From = from
	argv := spec.Command(l)
	if len(argv) == 0 {
		return nil, fmt.Errorf("server %s: empty command", spec.Name)
	}
	var own []string
	for _, v := range spec.Volumes {
		if v.Own {
			own = append(own, v.Path)
		}
	}
	pid, err := g.agent.Start(ctx, vmagent.Proc{Name: spec.Name, Argv: argv, Env: spec.Env, Dir: dir,
		Files: agentFilesOf(spec.FilesFor(l)), User: spec.User, CPUSet: m.Server.CPUSet, Own: own})
	if err != nil {
		return nil, fmt.Errorf("server %s in container %s: %w", spec.Name, g.cname, err)
	}
	ss := &supervised{site: s, g: g, m: m, addrs: map[string]string{}, Process: &vmagent.Process{Agent: g.agent, PID: pid, Argv: argv,
		LogPath: LogPath(s.p.env.LogDir, s.trial, spec.Name), Grace: stopTimeout * time.Second, Bound: teardownTimeout}}
	on, err := s.publishOn(m.Server.Entry)
	if err != nil {
		return nil, err
	}
	for _, pn := range m.Server.Ports {
		host := g.ip
		switch {
		case on != "":
			host = on
		case s.p.kind == platform.DockerHost:
			host = s.p.serverAddr()
		}
		ss.addrs[pn] = deploy.JoinPort(host, s.Port(m.Server.ID, pn))
	}
	g.started = append(g.started, m.Server.ID.Name())
	if s.p.site != nil {
		return remoteSupervised{supervised: ss, onSite: onSite{s.p.site}}, nil
	}
	return ss, nil
}

func agentFilesOf(fs []platform.File) []vmagent.File {
	var out []vmagent.File
	for _, f := range fs {
		out = append(out, vmagent.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	return out
}

func (s *site) PeerAddr(from, to topology.Server, port string) (string, error) {
	p := s.Port(to.ID, port)
	if s.p.kind == platform.DockerHost {
		return deploy.JoinPort(s.p.serverAddr(), p), nil
	}
	if from.OnHost && s.p.site != nil {
		// A role beside the driver, on another machine: the port
		// published on the host's address (to is an entry server).
		return deploy.JoinPort(s.p.serverAddr(), p), nil
	}
	if from.Group == to.Group && len(s.plan.Group(to.Group)) > 1 {
		// One container under the supervisor, which may not run yet.
		return deploy.JoinPort("127.0.0.1", p), nil
	}
	g, err := s.group(to.Group)
	if err != nil {
		return "", err
	}
	if g.ip == "" {
		return "", fmt.Errorf("%s has no address yet: it has not started", to.ID.Name())
	}
	return deploy.JoinPort(g.ip, p), nil
}

func (s *site) Places() []deploy.Place {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []deploy.Place
	for _, name := range s.order {
		g := s.groups[name]
		pl := deploy.Place{Name: g.cname, Kind: "container", Address: g.ip, CPUs: g.cpus, Servers: g.started}
		if g.direct {
			pl.Detail = "the server is the container's command"
		} else {
			pl.Detail = "servers started by nearnative's supervisor in the container, peers on 127.0.0.1"
		}
		pl.Detail += "; image " + s.p.env.Image
		if s.p.site != nil {
			pl.Detail += "; on sut host " + s.p.site.Host
		}
		out = append(out, pl)
	}
	return out
}

// Close removes the supervisor containers, in parallel: each is stopped,
// its log saved and removed, which takes a few seconds that N instances
// need not wait N times.
func (s *site) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(s.order))
	var wg sync.WaitGroup
	for i, name := range s.order {
		if g := s.groups[name]; !g.direct && g.id != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.removeSupervisor(ctx, g)
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// supervised is a server started by a container's supervisor; the
// process side (CPU time, migrations, log tail, exit, stop) is the agent's.
type supervised struct {
	*vmagent.Process
	site  *site
	g     *group
	m     deploy.Member
	addrs map[string]string
}

func (s *supervised) Addr(port string) string {
	a, ok := s.addrs[port]
	if !ok {
		panic(fmt.Sprintf("docker: port %q not declared by %s", port, s.m.Spec.Name))
	}
	return a
}

func (s *supervised) Describe() string {
	var ports []string
	for _, pn := range s.m.Server.Ports {
		ports = append(ports, pn+" "+s.addrs[pn])
	}
	sort.Strings(ports)
	how := "on " + s.g.ip
	if s.site.p.kind == platform.DockerHost {
		how = "on the host network"
	}
	return fmt.Sprintf("process pid %d in container %s (several servers under nearnative's supervisor) %s; client to %s",
		s.PID, s.g.cname, how, strings.Join(ports, ", "))
}

// LogTail implements deploy.LogTailer for a server's own container.
func (s *server) LogTail(ctx context.Context, lines int) string { return s.logTail(ctx, lines) }

// Exited implements deploy.Exiter for a server's own container.
func (s *server) Exited(ctx context.Context) error {
	insp, err := s.eng.cli.ContainerInspect(ctx, s.id)
	if err != nil {
		return fmt.Errorf("inspecting container %s: %w", s.name, err)
	}
	if insp.State != nil && !insp.State.Running {
		return fmt.Errorf("container %s exited with code %d", s.name, insp.State.ExitCode)
	}
	return nil
}

// Migrations implements deploy.Scheduler for a server's own container: every
// thread of every process the engine lists in it (host PIDs).
func (s *server) Migrations(ctx context.Context) (int64, error) {
	pids, err := s.pids(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, pid := range pids {
		if m, err := sysinfo.ProcMigrations(pid); err == nil {
			n += m
		}
	}
	return n, nil
}

// pids are the processes the engine lists in the container (PIDs of the
// engine's machine).
func (s *server) pids(ctx context.Context) ([]int, error) {
	top, err := s.eng.cli.ContainerTop(ctx, s.id, []string{"-o", "pid"})
	if err != nil {
		return nil, fmt.Errorf("listing the processes of container %s: %w", s.name, err)
	}
	var pids []int
	for _, row := range top.Processes {
		if len(row) == 0 {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(row[0])); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
