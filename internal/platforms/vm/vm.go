// Package vm runs servers in QEMU guests. The guest boots the host's Debian
// cloud kernel directly with a small initramfs whose /init is the nearnative
// binary itself (package vmagent); its root disk is an ext4 image made from
// the same workload image the containers run, cached by its inputs, and each
// guest writes to a throwaway qcow2 overlay. The guest sits on a private
// Linux bridge (no NAT, no route off the machine); the host reaches the
// server and the agent at the guest's address.
//
// One guest is booted per server or job: every trial starts from a clean
// disk. Boot time is reported in Describe but not measured, since workloads
// measure after Start returns.
package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// Defaults of the guest size.
const (
	DefaultVCPUs    = 2
	DefaultVMMemory = "2g"
)

// EmulatedNote is in the description of every server in a guest under TCG.
const EmulatedNote = "emulated (TCG), not comparable"

// StopTimeout is how long the agent waits after SIGTERM before SIGKILL.
const StopTimeout = 5 * time.Second

var (
	probeOnce sync.Once
	probeRes  vmprobe.Result
	probeErr  error
)

// Probe returns the acceleration QEMU guests get here, probing once per
// process.
func Probe(ctx context.Context) (vmprobe.Result, error) {
	probeOnce.Do(func() { probeRes, probeErr = vmprobe.Probe(context.WithoutCancel(ctx)) })
	return probeRes, probeErr
}

// APIFunc returns the Docker API used to export the workload image.
type APIFunc func(ctx context.Context) (client.APIClient, error)

// Platform is the vm platform.
type Platform struct {
	kind string // vm, vm-docker or vm-docker-host
	name string
	env  platform.Env
	dir  state.Dir
	opt  platform.Options
	api  APIFunc
	// Exe is the binary that becomes the guest's /init (the running
	// nearnative binary by default).
	Exe string
	// ForceUserNet selects the user-mode network fallback even when a
	// bridge could be made (for tests).
	ForceUserNet bool
	// userNet says why the fallback is used; "" with a bridge.
	userNet string

	// on is the sut host the guests boot on (NewOn); nil: this machine.
	on Host
	// placedOn names the sut host a role is placed on (NewOn).
	placedOn func(role string) string
	// siblings are the platforms of the other sut hosts roles are placed
	// on (NewOn): a role's guest boots on its host, through its sibling.
	siblings []*Platform
	// peers are the addresses of every sut host of the run's guests, p.on's
	// among them: a guest's servers accept connections from the forwards
	// of all (NewOn).
	peers []netip.Addr
	// staged maps the kernel, initramfs and disk here to their copies on
	// the sut host; stagedDisk is the disk's (qcow2).
	staged     map[string]string
	stagedDisk string

	mu      sync.Mutex
	ready   bool
	probe   vmprobe.Result
	kernel  vmprobe.Kernel
	disk    Disk
	initrd  string
	br      *bridge
	next    int
	memMiB  int64
	vcpus   int
	prepErr error
}

// New returns a vm platform called name.
func New(name string, env platform.Env, dir state.Dir, opt platform.Options, api APIFunc) (*Platform, error) {
	return NewKind(platform.VM, name, env, dir, opt, api)
}

// NewKind returns a platform of kind vm, vm-docker or vm-docker-host.
func NewKind(kind, name string, env platform.Env, dir state.Dir, opt platform.Options, api APIFunc) (*Platform, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("platform %s: %w", name, err)
	}
	if opt.CPUSet != "" || opt.CPUs > 0 || opt.Memory != "" || opt.Pin != "" {
		return nil, fmt.Errorf("platform %s: cpuset, cpus, memory and pin do not apply to a VM: use vcpus and vm_memory", name)
	}
	switch kind {
	case platform.VM, KindDockerNAT, KindDockerHost:
	default:
		return nil, fmt.Errorf("vm: unknown kind %q", kind)
	}
	p := &Platform{kind: kind, name: name, env: env, dir: dir, opt: opt, api: api, vcpus: opt.VCPUs}
	if p.vcpus == 0 {
		p.vcpus = DefaultVCPUs
	}
	mem := opt.VMMemory
	if mem == "" {
		mem = DefaultVMMemory
	}
	n, err := platform.ParseBytes(mem)
	if err != nil {
		return nil, err
	}
	p.memMiB = n >> 20
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("platform %s: finding the nearnative binary for the guest: %w", name, err)
	}
	p.Exe = exe
	return p, nil
}

