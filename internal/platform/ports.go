package platform

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// localPortRange is the file of the kernel's ephemeral port range (a var
// so tests can point it elsewhere).
var localPortRange = sysinfo.LocalPortRange

// minPool is the fewest ports a pool outside the ephemeral range must hold
// to be used; below it FreePorts lets the kernel choose.
const minPool = 1024

// recent remembers the ports this process handed out lately, so that two
// calls made before the first caller's server binds do not return the same
// port.
var recent = struct {
	sync.Mutex
	set   map[int]bool
	order []int
}{set: map[int]bool{}}

// recentMax is how many ports recent holds at most; a pool keeps at least
// half its ports out of it (recentCap).
const recentMax = 1024

// recentCap is how many ports recent may hold for a pool of size ports.
func recentCap(size int) int {
	if size <= 0 {
		return recentMax
	}
	return min(recentMax, size/2)
}

// FreePorts returns n distinct TCP ports free on the given host address.
//
// They come from outside the kernel's ephemeral range (the IANA dynamic
// ports above it, else the registered ports below it): a port found free is
// released before its server binds it, and a port from the ephemeral range
// can be taken in that gap as the source port of any outgoing connection
// (CI once lost Apache's port to a client connection of the same run's
// PostgreSQL preload). Outside that range only a process binding the port
// explicitly can race us. When no pool of minPool ports lies outside the
// range, the kernel chooses, as before. The ports handed out lately are
// remembered by this process only: a sut host's agent answers each
// request in a process of its own.
func FreePorts(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := portPool()
	recent.Lock()
	defer recent.Unlock()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := listenFree(host, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("finding a free port on %s: %w", host, err)
		}
		ls = append(ls, l)
		p := l.Addr().(*net.TCPAddr).Port
		ports = append(ports, p)
		remember(p, recentCap(hi-lo+1))
	}
	return ports, nil
}

// listenFree listens on a port of [lo, hi] that this process has not
// handed out lately, or on a kernel-chosen port when the pool is empty.
func listenFree(host string, lo, hi int) (net.Listener, error) {
	if hi < lo {
		return listenKernel(host)
	}
	var err error
	for try := 0; try < 4*(hi-lo+1) && try < 20000; try++ {
		p := lo + rand.IntN(hi-lo+1)
		if recent.set[p] {
			continue
		}
		var l net.Listener
		l, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	if err == nil {
		err = fmt.Errorf("every port of %d-%d was handed out lately", lo, hi)
	}
	return nil, fmt.Errorf("no free port in %d-%d: %w", lo, hi, err)
}

// listenKernel listens on a port the kernel chooses, not one handed out
// lately: those it chooses again stay bound until a fresh one comes.
func listenKernel(host string) (net.Listener, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for try := 0; try < 64; try++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		if !recent.set[l.Addr().(*net.TCPAddr).Port] {
			return l, nil
		}
		held = append(held, l)
	}
	return nil, errors.New("the kernel answered only ports handed out lately")
}

// remember adds p to recent, which keeps the last keep ports.
func remember(p, keep int) {
	recent.set[p] = true
	recent.order = append(recent.order, p)
	for len(recent.order) > keep {
		delete(recent.set, recent.order[0])
		recent.order = recent.order[1:]
	}
}

// portPool returns the ports FreePorts picks from: those above the
// ephemeral range, else those from 10000 up to just below it, else an
// empty pool (hi < lo) when neither holds minPool ports or the range
// cannot be read.
func portPool() (lo, hi int) {
	elo, ehi, err := sysinfo.EphemeralPorts(localPortRange)
	if err != nil {
		return 1, 0
	}
	if 65535-ehi >= minPool {
		return ehi + 1, 65535
	}
	if elo-10000 >= minPool {
		return 10000, elo - 1
	}
	return 1, 0
}
