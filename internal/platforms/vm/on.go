package vm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// Host is a sut host of a hosts file on which the guests boot: QEMU runs
// there as a process of nearnative's agent, reached through the host's SSH
// connection (package sshhost's Conn).
type Host interface {
	Name() string
	// Self is the nearnative binary there.
	Self() string
	// Addr is the host's address: the guests' servers are forwarded on it.
	Addr() netip.Addr
	Agent() *vmagent.Client
	// CPUs are the host's online CPUs (its guests' vCPUs are overcommitted
	// against them).
	CPUs() []int
	// DialContext opens a TCP connection from the host (its guests'
	// agents listen on its 127.0.0.1).
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// StageDir is where a sut host keeps the guests' kernel, initramfs and
// disk, each under a name of its content's key, so that a run finds them
// there from the previous one.
const StageDir = "/var/tmp/nearnative/vm"

// NewOn returns the platform kind (vm, vm-docker or vm-docker-host) whose
// guests boot on sut hosts: each guest on the host its roles are placed on
// (placedOn names a role's sut host; "" or nil: the first), which must be
// one of hosts (the first is where a role without place: goes). The
// guests' disk and initramfs are built here, as for local guests (a
// vm-docker disk seeded with the workload image by a guest booted here),
// and copied to each host once; the guests use QEMU's user-mode network
// with their servers' ports forwarded on their host's address (no bridge
// there), and reach the guests of their topology at those forwards.
func NewOn(kind, name string, env platform.Env, dir state.Dir, opt platform.Options, api APIFunc, hosts []Host, placedOn func(role string) string) (*Platform, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("platform %s: no sut host to boot guests on", name)
	}
	var peers []netip.Addr
	for _, h := range hosts {
		peers = append(peers, h.Addr())
	}
	var all []*Platform
	for _, h := range hosts {
		p, err := NewKind(kind, name, env, dir, opt, api)
		if err != nil {
			return nil, err
		}
		p.on, p.placedOn, p.peers = h, placedOn, peers
		p.staged = map[string]string{}
		p.userNet = "guests on sut host " + h.Name() + " use QEMU's user-mode network (a bridge on another machine is not built yet)"
		all = append(all, p)
	}
	all[0].siblings = all[1:]
	return all[0], nil
}

// hostFor is the platform of the sut host role is placed on: p's, or a
// sibling's; a host among none of them is refused (without the platform's
// name, which the caller's error gives).
func (p *Platform) hostFor(role string) (*Platform, error) {
	if p.on == nil || p.placedOn == nil {
		return p, nil
	}
	h := p.placedOn(role)
	if h == "" || h == p.on.Name() {
		return p, nil
	}
	for _, s := range p.siblings {
		if s.on.Name() == h {
			return s, nil
		}
	}
	return nil, platform.Unavailablef("%s is placed on sut host %s, where this platform boots no guest (its hosts: %s): place it on one of those", role, h, strings.Join(p.hostNames(), ", "))
}

// hostNames are the names of the sut hosts p's guests may boot on.
func (p *Platform) hostNames() []string {
	out := []string{p.on.Name()}
	for _, s := range p.siblings {
		out = append(out, s.on.Name())
	}
	return out
}

// hostRun runs argv on the sut host through its agent, in dir ("/" when
// empty, made when missing); a non-zero exit is an error with the output.
func (p *Platform) hostRun(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	if dir == "" {
		dir = "/"
	}
	out, err := p.on.Agent().Output(ctx, vmagent.Proc{Name: "vm-" + filepath.Base(argv[0]), Argv: argv, Dir: dir,
		Env: map[string]string{runid.EnvVar: string(p.env.Run)}})
	if err != nil {
		return out, fmt.Errorf("sut host %s: %w", p.on.Name(), err)
	}
	return out, nil
}

