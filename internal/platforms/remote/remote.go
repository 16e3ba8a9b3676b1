// Package remote is the native platform on a sut host of a hosts file:
// each server is a process started by nearnative's agent on that machine
// (reached over SSH, package sshhost), listening on the host's own address
// from the hosts file (its private or test-bed link), never on a wildcard.
// The load comes from the run's driver hosts (sshhost.ClientHost).
//
// Docker's paths offered there (docker.RemoteKinds) run there too (Docker,
// driving the host's dockerd through the SSH connection; the driver hosts
// routed to its bridge for docker-bridge: RouteDrivers), and rootful Podman
// (the same, over a Podman service started there: NewPodman); the VM kinds
// are package vm's (vm.NewOn). Kubernetes and the other kinds on a remote
// sut are not built yet: Refusal says so for each.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Agent is what the platform needs of a sut host: its agent and its name,
// address and pushed binary (sshhost.Conn).
type Agent interface {
	Name() string
	Self() string
	Addr() netip.Addr
	Agent() *vmagent.Client
	// CPUs are the host's online CPUs.
	CPUs() []int
	// Dropped says why the host's connection dropped (nil while it
	// stands).
	Dropped() error
	// DialContext opens a TCP connection from the host.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Refusal is why platform kind base cannot run on a remote sut host yet,
// or nil for native, Docker's kinds (NewDocker says which of those a
// remote engine offers), rootful Podman (NewPodman) and the vm kinds
// (package vm's NewOn says which).
func Refusal(base, host string) error {
	if base == platform.Native || IsDocker(base) || base == platform.Podman || base == platform.VM || base == platform.VMDocker || base == platform.VMDockerHost {
		return nil
	}
	return platform.Unavailablef("not built for remote hosts yet: native, Docker's kinds, podman (rootful) and the vm kinds run on sut host %s, %s does not; run it without --hosts", host, base)
}

// IsDocker reports whether base is one of Docker's kinds (the network
// paths, under any runtime), which NewDocker builds or refuses.
func IsDocker(base string) bool {
	return slices.Contains(docker.Kinds(), base)
}

// Platform is native on the remote sut hosts: each server on the host
// its role is placed on.
type Platform struct {
	name  string
	place func(role string) Agent
	env   platform.Env
	opt   platform.Options
	// peers are the addresses of every sut host: servers of a topology
	// placed on several hosts accept each other's connections.
	peers []netip.Addr
	// kind says what the hosts are, for the record: "sut host", or
	// "driver host" for the roles beside the driver.
	kind string
}

// What a platform's hosts are, for the record.
const (
	kindSUT    = "sut host"
	kindDriver = "driver host"
)

// BesideDriver marks p as the platform of the roles beside the driver
// (they run on a driver host), for the record.
func (pl *Platform) BesideDriver() *Platform {
	pl.kind = kindDriver
	return pl
}

// Beside is the platform of the roles beside the driver on driver d: native
// there, through its agent, its servers accepting the sut hosts' (suts)
// connections.
func Beside(d Agent, suts []Agent, env platform.Env) (*Platform, error) {
	p, err := New("host", func(string) Agent { return d }, append(suts, d), env, platform.Options{})
	if err != nil {
		return nil, err
	}
	return p.BesideDriver(), nil
}

// New returns the platform name whose servers run on place(spec name).
func New(name string, place func(role string) Agent, suts []Agent, env platform.Env, opt platform.Options) (*Platform, error) {
	p := &Platform{name: name, place: place, env: env, opt: opt, kind: kindSUT}
	for _, h := range suts {
		p.peers = append(p.peers, h.Addr())
	}
	return p, nil
}

// on is the platform as it runs one role: on its host.
type on struct {
	*Platform
	host Agent
}

// Name implements platform.Platform.
func (p *Platform) Name() string { return p.name }

// hostErr names the host in an error.
func (p on) hostErr(what string, err error) error {
	if d := p.host.Dropped(); d != nil {
		return fmt.Errorf("host %s dropped its SSH connection (%v): %s: %w", p.host.Name(), d, what, err)
	}
	return fmt.Errorf("host %s: %s: %w", p.host.Name(), what, err)
}

// Start implements platform.Platform: spec runs on the host its name is
// placed on.
func (pl *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p := on{pl, pl.place(spec.Name)}
	if !p.host.Addr().IsValid() {
		return nil, fmt.Errorf("host %s: its address must be an IP address (servers listen on it alone)", p.host.Name())
	}
	free, err := p.freePorts(ctx, len(spec.Ports))
	if err != nil {
		return nil, err
	}
	ports := map[string]int{}
	for i, name := range spec.Ports {
		ports[name] = free[i]
	}
	return p.start(ctx, trial, spec, ports, pl.opt.CPUSet)
}

// freePorts asks the host's kernel for n free TCP ports on its address.
func (p on) freePorts(ctx context.Context, n int) ([]int, error) {
	return p.freePortsOn(ctx, p.host.Addr().String(), n)
}

// freePortsOn asks the host's kernel for n free TCP ports on addr.
func (p on) freePortsOn(ctx context.Context, addr string, n int) ([]int, error) {
	ports, err := p.host.Agent().FreePorts(ctx, p.host.Self(), addr, n)
	if err != nil {
		return nil, p.hostErr("finding free ports", err)
	}
	return ports, nil
}

// start starts spec on p's host with the given ports, confined to cpuset.
func (p on) start(ctx context.Context, trial string, spec platform.Spec, ports map[string]int, cpuset string) (*server, error) {
	var own []string
	for _, v := range spec.Volumes {
		if err := p.copyVolume(ctx, v.HostPath); err != nil {
			return nil, err
		}
		if v.Own {
			own = append(own, v.HostPath)
		}
	}
	addr := p.host.Addr().String()
	// Named as state.TempDir names local ones, so that `nearnative cleanup
	// RUN` run there (cleanup --hosts) finds it.
	dir := "/tmp/" + runid.Prefix + string(p.env.Run) + "-" + trial + "-" + spec.Name + "-remote"
	from := platform.Nets(append([]netip.Prefix{platform.Loopback, netip.PrefixFrom(p.host.Addr(), p.host.Addr().BitLen())}, host.Sources(p.env.ClientHost())...)...)
	for _, peer := range p.peers {
		from = platform.Nets(append(from, netip.PrefixFrom(peer, peer.BitLen()))...)
	}
	l := platform.Listen{Host: addr, Ports: ports, Dir: dir, From: from}
	proc := vmagent.Proc{Name: trial + "-" + spec.Name, Argv: spec.Command(l), Dir: dir, User: spec.User, CPUSet: cpuset,
		CPUs: p.opt.CPUs, MemoryBytes: p.opt.MemoryBytes(),
		Env: map[string]string{runid.EnvVar: string(p.env.Run)}, Own: own}
	for k, v := range spec.Env {
		proc.Env[k] = v
	}
	for _, f := range spec.FilesFor(l) {
		proc.Files = append(proc.Files, vmagent.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	pid, err := p.host.Agent().Start(ctx, proc)
	if err != nil {
		p.removeDir(context.WithoutCancel(ctx), dir)
		return nil, p.hostErr("starting "+spec.Name, err)
	}
	var logPath string
	if p.env.LogDir != "" {
		logPath = filepath.Join(p.env.LogDir, trial+"-"+spec.Name+".log")
	}
	return &server{p: p, dir: dir, addr: addr, ports: ports,
		Process: &vmagent.Process{Agent: p.host.Agent(), PID: pid, Argv: proc.Argv, LogPath: logPath, Grace: stopGrace, Bound: stopGrace + 30*time.Second}}, nil
}

// stopGrace is how long a server has between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// treeSum is a shell function printing a digest of the tree "$1" (its
// files' names and contents), or "none" when it is not a directory. The
// same text runs here and on the host, so that the digests compare.
const treeSum = `sum() { test -d "$1" || { echo none; return; }; (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum); }`

// copyVolume makes the host see the tree hostPath of this machine at the
// same path, as a native server does. When the host holds the same tree
// there already (by the digest of names and contents: a host sharing this
// machine's file system, the test bed's, or a copy left by an earlier
// trial), nothing goes over; else the tree goes over in a tar stream to a
// fresh name beside it and replaces what is there.
func (p on) copyVolume(ctx context.Context, hostPath string) error {
	here, err := exec.CommandContext(ctx, "sh", "-c", treeSum+`; sum "$1"`, "sh", hostPath).Output()
	if err != nil {
		return fmt.Errorf("digesting %s here: %w", hostPath, err)
	}
	there, err := p.run(ctx, "digesting "+hostPath, "sh", "-c", treeSum+`; sum "$1"`, "sh", hostPath)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(there)) == strings.TrimSpace(string(here)) {
		return nil
	}
	tmp := hostPath + ".nn-put-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := p.host.Agent().Put(ctx, hostPath, tmp); err != nil {
		return p.hostErr("copying "+hostPath, err)
	}
	_, err = p.run(ctx, "putting "+hostPath+" in place", "sh", "-c", `rm -rf -- "$1" && mv -- "$2" "$1"`, "sh", hostPath, tmp)
	return err
}

// own gives the tree path on the host to uid and gid.
func (p on) own(ctx context.Context, path string, uid, gid int) error {
	_, err := p.run(ctx, "giving "+path+" to its server's user", "chown", "-R", "-h", fmt.Sprintf("%d:%d", uid, gid), "--", path)
	return err
}

func (p on) removeDir(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := p.run(ctx, "removing "+dir, "rm", "-rf", "--", dir)
	return err
}

// run runs argv on the host through its agent and returns its stdout; a
// failure or a non-zero exit is an error naming the host and what.
func (p on) run(ctx context.Context, what string, argv ...string) ([]byte, error) {
	out, err := p.host.Agent().Output(ctx, vmagent.Proc{Name: argv[0], Argv: argv, Dir: "/"})
	if err != nil {
		return nil, p.hostErr(what, err)
	}
	return out, nil
}

// server is a process of the host's agent: vmagent.Process answers its
// command, migrations, log tail and exit as for a VM guest's servers, and
// keeps its output in the run's log directory when it stops.
type server struct {
	*vmagent.Process
	p     on
	dir   string
	addr  string
	ports map[string]int
}

func (s *server) Addr(port string) string {
	return net.JoinHostPort(s.addr, strconv.Itoa(s.ports[port]))
}

func (s *server) Describe() string {
	var ps []string
	for name, port := range s.ports {
		ps = append(ps, name+" "+net.JoinHostPort(s.addr, strconv.Itoa(port)))
	}
	return fmt.Sprintf("process %d on %s %s, listening on %s", s.PID, s.p.kind, s.p.host.Name(), strings.Join(ps, ", "))
}

// Stop stops the process (its whole process group) once, keeps its
// output in the run's log directory and removes its directory; it works
// after ctx was cancelled.
func (s *server) Stop(ctx context.Context) error {
	var errs []error
	if err := s.Process.Stop(ctx); err != nil {
		errs = append(errs, s.p.hostErr("stopping the server", err))
	}
	if err := s.p.removeDir(context.WithoutCancel(ctx), s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CPUTime implements platform.CPUReporter: the server's processes on the
// sut host, read by the agent from /proc.
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	d, err := s.Process.CPUTime(ctx)
	if err != nil {
		return 0, s.p.hostErr("reading the server's CPU time", err)
	}
	return d, nil
}

// Machine implements platform.MachineReporter: the host, and whether it
// serves as the sut or beside the driver.
func (s *server) Machine() string { return s.p.kind + " " + s.p.host.Name() }

// MachineCPU implements platform.MachineReporter: the host's /proc/stat,
// read by its agent.
func (s *server) MachineCPU(ctx context.Context) (platform.MachineSample, error) {
	return s.p.machineCPU(ctx)
}

// machineCPU reads the host's /proc/stat through its agent.
func (p on) machineCPU(ctx context.Context) (platform.MachineSample, error) {
	id, sample, err := p.host.Agent().MachineCPU(ctx)
	if err != nil {
		return platform.MachineSample{}, p.hostErr("reading the machine's CPU counters", err)
	}
	return platform.MachineSample{Name: p.host.Name(), BootID: id, SUT: p.kind == kindSUT, Sample: sample}, nil
}

// ProbeDial implements platform.ProbeDialer: readiness is probed from the
// server's host, whose address its access rules admit.
func (s *server) ProbeDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return s.p.host.DialContext(ctx, network, addr)
}

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string {
	return "the server's processes on " + s.p.kind + " " + s.p.host.Name() + " (its agent, /proc)"
}

// The platform runs servers, jobs and topologies, as native does, so the
// roles beside the driver can run on a driver host.
var (
	_ platform.JobRunner       = (*Platform)(nil)
	_ platform.MachineReporter = (*server)(nil)
	_ platform.ProbeDialer     = (*server)(nil)
)
