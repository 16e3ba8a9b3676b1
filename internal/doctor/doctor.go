// Package doctor checks that this machine can run nearnative's built-in
// studies: root, the Docker engine, the workload image and its versions
// against the host's, the workload tools, KVM, cgroups, CPUs and memory, and
// the container runtimes beside runc (gVisor, crun, Podman, LXC). Each
// failed check carries the command that fixes it.
package doctor

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// Status of a check.
type Status string

// Statuses.
const (
	OK   Status = "ok"
	Warn Status = "warn" // something later workloads need, or a difference worth knowing
	Fail Status = "FAIL" // the built-in studies cannot run
)

// Check is one finding.
type Check struct {
	Name   string
	Status Status
	Detail string
	Fix    string // a command that fixes it
}

// Options tune the checks.
type Options struct {
	// Image overrides the workload image (a user's pulled image).
	Image string
	// SkipVM skips the QEMU boot probe (it takes seconds).
	SkipVM bool
}

// future are tools installed for workloads still to come (OLTP, Web 2.0,
// Redis scale-out): missing, they only warn. Every other known tool is used
// by a built-in study and must be there.
var future = map[string]bool{"postgres": true, "pgbench": true, "nginx": true, "haproxy": true, "nutcracker": true}

// Run performs every check.
func Run(ctx context.Context, o Options) []Check {
	var cs []Check
	add := func(c Check) { cs = append(cs, c) }
	if os.Geteuid() == 0 {
		add(Check{Name: "root", Status: OK, Detail: "running as root"})
	} else {
		add(Check{Name: "root", Status: Fail, Detail: "not root: containers, cgroups and cleanup need root", Fix: "sudo nearnative ..."})
	}

	eng, err := docker.Connect(ctx)
	if err != nil {
		add(Check{Name: "docker", Status: Fail, Detail: err.Error(), Fix: "make setup   (or: dockerd >/var/log/dockerd.log 2>&1 &)"})
	} else {
		defer eng.Close()
		info, err := eng.Info(ctx)
		if err != nil {
			add(Check{Name: "docker", Status: Fail, Detail: err.Error(), Fix: "make setup"})
		} else {
			add(Check{Name: "docker", Status: OK, Detail: fmt.Sprintf("engine %s, API %s, storage %s, cgroup driver %s", info.Version, info.APIVersion, info.StorageDriver, info.CgroupDriver)})
		}
		cs = append(cs, imageChecks(ctx, eng, o)...)
	}

	cs = append(cs, kubernetesChecks(ctx, eng, o)...)
	if err == nil {
		cs = append(cs, runtimeChecks(ctx, eng, o)...)
	}

	tools := sysinfo.ToolVersions(ctx)
	for _, t := range tools {
		c := Check{Name: "tool " + t.Name, Status: OK, Detail: strings.TrimSpace(t.Package + " " + t.Version)}
		if !t.Installed() {
			c.Status, c.Detail, c.Fix = Warn, t.Err, "make setup   (or: apt-get install -y "+specPackage(t.Name)+")"
			if !future[t.Name] {
				c.Status = Fail
			}
		}
		add(c)
	}

	if cg, err := sysinfo.CgroupVersion(); err == nil {
		add(Check{Name: "cgroups", Status: OK, Detail: cg})
	} else {
		add(Check{Name: "cgroups", Status: Fail, Detail: err.Error()})
	}
	mem, _ := sysinfo.MemoryBytes()
	numa, _ := sysinfo.NUMANodes()
	cpus := sysinfo.CPUCount()
	c := Check{Name: "machine", Status: OK, Detail: fmt.Sprintf("%d CPUs, %d NUMA node(s), %.1f GiB memory", cpus, numa, float64(mem)/(1<<30))}
	if cpus < 2 {
		c.Status, c.Detail = Warn, c.Detail+": with one CPU the load generator and the server share it; results mostly measure that"
	}
	add(c)

	if o.SkipVM {
		add(Check{Name: "vm acceleration", Status: Warn, Detail: "not probed (--skip-vm)"})
	} else {
		r, err := vmprobe.Probe(ctx)
		switch {
		case err != nil:
			add(Check{Name: "vm acceleration", Status: Warn, Detail: err.Error(), Fix: "apt-get install -y qemu-system-x86; scripts/vm-kernel.sh (make setup runs it) unpacks the guest kernel into nearnative's state directory"})
		case r.Accel == "kvm":
			add(Check{Name: "vm acceleration", Status: OK, Detail: fmt.Sprintf("KVM: a guest booted in %v", r.Boot.Round(10e6))})
		default:
			add(Check{Name: "vm acceleration", Status: Warn, Detail: fmt.Sprintf("TCG only (guest booted in %v): %s; VM results will be marked emulated, not comparable", r.Boot.Round(10e6), r.KVMReason)})
		}
	}
	return cs
}