// checkOn is Check for guests on a sut host: here, root and the tools that
// build the guest's disk and initramfs, and a kernel; there, QEMU, and KVM
// or why not (the guests then run emulated, a degradation every result
// states). No guest is booted to check: the first boot says what fails.
func (p *Platform) checkOn(ctx context.Context) (vmprobe.Result, error) {
	var none vmprobe.Result
	if os.Geteuid() != 0 {
		return none, platform.Unavailablef("%s needs root here to build the guests' disk: run nearnative as root", p.name)
	}
	tools := []struct{ bin, pkg string }{{"qemu-img", "qemu-utils"}, {"mkfs.ext4", "e2fsprogs"}}
	if p.kind != platform.VM {
		// A guest boots here once to load the image into the disk's engine.
		tools = append(tools, struct{ bin, pkg string }{"qemu-system-x86_64", "qemu-system-x86"})
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool.bin); err != nil {
			return none, platform.Unavailablef("%s not found here (it builds the guests' disk): apt-get install -y %s", tool.bin, tool.pkg)
		}
	}
	if p.kind != platform.VM {
		if _, err := Probe(ctx); err != nil {
			return none, platform.Unavailablef("%s: the guests' disk is seeded by a guest on this machine, and none boots here: %v", p.name, err)
		}
	}
	k, err := vmprobe.DefaultKernel()
	if err != nil {
		return none, platform.Unavailablef("%v", err)
	}
	if _, err := p.hostRun(ctx, "", "sh", "-c", `command -v qemu-img >/dev/null || { echo "qemu-img not found there: apt-get install -y qemu-utils"; exit 3; }`); err != nil {
		return none, platform.Unavailablef("%s: %v", p.name, err)
	}
	// The staged files are trusted only in a directory no other user
	// could have made or may write.
	const own = `for d in "$(dirname "$1")" "$1"; do mkdir -p -m 0755 "$d" || exit 3; [ -L "$d" ] && { echo "$d is a symlink: remove it"; exit 3; }; [ "$(stat -c %u "$d")" = "$(id -u)" ] || { echo "$d belongs to another user: remove it"; exit 3; }; case "$(stat -c %A "$d")" in ?????w????|????????w?) echo "$d is writable by other users: remove it"; exit 3;; esac; done`
	if _, err := p.hostRun(ctx, "", "sh", "-c", own, "sh", StageDir); err != nil {
		return none, platform.Unavailablef("%s: %v", p.name, err)
	}
	// The host boots a probe guest of the kernel its guests will boot
	// (copied there now), as Probe does here: KVM when a guest boots
	// under it (a nested or locked-down /dev/kvm may not), else TCG.
	kernel, _, err := p.stage(ctx, k.Image)
	if err != nil {
		return none, err
	}
	p.staged[k.Image] = kernel
	out, err := p.hostRun(ctx, "", p.on.Self(), vmagent.StdioArg, "--vm-probe", "--kernel", kernel)
	if err != nil {
		return none, platform.Unavailablef("%s: no QEMU guest boots on sut host %s: %v", p.name, p.on.Name(), err)
	}
	var r vmprobe.Result
	if err := json.Unmarshal(out, &r); err != nil || r.Accel == "" {
		return none, platform.Unavailablef("%s: sut host %s: reading its guest probe %q: %v", p.name, p.on.Name(), out, err)
	}
	r.Kernel = k // the guests boot this machine's kernel, copied there
	return r, nil
}

