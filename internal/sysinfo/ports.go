package sysinfo

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LocalPortRange is the file in which Linux keeps the range it takes
// connections' source ports (the ephemeral ports) from.
const LocalPortRange = "/proc/sys/net/ipv4/ip_local_port_range"

// EphemeralPorts reads the kernel's ephemeral port range from file (normally
// LocalPortRange).
func EphemeralPorts(file string) (lo, hi int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, err
	}
	return ParseEphemeralPorts(string(b))
}

// ParseEphemeralPorts parses the two numbers of ip_local_port_range.
func ParseEphemeralPorts(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ephemeral port range %q: want two numbers", s)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo <= 0 || lo > hi || hi > 65535 {
		return 0, 0, fmt.Errorf("ephemeral port range %q: want two ports, low first", s)
	}
	return lo, hi, nil
}
