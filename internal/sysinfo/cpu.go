// Package sysinfo records the environment of a run (kernel, CPUs, cgroups,
// virtualisation, tool versions) and measures CPU use from /proc: machine-wide
// busy time, per-CPU spread, softirq time, context switches and interrupts,
// and per-process CPU time and migrations.
//
// CPU cost per operation: the busy CPU time of the whole machine over a trial
// (a CPUDelta's BusySeconds, softirq included, so network stack work done on
// behalf of a container or VM is charged) divided by the operations the trial
// completed. On a shared machine it is often steadier than throughput, and it
// charges every layer (docker-proxy, iptables, a VM's emulation threads) to the
// workload that caused it. See CPUDelta.CostPerOp.
//
// Every parser takes an io.Reader or []byte so it can be fed fixed text in
// tests or a file read from elsewhere (a VM guest's /proc/stat, say).
package sysinfo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPUTimes holds the cumulative time counters of one /proc/stat "cpu" line, in
// clock ticks (see ClockTicks). Guest time is already included in User and
// Nice by the kernel, so it is not kept separately.
type CPUTimes struct {
	User    uint64 `json:"user"`
	Nice    uint64 `json:"nice"`
	System  uint64 `json:"system"`
	Idle    uint64 `json:"idle"`
	IOWait  uint64 `json:"iowait"`
	IRQ     uint64 `json:"irq"`
	SoftIRQ uint64 `json:"softirq"`
	Steal   uint64 `json:"steal"`
}

// Busy returns the ticks spent doing anything but idling or waiting for I/O:
// user, nice, system, irq, softirq and steal. Softirq is included because
// packet processing for containers and VMs runs there. Steal (time a
// hypervisor gave this vCPU's turn to someone else) is included too, so a
// contended VM looks more expensive; subtract CPUDelta.StealSeconds to leave
// it out.
func (t CPUTimes) Busy() uint64 {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
}

// Total returns all ticks: Busy plus idle and iowait.
func (t CPUTimes) Total() uint64 {
	return t.Busy() + t.Idle + t.IOWait
}

// sub returns t - u field by field, clamping at zero: some kernels let idle
// and iowait step backwards by a tick.
func (t CPUTimes) sub(u CPUTimes) CPUTimes {
	return CPUTimes{
		User:    subClamp(t.User, u.User),
		Nice:    subClamp(t.Nice, u.Nice),
		System:  subClamp(t.System, u.System),
		Idle:    subClamp(t.Idle, u.Idle),
		IOWait:  subClamp(t.IOWait, u.IOWait),
		IRQ:     subClamp(t.IRQ, u.IRQ),
		SoftIRQ: subClamp(t.SoftIRQ, u.SoftIRQ),
		Steal:   subClamp(t.Steal, u.Steal),
	}
}

func (t CPUTimes) add(u CPUTimes) CPUTimes {
	return CPUTimes{User: t.User + u.User, Nice: t.Nice + u.Nice, System: t.System + u.System, Idle: t.Idle + u.Idle,
		IOWait: t.IOWait + u.IOWait, IRQ: t.IRQ + u.IRQ, SoftIRQ: t.SoftIRQ + u.SoftIRQ, Steal: t.Steal + u.Steal}
}