// prepareOn builds the initramfs and the disk here and copies them, with
// the kernel, to the sut host (once per content); p.mu is held.
func (p *Platform) prepareOn(ctx context.Context, api client.APIClient) error {
	var err error
	if p.probe.Accel == "" {
		if p.probe, err = p.checkOn(ctx); err != nil {
			return err
		}
	}
	p.kernel = p.probe.Kernel
	if p.initrd, err = BuildInitrd(p.dir, p.Exe, p.kernel); err != nil {
		return err
	}
	if p.disk, err = p.buildDisk(ctx, api); err != nil {
		return err
	}
	// The raw disk is sparse (3 GB of which 1.4 used): a qcow2 copy of it
	// goes over the wire, and is the guests' backing file there.
	qcow, err := qcowOf(ctx, p.disk.Path)
	if err != nil {
		return err
	}
	for _, f := range []string{p.kernel.Image, p.initrd, qcow} {
		start := time.Now()
		remote, copied, err := p.stage(ctx, f)
		if err != nil {
			return err
		}
		if copied {
			fmt.Fprintf(p.log(), "vm: copied %s to sut host %s in %v\n", filepath.Base(f), p.on.Name(), time.Since(start).Round(100*time.Millisecond))
		}
		p.staged[f] = remote
	}
	p.stagedDisk = p.staged[qcow]
	return nil
}

