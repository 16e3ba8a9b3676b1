package vm

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Timeouts of a guest's life.
var (
	BootTimeoutKVM = 60 * time.Second
	BootTimeoutTCG = 240 * time.Second
	// PoweroffTimeout is how long each shutdown step (agent poweroff, ACPI
	// powerdown, QMP quit) may take before the next, harder one.
	PoweroffTimeout = 20 * time.Second
)

// guestConfig is what one boot needs.
type guestConfig struct {
	Run    runid.ID
	Name   string // nn-<trial>-<server>, for logs and qemu -name
	Accel  string // kvm or tcg
	VCPUs  int
	MemMiB int64
	Kernel string
	Initrd string
	Disk   string
	// Direct boots on Disk itself (raw, written to) instead of an overlay:
	// only for building a disk.
	Direct bool
	// Bridge is the run's guest bridge; nil selects the fallback, QEMU's
	// user-mode network with the Forward ports (and the agent's) forwarded
	// from 127.0.0.1 to the same port numbers in the guest.
	Bridge  *bridge
	Forward []int
	// ForwardOn is the host address the fallback forwards Forward on: the
	// client host's ServerAddr ("" is 127.0.0.1).
	ForwardOn string
	// Routes are the subnets the guest reaches through the host on the
	// bridge: a client host's link.
	Routes  []string
	Index   int // guest number within the run: tap name and address
	Console string
	// remote is the platform whose sut host the guest boots on (its Disk
	// a qcow2 file there); nil: this machine.
	remote *Platform
	// Peers lets a guest on a sut host open connections (QEMU's
	// restrict=off): its servers reach the other guests of their
	// topology at their hosts' forwards. Without it the guest only
	// answers forwarded connections.
	Peers bool
	// AgentPort is the sut host's 127.0.0.1 port the guest's agent is
	// forwarded on (0: one free there, chosen at boot).
	AgentPort int
}

// bootedBy is the platform that booted g: the sut host's it runs on, or
// p on this machine.
func (g *guest) bootedBy(p *Platform) *Platform {
	if g.cfg.remote != nil {
		return g.cfg.remote
	}
	return p
}

// guest is one running QEMU guest.
type guest struct {
	cfg     guestConfig
	cmd     *exec.Cmd
	done    <-chan struct{}
	tap     string
	tmp     string
	qmp     string
	ip      string // the guest's own address
	reach   string // the address the host reaches its ports at
	agent   *vmagent.Client
	boot    time.Duration
	console *os.File
	// pid is QEMU's on a sut host, as its agent knows it; consoleAt the
	// console file there.
	pid       int
	consoleAt string
}

func randomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// bootGuest starts QEMU with a fresh overlay on the base disk and waits for
// the guest's agent to answer. On error everything made is removed.
func bootGuest(ctx context.Context, cfg guestConfig) (*guest, error) {
	g := &guest{cfg: cfg}
	if err := g.start(ctx); err != nil {
		g.shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	return g, nil
}

func (g *guest) start(ctx context.Context) error {
	if g.cfg.remote != nil {
		return g.startOn(ctx)
	}
	cfg := g.cfg
	start := time.Now()
	var err error
	if g.tmp, err = state.TempDir(cfg.Run, "vm-"+cfg.Name); err != nil {
		return err
	}
	drive, err := g.drive(ctx)
	if err != nil {
		return err
	}
	token := randomToken()
	netdev, gw, err := g.network(token)
	if err != nil {
		return err
	}
	g.qmp = filepath.Join(g.tmp, "qmp.sock")
	// The token reaches the guest as a firmware file only root can read,
	// not on QEMU's command line, which every local user can read in /proc.
	tokenFile := filepath.Join(g.tmp, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return fmt.Errorf("writing the guest agent's token: %w", err)
	}
	if err := g.launch(g.qemuArgs(drive, netdev, gw, tokenFile)); err != nil {
		return err
	}
	if err := g.waitBoot(ctx); err != nil {
		return err
	}
	g.boot = time.Since(start)
	return nil
}

// drive is QEMU's -drive value: the disk itself (Direct), or a qcow2
// overlay on it in the guest's temp dir.
func (g *guest) drive(ctx context.Context) (string, error) {
	cfg := g.cfg
	if cfg.Direct {
		return "file=" + cfg.Disk + ",if=virtio,format=raw,cache=writeback", nil
	}
	overlay := filepath.Join(g.tmp, "overlay.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-b", cfg.Disk, "-F", "raw", overlay).CombinedOutput(); err != nil {
		return "", fmt.Errorf("creating the guest overlay: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// writeback honours the guest's flushes, so storage benchmarks see real
	// fsync costs.
	return "file=" + overlay + ",if=virtio,format=qcow2,cache=writeback", nil
}

// network sets the guest's address, where the host reaches it and its
// agent client, and returns QEMU's -netdev value and the guest's gateway: a
// tap on the run's bridge, or QEMU's user-mode network with forwards.
func (g *guest) network(token string) (netdev, gw string, err error) {
	cfg := g.cfg
	if cfg.Bridge != nil {
		if g.tap, err = newTap(cfg.Run, cfg.Bridge, cfg.Index); err != nil {
			return "", "", err
		}
		g.ip = cfg.Bridge.prefix + strconv.Itoa(2+cfg.Index%250)
		g.reach = g.ip
		g.agent = vmagent.NewClient(g.ip, token)
		return "tap,id=n0,ifname=" + g.tap + ",script=no,downscript=no", cfg.Bridge.hostIP.String(), nil
	}
	// restrict=on: the guest reaches nothing but its forwarded ports.
	g.ip, gw, g.reach = "10.0.2.15", "10.0.2.2", cfg.ForwardOn
	if g.reach == "" {
		g.reach = "127.0.0.1"
	}
	agentPort, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		return "", "", err
	}
	// The agent is nearnative's own, on loopback; the servers' ports where
	// the client host reaches this machine.
	netdev = "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:" + strconv.Itoa(agentPort[0]) + "-:" + strconv.Itoa(vmagent.Port)
	for _, p := range cfg.Forward {
		netdev += fmt.Sprintf(",hostfwd=tcp:%s:%d-:%d", g.reach, p, p)
	}
	g.agent = vmagent.NewClient("127.0.0.1", token)
	g.agent.Base = "http://127.0.0.1:" + strconv.Itoa(agentPort[0])
	return netdev, gw, nil
}

// qemuArgs is QEMU's command line for the guest.
func (g *guest) qemuArgs(drive, netdev, gw, tokenFile string) []string {
	cfg := g.cfg
	mac := fmt.Sprintf("52:54:00:d5:%02x:%02x", cfg.Index/256%256, cfg.Index%256)
	appendArgs := strings.Join([]string{
		"console=ttyS0", "panic=-1", "loglevel=4", "rw",
		vmagent.ParamIP + "=" + g.ip + "/24", vmagent.ParamGW + "=" + gw,
		vmagent.ParamName + "=" + "nn-guest",
	}, " ")
	if (cfg.Bridge != nil || cfg.remote != nil) && len(cfg.Routes) > 0 {
		appendArgs += " " + vmagent.ParamRoutes + "=" + strings.Join(cfg.Routes, ",")
	}
	accel, cpu := "tcg,thread=multi", "max"
	if cfg.Accel == "kvm" {
		accel, cpu = "kvm", "host"
	}
	return []string{
		"-name", cfg.Name, "-accel", accel, "-cpu", cpu,
		"-smp", strconv.Itoa(cfg.VCPUs), "-m", strconv.FormatInt(cfg.MemMiB, 10),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", cfg.Kernel, "-initrd", cfg.Initrd, "-append", appendArgs,
		"-fw_cfg", "name=" + vmagent.TokenFwCfg + ",file=" + tokenFile,
		"-drive", drive,
		"-netdev", netdev,
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac,
		"-serial", "file:" + g.consolePath(),
		"-qmp", "unix:" + g.qmp + ",server=on,wait=off",
	}
}

// launch starts QEMU, labelled with the run, its output beside the
// console's; the guest dies with nearnative (deathsig): an emulated guest
// left behind would burn a core beside the next run.
func (g *guest) launch(args []string) error {
	cfg := g.cfg
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return errors.New("qemu-system-x86_64 not found: apt-get install -y qemu-system-x86")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Console), 0o755); err != nil {
		return err
	}
	stderr, err := os.Create(cfg.Console + ".qemu")
	if err != nil {
		return err
	}
	g.console = stderr
	g.cmd = exec.Command(qemu, args...)
	g.cmd.Stdout, g.cmd.Stderr = stderr, stderr
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(cfg.Run))
	proc, err := deathsig.Start(g.cmd)
	if err != nil {
		return fmt.Errorf("starting qemu: %w", err)
	}
	g.done = proc.Done()
	return nil
}

