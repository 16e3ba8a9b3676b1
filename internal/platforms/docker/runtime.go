package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platform"
)

// Names under which the OCI runtimes other than runc are registered with
// dockerd (setup registers them; see docs/runtimes.md).
const (
	RuntimeRunsc = "runsc"
	RuntimeCrun  = "crun"
)

// variant is a Docker platform kind as a network path (one of the four
// runc kinds and docker-network) and the OCI runtime that runs its
// containers ("" for dockerd's default, runc).
type variant struct{ path, runtime string }

// variants maps every platform kind this package runs to its variant.
var variants = map[string]variant{
	platform.DockerNAT:         {platform.DockerNAT, ""},
	platform.DockerProxy:       {platform.DockerProxy, ""},
	platform.DockerBridge:      {platform.DockerBridge, ""},
	platform.DockerHost:        {platform.DockerHost, ""},
	platform.DockerNetwork:     {platform.DockerNetwork, ""},
	platform.DockerRunscNAT:    {platform.DockerNAT, RuntimeRunsc},
	platform.DockerRunscProxy:  {platform.DockerProxy, RuntimeRunsc},
	platform.DockerRunscBridge: {platform.DockerBridge, RuntimeRunsc},
	platform.DockerRunscHost:   {platform.DockerHost, RuntimeRunsc},
	platform.DockerCrunBridge:  {platform.DockerBridge, RuntimeCrun},
	platform.DockerCrunHost:    {platform.DockerHost, RuntimeCrun},
}

// Kinds lists, sorted, the platform kinds New accepts.
func Kinds() []string {
	var ks []string
	for k := range variants {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Runtime is an OCI runtime registered with the engine.
type Runtime struct {
	Name string
	Path string   // the binary; "" when the engine does not say
	Args []string // the runtime arguments dockerd passes it
}

// Runtimes lists the OCI runtimes the engine has registered, by name.
func (e *Daemon) Runtimes(ctx context.Context) (map[string]Runtime, error) {
	info, err := e.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the engine for its runtimes: %w", err)
	}
	out := map[string]Runtime{}
	for name, r := range info.Runtimes {
		out[name] = Runtime{Name: name, Path: r.Path, Args: r.Args}
	}
	return out, nil
}

// Gvisor is how a registered runsc sandboxes containers: gVisor's platform
// (how system calls reach its kernel: ptrace, kvm, systrap) and its network
// stack (sandbox: gVisor's own netstack; host: the host kernel's sockets in
// the container's network namespace; none).
type Gvisor struct {
	Version  string // runsc --version's first line, "" when it did not answer
	Platform string
	Network  string
}

// ParseRunscArgs reads gVisor's platform and network from runsc's global
// flags as dockerd passes them (runtimeArgs), with runsc's defaults
// (ptrace, sandbox) for what they leave out.
func ParseRunscArgs(args []string) Gvisor {
	g := Gvisor{Platform: "ptrace", Network: "sandbox"}
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal && i+1 < len(args) && (name == "platform" || name == "network") {
			val = args[i+1]
			i++
		}
		switch name {
		case "platform":
			g.Platform = val
		case "network":
			g.Network = val
		}
	}
	return g
}

// Note is the sentence every report of a gVisor platform carries.
func (g Gvisor) Note() string {
	v := "gVisor"
	if g.Version != "" {
		v += " (" + g.Version + ")"
	}
	plat := "platform " + g.Platform
	switch g.Platform {
	case "ptrace":
		// gVisor's platform guide (gvisor.dev/docs/user_guide/platforms)
		// gives ptrace "higher performance overhead than systrap in almost
		// all cases"; nearnative has not measured them against each other.
		plat += " (every system call of the sandboxed process is trapped with ptrace: the platform that runs anywhere, which gVisor's documentation gives more overhead than systrap in almost all cases)"
	case "kvm":
		plat += " (the sandbox runs as a KVM guest)"
	}
	netw := "network " + g.Network
	switch g.Network {
	case "sandbox":
		netw += " (gVisor's own TCP/IP stack, netstack, inside the sandbox)"
	case "host":
		netw += " (hostinet: the sandbox's sockets are the host kernel's, in the container's network namespace; gVisor's netstack is not used)"
	}
	return "runs under " + v + ": " + plat + ", " + netw
}

