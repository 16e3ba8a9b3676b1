package docker

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// containerCPU is what a container server's CPU time counts.
const containerCPU = "the container's cgroup (its cgroup files when the engine is local, else the engine's stats API)"

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string {
	if s.tracker != nil {
		return s.tracker.CPUSource()
	}
	return containerCPU
}

// OverheadCPUTime implements platform.OverheadReporter: the CPU time of the
// docker-proxy processes that serve the container's published ports (the
// userland proxy; on docker-proxy every byte passes through it). They work
// for the run, so the CPU account counts them with its own processes, not
// as the rest of the machine.
func (s *server) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
	if s.tracker != nil {
		return s.tracker.OverheadCPUTime(ctx)
	}
	if s.bridgeIP == "" {
		return 0, nil
	}
	return proxyCPU("/proc", s.bridgeIP), nil
}

// proxyCPU sums the CPU time of the docker-proxy processes under procRoot
// that forward to containerIP. A proxy that exits while being read counts
// nothing.
func proxyCPU(procRoot, containerIP string) time.Duration {
	var sum time.Duration
	for _, p := range sysinfo.Procs(procRoot, "docker-proxy") {
		i := slices.Index(p.Args, "-container-ip")
		if i < 0 || i+1 >= len(p.Args) || p.Args[i+1] != containerIP {
			continue
		}
		if st, err := sysinfo.ReadProcStatAt(procRoot, p.PID); err == nil {
			sum += st.CPU()
		}
	}
	return sum
}

// supervisedCPU is what the CPU time of a server under a supervisor counts.
const supervisedCPU = "the server's process tree (its living workers and what they have reaped), read from /proc inside the container it shares with other servers"

// CPUSource implements platform.CPUDescriber.
func (s *supervised) CPUSource() string { return supervisedCPU }

// OverheadCPUTime implements platform.OverheadReporter: the docker-proxy
// processes that forward to this server's own ports of the shared container.
func (s *supervised) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
	if s.site.p.kind == platform.DockerHost || !s.m.Server.Entry {
		return 0, nil
	}
	ports := map[string]bool{}
	for _, pn := range s.m.Server.Ports {
		ports[strconv.Itoa(s.site.Port(s.m.Server.ID, pn))] = true
	}
	var sum time.Duration
	for _, p := range sysinfo.Procs("/proc", "docker-proxy") {
		ip, port := argAfter(p.Args, "-container-ip"), argAfter(p.Args, "-container-port")
		if ip != s.g.ip || !ports[port] {
			continue
		}
		if st, err := sysinfo.ReadProcStatAt("/proc", p.PID); err == nil {
			sum += st.CPU()
		}
	}
	return sum, nil
}

func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}
