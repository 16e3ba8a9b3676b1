// Package lxc runs servers in LXC system containers (the lxc platform): a
// container per server, booted from the workload image's root file system
// (exported from Docker once per image ID, each container writing an
// overlay of its own), with its own veth on a Linux bridge made for the
// run, its init nearnative's agent (the binary itself, bind-mounted, as the
// container-per-instance layout's supervisor and the VM guests' init are),
// through which the host starts servers and runs jobs inside. The run's
// client host is routed to the bridge and reaches each server at the
// container's address, as docker-bridge's reaches a container's.
//
// What a run makes is labelled with it: the bridge and the veths carry the
// alias nearnative.run=<id>, the containers' processes (the agent, its
// servers, LXC's monitor) carry NEARNATIVE_RUN in their environment, their
// cgroups sit under nearnative/<run>, and the containers' directory is a
// temp dir of the run. After a crash cleanup's process, link, cgroup and
// temp-dir sweepers remove all of it; a container whose init is killed
// takes its namespaces and veth with it.
package lxc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// DockerEngine returns the run's Docker engine, which holds the workload
// image.
type DockerEngine func(ctx context.Context) (*docker.Daemon, error)

// Timeouts.
const (
	bootTimeout = 30 * time.Second // lxc-start until the agent answers
	stopTimeout = 2 * time.Second  // a server's SIGTERM before SIGKILL
	haltTimeout = 30 * time.Second
)

// Platform runs each server in an LXC container of its own.
type Platform struct {
	name   string
	env    platform.Env
	dir    state.Dir
	opt    platform.Options
	docker DockerEngine
	// Agent is the binary each container runs as its init: this
	// nearnative binary (a test binary whose TestMain calls
	// vmagent.Entry in tests).
	Agent string

	mu     sync.Mutex
	rootfs string
	br     *bridge
	path   string // the run's lxcpath: a directory per container
	routed bool
	n      int
	live   map[string]*container
	closed bool
}

// New returns the lxc platform named name for env's run, with the options
// opt; the root file system comes from env.Image in the Docker engine
// dockerEng returns.
func New(name string, env platform.Env, dir state.Dir, opt platform.Options, dockerEng DockerEngine) (*Platform, error) {
	if name == "" {
		name = platform.LXC
	}
	if env.Image == "" {
		return nil, fmt.Errorf("lxc platform %s: no workload image", name)
	}
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("lxc platform %s: %w", name, err)
	}
	if opt.Pin != "" {
		return nil, fmt.Errorf("lxc platform %s: option pin is for native and Docker platforms (topologies)", name)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("lxc platform %s: finding the nearnative binary for the agent: %w", name, err)
	}
	return &Platform{name: name, env: env, dir: dir, opt: opt, docker: dockerEng, Agent: exe, live: map[string]*container{}}, nil
}

// Name implements platform.Platform.
func (p *Platform) Name() string { return p.name }