func subClamp(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// CPUSample is one reading of /proc/stat.
type CPUSample struct {
	// At is when the sample was read.
	At time.Time `json:"at"`
	// All is the aggregate "cpu" line (the sum over online CPUs).
	All CPUTimes `json:"all"`
	// PerCPU holds the "cpuN" lines in file order; CPUIDs[i] is the N of
	// PerCPU[i]. Offline CPUs are missing from /proc/stat, so an index is not
	// necessarily a CPU number.
	PerCPU []CPUTimes `json:"per_cpu"`
	CPUIDs []int      `json:"cpu_ids"`
	// Ctxt is the number of context switches since boot, Intr the number of
	// interrupts serviced and SoftIRQs the number of softirqs run.
	Ctxt     uint64 `json:"ctxt"`
	Intr     uint64 `json:"intr"`
	SoftIRQs uint64 `json:"softirqs"`
}

// ReadCPU reads /proc/stat.
func ReadCPU() (CPUSample, error) {
	b, err := os.ReadFile("/proc/stat")
	at := time.Now()
	if err != nil {
		return CPUSample{}, fmt.Errorf("reading CPU counters: %w", err)
	}
	s, err := ParseStat(bytes.NewReader(b))
	if err != nil {
		return CPUSample{}, fmt.Errorf("parsing /proc/stat: %w", err)
	}
	s.At = at
	return s, nil
}

// BootID is the running kernel's boot ID (/proc/sys/kernel/random/boot_id):
// it names a machine for as long as it runs, so that readings from hosts
// that are one machine (network namespaces, the test bed) are told apart
// from other machines' and not added twice.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot ID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ParseStat parses the text of /proc/stat. At is left zero for the caller to
// set. Lines with fewer than the eight time columns this package keeps (old
// kernels) leave the missing ones zero; at least four are required.
func ParseStat(r io.Reader) (CPUSample, error) {
	var s CPUSample
	sawAll := false
	sc := bufio.NewScanner(r)
	// The intr line lists every IRQ number and can exceed 64 KiB on large
	// machines.
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		key := fields[0]
		switch {
		case key == "cpu":
			t, err := parseCPUTimes(fields[1:])
			if err != nil {
				return CPUSample{}, fmt.Errorf("cpu line: %w", err)
			}
			s.All, sawAll = t, true
		case strings.HasPrefix(key, "cpu"):
			id, err := strconv.Atoi(key[3:])
			if err != nil {
				return CPUSample{}, fmt.Errorf("line %q: bad CPU number: %w", key, err)
			}
			t, err := parseCPUTimes(fields[1:])
			if err != nil {
				return CPUSample{}, fmt.Errorf("%s line: %w", key, err)
			}
			s.PerCPU = append(s.PerCPU, t)
			s.CPUIDs = append(s.CPUIDs, id)
		case key == "ctxt" || key == "intr" || key == "softirq":
			if len(fields) < 2 {
				return CPUSample{}, fmt.Errorf("%s line has no value", key)
			}
			v, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return CPUSample{}, fmt.Errorf("%s line: %w", key, err)
			}
			switch key {
			case "ctxt":
				s.Ctxt = v
			case "intr":
				s.Intr = v
			default:
				s.SoftIRQs = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return CPUSample{}, fmt.Errorf("reading: %w", err)
	}
	if !sawAll {
		return CPUSample{}, errors.New("no aggregate \"cpu\" line")
	}
	return s, nil
}

func parseCPUTimes(f []string) (CPUTimes, error) {
	if len(f) < 4 {
		return CPUTimes{}, fmt.Errorf("%d time columns, want at least 4", len(f))
	}
	var v [8]uint64
	for i := 0; i < len(v) && i < len(f); i++ {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("column %d: %w", i+1, err)
		}
		v[i] = n
	}
	return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3],
		IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}