// Name implements platform.Platform.
func (p *Platform) Name() string { return p.name }

// Check implements platform.Checker: root, QEMU, a kernel with its modules,
// mkfs.ext4, and a guest that boots (KVM or TCG).
func (p *Platform) Check(ctx context.Context) error {
	if p.on != nil {
		p.mu.Lock()
		r, err := p.checkOn(ctx)
		if err == nil {
			p.probe = r
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
		for _, s := range p.siblings {
			if err := s.Check(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	if os.Geteuid() != 0 {
		return platform.Unavailablef("%s needs root (bridge and tap devices): run nearnative as root", p.name)
	}
	for _, tool := range []struct{ bin, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"}, {"qemu-img", "qemu-utils"}, {"mkfs.ext4", "e2fsprogs"}, {"ip", "iproute2"},
	} {
		if _, err := exec.LookPath(tool.bin); err != nil {
			return platform.Unavailablef("%s not found: apt-get install -y %s", tool.bin, tool.pkg)
		}
	}
	if _, err := vmprobe.DefaultKernel(); err != nil {
		return platform.Unavailablef("%v", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return platform.Unavailablef("/dev/net/tun missing: modprobe tun")
	}
	if _, err := Probe(ctx); err != nil {
		return platform.Unavailablef("%v", err)
	}
	if err := p.env.ClientHost().CanRoute(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// Acceleration describes the acceleration for listings: "KVM" or the TCG
// note; it probes (once per process).
func (p *Platform) Acceleration(ctx context.Context) string {
	r, err := Probe(ctx)
	switch {
	case err != nil:
		return "no guest boots: " + err.Error()
	case r.Emulated():
		return EmulatedNote + " (" + r.KVMReason + ")"
	}
	return "KVM"
}

// prepare probes, builds (or finds) the disk and initramfs and creates the
// bridge, once.
func (p *Platform) prepare(ctx context.Context) error {
	if p.ready {
		return nil
	}
	if p.prepErr != nil {
		return p.prepErr
	}
	err := p.doPrepare(ctx)
	if err != nil && ctx.Err() == nil {
		p.prepErr = err
	}
	return err
}

func (p *Platform) doPrepare(ctx context.Context) error {
	api, err := p.api(ctx)
	if err != nil {
		return err
	}
	if err := p.resolveImage(ctx, api); err != nil {
		return err
	}
	if p.on != nil {
		if err := p.prepareOn(ctx, api); err != nil {
			return err
		}
		p.ready = true
		return nil
	}
	if p.probe, err = Probe(ctx); err != nil {
		return err
	}
	p.kernel = p.probe.Kernel
	if p.initrd, err = BuildInitrd(p.dir, p.Exe, p.kernel); err != nil {
		return err
	}
	if p.br == nil && p.userNet == "" {
		if p.ForceUserNet {
			p.userNet = "forced"
		} else if p.br, err = newBridge(p.env.Run); err != nil {
			// Describe() states the fallback and why, with every result.
			p.userNet = "the bridge could not be made: " + err.Error()
		} else if err = p.env.ClientHost().Route(ctx, p.br.subnet()); err != nil {
			// The client host reaches the guests through this machine,
			// as an outside client reaches a VM's address.
			rerr := p.br.remove()
			p.br = nil
			return errors.Join(fmt.Errorf("%s: %w", p.name, err), rerr)
		}
	}
	if p.disk, err = p.buildDisk(ctx, api); err != nil {
		return err
	}
	p.ready = true
	return nil
}

// buildDisk builds (or finds) the guests' disk of the platform's kind: the
// workload image's tree, or on the vm-docker kinds that tree with Docker
// and the image loaded into its engine (by a guest booted here).
func (p *Platform) buildDisk(ctx context.Context, api client.APIClient) (Disk, error) {
	if p.kind == platform.VM {
		return BuildDisk(ctx, api, p.dir, p.env.Image, p.kernel, p.log())
	}
	return buildDockerDisk(ctx, api, p.dir, p.env.Image, p.kernel, p.log(), p.seedDockerDisk)
}

// resolveImage names the workload image when the run names none (its study
// has no Docker platform): the one built here.
func (p *Platform) resolveImage(ctx context.Context, api client.APIClient) error {
	if p.env.Image == "" {
		// The run names no image when its study has no Docker platform:
		// use the locally built one.
		cfg, err := image.DefaultConfig()
		if err != nil {
			return fmt.Errorf("vm: finding the workload image: %w", err)
		}
		ref, present, err := image.Current(ctx, api, cfg)
		if err != nil {
			return fmt.Errorf("vm: finding the workload image: %w", err)
		}
		if !present {
			return fmt.Errorf("vm: workload image %s is not built: run `nearnative image build`", ref)
		}
		p.env.Image = ref
	}
	return nil
}

// Close removes the bridge (and closes the other sut hosts' platforms).
func (p *Platform) Close() error {
	var errs []error
	for _, s := range p.siblings {
		errs = append(errs, s.Close())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	errs = append(errs, p.br.remove())
	p.br, p.ready = nil, false
	if p.on == nil {
		p.userNet = "" // the next prepare tries a bridge again
	}
	return errors.Join(errs...)
}

// onHost is what a guest of a topology on a sut host is given besides
// its forwards.
type onHost struct {
	// Peers lets the guest open connections (guestConfig.Peers).
	Peers bool
	// AgentPort is the port of the host's 127.0.0.1 the guest's agent is
	// forwarded on, chosen with the other guests' of the host (0: chosen
	// at boot).
	AgentPort int
}

// boot prepares the platform and boots one guest.
func (p *Platform) boot(ctx context.Context, name string, forward []int) (*guest, error) {
	return p.bootSized(ctx, name, forward, p.vcpus, onHost{})
}

// bootSized boots a guest with vcpus vCPUs instead of the platform's (a
// topology role's guest of its own); its memory is the platform's. o says
// more of a guest on a sut host.
func (p *Platform) bootSized(ctx context.Context, name string, forward []int, vcpus int, o onHost) (*guest, error) {
	p.mu.Lock()
	if err := p.prepare(ctx); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if _, err := os.Stat(p.initrd); err != nil && p.on == nil {
		// Pruned by another process since prepare: make it again.
		initrd, err := BuildInitrd(p.dir, p.Exe, p.kernel)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		p.initrd = initrd
	}
	p.next++
	cfg := guestConfig{
		Run: p.env.Run, Name: name, Accel: p.probe.Accel, VCPUs: vcpus, MemMiB: p.memMiB,
		Kernel: p.kernel.Image, Initrd: p.initrd, Disk: p.disk.Path, Bridge: p.br, Forward: forward, Index: p.next,
		ForwardOn: p.env.ClientHost().ServerAddr(), Routes: p.clientRoutes(),
		Console: filepath.Join(p.env.LogDir, name+"-console.log"),
	}
	if p.on != nil {
		cfg.Kernel, cfg.Initrd, cfg.Disk = p.staged[p.kernel.Image], p.staged[p.initrd], p.stagedDisk
		cfg.ForwardOn, cfg.remote, cfg.Peers, cfg.AgentPort = p.on.Addr().String(), p, o.Peers, o.AgentPort
		// QEMU's user-mode network hands the guest a forwarded
		// connection from the driver host's own address (only loopback
		// sources become 10.0.2.2): the guest answers through the
		// gateway; restrict=on still keeps it from reaching anything
		// unless it has peers.
		cfg.Routes = []string{"0.0.0.0/0"}
	}
	p.mu.Unlock()
	return bootGuest(ctx, cfg)
}

func (p *Platform) where(g *guest) string {
	accel := "KVM"
	if g.cfg.Accel != "kvm" {
		accel = EmulatedNote
	}
	on := g.bootedBy(p) // the sut host's, for a guest there
	net := "on QEMU user-mode networking (fallback: " + on.userNet + "), client via " + g.reach + " port forwards (slirp)"
	if g.cfg.Peers {
		net += ", other guests reached at their hosts' forwards (restrict=off: the guest may open connections)"
	}
	if g.cfg.Bridge != nil {
		net = fmt.Sprintf("at %s on bridge %s (tap %s)", g.ip, g.cfg.Bridge.name, g.tap)
	}
	what := "QEMU guest"
	if on.on != nil {
		what = "QEMU guest on sut host " + on.on.Name()
	}
	return fmt.Sprintf("%s, %s, %d vCPUs, %d MiB, disk from %s, booted in %v (not measured), %s",
		what, accel, g.cfg.VCPUs, g.cfg.MemMiB, on.env.Image, g.boot.Round(100*time.Millisecond), net)
}

// clientRoutes are the subnets a guest routes back to through the host:
// the client host's link when the client is in a namespace of its own.
func (p *Platform) clientRoutes() []string {
	if c := p.env.ClientHost(); c.Kind() == host.Netns {
		return []string{c.Subnet().String()}
	}
	return nil
}

// from is where connections to a server in guest g come from: loopback
// (the guest's own), the client host's subnet (routed through this
// machine), the guests' bridge (this machine's probes, peers in other
// guests) or QEMU's user-mode network, and on the vm-docker kinds the
// guest engine's default bridge (its docker-proxy and containers).
func (p *Platform) from(g *guest) []netip.Prefix {
	nets := append([]netip.Prefix{platform.Loopback}, host.Sources(p.env.ClientHost())...)
	for _, a := range p.peers { // the sut hosts (this one too), through their forwards
		nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
	}
	if g.cfg.Bridge != nil {
		nets = append(nets, g.cfg.Bridge.subnet())
	} else {
		nets = append(nets, netip.MustParsePrefix("10.0.2.0/24"))
	}
	if p.kind != platform.VM {
		nets = append(nets, netip.MustParsePrefix("172.17.0.0/16"))
	}
	return platform.Nets(nets...)
}

func agentFiles(fs []platform.File) []vmagent.File {
	var out []vmagent.File
	for _, f := range fs {
		out = append(out, vmagent.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	return out
}

// Start implements platform.Platform: it boots a guest and starts the
// server in it.
func (p *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if len(spec.Volumes) > 0 {
		return nil, fmt.Errorf("server %s: host volumes are not supported in a VM", spec.Name)
	}
	if hp, err := p.hostFor(spec.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	} else if hp != p {
		return hp.Start(ctx, trial, spec)
	}
	// Any free port is free in a fresh guest; ask the host for free ones
	// (platform.FreePorts), which are also free for the fallback's port
	// forwards (a sut host's kernel for its own address).
	var ports map[string]int
	var err error
	if p.on != nil {
		free, ferr := p.hostPorts(ctx, p.on.Addr().String(), len(spec.Ports))
		if ferr != nil {
			return nil, ferr
		}
		ports = platform.PortsFor(spec, free)
	} else if ports, err = platform.AssignPorts(spec, p.env.ClientHost().ServerAddr()); err != nil {
		return nil, err
	}
	if p.kind != platform.VM {
		return p.startDocker(ctx, trial, spec, ports)
	}
	g, err := p.boot(ctx, trial+"-"+spec.Name, portList(ports))
	if err != nil {
		return nil, err
	}
	s := &server{p: p, g: g, name: trial + "-" + spec.Name, ports: ports}
	if err := s.start(ctx, spec); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return p.onHost(s), nil
}

type server struct {
	p     *Platform
	g     *guest
	name  string
	ports map[string]int
	argv  []string
	pid   int
	once  sync.Once
	err   error
}

func (s *server) start(ctx context.Context, spec platform.Spec) error {
	var err error
	dir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: s.g.ip, Ports: s.ports, Dir: dir, From: s.p.from(s.g)}
	s.argv = spec.Command(l)
	if len(s.argv) == 0 {
		return fmt.Errorf("server %s: empty command", spec.Name)
	}
	s.pid, err = s.g.agent.Start(ctx, vmagent.Proc{
		Name: spec.Name, Argv: s.argv, Env: spec.Env, Dir: dir, Files: agentFiles(spec.FilesFor(l)), User: spec.User,
	})
	if err != nil {
		return fmt.Errorf("server %s in the guest: %w", spec.Name, err)
	}
	return nil
}

func (s *server) Addr(port string) string {
	p, ok := s.ports[port]
	if !ok {
		panic(fmt.Sprintf("vm: port %q not declared", port))
	}
	return net.JoinHostPort(s.g.reach, strconv.Itoa(p))
}

func portList(m map[string]int) []int {
	var out []int
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

func (s *server) Command() []string { return s.argv }

func (s *server) Describe() string {
	d := s.p.where(s.g)
	if s.pid > 0 {
		d = fmt.Sprintf("guest process pid %d in a %s", s.pid, d)
	}
	return d
}

// Stop stops the server through the agent, saves its output to the run's
// log dir, powers the guest off and removes its tap and overlay.
func (s *server) Stop(ctx context.Context) error {
	// Teardown must work after Ctrl-C cancelled the run's context.
	ctx = context.WithoutCancel(ctx)
	s.once.Do(func() {
		var errs []error
		if s.pid > 0 {
			sctx, cancel := context.WithTimeout(ctx, StopTimeout+10*time.Second)
			out, err := s.g.agent.Stop(sctx, s.pid, StopTimeout)
			cancel()
			if err != nil {
				errs = append(errs, err)
			}
			if len(out) > 0 {
				os.WriteFile(filepath.Join(s.p.env.LogDir, s.name+".log"), out, 0o644)
			}
		}
		if err := s.g.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// RunJob implements platform.JobRunner: it boots a guest, runs the command
// to completion in it and powers the guest off.
func (p *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	var res platform.JobResult
	if err := spec.Validate(); err != nil {
		return res, err
	}
	if len(spec.Volumes) > 0 {
		return res, fmt.Errorf("job %s: host volumes are not supported in a VM", spec.Name)
	}
	if p.kind != platform.VM {
		return p.runDockerJob(ctx, trial, spec)
	}
	g, err := p.boot(ctx, trial+"-"+spec.Name, nil)
	if err != nil {
		return res, err
	}
	defer g.shutdown(context.WithoutCancel(ctx))
	dir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: g.ip, Ports: map[string]int{}, Dir: dir}
	res.Command = spec.Command(l)
	res.Where = p.where(g)
	if len(res.Command) == 0 {
		return res, fmt.Errorf("job %s: empty command", spec.Name)
	}
	r, err := g.agent.Run(ctx, vmagent.Proc{
		Name: spec.Name, Argv: res.Command, Env: spec.Env, Dir: dir, Files: agentFiles(spec.FilesFor(l)), User: spec.User,
	})
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("job %s in the guest: %w", spec.Name, err)
	}
	res.Stdout, res.Stderr, res.ExitCode, res.Wall = r.Stdout, r.Stderr, r.ExitCode, r.Wall
	if r.Error != "" {
		return res, fmt.Errorf("job %s: %s", spec.Name, r.Error)
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("job %s exited with code %d", spec.Name, res.ExitCode)
	}
	return res, nil
}

// log is where disk builds report progress: the run's log, or nowhere.
func (p *Platform) log() io.Writer {
	if p.env.Log == nil {
		return io.Discard
	}
	return p.env.Log
}
