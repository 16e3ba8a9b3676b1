package docker

import (
	"context"
	"slices"
	"time"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// containerCPU is what a container server's CPU time counts.
const containerCPU = "the container's cgroup (Docker engine stats)"

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string { return containerCPU }

// OverheadCPUTime implements platform.OverheadReporter: the CPU time of the
// docker-proxy processes that serve the container's published ports (the
// userland proxy; on docker-proxy every byte passes through it). They work
// for the run, so the CPU account counts them with its own processes, not
// as the rest of the machine.
func (s *server) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
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
