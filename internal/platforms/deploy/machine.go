package deploy

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
)

// HostCPUs returns the host's online CPU numbers.
func HostCPUs() []int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err == nil {
		if cpus, err := sysinfo.ParseIDList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return cpus
		}
	}
	n := sysinfo.CPUCount()
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// Ports assigns every server of plan distinct free TCP ports on host, one per
// port name: the numbers are then fixed for the whole trial, so servers of
// one place can name each other before any of them starts.
func Ports(plan *topology.Plan, host string) (map[topology.ServerID]map[string]int, error) {
	free, err := platform.FreePorts(host, PortCount(plan))
	if err != nil {
		return nil, err
	}
	return PortsFrom(plan, free), nil
}

// PortCount is how many ports the plan's servers need.
func PortCount(plan *topology.Plan) int {
	n := 0
	for _, s := range plan.Servers {
		n += len(s.Ports)
	}
	return n
}

// PortsFrom gives the plan's servers the ports free, in order (free holds
// PortCount(plan) numbers, found free where the servers run).
func PortsFrom(plan *topology.Plan, free []int) map[topology.ServerID]map[string]int {
	out := map[topology.ServerID]map[string]int{}
	for _, s := range plan.Servers {
		m := map[string]int{}
		for _, p := range s.Ports {
			m[p], free = free[0], free[1:]
		}
		out[s.ID] = m
	}
	return out
}

// PortOf looks up a port in a map made by Ports; a missing name is a
// programming error of the workload (its spec and role disagree).
func PortOf(ports map[topology.ServerID]map[string]int, id topology.ServerID, port string) int {
	p, ok := ports[id][port]
	if !ok {
		panic(fmt.Sprintf("deploy: server %s has no port %q", id.Name(), port))
	}
	return p
}

// JoinPort is host:port.
func JoinPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
