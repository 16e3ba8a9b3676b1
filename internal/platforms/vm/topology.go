package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Machine implements deploy.Backend: the host's CPUs (the sut host's, for
// guests there) and each guest's vCPUs;
// on vm-docker every group is a container of one guest's engine.
func (p *Platform) Machine() topology.Machine {
	cpus := deploy.HostCPUs()
	if p.on != nil {
		cpus = p.on.CPUs()
	}
	return topology.Machine{CPUs: cpus, VCPUs: p.vcpus, GuestMemory: p.memMiB << 20, GuestContainers: p.kind != platform.VM}
}

// Open implements deploy.Backend. It boots the plan's guests (one by
// default, `vms: N` to spread the instances over N, each with the platform's
// vcpus, or the plan's count for a role's guest of its own, and vm_memory) and, on vm-docker, starts each guest's Docker engine.
// On vm every server is a process of its guest; on vm-docker every group is
// a container of its guest's engine. Servers reach each other at their
// guest's address; the host reaches them there too.
func (p *Platform) Open(ctx context.Context, trial string, plan *topology.Plan) (_ deploy.Site, err error) {
	guests := plan.Guests()
	on, err := p.guestHosts(guests)
	if err != nil {
		return nil, err
	}
	// Known before booting on a sut host (always user-mode there) or after
	// an earlier fallback; else known once the guests have booted.
	if err := p.joinable(len(guests)); err != nil {
		return nil, err
	}
	var ports map[topology.ServerID]map[string]int
	var agents []int // each guest's agent port on its sut host (0: here)
	if p.on != nil {
		// The hosts' platforms prepare one at a time, before the guests
		// boot at once: they build and stage the same files.
		for _, hp := range on { // once each: prepare remembers
			hp.mu.Lock()
			err := hp.prepare(ctx)
			hp.mu.Unlock()
			if err != nil {
				return nil, err
			}
		}
		if ports, agents, err = hostForwards(ctx, guests, on); err != nil {
			return nil, err
		}
	} else if ports, err = deploy.Ports(plan, p.env.ClientHost().ServerAddr()); err != nil {
		return nil, err
	}
	s := &vmSite{p: p, trial: trial, plan: plan, ports: ports, groups: map[string]*vmGroup{}}
	defer func() {
		if err != nil {
			s.Close(context.WithoutCancel(ctx))
		}
	}()
	s.guests = make([]*vmGuest, len(guests))
	errs := make([]error, len(guests))
	var wg sync.WaitGroup
	for i, servers := range guests {
		var fwd []int
		for _, sv := range servers {
			for _, pn := range sv.Ports {
				fwd = append(fwd, ports[sv.ID][pn])
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			vcpus := p.vcpus
			if i < len(plan.GuestVCPUs) && plan.GuestVCPUs[i] > 0 {
				vcpus = plan.GuestVCPUs[i]
			}
			o := onHost{Peers: len(guests) > 1}
			if agents != nil {
				o.AgentPort = agents[i]
			}
			g, err := on[i].bootSized(ctx, fmt.Sprintf("%s-vm%d", trial, i), fwd, vcpus, o)
			if err != nil {
				errs[i] = fmt.Errorf("booting guest %d: %w", i, err)
				return
			}
			vg := &vmGuest{g: g, index: i}
			s.guests[i] = vg
			if p.kind != platform.VM {
				if vg.d, err = startDockerd(ctx, g); err != nil {
					errs[i] = fmt.Errorf("guest %d: %w", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := p.joinable(len(guests)); err != nil {
		return nil, err
	}
	return s, nil
}

// guestHosts is the platform (the sut host's, on sut hosts) each guest of
// plan boots on: its servers' roles' host; a guest holding roles placed
// on two hosts is refused (deploy names the platform).
func (p *Platform) guestHosts(guests [][]topology.Server) ([]*Platform, error) {
	on := make([]*Platform, len(guests))
	for i, servers := range guests {
		on[i] = p
		by := ""
		for j, sv := range servers {
			hp, err := p.hostFor(sv.ID.Role)
			if err != nil {
				return nil, err
			}
			if j > 0 && hp != on[i] {
				return nil, platform.Unavailablef("guest %d would hold %s, placed on sut host %s, and %s, placed on %s: place them on one host, or give the roles guests of their own (web20's vm_split, redis-scaleout's guests: per-redis)", i, by, on[i].on.Name(), sv.ID.Role, hp.on.Name())
			}
			on[i], by = hp, sv.ID.Role
		}
	}
	return on, nil
}

// hostForwards are the ports of guests' servers, forwarded on the address
// of the sut host each guest boots on (on), and each guest's agent port on
// that host's 127.0.0.1: free in that host's kernel, chosen in one call per
// host and address, so that guests booting at once on a host do not get
// the same port.
func hostForwards(ctx context.Context, guests [][]topology.Server, on []*Platform) (map[topology.ServerID]map[string]int, []int, error) {
	count, nguests := map[*Platform]int{}, map[*Platform]int{}
	for i, servers := range guests {
		nguests[on[i]]++
		for _, sv := range servers {
			count[on[i]] += len(sv.Ports)
		}
	}
	free, agentFree := map[*Platform][]int{}, map[*Platform][]int{}
	for hp, n := range nguests {
		if count[hp] > 0 {
			ports, err := hp.hostPorts(ctx, hp.on.Addr().String(), count[hp])
			if err != nil {
				return nil, nil, err
			}
			free[hp] = ports
		}
		ports, err := hp.hostPorts(ctx, "127.0.0.1", n)
		if err != nil {
			return nil, nil, err
		}
		agentFree[hp] = ports
	}
	out := map[topology.ServerID]map[string]int{}
	agents := make([]int, len(guests))
	for i, servers := range guests {
		agents[i], agentFree[on[i]] = agentFree[on[i]][0], agentFree[on[i]][1:]
		for _, sv := range servers {
			m := map[string]int{}
			for _, pn := range sv.Ports {
				m[pn], free[on[i]] = free[on[i]][0], free[on[i]][1:]
			}
			out[sv.ID] = m
		}
	}
	return out, agents, nil
}

// joinable refuses n guests on QEMU's user-mode network here, which does
// not join guests, saying how a study puts its topology in one guest. On
// sut hosts the guests reach each other at their hosts' forwards.
func (p *Platform) joinable(n int) error {
	if p.userNet == "" || n <= 1 || p.on != nil {
		return nil
	}
	return fmt.Errorf("%d guests cannot reach each other on QEMU's user-mode network (%s): run it in one guest (workload param vms: 1; redis-scaleout: guests: one)", n, p.userNet)
}

type vmSite struct {
	p      *Platform
	trial  string
	plan   *topology.Plan
	ports  map[topology.ServerID]map[string]int
	guests []*vmGuest

	mu     sync.Mutex
	groups map[string]*vmGroup
	order  []string
}

type vmGuest struct {
	g     *guest
	d     *guestDocker // vm-docker only
	index int
	mu    sync.Mutex
	exe   bool // the nearnative binary is in the guest (for supervisors)
	held  []string
	put   map[string]string // guest path -> host tree copied there
}

// vmGroup is a container in a guest's engine (vm-docker only).
type vmGroup struct {
	name    string
	guest   *vmGuest
	cname   string
	ip      string // the container's address inside the guest
	direct  bool
	agent   *vmagent.Client
	started []string
}

func (s *vmSite) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

// guestCPUs checks that a placement's CPU set fits the guest's vCPUs.
func (s *vmSite) guestCPUs(sv topology.Server) (string, error) {
	if sv.CPUSet == "" {
		return "", nil
	}
	cpus, err := platform.ParseCPUSet(sv.CPUSet)
	if err != nil {
		return "", err
	}
	n := s.guests[sv.Guest].g.cfg.VCPUs
	for _, c := range cpus {
		if c >= n {
			return "", fmt.Errorf("%s is pinned to CPUs %s, but its guest has %d vCPUs (0-%d): in a guest, pinning names vCPUs", sv.ID.Name(), sv.CPUSet, n, n-1)
		}
	}
	return sv.CPUSet, nil
}

// putVolumes copies each volume's host tree into the guest at guestPath(v),
// once per guest: servers that share a volume at one path (nginx and
// PHP-FPM see one site) share the guest's copy too.
func (s *vmSite) putVolumes(ctx context.Context, vg *vmGuest, spec platform.Spec, guestPath func(i int, v platform.Volume) string) error {
	for i, v := range spec.Volumes {
		dest := guestPath(i, v)
		vg.mu.Lock()
		src, done := vg.put[dest]
		vg.mu.Unlock()
		if done {
			if src != v.HostPath {
				return fmt.Errorf("volumes %s and %s of guest %d both go to %s", src, v.HostPath, vg.index, dest)
			}
			continue
		}
		if err := vg.g.agent.Put(ctx, v.HostPath, dest); err != nil {
			return fmt.Errorf("copying volume %s of %s into guest %d: %w", v.HostPath, spec.Name, vg.index, err)
		}
		vg.mu.Lock()
		if vg.put == nil {
			vg.put = map[string]string{}
		}
		vg.put[dest] = v.HostPath
		vg.mu.Unlock()
	}
	return nil
}

func (s *vmSite) OpenGroup(ctx context.Context, name string, members []deploy.Member) error {
	if s.p.kind == platform.VM {
		return nil
	}
	vg := s.guests[members[0].Server.Guest]
	g := &vmGroup{name: name, guest: vg, cname: "nn-" + name, direct: len(members) == 1}
	if !g.direct {
		if err := s.openSupervisor(ctx, g, members); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.groups[name] = g
	s.order = append(s.order, name)
	s.mu.Unlock()
	return nil
}

// exePath is where the nearnative binary goes in a guest for supervisors.
const exePath = "/nearnative-bin"

// openSupervisor runs a container holding several servers in the guest's
// engine, with nearnative's supervisor as its command.
func (s *vmSite) openSupervisor(ctx context.Context, g *vmGroup, members []deploy.Member) error {
	vg := g.guest
	if err := s.stageExe(ctx, vg); err != nil {
		return err
	}
	free, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		return err
	}
	ap := free[0]
	token := vmagent.NewToken()
	args := []string{"run", "-d", "--init", "--name", g.cname,
		"-v", exePath + "/nearnative:" + vmagent.SupervisorPath + ":ro",
		"-e", vmagent.TokenEnv + "=" + token, "--entrypoint", vmagent.SupervisorPath}
	if s.p.kind == KindDockerHost {
		args = append(args, "--network", "host", "-e", vmagent.ListenEnv+"="+vg.g.ip+":"+strconv.Itoa(ap))
	} else {
		args = append(args, "-e", vmagent.ListenEnv+"=0.0.0.0:7977", "-p", vg.g.ip+":"+strconv.Itoa(ap)+":7977")
	}
	memberArgs, err := s.supervisorMembers(ctx, g, members)
	if err != nil {
		return err
	}
	args = append(append(args, memberArgs...), vg.image(s.p))
	if _, err := vg.d.docker(ctx, args...); err != nil {
		return err
	}
	if g.ip, err = s.containerIP(ctx, vg, g.cname); err != nil {
		return err
	}
	g.agent = vmagent.NewClientAddr(vg.g.reach+":"+strconv.Itoa(ap), token)
	if vg.g.cfg.Bridge == nil {
		// QEMU's user-mode network forwards only the servers' ports: the
		// supervisor is reached through the guest's agent, from inside.
		g.agent = vmagent.NewClientDial(vg.g.ip+":"+strconv.Itoa(ap), token, func(ctx context.Context, _, addr string) (net.Conn, error) {
			return vg.g.agent.Dial(ctx, addr)
		})
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := g.agent.WaitReady(wctx); err != nil {
		logs, _ := vg.d.docker(context.WithoutCancel(ctx), "logs", "--tail", "15", g.cname)
		return fmt.Errorf("the supervisor in container %s of guest %d did not answer: %w; its log: %s%s", g.cname, vg.index, err, logs.Stdout, logs.Stderr)
	}
	return nil
}

// stageExe copies the nearnative binary into the guest once, for its
// supervisors.
func (s *vmSite) stageExe(ctx context.Context, vg *vmGuest) error {
	vg.mu.Lock()
	defer vg.mu.Unlock()
	if vg.exe {
		return nil
	}
	tmp, err := os.MkdirTemp("", "nn-exe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The copy keeps the directory's mode: readable by the servers' users,
	// as /usr/local/bin would be.
	os.Chmod(tmp, 0o755)
	if err := os.Link(s.p.Exe, filepath.Join(tmp, "nearnative")); err != nil {
		b, rerr := os.ReadFile(s.p.Exe)
		if rerr != nil || os.WriteFile(filepath.Join(tmp, "nearnative"), b, 0o755) != nil {
			return fmt.Errorf("staging the nearnative binary for guest %d: %w", vg.index, errors.Join(err, rerr))
		}
	}
	if err := vg.g.agent.Put(ctx, tmp, exePath); err != nil {
		return err
	}
	vg.exe = true
	return nil
}

// supervisorMembers copies the members' volumes into the guest and
// returns the docker run options that mount them (once each: servers of
// one container may share a volume, as nginx and PHP-FPM see one site at
// one path) and publish the members' ports on the guest's address.
func (s *vmSite) supervisorMembers(ctx context.Context, g *vmGroup, members []deploy.Member) ([]string, error) {
	vg := g.guest
	var args []string
	mounted := map[string]string{} // container path -> host tree
	for _, m := range members {
		for i, v := range m.Spec.Volumes {
			if src, ok := mounted[v.Path]; ok {
				if src != v.HostPath {
					return nil, fmt.Errorf("servers of container %s mount both %s and %s at %s", g.cname, src, v.HostPath, v.Path)
				}
				continue
			}
			mounted[v.Path] = v.HostPath
			gp := volumePath(m.Spec.Name, i)
			if err := s.putVolumes(ctx, vg, platform.Spec{Name: m.Spec.Name, Volumes: []platform.Volume{v}}, func(int, platform.Volume) string { return gp }); err != nil {
				return nil, err
			}
			args = append(args, "-v", gp+":"+v.Path+roSuffix(v))
		}
		if s.p.kind != KindDockerHost {
			for _, pn := range m.Server.Ports {
				ps := strconv.Itoa(s.Port(m.Server.ID, pn))
				args = append(args, "-p", vg.g.ip+":"+ps+":"+ps)
			}
		}
	}
	return args, nil
}

// roSuffix is the -v option's suffix of a read-only volume.
func roSuffix(v platform.Volume) string {
	if v.ReadOnly {
		return ":ro"
	}
	return ""
}

func volumePath(server string, i int) string {
	return platform.ContainerDir + "/volumes/" + server + "-" + strconv.Itoa(i)
}

// containerIP is a container's address on its guest engine's bridge (the
// guest's own address on the host network).
func (s *vmSite) containerIP(ctx context.Context, vg *vmGuest, cname string) (string, error) {
	if s.p.kind == KindDockerHost {
		return vg.g.ip, nil
	}
	r, err := vg.d.docker(ctx, "inspect", "-f", "{{.NetworkSettings.IPAddress}}", cname)
	if err != nil {
		return "", err
	}
	ip := strings.TrimSpace(string(r.Stdout))
	if ip == "" {
		return "", fmt.Errorf("container %s in guest %d has no address", cname, vg.index)
	}
	return ip, nil
}

func (s *vmSite) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	vg := s.guests[m.Server.Guest]
	cpus, err := s.guestCPUs(m.Server)
	if err != nil {
		return nil, err
	}
	spec := m.Spec
	var srv platform.Server
	if s.p.kind == platform.VM {
		srv, err = s.startProc(ctx, vg, m, cpus)
	} else {
		s.mu.Lock()
		g := s.groups[m.Server.Group]
		s.mu.Unlock()
		if g == nil {
			return nil, fmt.Errorf("container group %s is not open", m.Server.Group)
		}
		if g.direct {
			srv, err = s.startContainer(ctx, g, m, cpus)
		} else {
			srv, err = s.startSupervised(ctx, g, m, cpus)
		}
	}
	if err != nil {
		return nil, err
	}
	vg.mu.Lock()
	vg.held = append(vg.held, spec.Name)
	vg.mu.Unlock()
	if gp, ok := srv.(*guestProc); ok && vg.g.cfg.remote != nil {
		return remoteProc{guestProc: gp, hostAnswers: hostAnswers{vg.g.bootedBy(s.p)}}, nil
	}
	return srv, nil
}

// startProc starts a server as a process of its guest.
func (s *vmSite) startProc(ctx context.Context, vg *vmGuest, m deploy.Member, cpus string) (platform.Server, error) {
	spec := m.Spec
	var own []string
	if err := s.putVolumes(ctx, vg, spec, func(_ int, v platform.Volume) string {
		if v.Own {
			own = append(own, v.Path)
		}
		return v.Path
	}); err != nil {
		return nil, err
	}
	dir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: vg.g.ip, Ports: s.ports[m.Server.ID], Dir: dir, From: s.p.from(vg.g)}
	argv := spec.Command(l)
	if len(argv) == 0 {
		return nil, fmt.Errorf("server %s: empty command", spec.Name)
	}
	pid, err := vg.g.agent.Start(ctx, vmagent.Proc{Name: spec.Name, Argv: argv, Env: spec.Env, Dir: dir,
		Files: agentFiles(spec.FilesFor(l)), User: spec.User, CPUSet: cpus, Own: own})
	if err != nil {
		return nil, fmt.Errorf("server %s in guest %d: %w", spec.Name, vg.index, err)
	}
	return &guestProc{site: s, vg: vg, m: m, host: vg.g.reach, Process: &vmagent.Process{Agent: vg.g.agent, PID: pid, Argv: argv, LogPath: s.logPath(spec.Name), Grace: StopTimeout, Bound: StopTimeout + 30*time.Second},
		where: fmt.Sprintf("process pid %d in guest %d, %s", pid, vg.index, s.p.where(vg.g))}, nil
}

// startContainer runs a one-server group as its own container in the
// guest's engine.
func (s *vmSite) startContainer(ctx context.Context, g *vmGroup, m deploy.Member, cpus string) (platform.Server, error) {
	vg, spec := g.guest, m.Spec
	hostDir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: "0.0.0.0", Ports: s.ports[m.Server.ID], Dir: platform.ContainerDir, From: s.p.from(vg.g)}
	if s.p.kind == KindDockerHost {
		l.Host = vg.g.ip
	}
	if r, err := vg.g.agent.Run(ctx, vmagent.Proc{Argv: []string{"true"}, Dir: hostDir, Files: agentFiles(spec.FilesFor(l))}); err != nil || r.ExitCode != 0 {
		return nil, fmt.Errorf("writing the files of %s in guest %d: %v %s", spec.Name, vg.index, err, r.Stderr)
	}
	args := []string{"run", "-d", "--init", "--name", g.cname, "-v", hostDir + ":" + platform.ContainerDir, "-w", platform.ContainerDir}
	var own []string
	for i, v := range spec.Volumes {
		gp := volumePath(spec.Name, i)
		if v.Own {
			own = append(own, gp)
		}
		if err := vg.g.agent.Put(ctx, v.HostPath, gp); err != nil {
			return nil, fmt.Errorf("copying volume %s of %s into guest %d: %w", v.HostPath, spec.Name, vg.index, err)
		}
		args = append(args, "-v", gp+":"+v.Path+roSuffix(v))
	}
	if len(own) > 0 && spec.User != "" {
		// The guest's disk is the image's, so its users are the container's.
		if r, err := vg.g.agent.Run(ctx, vmagent.Proc{Argv: []string{"true"}, Dir: "/", User: spec.User, Own: own}); err != nil || r.ExitCode != 0 {
			return nil, fmt.Errorf("giving the volumes of %s to %s in guest %d: %v %s", spec.Name, spec.User, vg.index, err, r.Stderr)
		}
	}
	if s.p.kind == KindDockerHost {
		args = append(args, "--network", "host")
	} else {
		// Every port is published on the guest's private address, so
		// that the host can probe every server; peers still reach each
		// other at the containers' own addresses.
		for _, pn := range m.Server.Ports {
			ps := strconv.Itoa(s.Port(m.Server.ID, pn))
			args = append(args, "-p", vg.g.ip+":"+ps+":"+ps)
		}
	}
	if cpus != "" {
		args = append(args, "--cpuset-cpus", cpus)
	}
	for k, v := range spec.Env {
		args = append(args, "-e", k+"="+v)
	}
	if spec.User != "" {
		args = append(args, "--user", spec.User)
	}
	argv := spec.Command(l)
	args = append(append(args, g.guest.image(s.p)), argv...)
	if _, err := vg.d.docker(ctx, args...); err != nil {
		return nil, err
	}
	r, err := vg.d.docker(ctx, "inspect", "-f", "{{.State.Running}} {{.State.Pid}} {{.NetworkSettings.IPAddress}}", g.cname)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(r.Stdout))
	if len(f) < 2 || f[0] != "true" {
		logs, _ := vg.d.docker(ctx, "logs", "--tail", "15", g.cname)
		return nil, fmt.Errorf("container %s in guest %d exited at once: %s%s", g.cname, vg.index, logs.Stdout, logs.Stderr)
	}
	pid, _ := strconv.Atoi(f[1])
	g.ip = vg.g.ip
	if len(f) > 2 && s.p.kind != KindDockerHost {
		g.ip = f[2]
	}
	g.started = append(g.started, spec.Name)
	return &guestProc{site: s, vg: vg, m: m, host: vg.g.reach, own: g, Process: &vmagent.Process{Agent: vg.g.agent, PID: pid, Argv: argv, LogPath: s.logPath(spec.Name), Grace: StopTimeout, Bound: StopTimeout + 30*time.Second},
		where: fmt.Sprintf("container %s (pid %d) at %s in the Docker engine of guest %d, %s", g.cname, pid, g.ip, vg.index, s.p.where(vg.g))}, nil
}

// startSupervised starts a server through a group container's supervisor.
func (s *vmSite) startSupervised(ctx context.Context, g *vmGroup, m deploy.Member, cpus string) (platform.Server, error) {
	spec := m.Spec
	dir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: "0.0.0.0", Ports: s.ports[m.Server.ID], Dir: dir, From: s.p.from(g.guest.g)}
	if s.p.kind == KindDockerHost {
		l.Host = g.guest.g.ip
	}
	var own []string
	for _, v := range spec.Volumes {
		if v.Own {
			own = append(own, v.Path)
		}
	}
	argv := spec.Command(l)
	pid, err := g.agent.Start(ctx, vmagent.Proc{Name: spec.Name, Argv: argv, Env: spec.Env, Dir: dir,
		Files: agentFiles(spec.FilesFor(l)), User: spec.User, CPUSet: cpus, Own: own})
	if err != nil {
		return nil, fmt.Errorf("server %s in container %s of guest %d: %w", spec.Name, g.cname, g.guest.index, err)
	}
	g.started = append(g.started, spec.Name)
	return &guestProc{site: s, vg: g.guest, m: m, host: g.guest.g.reach, Process: &vmagent.Process{Agent: g.agent, PID: pid, Argv: argv, LogPath: s.logPath(spec.Name), Grace: StopTimeout, Bound: StopTimeout + 30*time.Second},
		where: fmt.Sprintf("process pid %d in container %s (several servers under nearnative's supervisor) in the Docker engine of guest %d, %s", pid, g.cname, g.guest.index, s.p.where(g.guest.g))}, nil
}

func (s *vmSite) PeerAddr(from, to topology.Server, port string) (string, error) {
	p := s.Port(to.ID, port)
	if from.Guest != to.Guest {
		s.p.mu.Lock()
		br := s.p.br
		s.p.mu.Unlock()
		if br != nil && br.isolated != "" {
			return "", fmt.Errorf("%s in guest %d cannot reach %s in guest %d: %s", from.ID.Name(), from.Guest, to.ID.Name(), to.Guest, br.isolated)
		}
	}
	if from.Guest != to.Guest && s.p.on != nil {
		// Guests on sut hosts: the peer's forward on its host's address,
		// which the from guest's QEMU opens (restrict=off) from its host.
		return deploy.JoinPort(s.guests[to.Guest].forwardAddr(), p), nil
	}
	if s.p.kind == platform.VM || s.p.kind == KindDockerHost {
		return deploy.JoinPort(s.guests[to.Guest].g.ip, p), nil
	}
	if from.Group == to.Group && len(s.plan.Group(to.Group)) > 1 {
		return deploy.JoinPort("127.0.0.1", p), nil
	}
	if from.Guest != to.Guest {
		// Another guest's engine publishes every port of its containers
		// on that guest's address (startContainer, openSupervisor), which
		// the run's bridge carries from guest to guest.
		return deploy.JoinPort(s.guests[to.Guest].g.ip, p), nil
	}
	s.mu.Lock()
	g := s.groups[to.Group]
	s.mu.Unlock()
	if g == nil || g.ip == "" {
		return "", fmt.Errorf("%s has no address yet: it has not started", to.ID.Name())
	}
	return deploy.JoinPort(g.ip, p), nil
}

// image is the workload image in vg's engine, as the platform that booted
// it resolved it (a run naming none resolves it when the platform
// prepares, and p, the primary, may have booted no guest).
func (vg *vmGuest) image(p *Platform) string { return vg.g.bootedBy(p).env.Image }

// forwardAddr is where another guest reaches vg's forwards: its host's
// address, or QEMU's gateway (the host's loopback) when the forwards are
// on loopback, which only a guest of the same host reaches so (as in the
// tests: two "hosts" that are this machine).
func (vg *vmGuest) forwardAddr() string {
	if a, err := netip.ParseAddr(vg.g.reach); err == nil && a.IsLoopback() {
		return "10.0.2.2"
	}
	return vg.g.reach
}

func (s *vmSite) Places() []deploy.Place {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []deploy.Place
	for _, vg := range s.guests {
		if vg == nil {
			continue
		}
		vg.mu.Lock()
		out = append(out, deploy.Place{Name: "guest " + strconv.Itoa(vg.index), Kind: "guest", Address: vg.g.ip,
			Servers: append([]string(nil), vg.held...), Detail: s.p.where(vg.g)})
		vg.mu.Unlock()
	}
	for _, name := range s.order {
		g := s.groups[name]
		out = append(out, deploy.Place{Name: g.cname, Kind: "container in guest " + strconv.Itoa(g.guest.index), Address: g.ip,
			Servers: g.started, Detail: "image " + g.guest.image(s.p)})
	}
	return out
}

func (s *vmSite) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	s.mu.Lock()
	order := append([]string(nil), s.order...)
	s.mu.Unlock()
	for _, name := range order {
		g := s.groups[name]
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if r, err := g.guest.d.docker(sctx, "logs", g.cname); err == nil {
			os.WriteFile(filepath.Join(s.p.env.LogDir, s.trial+"-"+name+".log"), append(r.Stdout, r.Stderr...), 0o644)
		}
		if _, err := g.guest.d.docker(sctx, "rm", "-f", g.cname); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	var wg sync.WaitGroup
	gerrs := make([]error, len(s.guests))
	for i, vg := range s.guests {
		if vg == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if vg.d != nil {
				sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				vg.d.stop(sctx)
				cancel()
			}
			gerrs[i] = vg.g.shutdown(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, gerrs...)...)
}

// guestProc is a server in a guest: a process of the guest, a container of
// its engine, or a process under a container's supervisor. Its process
// side is the agent's (the guest's, or the supervisor's), but for a
// container of its own, whose log, exit and stop are the guest engine's.
type guestProc struct {
	*vmagent.Process
	site  *vmSite
	vg    *vmGuest
	m     deploy.Member
	host  string   // where the host reaches its ports
	own   *vmGroup // the server's own container, if it has one
	where string
	once  sync.Once
	err   error
}

// logPath is where a server's output goes when it stops ("" without a log
// directory).
func (s *vmSite) logPath(name string) string {
	if s.p.env.LogDir == "" {
		return ""
	}
	return filepath.Join(s.p.env.LogDir, s.trial+"-"+name+".log")
}

// Addr is the host-side address: the guest's, where vm-docker publishes
// every port of its containers.
func (s *guestProc) Addr(port string) string {
	return deploy.JoinPort(s.host, s.site.Port(s.m.Server.ID, port))
}

func (s *guestProc) Describe() string {
	var ports []string
	for _, pn := range s.m.Server.Ports {
		ports = append(ports, pn+" "+s.Addr(pn))
	}
	sort.Strings(ports)
	return s.where + "; ports " + strings.Join(ports, ", ")
}

// LogTail implements deploy.LogTailer.
func (s *guestProc) LogTail(ctx context.Context, lines int) string {
	if s.own == nil {
		return s.Process.LogTail(ctx, lines)
	}
	r, err := s.vg.d.docker(ctx, "logs", "--tail", strconv.Itoa(lines), s.own.cname)
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	return string(r.Stdout) + string(r.Stderr)
}

// Exited implements deploy.Exiter.
func (s *guestProc) Exited(ctx context.Context) error {
	if s.own == nil {
		return s.Process.Exited(ctx)
	}
	r, err := s.vg.d.docker(ctx, "inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", s.own.cname)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(r.Stdout)); len(f) == 2 && f[0] != "true" {
		return fmt.Errorf("container %s exited with code %s", s.own.cname, f[1])
	}
	return nil
}

// Stop stops the server and keeps its output in the run's log directory.
// A container of its own goes when the site closes (with its log).
func (s *guestProc) Stop(ctx context.Context) error {
	if s.own == nil {
		return s.Process.Stop(ctx)
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout+30*time.Second)
		defer cancel()
		_, s.err = s.vg.d.docker(ctx, "stop", "-t", "2", s.own.cname)
	})
	return s.err
}