// waitBoot waits until the guest's agent answers, or QEMU ends (here, or
// on its sut host), or the accelerator's boot timeout passes.
func (g *guest) waitBoot(ctx context.Context) error {
	timeout := BootTimeoutTCG
	if g.cfg.Accel == "kvm" {
		timeout = BootTimeoutKVM
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	where, stopped := "", g.stopped(wctx)
	if g.cfg.remote != nil {
		where = " on sut host " + g.cfg.remote.on.Name()
	}
	ready := make(chan error, 1)
	go func() { ready <- g.agent.WaitReady(wctx) }()
	var err error
	select {
	case err = <-ready:
	case how := <-stopped:
		cancel()
		<-ready
		return fmt.Errorf("the guest stopped while booting%s (%s); console:\n%s", where, how, g.consoleTail(15))
	}
	if err != nil {
		return fmt.Errorf("the guest's agent%s did not answer within %v under %s: %w; console:\n%s", where, timeout, g.cfg.Accel, err, g.consoleTail(15))
	}
	return nil
}

// stopped says how QEMU ended, once it has: this machine's process, or
// the sut host's.
func (g *guest) stopped(ctx context.Context) <-chan string {
	if g.cfg.remote != nil {
		return g.stoppedOn(ctx)
	}
	out := make(chan string, 1)
	go func() {
		select {
		case <-g.done:
			out <- fmt.Sprint(g.cmd.ProcessState)
		case <-ctx.Done():
		}
	}()
	return out
}

// consolePath is the console file where QEMU runs.
func (g *guest) consolePath() string {
	if g.consoleAt != "" {
		return g.consoleAt
	}
	return g.cfg.Console
}

func (g *guest) consoleTail(n int) string {
	if g.cfg.remote != nil {
		return g.consoleTailOn(n)
	}
	b, _ := os.ReadFile(g.cfg.Console)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	q, _ := os.ReadFile(g.cfg.Console + ".qemu")
	if s := strings.TrimSpace(string(q)); s != "" {
		lines = append(lines, "qemu: "+s)
	}
	return "  " + strings.Join(lines, "\n  ")
}

func (g *guest) exited(d time.Duration) bool {
	select {
	case <-g.done:
		return true
	case <-time.After(d):
		return false
	}
}

// shutdown powers the guest off (agent, then ACPI, then QMP quit, then
// SIGKILL) and removes its tap and overlay. Safe on a partly booted guest.
func (g *guest) shutdown(ctx context.Context) error {
	// Teardown must work after Ctrl-C cancelled the run's context.
	ctx = context.WithoutCancel(ctx)
	if g.cfg.remote != nil {
		return g.shutdownOn(ctx)
	}
	var errs []error
	if g.cmd != nil && g.cmd.Process != nil {
		if g.agent != nil {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			g.agent.Poweroff(actx)
			cancel()
		}
		if !g.exited(PoweroffTimeout) {
			qmpCommand(g.qmp, "system_powerdown")
			if !g.exited(PoweroffTimeout / 2) {
				qmpCommand(g.qmp, "quit")
				if !g.exited(5 * time.Second) {
					syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
					<-g.done
					errs = append(errs, fmt.Errorf("guest %s did not power off: killed", g.cfg.Name))
				}
			}
		}
	}
	if g.console != nil {
		g.console.Close()
		if st, err := os.Stat(g.console.Name()); err == nil && st.Size() == 0 {
			os.Remove(g.console.Name()) // qemu said nothing
		}
	}
	if g.tap != "" {
		if err := delLink(g.tap); err != nil {
			errs = append(errs, err)
		}
	}
	if g.tmp != "" {
		if err := os.RemoveAll(g.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// qmpCommand sends one command over the QMP socket, best effort.
func qmpCommand(sock, command string) error {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadBytes('\n'); err != nil { // greeting
		return err
	}
	enc := json.NewEncoder(c)
	for _, cmd := range []string{"qmp_capabilities", command} {
		if err := enc.Encode(map[string]string{"execute": cmd}); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return err
			}
			var m map[string]json.RawMessage
			json.Unmarshal(line, &m)
			if _, ok := m["event"]; !ok {
				break
			}
		}
	}
	return nil
}
