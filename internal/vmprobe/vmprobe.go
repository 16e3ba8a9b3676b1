// Package vmprobe finds the VM platforms' guest kernel and which
// acceleration a QEMU guest really gets here.
// /dev/kvm existing is not enough: under some nested hypervisors a stock
// kernel hangs under KVM. The probe boots Debian's cloud kernel with no root
// file system and waits for the guest to reach its "VFS: Unable to mount
// root fs" panic: a guest that prints that has really run.
package vmprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/state"
)

// Result says what acceleration works.
type Result struct {
	// Accel is "kvm", "tcg" or "" when no guest boots at all.
	Accel string
	// KVMReason says why KVM was not used, when it was not.
	KVMReason string
	// Boot is how long the successful probe took to reach the panic.
	Boot time.Duration
	// Kernel is the guest kernel the probe booted.
	Kernel Kernel
}

// Emulated reports whether guests run under software emulation (TCG), whose
// results are not comparable with native ones.
func (r Result) Emulated() bool { return r.Accel == "tcg" }

// Timeouts for the probes: a KVM guest reaches the panic in a second or two;
// TCG takes several seconds.
var (
	KVMTimeout = 12 * time.Second
	TCGTimeout = 60 * time.Second
)

// Kernel is a guest kernel unpacked into nearnative's state directory by
// scripts/vm-kernel.sh (part of `make setup`): Debian's cloud kernel
// package, extracted with dpkg-deb and never installed, so /boot and the
// host's boot loader are left alone.
type Kernel struct {
	// Version is the kernel release, e.g. 6.1.0-27-cloud-amd64.
	Version string
	// Image is the vmlinuz file QEMU boots.
	Image string
	// Modules is the kernel's module directory (with modules.dep).
	Modules string
}

// KernelDir is where scripts/vm-kernel.sh unpacks kernels under a state
// directory root: KernelDir/VERSION/boot/vmlinuz-VERSION and
// KernelDir/VERSION/lib/modules/VERSION.
func KernelDir(root string) string { return filepath.Join(root, "kernel") }

// KernelRoots are the state directories searched for a kernel, in order:
// $NEARNATIVE_HOME when set, then the default /var/lib/nearnative (so that
// runs and tests with a state directory of their own find the kernel that
// setup unpacked).
func KernelRoots() []string {
	roots := []string{}
	if h := os.Getenv(state.EnvHome); h != "" {
		roots = append(roots, h)
	}
	return append(roots, state.DefaultHome)
}

// FindKernel returns the newest kernel unpacked under the first of roots
// that holds one.
func FindKernel(roots ...string) (Kernel, error) {
	for _, root := range roots {
		dirs, _ := filepath.Glob(filepath.Join(KernelDir(root), "[0-9]*"))
		var found []Kernel
		for _, d := range dirs {
			v := filepath.Base(d)
			k := Kernel{Version: v, Image: filepath.Join(d, "boot", "vmlinuz-"+v), Modules: filepath.Join(d, "lib", "modules", v)}
			if _, err := os.Stat(k.Image); err != nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err != nil {
				continue
			}
			found = append(found, k)
		}
		if len(found) > 0 {
			sort.Slice(found, func(i, j int) bool { return versionLess(found[i].Version, found[j].Version) })
			return found[len(found)-1], nil
		}
	}
	var where []string
	for _, r := range roots {
		where = append(where, KernelDir(r))
	}
	return Kernel{}, fmt.Errorf("no VM kernel in %s: run scripts/vm-kernel.sh (make setup does) to unpack linux-image-cloud-amd64 there", strings.Join(where, " or "))
}

// DefaultKernel is FindKernel over KernelRoots.
func DefaultKernel() (Kernel, error) { return FindKernel(KernelRoots()...) }

// versionLess orders kernel releases by their numeric fields
// (6.1.0-9 < 6.1.0-27), then as strings.
func versionLess(a, b string) bool {
	na, nb := numbers(a), numbers(b)
	for i := 0; i < len(na) && i < len(nb); i++ {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	if len(na) != len(nb) {
		return len(na) < len(nb)
	}
	return a < b
}

// numbers returns the runs of digits in s as integers.
func numbers(s string) []int {
	var out []int
	n, in := 0, false
	for _, r := range s + "x" {
		if r >= '0' && r <= '9' {
			n, in = n*10+int(r-'0'), true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	return out
}

// Probe boots the probe guest under KVM (when /dev/kvm exists) and falls
// back to TCG.
func Probe(ctx context.Context) (Result, error) {
	k, err := DefaultKernel()
	if err != nil {
		return Result{}, err
	}
	return ProbeKernel(ctx, k)
}

// ProbeKernel is Probe with the guest kernel k (only its Image is booted):
// a sut host probes with the kernel its guests will boot, copied there.
func ProbeKernel(ctx context.Context, k Kernel) (Result, error) {
	r := Result{Kernel: k}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return r, errors.New("qemu-system-x86_64 not found: apt-get install -y qemu-system-x86")
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		r.KVMReason = "/dev/kvm does not exist (no hardware virtualisation, or the kvm module is not loaded)"
	} else {
		d, err := boot(ctx, qemu, r.Kernel.Image, "kvm", KVMTimeout)
		if err == nil {
			r.Accel, r.Boot = "kvm", d
			return r, nil
		}
		r.KVMReason = "/dev/kvm exists but a guest did not boot under it: " + err.Error()
	}
	d, err := boot(ctx, qemu, r.Kernel.Image, "tcg", TCGTimeout)
	if err != nil {
		return r, fmt.Errorf("no QEMU guest boots here, not even under TCG: %w", err)
	}
	r.Accel, r.Boot = "tcg", d
	return r, nil
}

func boot(ctx context.Context, qemu, kernel, accel string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(qemu, "-accel", accel, "-m", "256", "-kernel", kernel,
		"-append", "console=ttyS0 panic=-1 loglevel=4", "-nographic", "-nodefaults",
		"-serial", "stdio", "-display", "none", "-no-reboot")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	// QEMU dies with nearnative, and its group when ctx ends; its own exit
	// status says nothing (the guest's panic ends it either way).
	started, err := deathsig.Run(ctx, cmd)
	if !started {
		return 0, fmt.Errorf("starting qemu: %w", err)
	}
	if err != nil && err == ctx.Err() {
		return 0, fmt.Errorf("the guest did not reach its first kernel messages within %v", timeout)
	}
	if !bytes.Contains(out.Bytes(), []byte("VFS: Unable to mount root")) {
		return 0, fmt.Errorf("qemu exited without the guest's boot messages: %s", lastLine(out.Bytes()))
	}
	return time.Since(start), nil
}

func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) == 0 {
		return ""
	}
	return string(bytes.TrimSpace(lines[len(lines)-1]))
}
