package docker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// PrimaryAddr returns the host's primary non-loopback IPv4 address: the first
// IPv4 address of the interface that carries the default route (read from
// /proc/net/route). Nothing of a run is published or listens on it (docker-nat
// publishes on its client host's link instead); tests use it to check so.
func PrimaryAddr() (net.IP, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("finding the primary address: %w", err)
	}
	defer f.Close()
	iface, err := defaultRouteIface(f)
	if err != nil {
		return nil, fmt.Errorf("finding the primary address: %w", err)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("finding the primary address: interface %s of the default route: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("finding the primary address: addresses of %s: %w", iface, err)
	}
	if ip := firstIPv4(addrs); ip != nil {
		return ip, nil
	}
	return nil, fmt.Errorf("finding the primary address: interface %s of the default route has no IPv4 address", iface)
}

// firstIPv4 returns the first non-loopback IPv4 address in addrs, or nil.
func firstIPv4(addrs []net.Addr) net.IP {
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if ip4 := ip.To4(); ip4 != nil && !ip4.IsLoopback() {
			return ip4
		}
	}
	return nil
}

// defaultRouteIface parses /proc/net/route and returns the interface of the
// IPv4 default route with the lowest metric that is up.
func defaultRouteIface(r io.Reader) (string, error) {
	const rtfUp = 0x1
	sc := bufio.NewScanner(r)
	best, bestMetric := "", -1
	first := true
	for sc.Scan() {
		if first { // header: Iface Destination Gateway Flags RefCnt Use Metric Mask ...
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		metric, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil || f[1] != "00000000" || f[7] != "00000000" || flags&rtfUp == 0 {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading the routing table: %w", err)
	}
	if best == "" {
		return "", fmt.Errorf("no IPv4 default route")
	}
	return best, nil
}