// Check implements platform.Checker: root, LXC's tools, overlayfs, the
// workload image in Docker, and a client host that can be routed to the
// containers' bridge.
func (p *Platform) Check(ctx context.Context) error {
	if err := Prerequisites(); err != nil {
		return err // the caller names the platform
	}
	eng, err := p.docker(ctx)
	if err != nil {
		return err
	}
	if err := eng.CheckImage(ctx, p.name, p.env.Image); err != nil {
		return err
	}
	if err := p.env.ClientHost().CanRoute(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// Prerequisites says whether this machine can run LXC containers the way
// the platform does: nil, or an error matching platform.ErrUnavailable
// that names the fix.
func Prerequisites() error {
	if os.Geteuid() != 0 {
		return platform.Unavailablef("LXC containers need root (nearnative makes privileged system containers): run nearnative as root")
	}
	for _, tool := range []string{"lxc-start", "lxc-stop", "lxc-info"} {
		if _, err := exec.LookPath(tool); err != nil {
			return platform.Unavailablef("%s is not installed: apt-get install lxc (make setup does)", tool)
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && !bytes.Contains(b, []byte("\toverlay\n")) {
		if out, err := exec.Command("modprobe", "overlay").CombinedOutput(); err != nil {
			return platform.Unavailablef("the kernel has no overlay file system, which each LXC container writes its root file system through: modprobe overlay (%v: %s)", err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// Version is LXC's version ("5.0.2"), "" when lxc-start does not say.
func Version() string {
	out, err := exec.Command("lxc-start", "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// version is Version, asked once.
var version = sync.OnceValue(Version)

// prepare makes what every container of the run needs, once: the root
// file system, the bridge, the run's container directory, the client
// host's route to the bridge.
func (p *Platform) prepare(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("platform %s is closed", p.name)
	}
	if p.rootfs == "" {
		eng, err := p.docker(ctx)
		if err != nil {
			return err
		}
		if p.rootfs, err = Rootfs(ctx, eng.API(), p.dir, p.env.Image, p.env.Log); err != nil {
			return err
		}
	}
	if p.path == "" {
		dir, err := state.TempDir(p.env.Run, "lxc")
		if err != nil {
			return fmt.Errorf("lxc: %w", err)
		}
		p.path = dir
	}
	if p.br == nil {
		br, err := newBridge(ctx, p.env.Run)
		if err != nil {
			return err
		}
		p.br = br
		if br.isolated != "" && p.env.Log != nil {
			fmt.Fprintf(p.env.Log, "%s: servers in different containers cannot reach each other: %s\n", p.name, br.isolated)
		}
	}
	if !p.routed {
		if err := p.env.ClientHost().Route(ctx, p.br.subnet); err != nil {
			return fmt.Errorf("%s: routing the client host to the containers' bridge %s: %w", p.name, p.br.subnet, err)
		}
		p.routed = true
	}
	return nil
}

// container is a running LXC container with its agent.
type container struct {
	name    string
	dir     string // lxcpath/name
	ip      netip.Addr
	veth    string
	cgroup  string // the container's cgroup, relative to each hierarchy
	agent   *vmagent.Client
	booted  time.Duration
	stopped bool
}

// boot starts a container for server (or job) name of trial with the
// volumes vols, and waits for its agent.
func (p *Platform) boot(ctx context.Context, trial, name string, vols []platform.Volume) (_ *container, err error) {
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.n++
	n := p.n
	ip, err := p.br.take()
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c := &container{
		name: docker.ContainerName(p.env.Run, trial, name),
		ip:   ip,
		veth: fmt.Sprintf("nnx%sc%d", p.env.Run.Short(), n%1000),
	}
	c.dir = filepath.Join(p.path, c.name)
	c.cgroup = filepath.Join(cgroup.Parent, string(p.env.Run), "lxc-"+c.name)
	defer func() {
		if err != nil {
			p.halt(context.WithoutCancel(ctx), c)
		}
	}()
	if err := os.MkdirAll(filepath.Join(c.dir, "delta0"), 0o755); err != nil {
		return nil, fmt.Errorf("lxc: %w", err)
	}
	token := vmagent.NewToken()
	if err := os.WriteFile(filepath.Join(c.dir, "config"), []byte(p.config(c, token, vols)), 0o600); err != nil {
		return nil, fmt.Errorf("lxc: %w", err)
	}
	p.mu.Lock()
	p.live[c.name] = c
	p.mu.Unlock()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "lxc-start", "-P", p.path, "-n", c.name, "-l", "INFO", "-o", filepath.Join(c.dir, "lxc.log"))
	// LXC's monitor, forked by lxc-start, keeps this environment: cleanup
	// finds it by the run.
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(p.env.Run))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: lxc-start %s: %w: %s%s", p.name, c.name, err, bytes.TrimSpace(out), p.logTail(c))
	}
	ip2(ctx, "link", "set", "dev", c.veth, "alias", alias(p.env.Run))
	c.agent = vmagent.NewClientAddr(net.JoinHostPort(ip.String(), strconv.Itoa(vmagent.Port)), token)
	err = platform.WaitReady(ctx, bootTimeout, 10*time.Millisecond, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.agent.Ping(pctx)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: the agent of container %s did not answer: %w%s", p.name, c.name, err, p.logTail(c))
	}
	c.booted = time.Since(start)
	return c, nil
}

// ip2 runs ip(8) and ignores its failure (a label that could not be set
// only makes a crash's leftovers harder to find; the veth dies with the
// container anyway).
func ip2(ctx context.Context, args ...string) { ip(ctx, args...) }

// config is the container's LXC configuration.
func (p *Platform) config(c *container, token string, vols []platform.Volume) string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	line("lxc.include", "/usr/share/lxc/config/common.conf")
	line("lxc.uts.name", "nn-"+p.env.Run.Short())
	line("lxc.rootfs.path", "overlay:"+p.rootfs+":"+filepath.Join(c.dir, "delta0"))
	line("lxc.console.path", "none")
	line("lxc.tty.max", "0")
	line("lxc.net.0.type", "veth")
	line("lxc.net.0.link", p.br.name)
	line("lxc.net.0.name", "eth0")
	line("lxc.net.0.flags", "up")
	line("lxc.net.0.veth.pair", c.veth)
	line("lxc.net.0.ipv4.address", netip.PrefixFrom(c.ip, p.br.subnet.Bits()).String()+" "+p.br.broadcast().String())
	line("lxc.net.0.ipv4.gateway", p.br.host.String())
	// The agent is the container's init.
	line("lxc.mount.entry", p.Agent+" "+strings.TrimPrefix(vmagent.SupervisorPath, "/")+" none bind,ro,create=file 0 0")
	line("lxc.init.cmd", vmagent.SupervisorPath)
	line("lxc.environment", vmagent.TokenEnv+"="+token)
	line("lxc.environment", vmagent.ListenEnv+"="+net.JoinHostPort(c.ip.String(), strconv.Itoa(vmagent.Port)))
	line("lxc.environment", runid.EnvVar+"="+string(p.env.Run))
	line("lxc.environment", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	line("lxc.environment", "HOME=/root")
	for _, v := range vols {
		opts := "bind,create=dir"
		if v.ReadOnly {
			opts += ",ro"
		}
		line("lxc.mount.entry", v.HostPath+" "+strings.TrimPrefix(v.Path, "/")+" none "+opts+" 0 0")
	}
	// Its cgroups, and its monitor's, under the run's.
	line("lxc.cgroup.dir.container", c.cgroup)
	line("lxc.cgroup.dir.monitor", c.cgroup+"-monitor")
	limits(line, p.opt)
	return b.String()
}

// limits writes the options' CPU set, quota and memory limit as LXC's
// cgroup keys (v1 or v2).
func limits(line func(k, v string), o platform.Options) {
	v2 := cgroup.IsV2()
	key := func(v1, v2k string) string {
		if v2 {
			return "lxc.cgroup2." + v2k
		}
		return "lxc.cgroup." + v1
	}
	if o.CPUSet != "" {
		line(key("cpuset.cpus", "cpuset.cpus"), o.CPUSet)
	}
	if o.CPUs > 0 {
		quota := strconv.Itoa(int(o.CPUs*100000 + 0.5))
		if v2 {
			line("lxc.cgroup2.cpu.max", quota+" 100000")
		} else {
			line("lxc.cgroup.cpu.cfs_period_us", "100000")
			line("lxc.cgroup.cpu.cfs_quota_us", quota)
		}
	}
	if m := o.MemoryBytes(); m > 0 {
		line(key("memory.limit_in_bytes", "memory.max"), strconv.FormatInt(m, 10))
	}
}

// logTail is the end of LXC's log of c, for errors.
func (p *Platform) logTail(c *container) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "lxc.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "; LXC's log ends:\n  " + strings.Join(lines, "\n  ")
}

// halt stops container c (killing it: its servers were stopped through
// the agent before) and removes its directory; a container already gone
// is not an error.
func (p *Platform) halt(ctx context.Context, c *container) error {
	p.mu.Lock()
	if c.stopped {
		p.mu.Unlock()
		return nil
	}
	c.stopped = true
	delete(p.live, c.name)
	path := p.path
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), haltTimeout)
	defer cancel()
	var errs []error
	if _, err := os.Stat(filepath.Join(c.dir, "config")); err == nil {
		out, err := exec.CommandContext(ctx, "lxc-stop", "-P", path, "-n", c.name, "-k").CombinedOutput()
		if err != nil && !notRunning(out) {
			errs = append(errs, fmt.Errorf("lxc-stop %s: %w: %s", c.name, err, bytes.TrimSpace(out)))
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing container %s: %w", c.name, err))
	}
	p.mu.Lock()
	br := p.br
	p.mu.Unlock()
	if br != nil && c.ip.IsValid() {
		// The host's neighbour entry still names the gone container's
		// MAC: a container given the address next would not be reached
		// (its agent would not answer) until the entry went stale. A
		// failed flush is said, not ignored: the next boot would stall.
		if err := ip(ctx, "neigh", "flush", "to", c.ip.String(), "dev", br.name); err != nil {
			errs = append(errs, err)
		}
		p.mu.Lock()
		br.give(c.ip)
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// notRunning reports whether lxc-stop's output says the container was not
// running (or is not defined): it is gone already.
func notRunning(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "is not running") || strings.Contains(s, "not defined") || strings.Contains(s, "No such")
}

// Close implements platform.Closer: containers still running are
// stopped, the bridge and the run's container directory removed, and the
// run's cgroup parents removed once empty.
func (p *Platform) Close() error {
	p.mu.Lock()
	p.closed = true
	var live []*container
	for _, c := range p.live {
		live = append(live, c)
	}
	p.mu.Unlock()
	var errs []error
	for _, c := range live {
		errs = append(errs, p.halt(context.Background(), c))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.br != nil {
		errs = append(errs, p.br.remove())
		p.br = nil
	}
	if p.path != "" {
		errs = append(errs, os.RemoveAll(p.path))
		p.path = ""
	}
	for _, l := range cgroup.Leftovers(p.env.Run) {
		os.Remove(l.Dir) // only once empty: another platform of the run may use it
	}
	return errors.Join(errs...)
}