// qcowOf converts the raw disk at raw into a qcow2 file beside it, once.
func qcowOf(ctx context.Context, raw string) (string, error) {
	q := strings.TrimSuffix(raw, filepath.Ext(raw)) + ".qcow2"
	if st, err := os.Stat(q); err == nil && st.Size() > 0 {
		return q, nil
	}
	tmp := q + ".tmp-" + strconv.Itoa(os.Getpid())
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "qcow2", raw, tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("vm: converting the guest disk to qcow2 for a sut host: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, q); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return q, nil
}

// stage copies the local file to StageDir on the sut host, named by a key
// of its path, size and time, unless it is there already; it returns the
// path there and whether it copied.
func (p *Platform) stage(ctx context.Context, local string) (string, bool, error) {
	st, err := os.Stat(local)
	if err != nil {
		return "", false, err
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%d", local, st.Size(), st.ModTime().UnixNano())))
	base := filepath.Base(local)
	remote := StageDir + "/" + hex.EncodeToString(h[:6]) + "-" + base
	if out, err := p.hostRun(ctx, "", "stat", "-c", "%s", remote); err == nil && strings.TrimSpace(string(out)) == strconv.FormatInt(st.Size(), 10) {
		return remote, false, nil
	}
	// Put copies a tree: a directory here holding a hard link to the file
	// (on its file system, so nothing is copied here).
	tree, err := os.MkdirTemp(filepath.Dir(local), ".stage-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tree)
	if err := os.Link(local, filepath.Join(tree, base)); err != nil {
		return "", false, fmt.Errorf("vm: staging %s: %w", local, err)
	}
	tmp := remote + ".tmp-" + string(p.env.Run)
	if err := p.on.Agent().Put(ctx, tree, tmp); err != nil {
		p.hostRun(context.WithoutCancel(ctx), "", "rm", "-rf", tmp)
		return "", false, fmt.Errorf("sut host %s: copying %s: %w", p.on.Name(), base, err)
	}
	if _, err := p.hostRun(ctx, "", "sh", "-c", `sync "$1/$2" && mv "$1/$2" "$3" && rm -rf "$1"`, "sh", tmp, base, remote); err != nil {
		return "", false, err
	}
	if strings.HasPrefix(base, "initrd-") {
		// One initramfs per nearnative build: the older ones go (a guest
		// booting from one holds it open).
		p.hostRun(ctx, "", "find", StageDir, "-maxdepth", "1", "-name", "*-initrd-*.cpio", "!", "-name", filepath.Base(remote), "-mmin", "+10", "-delete")
	}
	return remote, true, nil
}

// hostPorts asks the sut host's kernel for n free TCP ports on addr.
func (p *Platform) hostPorts(ctx context.Context, addr string, n int) ([]int, error) {
	ports, err := p.on.Agent().FreePorts(ctx, p.on.Self(), addr, n)
	if err != nil {
		return nil, fmt.Errorf("sut host %s: finding free ports: %w", p.on.Name(), err)
	}
	return ports, nil
}

// startOn boots the guest on its sut host: its overlay and files in a
// temp dir there named as a local guest's (so that `cleanup --hosts`
// finds it), QEMU a process of the host's agent labelled with the run, the
// guest's agent forwarded on the host's 127.0.0.1 and reached through
// the SSH connection, the servers' ports on the host's address.
func (g *guest) startOn(ctx context.Context) error {
	cfg := g.cfg
	p := cfg.remote
	start := time.Now()
	// A fresh 0700 directory (mktemp), never one another user prepared
	// under that name.
	out, err := p.hostRun(ctx, "", "mktemp", "-d", "/tmp/"+runid.Prefix+string(cfg.Run)+"-vm-"+cfg.Name+"-XXXXXX")
	if err != nil {
		return fmt.Errorf("the guest's temp dir: %w", err)
	}
	g.tmp = strings.TrimSpace(string(out))
	g.consoleAt = g.tmp + "/console.log"
	g.qmp = g.tmp + "/qmp.sock"
	overlay := g.tmp + "/overlay.qcow2"
	if _, err := p.hostRun(ctx, g.tmp, "qemu-img", "create", "-q", "-f", "qcow2", "-b", cfg.Disk, "-F", "qcow2", overlay); err != nil {
		return fmt.Errorf("creating the guest overlay: %w", err)
	}
	drive := "file=" + overlay + ",if=virtio,format=qcow2,cache=writeback"
	ap := []int{cfg.AgentPort}
	if ap[0] == 0 {
		if ap, err = p.hostPorts(ctx, "127.0.0.1", 1); err != nil {
			return err
		}
	}
	token := randomToken()
	g.ip, g.reach = "10.0.2.15", cfg.ForwardOn
	restrict := "on"
	if cfg.Peers {
		restrict = "off" // its servers open connections to other guests' forwards
	}
	netdev := "user,id=n0,restrict=" + restrict + ",hostfwd=tcp:127.0.0.1:" + strconv.Itoa(ap[0]) + "-:" + strconv.Itoa(vmagent.Port)
	for _, port := range cfg.Forward {
		netdev += fmt.Sprintf(",hostfwd=tcp:%s:%d-:%d", g.reach, port, port)
	}
	g.agent = vmagent.NewClientDial("127.0.0.1:"+strconv.Itoa(ap[0]), token, p.on.DialContext)
	args := g.qemuArgs(drive, netdev, "10.0.2.2", g.tmp+"/token")
	// Not cancelled half-way: a QEMU started there must be known to be
	// stopped.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	g.pid, err = p.on.Agent().Start(sctx, vmagent.Proc{Name: "qemu-" + cfg.Name, Argv: append([]string{"qemu-system-x86_64"}, args...), Dir: g.tmp,
		Env:   map[string]string{runid.EnvVar: string(cfg.Run)},
		Files: []vmagent.File{{Path: "token", Content: []byte(token), Mode: 0o600}}})
	if err != nil {
		return fmt.Errorf("sut host %s: starting qemu: %w", p.on.Name(), err)
	}
	if err := g.waitBoot(ctx); err != nil {
		return err
	}
	g.boot = time.Since(start)
	return nil
}

// stoppedOn says how QEMU ended on the sut host, once it has (polled
// through the host's agent until ctx ends).
func (g *guest) stoppedOn(ctx context.Context) <-chan string {
	out := make(chan string, 1)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if st, err := g.cfg.remote.on.Agent().Status(ctx, g.pid); err == nil && !st.Running {
					out <- st.Exit
					return
				}
			}
		}
	}()
	return out
}

// consoleTailOn is the end of the guest's console and of QEMU's output on
// the sut host.
func (g *guest) consoleTailOn(n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := g.cfg.remote.hostRun(ctx, "", "tail", "-n", strconv.Itoa(n), g.consoleAt)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if st, err := g.cfg.remote.on.Agent().Status(ctx, g.pid); err == nil && strings.TrimSpace(st.Tail) != "" {
		lines = append(lines, "qemu: "+strings.TrimSpace(st.Tail))
	}
	return "  " + strings.Join(lines, "\n  ")
}

