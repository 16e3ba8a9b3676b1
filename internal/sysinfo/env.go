package sysinfo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/version"
)

// Env is the environment a run was measured in. Every run stores one.
type Env struct {
	Hostname string `json:"hostname"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel"`
	// OS is PRETTY_NAME from /etc/os-release.
	OS       string `json:"os"`
	CPUModel string `json:"cpu_model"`
	// CPUs is the number of CPUs nearnative may use (CPUCount).
	CPUs        int   `json:"cpus"`
	Sockets     int   `json:"sockets"`
	NUMANodes   int   `json:"numa_nodes"`
	MemoryBytes int64 `json:"memory_bytes"`
	// CgroupVersion is CgroupV1, CgroupV2 or CgroupHybrid.
	CgroupVersion string `json:"cgroup_version"`
	// Governor is the cpufreq governor; empty without cpufreq.
	Governor string `json:"governor"`
	// Virtualization names the hypervisor this kernel runs under ("kvm",
	// "xen", ...), "none" on bare metal, or "" when it cannot be told.
	Virtualization string `json:"virtualization"`
	// Docker holds facts about the Docker engine, filled by the caller
	// (this package does not talk to Docker).
	Docker map[string]string `json:"docker"`
	// Tools are the versions of the workload tools (ToolVersions).
	Tools []Tool `json:"tools"`
	// NearnativeVersion and Commit come from package version.
	NearnativeVersion string `json:"nearnative_version"`
	Commit            string `json:"commit"`
	// Extra holds further facts under stable keys; see Capture.
	Extra map[string]string `json:"extra"`
}

// Capture records the environment. It is best effort: what cannot be read is
// left empty, and unexpected failures (not a merely absent file) are listed
// under Extra["warnings"]. The error is non-nil only when ctx ends before the
// capture is done; the Env returned is still usable then.
//
// Extra keys: kernel_version, arch, go_version, cpus_online, cpu_vendor,
// cpu_hypervisor_flag, container (docker, podman, none, ... : whether
// nearnative itself runs inside a container), dmi_sys_vendor,
// dmi_product_name, kvm (whether /dev/kvm exists), clocksource,
// transparent_hugepage, smt_active, cmdline, clk_tck, loadavg, irqbalance,
// irqs (device interrupt lines with their affinity and per-CPU counts),
// tcp_congestion_control and default_qdisc (with BBR and no fq qdisc TCP
// paces itself, and over a 1500-byte link held the last packet of 1.5% of
// http-max's responses 35-50 ms on BENCH.md's quiet re-take, "The 40 ms
// plateau"), warnings.
func Capture(ctx context.Context) (Env, error) {
	e := Env{Extra: map[string]string{}}
	var w captureWarnings

	// Commands (tool lookups, systemd-detect-virt) run while files are read.
	var wg sync.WaitGroup
	var tools []Tool
	var virt, container string
	wg.Add(2)
	go func() { defer wg.Done(); tools = ToolVersions(ctx) }()
	go func() { defer wg.Done(); virt, container = detectVirt(ctx) }()

	e.kernelFacts(&w)
	ci, ciErr := e.machineFacts(&w)
	e.fileFacts(&w)
	e.NearnativeVersion, e.Commit = version.Version, version.CommitID()

	wg.Wait()
	e.Tools = tools
	e.Virtualization = virt
	if e.Virtualization == "" {
		e.Virtualization = virtFromFiles(e.Extra["dmi_sys_vendor"], e.Extra["dmi_product_name"], ci.Hypervisor, ciErr == nil)
	}
	setExtra(e.Extra, "container", container)

	if len(w) > 0 {
		sort.Strings(w)
		e.Extra["warnings"] = strings.Join(w, "; ")
	}
	if err := ctx.Err(); err != nil {
		return e, fmt.Errorf("capturing environment: %w", err)
	}
	return e, nil
}

// captureWarnings are the facts Capture could not read, one "what: error"
// each; a file that does not exist is no warning.
type captureWarnings []string

func (w *captureWarnings) add(what string, err error) {
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		*w = append(*w, fmt.Sprintf("%s: %v", what, err))
	}
}

// kernelFacts reads the host name, the kernel (uname), the interrupts and
// the OS release.
func (e *Env) kernelFacts(w *captureWarnings) {
	var err error
	e.Hostname, err = os.Hostname()
	w.add("hostname", err)

	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
		e.Extra["kernel_version"] = unix.ByteSliceToString(u.Version[:])
		e.Extra["arch"] = unix.ByteSliceToString(u.Machine[:])
		if e.Hostname == "" {
			e.Hostname = unix.ByteSliceToString(u.Nodename[:])
		}
	} else {
		w.add("uname", err)
	}
	e.Extra["go_version"] = runtime.Version()
	e.Extra["irqbalance"] = IRQBalance("/proc")
	if irqs, err := DeviceIRQs("/proc"); err == nil {
		e.Extra["irqs"] = FormatIRQs(irqs)
	} else {
		w.add("interrupts", err)
	}

	if f, err := os.Open("/etc/os-release"); err == nil {
		e.OS, err = ParseOSRelease(f)
		f.Close()
		w.add("os-release", err)
	} else {
		w.add("os-release", err)
	}
}

