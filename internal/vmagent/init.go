package vmagent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// InitPath is where the host's initramfs puts the agent binary.
const InitPath = "/init"

// ModulesDir is the initramfs directory holding the kernel modules the guest
// needs before its root disk is readable; the agent loads them in name order.
const ModulesDir = "/nn-modules"

// IsInit reports whether this process is the agent as the guest's PID 1.
func IsInit() bool { return os.Getpid() == 1 && os.Args[0] == InitPath }

// Main runs the agent as PID 1 and never returns normally: on a fatal error
// it prints it on the console and powers the guest off.
func Main() int {
	log("nearnative agent starting")
	params, err := bootGuest()
	if err == nil {
		err = serve(params)
	}
	log("fatal: %v", err)
	powerOff()
	return 1
}

func log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nn-agent: "+format+"\n", args...)
}

// bootGuest loads the virtio modules, mounts the root disk, switches to it,
// mounts the usual file systems and brings up the network.
func bootGuest() (map[string]string, error) {
	os.MkdirAll("/dev", 0o755)
	os.MkdirAll("/proc", 0o555)
	if err := unix.Mount("devtmpfs", "/dev", "devtmpfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return nil, fmt.Errorf("mounting /dev: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		return nil, fmt.Errorf("mounting /proc: %w", err)
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, err
	}
	params := ParseCmdline(string(cmdline))
	if err := loadModules(ModulesDir); err != nil {
		return nil, err
	}
	if err := waitFile("/dev/vda", 30*time.Second); err != nil {
		return nil, err
	}
	os.MkdirAll("/newroot", 0o755)
	if err := unix.Mount("/dev/vda", "/newroot", "ext4", 0, ""); err != nil {
		return nil, fmt.Errorf("mounting the root disk /dev/vda: %w", err)
	}
	if err := unix.Unmount("/proc", 0); err != nil {
		return nil, fmt.Errorf("unmounting /proc: %w", err)
	}
	os.MkdirAll("/newroot/dev", 0o755)
	if err := unix.Mount("/dev", "/newroot/dev", "", unix.MS_MOVE, ""); err != nil {
		return nil, fmt.Errorf("moving /dev: %w", err)
	}
	// switch_root without exec: this process keeps running from the
	// initramfs, which stays in memory under the new root.
	if err := os.Chdir("/newroot"); err != nil {
		return nil, err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return nil, fmt.Errorf("moving the root disk to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return nil, fmt.Errorf("chroot: %w", err)
	}
	os.Chdir("/")
	for _, m := range []struct{ src, dst, typ, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777"},
		{"tmpfs", "/run", "tmpfs", "mode=755"},
		{"devpts", "/dev/pts", "devpts", "gid=5,mode=620,ptmxmode=666"},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", ""},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, m.data); err != nil {
			log("mounting %s: %v", m.dst, err)
		}
	}
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	os.Setenv("HOME", "/root")
	if name := params[ParamName]; name != "" {
		unix.Sethostname([]byte(name))
	}
	// The token comes as a firmware file (sysfs is mounted now); only an
	// older host puts it on the command line.
	if b, err := os.ReadFile(TokenFwCfgPath); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		params[ParamToken] = strings.TrimSpace(string(b))
	}
	if err := network(params); err != nil {
		return nil, err
	}
	return params, nil
}

// ParseCmdline splits a kernel command line into key=value pairs (a bare
// word maps to "").
func ParseCmdline(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func loadModules(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading module %s: %w", n, err)
		}
	}
	return nil
}

func waitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// network brings up lo and eth0 with the address from the command line,
// using the guest's own ip(8) (iproute2 is in the workload image).
func network(params map[string]string) error {
	ip := params[ParamIP]
	if _, _, err := net.ParseCIDR(ip); err != nil {
		return fmt.Errorf("kernel parameter %s=%q: want an address with prefix: %w", ParamIP, ip, err)
	}
	if err := waitFile("/sys/class/net/eth0", 30*time.Second); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", ip, "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
	}
	// Replies to a client host go back through the host: a route per
	// subnet, no default route (the guest reaches nothing else).
	if gw, routes := params[ParamGW], params[ParamRoutes]; gw != "" && routes != "" {
		for _, r := range strings.Split(routes, ",") {
			if _, _, err := net.ParseCIDR(r); err != nil {
				return fmt.Errorf("kernel parameter %s=%q: %q is not a subnet: %w", ParamRoutes, routes, r, err)
			}
			steps = append(steps, []string{"ip", "route", "add", r, "via", gw, "dev", "eth0"})
		}
	}
	for _, argv := range steps {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

func powerOff() {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		log("power off: %v", err)
	}
	select {}
}
