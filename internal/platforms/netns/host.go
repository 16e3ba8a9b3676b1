package netns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
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

// usedPrefixes lists the IPv4 prefixes this machine routes or holds
// addresses in, from `ip -4 route show table all` and `ip -4 addr`.
func usedPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, argv := range [][]string{{"ip", "-4", "route", "show", "table", "all"}, {"ip", "-4", "-o", "addr", "show"}} {
		out, err := run(ctx, argv...)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(out, "\n") {
			for _, f := range strings.Fields(line) {
				if !strings.Contains(f, "/") && !strings.Contains(f, ".") {
					continue
				}
				if !strings.Contains(f, "/") {
					f += "/32"
				}
				if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
					ps = append(ps, p.Masked())
				}
			}
		}
	}
	return ps, nil
}

// subnets remembers the /24s this process has handed out, so that two
// platforms of one run never share one even when neither is routed.
var subnets = struct {
	sync.Mutex
	taken map[netip.Prefix]bool
}{taken: map[netip.Prefix]bool{}}

// pickSubnet chooses a private /24 in 10.213.0.0/16 that no route or address
// of the machine overlaps and this process has not handed out.
func pickSubnet(ctx context.Context) (netip.Prefix, error) {
	used, err := usedPrefixes(ctx)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("reading the machine's routes: %w", err)
	}
	subnets.Lock()
	defer subnets.Unlock()
	start := rand.IntN(256)
	for i := 0; i < 256; i++ {
		c := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte((start + i) % 256), 0}), 24)
		if subnets.taken[c] {
			continue
		}
		clash := false
		for _, u := range used {
			if u.Bits() > 0 && u.Overlaps(c) {
				clash = true
				break
			}
		}
		if !clash {
			subnets.taken[c] = true
			return c, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 left in 10.213.0.0/16")
}

// releaseSubnet returns a /24 handed out by pickSubnet.
func releaseSubnet(p netip.Prefix) {
	subnets.Lock()
	defer subnets.Unlock()
	delete(subnets.taken, p)
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