func specPackage(name string) string {
	for _, s := range sysinfo.KnownTools {
		if s.Name == name {
			return s.Package
		}
	}
	return name
}

func imageChecks(ctx context.Context, eng *docker.Daemon, o Options) []Check {
	cfg, err := image.DefaultConfig()
	if err != nil {
		return []Check{{Name: "image", Status: Fail, Detail: err.Error()}}
	}
	cfg.Ref = o.Image
	ref, present, err := image.Current(ctx, eng.API(), cfg)
	if err != nil {
		return []Check{{Name: "image", Status: Fail, Detail: err.Error(), Fix: "nearnative image build"}}
	}
	if !present {
		c := Check{Name: "image", Status: Fail, Detail: ref + " is not in the Docker engine (or the host's package versions changed since it was built)", Fix: "nearnative image build"}
		if stale, _ := image.Stale(ctx, eng.API(), ref); len(stale) > 0 {
			c.Detail += fmt.Sprintf("; %d older workload image(s) exist", len(stale))
		}
		return []Check{c}
	}
	cs := []Check{{Name: "image", Status: OK, Detail: ref + " present and current"}}
	imgV, err := image.Versions(ctx, eng.API(), ref)
	if err != nil {
		return append(cs, Check{Name: "image versions", Status: Warn, Detail: err.Error()})
	}
	// Every package the image has, not only the workload packages: the
	// server binary of postgresql, for one, is in a dependency.
	hostV, err := image.HostVersions(ctx, image.Names(imgV))
	if err != nil {
		return append(cs, Check{Name: "image versions", Status: Warn, Detail: err.Error()})
	}
	var shared []image.Mismatch
	for _, m := range image.Compare(hostV, imgV) {
		if m.Host != "" { // packages the host lacks are not run natively
			shared = append(shared, m)
		}
	}
	var lines []string
	pkgs := append([]string{}, image.DefaultPackages...)
	sort.Strings(pkgs)
	for _, p := range pkgs {
		mark := "="
		if hostV[p] != imgV[p] {
			mark = "!="
		}
		lines = append(lines, fmt.Sprintf("%-13s host %-24s %-2s image %s", p, orNone(hostV[p]), mark, orNone(imgV[p])))
	}
	c := Check{Name: "image versions", Status: OK, Detail: fmt.Sprintf("host and image run the same versions of all %d shared packages:\n      %s", countShared(hostV), strings.Join(lines, "\n      "))}
	if len(shared) > 0 {
		var names []string
		for _, m := range shared {
			names = append(names, m.String())
		}
		c.Status = Warn
		c.Detail = fmt.Sprintf("%d package(s) differ between host and image, so native and container do not run the same binaries: %s\n      %s",
			len(shared), strings.Join(names, "; "), strings.Join(lines, "\n      "))
		c.Fix = "make setup   (upgrades the host's workload packages; or: nearnative image build --rebuild)"
	}
	return append(cs, c)
}

func countShared(host map[string]string) int {
	n := 0
	for _, v := range host {
		if v != "" {
			n++
		}
	}
	return n
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// Healthy reports whether no check failed.
func Healthy(cs []Check) bool {
	for _, c := range cs {
		if c.Status == Fail {
			return false
		}
	}
	return true
}