// CPUDelta is the CPU use between two samples. Seconds are CPU-seconds summed
// over CPUs, so on a 2-CPU machine a 1 s interval has TotalSeconds near 2.
// /proc/stat counts in ticks (10 ms at the usual 100 Hz), so intervals should
// last seconds, not milliseconds, for the figures to mean much.
type CPUDelta struct {
	// Interval is the wall time between the samples.
	Interval time.Duration `json:"interval"`
	// Ticks is the difference of the aggregate counters.
	Ticks CPUTimes `json:"ticks"`
	// BusySeconds is Ticks.Busy() in seconds: the machine's busy CPU time,
	// softirq (and steal) included. Divide by operations for the CPU cost per
	// operation.
	BusySeconds float64 `json:"busy_seconds"`
	// TotalSeconds is Ticks.Total() in seconds.
	TotalSeconds float64 `json:"total_seconds"`
	// SoftIRQSeconds, IRQSeconds, SystemSeconds, UserSeconds (user + nice),
	// IOWaitSeconds and StealSeconds break BusySeconds (and iowait) down.
	SoftIRQSeconds float64 `json:"softirq_seconds"`
	IRQSeconds     float64 `json:"irq_seconds"`
	SystemSeconds  float64 `json:"system_seconds"`
	UserSeconds    float64 `json:"user_seconds"`
	IOWaitSeconds  float64 `json:"iowait_seconds"`
	StealSeconds   float64 `json:"steal_seconds"`
	// Utilisation is BusySeconds / TotalSeconds: the busy fraction of the
	// whole machine (0..1).
	Utilisation float64 `json:"utilisation"`
	// PerCPUBusy is the busy fraction (0..1) of each CPU present in both
	// samples, in the order of CPUIDs: the "CPU spread" that shows whether
	// a workload kept one core saturated while another idled.
	PerCPUBusy []float64 `json:"per_cpu_busy"`
	CPUIDs     []int     `json:"cpu_ids"`
	// ContextSwitches, Interrupts and SoftIRQs are the machine-wide counts
	// over the interval.
	ContextSwitches uint64 `json:"context_switches"`
	Interrupts      uint64 `json:"interrupts"`
	SoftIRQs        uint64 `json:"softirqs"`
}

// Delta returns the CPU use between a and b. The samples may be given in
// either order: the earlier one (by At) is the start. Counters that step
// backwards count as zero.
func (a CPUSample) Delta(b CPUSample) CPUDelta {
	from, to := a, b
	if to.At.Before(from.At) {
		from, to = to, from
	}
	hz := float64(ClockTicks())
	sec := func(ticks uint64) float64 { return float64(ticks) / hz }
	t := to.All.sub(from.All)
	d := CPUDelta{
		Interval:        to.At.Sub(from.At),
		Ticks:           t,
		BusySeconds:     sec(t.Busy()),
		TotalSeconds:    sec(t.Total()),
		SoftIRQSeconds:  sec(t.SoftIRQ),
		IRQSeconds:      sec(t.IRQ),
		SystemSeconds:   sec(t.System),
		UserSeconds:     sec(t.User + t.Nice),
		IOWaitSeconds:   sec(t.IOWait),
		StealSeconds:    sec(t.Steal),
		ContextSwitches: subClamp(to.Ctxt, from.Ctxt),
		Interrupts:      subClamp(to.Intr, from.Intr),
		SoftIRQs:        subClamp(to.SoftIRQs, from.SoftIRQs),
	}
	if tot := t.Total(); tot > 0 {
		d.Utilisation = float64(t.Busy()) / float64(tot)
	}
	prev := make(map[int]CPUTimes, len(from.PerCPU))
	for i, c := range from.PerCPU {
		prev[cpuID(from, i)] = c
	}
	for i, c := range to.PerCPU {
		id := cpuID(to, i)
		p, ok := prev[id]
		if !ok {
			continue // came online during the interval
		}
		dc := c.sub(p)
		frac := 0.0
		if tot := dc.Total(); tot > 0 {
			frac = float64(dc.Busy()) / float64(tot)
		}
		d.PerCPUBusy = append(d.PerCPUBusy, frac)
		d.CPUIDs = append(d.CPUIDs, id)
	}
	return d
}