// gvisorOf reads how the registered runsc sandboxes containers, asking the
// binary for its version (on the engine's machine: a sut host's through
// its agent).
func (p *dockerPlatform) gvisorOf(ctx context.Context, r Runtime) Gvisor {
	g := ParseRunscArgs(r.Args)
	path := r.Path
	if path == "" {
		path = r.Name
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []byte
	var err error
	if p.site != nil {
		out, err = p.site.Run(vctx, "asking runsc its version", path, "--version")
	} else {
		out, err = exec.CommandContext(vctx, path, "--version").Output()
	}
	if err == nil {
		g.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	return g
}

// PathOf is the network path of Docker platform kind (docker-runsc-bridge:
// docker-bridge), or kind itself when it is none of the package's.
func PathOf(kind string) string {
	if v, ok := variants[kind]; ok {
		return v.path
	}
	return kind
}

// checkRuntime says whether the platform's OCI runtime can run containers
// here: registered with dockerd and able to start on this machine.
func (p *dockerPlatform) checkRuntime(ctx context.Context) error {
	if p.runtime == "" {
		return nil
	}
	rts, err := p.eng.Runtimes(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	r, ok := rts[p.runtime]
	if !ok {
		var names []string
		for n := range rts {
			names = append(names, n)
		}
		sort.Strings(names)
		return platform.Unavailablef("%s runs its containers with the OCI runtime %s, which dockerd does not know (it knows %s): "+
			"run `make setup` (it adds %s to the runtimes in dockerd's daemon.json, says so, and reloads dockerd with SIGHUP), "+
			"or register it yourself as docs/runtimes.md shows", p.name, p.runtime, strings.Join(names, ", "), p.runtime)
	}
	if r.Path != "" && strings.HasPrefix(r.Path, "/") {
		has, err := p.engineHas(ctx, r.Path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if !has {
			return platform.Unavailablef("%s: dockerd's runtime %s is %s, which is not %s: install it (apt-get install %s) or run `make setup`",
				p.name, p.runtime, r.Path, p.engineMachine(), map[string]string{RuntimeRunsc: "runsc", RuntimeCrun: "crun"}[p.runtime])
		}
	}
	switch p.runtime {
	case RuntimeRunsc:
		g := p.gvisorOf(ctx, r)
		if g.Network == "sandbox" && p.netstackRefused(ctx) {
			return platform.Unavailablef("%s: runsc is registered with gVisor's own network stack (netstack), which this runsc refuses on this kernel "+
				"(it takes every network namespace for the host's, since /proc/sys/net/core/rmem_default exists in each): "+
				"register runsc with --network=host (make setup does), or install a newer runsc", p.name)
		}
		if g.Platform == "kvm" {
			has, err := p.engineHas(ctx, "/dev/kvm")
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if !has {
				return platform.Unavailablef("%s: runsc is registered with gVisor's kvm platform and %s has no /dev/kvm: register it with --platform=ptrace", p.name, p.engineMachine())
			}
		}
		p.mu.Lock()
		p.gvisor = &g
		p.mu.Unlock()
	case RuntimeCrun:
		err := CrunCgroupLayout()
		if p.site != nil {
			err = p.siteCrunLayout(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return nil
}

// engineMachine names the machine the engine runs on, for messages.
func (p *dockerPlatform) engineMachine() string {
	if p.site != nil {
		return "on sut host " + p.site.Host
	}
	return "on this machine"
}

// engineHas reports whether path exists on the engine's machine (a sut
// host's, asked through its agent: an error when it could not say).
func (p *dockerPlatform) engineHas(ctx context.Context, path string) (bool, error) {
	if p.site != nil {
		out, err := p.site.Run(ctx, "looking for "+path, "sh", "-c", `if [ -e "$1" ]; then echo yes; else echo no; fi`, "sh", path)
		if err != nil {
			return false, fmt.Errorf("sut host %s: %w", p.site.Host, err)
		}
		return strings.TrimSpace(string(out)) == "yes", nil
	}
	_, err := os.Stat(path)
	return err == nil, nil
}

// netstackRefused is NetstackRefused on the engine's machine: on a sut
// host, the same file looked for in a fresh network namespace there
// (unshare -n; where that fails, not refused, as here).
func (p *dockerPlatform) netstackRefused(ctx context.Context) bool {
	if p.site != nil {
		_, err := p.site.Run(ctx, "probing runsc's netstack", "unshare", "-n", "test", "-e", "/proc/sys/net/core/rmem_default")
		return err == nil
	}
	return NetstackRefused()
}

// siteCrunLayout is CrunCgroupLayout on the site's host.
func (p *dockerPlatform) siteCrunLayout(ctx context.Context) error {
	if err := CrunCgroupLayoutVia(ctx, func(ctx context.Context, argv ...string) ([]byte, error) {
		return p.site.Run(ctx, "reading the cgroup layout", argv...)
	}); err != nil {
		return fmt.Errorf("sut host %s: %w", p.site.Host, err)
	}
	return nil
}

// CrunCgroupLayout says whether crun (docker-crun-*, and Podman's runtime)
// can run containers on this machine's cgroup layout: nil, or an error
// matching platform.ErrUnavailable that names the fix when the layout is
// hybrid (v1 controllers with a unified mount beside them) and its v2 mount
// holds controllers, which crun refuses.
func CrunCgroupLayout() error {
	if cgroup.IsV2() {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(cgroup.Root, "unified", "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return CrunLayoutOf(strings.Fields(string(b)))
}

// CrunCgroupLayoutVia is CrunCgroupLayout on another machine, whose
// commands run runs (a sut host's agent): the controllers of its unified
// mount when its layout is hybrid.
func CrunCgroupLayoutVia(ctx context.Context, run func(ctx context.Context, argv ...string) ([]byte, error)) error {
	out, err := run(ctx, "sh", "-c", `[ -e "$1/cgroup.controllers" ] || cat "$1/unified/cgroup.controllers" 2>/dev/null; true`, "sh", cgroup.Root)
	if err != nil {
		return err
	}
	return CrunLayoutOf(strings.Fields(string(out)))
}

// CrunLayoutOf refuses a hybrid layout whose unified mount holds ctrls
// (crun refuses it), naming the fix.
func CrunLayoutOf(ctrls []string) error {
	if len(ctrls) == 0 {
		return nil
	}
	return platform.Unavailablef("crun refuses a hybrid cgroup layout whose v2 mount (%s) holds controllers (here: %s): "+
		"mount them on v1 (make setup does: mkdir -p %s/%s && mount -t cgroup -o %s cgroup %s/%s)",
		filepath.Join(cgroup.Root, "unified"), strings.Join(ctrls, " "),
		cgroup.Root, ctrls[0], ctrls[0], cgroup.Root, ctrls[0])
}

// NetstackRefused reports whether the packaged runsc refuses gVisor's own
// network stack on this kernel (setup then registers runsc with
// --network=host): whether this kernel shows
// /proc/sys/net/core/rmem_default in a network namespace other than the
// host's: runsc releases of 2022 take that file for the sign of the host's
// namespace and refuse to start a sandbox with its own network stack there
// ("cannot run with network enabled in root network namespace"); kernels
// since 6.x namespace that sysctl. The check enters a fresh network
// namespace on a thread of its own, which is never returned to the pool.
func NetstackRefused() bool {
	res := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: it dies with this goroutine rather
		// than running others in the fresh namespace.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			res <- false
			return
		}
		res <- unix.Access("/proc/sys/net/core/rmem_default", unix.F_OK) == nil
	}()
	return <-res
}

// Degradations implements platform.Degrader: a platform run by gVisor names
// gVisor's platform and network stack in every report of the run, since
// both change what is measured.
func (p *dockerPlatform) Degradations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gvisor == nil {
		return nil
	}
	return []string{p.gvisor.Note()}
}

// Sandbox implements platform.Sandboxed: the platforms under runsc run
// their servers in gVisor, with the platform and network stack dockerd's
// registration gives runsc (known once Check has run).
func (p *dockerPlatform) Sandbox() (platform.Sandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gvisor == nil {
		return platform.Sandbox{}, false
	}
	return platform.Sandbox{Name: "gVisor", Platform: p.gvisor.Platform, Network: p.gvisor.Network}, true
}