// runningOn says whether QEMU still runs on the sut host.
func (g *guest) runningOn(ctx context.Context) bool {
	st, err := g.cfg.remote.on.Agent().Status(ctx, g.pid)
	return err == nil && st.Running
}

// shutdownOn powers the guest off (its agent; then the host's agent stops
// QEMU, SIGTERM then SIGKILL), keeps its console in the run's log dir and
// removes its temp dir there.
func (g *guest) shutdownOn(ctx context.Context) error {
	h := g.cfg.remote.on
	var errs []error
	if g.pid > 0 {
		if g.agent != nil {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			g.agent.Poweroff(actx)
			cancel()
		}
		for deadline := time.Now().Add(PoweroffTimeout); g.runningOn(ctx) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
		}
		sctx, cancel := context.WithTimeout(ctx, StopTimeout+10*time.Second)
		out, err := h.Agent().Stop(sctx, g.pid, StopTimeout)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("sut host %s: stopping guest %s: %w", h.Name(), g.cfg.Name, err))
		}
		if len(out) > 0 && g.cfg.Console != "" {
			os.MkdirAll(filepath.Dir(g.cfg.Console), 0o755)
			os.WriteFile(g.cfg.Console+".qemu", out, 0o644)
		}
	}
	if g.tmp != "" {
		if out, err := g.cfg.remote.hostRun(ctx, "", "cat", g.consoleAt); err == nil && len(out) > 0 && g.cfg.Console != "" {
			os.MkdirAll(filepath.Dir(g.cfg.Console), 0o755)
			os.WriteFile(g.cfg.Console, out, 0o644)
		}
		if _, err := g.cfg.remote.hostRun(ctx, "", "rm", "-rf", g.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	g.pid = 0
	return errors.Join(errs...)
}

// guestServer is a server in a guest: a process of the guest (server) or a
// container of its engine (dockerServer).
type guestServer interface {
	platform.Server
	platform.CPUReporter
	platform.CPUDescriber
}

// hostAnswers is what a server in a guest on a sut host answers from the
// host rather than from this machine: the host's machine figures, and
// readiness probed from the host (its forwards listen on its address).
type hostAnswers struct{ p *Platform }

// remoteServer is a single server in a guest on a sut host.
type remoteServer struct {
	guestServer
	hostAnswers
}

// remoteProc is a server of a topology in a guest on a sut host.
type remoteProc struct {
	*guestProc
	hostAnswers
}

// onHost wraps s, a server of a guest on the sut host.
func (p *Platform) onHost(s guestServer) platform.Server {
	if p.on == nil {
		return s
	}
	return remoteServer{guestServer: s, hostAnswers: hostAnswers{p}}
}

// Machine implements platform.MachineReporter.
func (h hostAnswers) Machine() string { return "sut host " + h.p.on.Name() }

// MachineCPU implements platform.MachineReporter: the host's /proc/stat,
// read by its agent.
func (h hostAnswers) MachineCPU(ctx context.Context) (platform.MachineSample, error) {
	id, sample, err := h.p.on.Agent().MachineCPU(ctx)
	if err != nil {
		return platform.MachineSample{}, fmt.Errorf("sut host %s: reading the machine's CPU counters: %w", h.p.on.Name(), err)
	}
	return platform.MachineSample{Name: h.p.on.Name(), BootID: id, SUT: true, Sample: sample}, nil
}

// ProbeDial implements platform.ProbeDialer: from the sut host.
func (h hostAnswers) ProbeDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return h.p.on.DialContext(ctx, network, addr)
}

var (
	_ platform.MachineReporter = remoteServer{}
	_ platform.ProbeDialer     = remoteServer{}
	_ platform.CPUReporter     = remoteServer{}
	_ platform.MachineReporter = remoteProc{}
	_ platform.ProbeDialer     = remoteProc{}
	_ platform.CPUReporter     = remoteProc{}
	_ guestServer              = (*server)(nil)
	_ guestServer              = (*dockerServer)(nil)
)
