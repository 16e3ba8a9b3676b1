// Package vmprobe finds out which acceleration a QEMU guest really gets here.
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
	"syscall"
	"time"
)

// Result says what acceleration works.
type Result struct {
	// Accel is "kvm", "tcg" or "" when no guest boots at all.
	Accel string
	// KVMReason says why KVM was not used, when it was not.
	KVMReason string
	// Boot is how long the successful probe took to reach the panic.
	Boot   time.Duration
	Kernel string
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

// Kernel returns the newest Debian cloud kernel in /boot.
func Kernel() (string, error) {
	ks, _ := filepath.Glob("/boot/vmlinuz-*-cloud-amd64")
	if len(ks) == 0 {
		ks, _ = filepath.Glob("/boot/vmlinuz-*")
	}
	if len(ks) == 0 {
		return "", errors.New("no kernel in /boot: apt-get install -y linux-image-cloud-amd64")
	}
	sort.Strings(ks)
	return ks[len(ks)-1], nil
}

// Probe boots the probe guest under KVM (when /dev/kvm exists) and falls
// back to TCG.
func Probe(ctx context.Context) (Result, error) {
	var r Result
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return r, errors.New("qemu-system-x86_64 not found: apt-get install -y qemu-system-x86")
	}
	if r.Kernel, err = Kernel(); err != nil {
		return r, err
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		r.KVMReason = "/dev/kvm does not exist (no hardware virtualisation, or the kvm module is not loaded)"
	} else {
		d, err := boot(ctx, qemu, r.Kernel, "kvm", KVMTimeout)
		if err == nil {
			r.Accel, r.Boot = "kvm", d
			return r, nil
		}
		r.KVMReason = "/dev/kvm exists but a guest did not boot under it: " + err.Error()
	}
	d, err := boot(ctx, qemu, r.Kernel, "tcg", TCGTimeout)
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
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting qemu: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
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