// machineFacts reads the CPUs, sockets, NUMA nodes, memory, cgroup version
// and governor, and returns the CPU description (for the virtualisation
// guess) with its error.
func (e *Env) machineFacts(w *captureWarnings) (CPUInfo, error) {
	ci, ciErr := ReadCPUInfo()
	w.add("cpuinfo", ciErr)
	e.CPUModel = ci.Model
	setExtra(e.Extra, "cpu_vendor", ci.Vendor)
	if ciErr == nil {
		e.Extra["cpu_hypervisor_flag"] = strconv.FormatBool(ci.Hypervisor)
	}
	e.CPUs = CPUCount()
	if n, err := OnlineCPUs(); err == nil {
		e.Extra["cpus_online"] = strconv.Itoa(n)
	} else {
		w.add("online CPUs", err)
	}
	var err error
	e.Sockets, err = Sockets()
	w.add("sockets", err)
	e.NUMANodes, err = NUMANodes()
	w.add("NUMA nodes", err)
	e.MemoryBytes, err = MemoryBytes()
	w.add("memory", err)
	e.CgroupVersion, err = CgroupVersion()
	w.add("cgroup version", err)
	e.Governor = Governor()
	return ci, ciErr
}

// fileFacts reads the one-line facts of /sys and /proc (DMI, clock source,
// huge pages, SMT, command line, load, TCP settings) and whether KVM is
// there.
func (e *Env) fileFacts(w *captureWarnings) {
	for key, path := range map[string]string{
		"dmi_sys_vendor":         "/sys/class/dmi/id/sys_vendor",
		"dmi_product_name":       "/sys/class/dmi/id/product_name",
		"clocksource":            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
		"transparent_hugepage":   "/sys/kernel/mm/transparent_hugepage/enabled",
		"smt_active":             "/sys/devices/system/cpu/smt/active",
		"cmdline":                "/proc/cmdline",
		"loadavg":                "/proc/loadavg",
		"tcp_congestion_control": "/proc/sys/net/ipv4/tcp_congestion_control",
		"default_qdisc":          "/proc/sys/net/core/default_qdisc",
	} {
		v, err := readTrim(path)
		w.add(key, err)
		setExtra(e.Extra, key, v)
	}
	_, err := os.Stat("/dev/kvm")
	e.Extra["kvm"] = strconv.FormatBool(err == nil)
	e.Extra["clk_tck"] = strconv.FormatInt(ClockTicks(), 10)
}

func setExtra(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ParseOSRelease returns PRETTY_NAME (or NAME VERSION_ID) from the text of
// /etc/os-release.
func ParseOSRelease(r io.Reader) (string, error) {
	vals := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, `"'`)
		}
		vals[k] = v
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading os-release: %w", err)
	}
	if v := vals["PRETTY_NAME"]; v != "" {
		return v, nil
	}
	if v := strings.TrimSpace(vals["NAME"] + " " + vals["VERSION_ID"]); v != "" {
		return v, nil
	}
	return "", errors.New("os-release has neither PRETTY_NAME nor NAME")
}

// detectVirt asks systemd-detect-virt, if installed, for the hypervisor and
// the container manager, and falls back to marker files for the latter.
func detectVirt(ctx context.Context) (vm, container string) {
	const timeout = 3 * time.Second
	// systemd-detect-virt prints "none" and exits 1 when there is none.
	if out, _, err := runCommand(ctx, timeout, "systemd-detect-virt", "--vm"); err == nil || isExitError(err) {
		vm = firstLine(out)
	}
	if out, _, err := runCommand(ctx, timeout, "systemd-detect-virt", "--container"); err == nil || isExitError(err) {
		container = firstLine(out)
	}
	if container == "" || container == "none" {
		switch {
		case exists("/.dockerenv"):
			container = "docker"
		case exists("/run/.containerenv"):
			container = "podman"
		case container == "" && exists("/proc/self"):
			container = "none"
		}
	}
	return vm, container
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// virtFromFiles guesses the hypervisor when systemd-detect-virt is absent.
func virtFromFiles(dmiVendor, dmiProduct string, hypervisorFlag, cpuinfoRead bool) string {
	if b, err := os.ReadFile("/sys/hypervisor/type"); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t
		}
	}
	dmi := strings.ToLower(dmiVendor + " " + dmiProduct)
	for _, k := range []struct{ needle, name string }{
		{"qemu", "qemu"}, {"kvm", "kvm"}, {"vmware", "vmware"},
		{"virtualbox", "oracle"}, {"innotek", "oracle"}, {"xen", "xen"},
		{"microsoft corporation virtual", "microsoft"}, {"amazon ec2", "amazon"},
		{"google compute engine", "google"}, {"parallels", "parallels"},
		{"bochs", "bochs"}, {"firecracker", "firecracker"},
	} {
		if strings.Contains(dmi, k.needle) {
			return k.name
		}
	}
	if hypervisorFlag {
		return "unknown hypervisor (cpuinfo hypervisor flag)"
	}
	if cpuinfoRead && (runtime.GOARCH == "amd64" || runtime.GOARCH == "386") {
		return "none"
	}
	return ""
}
