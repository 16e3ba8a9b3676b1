package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// run runs argv and returns its output; a failure's error quotes the command
// and what it printed.
func run(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// notFound reports whether a command's error says the object does not exist,
// which teardown counts as success.
func notFound(err error) bool {
	if err == nil {
		return true
	}
	s := err.Error()
	for _, m := range []string{"Cannot find device", "No such file", "does not exist", "not found", "No such process",
		"Bad rule", "no bridge named", "no port named"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// ethtoolTxCsumOff turns off transmit checksum offload (and with it TSO) on
// link dev inside namespace ns. Open vSwitch's userspace datapath reads
// frames through AF_PACKET and forwards them with the partial checksums the
// kernel left for the hardware; the receiver then drops them.
func ethtoolTxCsumOff(ns, dev string) (err error) {
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", ns, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening this thread's namespace: %w", err)
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering namespace %s: %w", ns, err)
	}
	defer func() {
		if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// The thread stays locked and dies with its goroutine.
			err = errors.Join(err, fmt.Errorf("returning from namespace %s: %w", ns, rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket in namespace %s: %w", ns, err)
	}
	defer unix.Close(fd)
	const ethtoolSTxCsum = 0x17
	val := struct{ cmd, data uint32 }{ethtoolSTxCsum, 0}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], dev)
	ifr.data = uintptr(unsafe.Pointer(&val))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return fmt.Errorf("turning off tx checksum offload on %s in %s: %w", dev, ns, errno)
	}
	runtime.KeepAlive(&val)
	return nil
}