// SumDeltas adds the CPU use of several machines over one load: seconds
// and counts add up, Utilisation is the busy share of all their CPUs,
// Interval is the longest, and PerCPUBusy lists every machine's CPUs in
// turn (CPUIDs repeat across machines). One delta is returned as it is.
func SumDeltas(ds []CPUDelta) CPUDelta {
	if len(ds) == 1 {
		return ds[0]
	}
	var s CPUDelta
	for _, d := range ds {
		s.Interval = max(s.Interval, d.Interval)
		s.Ticks = s.Ticks.add(d.Ticks)
		s.BusySeconds += d.BusySeconds
		s.TotalSeconds += d.TotalSeconds
		s.SoftIRQSeconds += d.SoftIRQSeconds
		s.IRQSeconds += d.IRQSeconds
		s.SystemSeconds += d.SystemSeconds
		s.UserSeconds += d.UserSeconds
		s.IOWaitSeconds += d.IOWaitSeconds
		s.StealSeconds += d.StealSeconds
		s.PerCPUBusy = append(s.PerCPUBusy, d.PerCPUBusy...)
		s.CPUIDs = append(s.CPUIDs, d.CPUIDs...)
		s.ContextSwitches += d.ContextSwitches
		s.Interrupts += d.Interrupts
		s.SoftIRQs += d.SoftIRQs
	}
	if s.TotalSeconds > 0 {
		s.Utilisation = s.BusySeconds / s.TotalSeconds
	}
	return s
}

// cpuID returns the CPU number of s.PerCPU[i], falling back to the index for
// samples built without CPUIDs.
func cpuID(s CPUSample, i int) int {
	if i < len(s.CPUIDs) {
		return s.CPUIDs[i]
	}
	return i
}

// CostPerOp returns the CPU cost per operation: BusySeconds divided by ops.
// It returns 0 when ops is not positive.
func (d CPUDelta) CostPerOp(ops float64) time.Duration {
	if ops <= 0 {
		return 0
	}
	return time.Duration(d.BusySeconds / ops * float64(time.Second))
}

// Spread returns the lowest and highest per-CPU busy fractions (0, 0 when
// there are none).
func (d CPUDelta) Spread() (lowest, highest float64) {
	for i, f := range d.PerCPUBusy {
		if i == 0 || f < lowest {
			lowest = f
		}
		if i == 0 || f > highest {
			highest = f
		}
	}
	return lowest, highest
}

// DefaultClockTicks is USER_HZ on every Linux architecture Go supports; the
// kernel reports /proc times in these units whatever its internal HZ.
const DefaultClockTicks = 100

// atClkTck is the auxiliary vector entry carrying sysconf(_SC_CLK_TCK).
const atClkTck = 17

var clockTicks = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return DefaultClockTicks
	}
	if hz, ok := parseAuxvClkTck(b, strconv.IntSize/8); ok {
		return hz
	}
	return DefaultClockTicks
})

// ClockTicks returns the unit of the /proc tick counters per second
// (sysconf(_SC_CLK_TCK)). golang.org/x/sys/unix has no sysconf, so it is
// read from the AT_CLKTCK entry of /proc/self/auxv, which is where libc's
// sysconf gets it; if that fails it is DefaultClockTicks (100).
func ClockTicks() int64 { return clockTicks() }

// parseAuxvClkTck finds AT_CLKTCK in an auxiliary vector of native-endian
// words of the given size.
func parseAuxvClkTck(b []byte, word int) (int64, bool) {
	read := func(p []byte) uint64 {
		if word == 4 {
			return uint64(binary.NativeEndian.Uint32(p))
		}
		return binary.NativeEndian.Uint64(p)
	}
	for i := 0; i+2*word <= len(b); i += 2 * word {
		key, val := read(b[i:]), read(b[i+word:])
		if key == 0 {
			break
		}
		if key == atClkTck && val > 0 && val < 1<<20 {
			return int64(val), true
		}
	}
	return 0, false
}

// ticksToDuration converts clock ticks to a duration without overflowing.
func ticksToDuration(ticks uint64) time.Duration {
	hz := uint64(ClockTicks())
	return time.Duration(ticks/hz)*time.Second + time.Duration(ticks%hz)*time.Second/time.Duration(hz)
}
