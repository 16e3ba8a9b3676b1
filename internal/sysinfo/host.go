package sysinfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPUInfo is what nearnative keeps from /proc/cpuinfo.
type CPUInfo struct {
	// Model is the first "model name" (x86) or equivalent line.
	Model string `json:"model"`
	// Vendor is vendor_id (x86) or "CPU implementer" (arm64), if present.
	Vendor string `json:"vendor"`
	// Logical is the number of "processor" entries.
	Logical int `json:"logical"`
	// Sockets is the number of distinct "physical id" values, 0 when the
	// file does not say.
	Sockets int `json:"sockets"`
	// Hypervisor is true when the x86 "hypervisor" CPU flag is set: the
	// kernel runs in a virtual machine.
	Hypervisor bool `json:"hypervisor"`
}

// ParseCPUInfo parses the text of /proc/cpuinfo.
func ParseCPUInfo(r io.Reader) (CPUInfo, error) {
	var ci CPUInfo
	sockets := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			ci.Logical++
		case "model name", "cpu model", "Processor", "cpu":
			// x86, mips, older arm, powerpc; first one wins.
			if ci.Model == "" && val != "" {
				ci.Model = val
			}
		case "vendor_id", "CPU implementer":
			if ci.Vendor == "" {
				ci.Vendor = val
			}
		case "physical id":
			sockets[val] = true
		case "flags":
			if !ci.Hypervisor {
				for _, f := range strings.Fields(val) {
					if f == "hypervisor" {
						ci.Hypervisor = true
						break
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return CPUInfo{}, fmt.Errorf("reading cpuinfo: %w", err)
	}
	ci.Sockets = len(sockets)
	return ci, nil
}

// ReadCPUInfo reads /proc/cpuinfo.
func ReadCPUInfo() (CPUInfo, error) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return CPUInfo{}, fmt.Errorf("reading CPU model: %w", err)
	}
	defer f.Close()
	return ParseCPUInfo(f)
}

// CPUCount returns the number of CPUs this process may run on (its affinity
// mask), which is what a workload started from it gets. It falls back to
// runtime.NumCPU.
func CPUCount() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		if n := set.Count(); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// OnlineCPUs returns the number of online CPUs from
// /sys/devices/system/cpu/online (may exceed CPUCount under an affinity mask
// or cpuset).
func OnlineCPUs() (int, error) {
	return countListFile("/sys/devices/system/cpu/online")
}

// NUMANodes returns the number of online NUMA nodes. A kernel built without
// NUMA support has no /sys/devices/system/node and counts as one node.
func NUMANodes() (int, error) {
	n, err := countListFile("/sys/devices/system/node/online")
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat("/sys/devices/system/node"); errors.Is(serr, fs.ErrNotExist) {
			return 1, nil
		}
	}
	return n, err
}

// Sockets returns the number of distinct physical packages from sysfs
// topology, falling back to /proc/cpuinfo.
func Sockets() (int, error) {
	ids := map[string]bool{}
	paths, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			ids[strings.TrimSpace(string(b))] = true
		}
	}
	if len(ids) > 0 {
		return len(ids), nil
	}
	ci, err := ReadCPUInfo()
	if err != nil {
		return 0, err
	}
	if ci.Sockets == 0 {
		return 0, errors.New("counting sockets: neither sysfs topology nor cpuinfo says")
	}
	return ci.Sockets, nil
}

func countListFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	ids, err := ParseIDList(string(b))
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return len(ids), nil
}

// ParseIDList parses a kernel ID list such as "0-3,8,10-11" (the format of
// sysfs cpu and node lists and cpuset.cpus). Empty input is an empty list.
func ParseIDList(s string) ([]int, error) {
	var ids []int
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad ID %q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("bad range %q: %w", part, err)
			}
		}
		if b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("bad range %q", part)
		}
		for i := a; i <= b; i++ {
			ids = append(ids, i)
		}
	}
	return ids, nil
}

// MemoryBytes returns the machine's usable RAM (MemTotal of /proc/meminfo).
func MemoryBytes() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading memory size: %w", err)
	}
	defer f.Close()
	n, err := ParseMemTotal(f)
	if err != nil {
		return 0, fmt.Errorf("parsing /proc/meminfo: %w", err)
	}
	return n, nil
}

// ParseMemTotal returns MemTotal in bytes from the text of /proc/meminfo.
func ParseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "MemTotal" {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			return 0, errors.New("MemTotal has no value")
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal: %w", err)
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading: %w", err)
	}
	return 0, errors.New("no MemTotal line")
}

// Cgroup versions as reported by CgroupVersion.
const (
	CgroupV1     = "v1"
	CgroupV2     = "v2"
	CgroupHybrid = "hybrid (v1 + v2 unified)"
)

// CgroupVersion reports how cgroups are mounted for this process: CgroupV2
// when the unified hierarchy is at /sys/fs/cgroup, CgroupHybrid when v1
// hierarchies are mounted with a v2 one beside them (systemd's "unified"
// mount; Docker then uses v1), CgroupV1 when only v1 is mounted.
func CgroupVersion() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	v, err := ParseCgroupVersion(f)
	if err != nil {
		return "", fmt.Errorf("parsing /proc/self/mountinfo: %w", err)
	}
	return v, nil
}

// ParseCgroupVersion decides the cgroup version (see CgroupVersion) from the
// text of /proc/PID/mountinfo.
func ParseCgroupVersion(r io.Reader) (string, error) {
	v1, v2, v2AtRoot := false, false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		switch qf[0] {
		case "cgroup":
			v1 = true
		case "cgroup2":
			v2 = true
			if unescapeMount(pf[4]) == "/sys/fs/cgroup" {
				v2AtRoot = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading: %w", err)
	}
	switch {
	case v2AtRoot, v2 && !v1:
		return CgroupV2, nil
	case v1 && v2:
		return CgroupHybrid, nil
	case v1:
		return CgroupV1, nil
	}
	return "", errors.New("no cgroup file system mounted")
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Governor returns the cpufreq scaling governor, or the distinct governors
// joined by "," when CPUs differ. It is "" when the kernel exposes no
// cpufreq (common in VMs).
func Governor() string {
	paths, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
	seen := map[string]bool{}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			if g := strings.TrimSpace(string(b)); g != "" {
				seen[g] = true
			}
		}
	}
	gs := make([]string, 0, len(seen))
	for g := range seen {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	return strings.Join(gs, ",")
}
