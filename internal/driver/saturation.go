package driver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Limits say when a driver counts as saturated (the bottleneck, rather than
// the system it drives). Zero fields take the defaults.
type Limits struct {
	// CPUShare: the driver used at least this share of the CPUs it may run
	// on (default 0.9).
	CPUShare float64 `json:"cpu_share,omitempty"`
	// Lag: the 99th percentile of the driver's wake-up lag behind its plan
	// exceeded this (default 2 ms).
	Lag time.Duration `json:"lag,omitempty"`
	// LateShare: in the open loop, at least this share of the requests due
	// were sent late and the lag shows the driver itself was behind
	// (default 0.01).
	LateShare float64 `json:"late_share,omitempty"`
	// FDShare and PortShare: peak file descriptors against the process's
	// limit, peak sockets on ephemeral ports against the range (default 0.8).
	FDShare   float64 `json:"fd_share,omitempty"`
	PortShare float64 `json:"port_share,omitempty"`
}

// Default saturation limits.
const (
	DefaultCPUShare  = 0.9
	DefaultLag       = 2 * time.Millisecond
	DefaultLateShare = 0.01
	DefaultFDShare   = 0.8
	DefaultPortShare = 0.8
)

func (l Limits) withDefaults() Limits {
	if l.CPUShare == 0 {
		l.CPUShare = DefaultCPUShare
	}
	if l.Lag == 0 {
		l.Lag = DefaultLag
	}
	if l.LateShare == 0 {
		l.LateShare = DefaultLateShare
	}
	if l.FDShare == 0 {
		l.FDShare = DefaultFDShare
	}
	if l.PortShare == 0 {
		l.PortShare = DefaultPortShare
	}
	return l
}

// Saturation is the verdict of the driver's own checks on one run.
type Saturation struct {
	// Saturated is set when any check failed: the driver may have been the
	// bottleneck, and Reasons say which checks and by how much.
	Saturated bool     `json:"saturated"`
	Reasons   []string `json:"reasons,omitempty"`
	// The figures behind the checks.
	CPUShare  float64       `json:"cpu_share"` // of the CPUs the driver may run on
	LagP99    time.Duration `json:"lag_p99"`
	LateShare float64       `json:"late_share"`
	FDShare   float64       `json:"fd_share"`
	PortShare float64       `json:"port_share"`
}

// Saturation runs the driver's saturation checks on r.
func (r *Result) Saturation(l Limits) Saturation {
	l = l.withDefaults()
	var s Saturation
	if r.CPUs > 0 {
		s.CPUShare = r.CPUShare() / float64(r.CPUs)
	}
	s.LagP99 = r.Lag.Quantile(0.99)
	if r.Open.Due > 0 {
		s.LateShare = float64(r.Open.Late) / float64(r.Open.Due)
	}
	if r.FDLimit > 0 {
		s.FDShare = float64(r.FDs) / float64(r.FDLimit)
	}
	if r.PortRange > 0 {
		s.PortShare = float64(r.Ports) / float64(r.PortRange)
	}
	add := func(format string, args ...any) {
		s.Saturated = true
		s.Reasons = append(s.Reasons, fmt.Sprintf(format, args...))
	}
	if s.CPUShare >= l.CPUShare {
		add("the driver used %.0f%% of the %d CPU(s) it may run on (limit %.0f%%)", s.CPUShare*100, r.CPUs, l.CPUShare*100)
	}
	if s.LagP99 > l.Lag {
		add("the driver woke up to %v late behind its plan (p99 of %d wake-ups; limit %v)", s.LagP99.Round(10*time.Microsecond), r.Lag.Count(), l.Lag)
	}
	if s.LateShare >= l.LateShare && s.LagP99 > l.Lag {
		add("%.1f%% of the requests due were sent late", s.LateShare*100)
	}
	if s.FDShare >= l.FDShare {
		add("file descriptors peaked at %d of the limit %d", r.FDs, r.FDLimit)
	}
	if s.PortShare >= l.PortShare {
		add("TCP sockets in use or in TIME_WAIT on this machine peaked at %d, against %d ephemeral ports", r.Ports, r.PortRange)
	}
	return s
}

// cpuTime is this process's user + system time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allowedCPUs is how many CPUs this process may run on.
func allowedCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 1
	}
	return max(1, set.Count())
}

// monitor samples the process's file descriptors and the machine's sockets
// on ephemeral ports until stopped, keeping the peaks.
type monitor struct {
	mu                            sync.Mutex
	fds, fdLimit, ports, portSize int
	lo, hi                        int
	done                          chan struct{}
	wg                            sync.WaitGroup
}

func startMonitor(ctx context.Context, every time.Duration) *monitor {
	m := &monitor{done: make(chan struct{})}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		m.fdLimit = int(rl.Cur)
	}
	m.lo, m.hi = portRange()
	if m.hi >= m.lo && m.lo > 0 {
		m.portSize = m.hi - m.lo + 1
	}
	m.sample()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.sample()
			case <-m.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return m
}

func (m *monitor) sample() {
	fds := countFDs()
	ports := countEphemeral(m.lo, m.hi)
	m.mu.Lock()
	m.fds, m.ports = max(m.fds, fds), max(m.ports, ports)
	m.mu.Unlock()
}

// stop ends sampling (after a last sample) and fills r's peaks.
func (m *monitor) stop(r *Result) {
	close(m.done)
	m.wg.Wait()
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	r.FDs, r.FDLimit, r.Ports, r.PortRange = m.fds, m.fdLimit, m.ports, m.portSize
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// portRange reads the kernel's ephemeral port range (hi < lo when unknown).
func portRange() (lo, hi int) {
	lo, hi, err := sysinfo.EphemeralPorts(sysinfo.LocalPortRange)
	if err != nil {
		return 0, -1
	}
	return lo, hi
}

// countEphemeral estimates the TCP sockets holding local ports: those in
// use and in TIME_WAIT, IPv4 and IPv6, from /proc/net/sockstat*, whose cost
// does not grow with the number of sockets (reading /proc/net/tcp with tens
// of thousands of TIME_WAIT entries took a fifth of the driver's CPU). It
// counts listening and accepted sockets too, so it is an upper bound of the
// ephemeral ports in use.
func countEphemeral(lo, hi int) int {
	if hi < lo || lo <= 0 {
		return 0
	}
	n := 0
	for _, f := range []string{"/proc/net/sockstat", "/proc/net/sockstat6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += sockstatTCP(string(b))
	}
	return n
}

// sockstatTCP adds the "inuse" and "tw" counts of the TCP line of a
// /proc/net/sockstat file ("TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1").
func sockstatTCP(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "TCP:" && fields[0] != "TCP6:" {
			continue
		}
		for i := 1; i+1 < len(fields); i += 2 {
			if fields[i] == "inuse" || fields[i] == "tw" {
				v, _ := strconv.Atoi(fields[i+1])
				n += v
			}
		}
	}
	return n
}
