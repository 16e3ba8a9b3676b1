// Package cgroup places native server processes into cgroups that nearnative
// creates under a "nearnative/<run>" parent, so that a CPU set, a CPU quota
// and a memory limit apply to them as Docker applies them to containers. It
// supports the v1 hierarchy (one mount per controller) and the unified v2
// hierarchy, choosing v1 controllers when both are mounted (a hybrid host,
// where Docker uses v1 too).
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// Root is where cgroup file systems are mounted.
var Root = "/sys/fs/cgroup"

// Parent is the directory nearnative creates in each hierarchy.
const Parent = "nearnative"

// Limits are the resource limits of one group.
type Limits struct {
	CPUSet      string  // "0-1"
	CPUs        float64 // quota in CPUs
	MemoryBytes int64
}

// Empty reports whether no limit is set.
func (l Limits) Empty() bool { return l.CPUSet == "" && l.CPUs == 0 && l.MemoryBytes == 0 }

// Group is a created cgroup: one directory per controller on v1, one on v2.
type Group struct {
	// Dirs are the group's directories; a process joins by writing its PID
	// to Dirs[i]/cgroup.procs.
	Dirs []string
}

// IsV2 reports whether the unified hierarchy is mounted at Root itself.
func IsV2() bool {
	_, err := os.Stat(filepath.Join(Root, "cgroup.controllers"))
	return err == nil
}

// New creates the group run/name with the given limits. With no limits the
// group still tracks the processes (cpuacct on v1), so that every
// descendant, even one that started its own session, can be found and
// killed.
func New(run runid.ID, name string, l Limits) (*Group, error) {
	g := &Group{}
	if IsV2() {
		if err := g.newV2(run, name, l); err != nil {
			g.Remove()
			return nil, err
		}
		return g, nil
	}
	if err := g.newV1(run, name, l); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

func write(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup: writing %q to %s: %w", value, path, err)
	}
	return nil
}

func (g *Group) mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup: creating %s: %w (nearnative needs root for CPU and memory limits on the native platform)", dir, err)
	}
	g.Dirs = append(g.Dirs, dir)
	return nil
}

func (g *Group) newV1(run runid.ID, name string, l Limits) error {
	rel := filepath.Join(Parent, string(run), name)
	if err := g.mkdir(filepath.Join(Root, "cpuacct", rel)); err != nil {
		return err
	}
	if l.CPUSet != "" {
		base := filepath.Join(Root, "cpuset")
		// cpuset v1 requires cpus and mems on every level before a task joins.
		for _, lvl := range []string{Parent, filepath.Join(Parent, string(run))} {
			d := filepath.Join(base, lvl)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("cgroup: creating %s: %w", d, err)
			}
			if err := inherit(d, "cpuset.cpus"); err != nil {
				return err
			}
			if err := inherit(d, "cpuset.mems"); err != nil {
				return err
			}
		}
		d := filepath.Join(base, rel)
		if err := g.mkdir(d); err != nil {
			return err
		}
		if err := inherit(d, "cpuset.mems"); err != nil {
			return err
		}
		if err := write(filepath.Join(d, "cpuset.cpus"), l.CPUSet); err != nil {
			return err
		}
	}
	// Always a cpu group of its own, quota or not: Docker gives every
	// container one, and CFS group scheduling treats a group differently
	// from a task in the root group under contention, so native and its
	// variants must be grouped alike for their comparison to be fair.
	d := filepath.Join(Root, "cpu", rel)
	if err := g.mkdir(d); err != nil {
		return err
	}
	if l.CPUs > 0 {
		if err := write(filepath.Join(d, "cpu.cfs_period_us"), "100000"); err != nil {
			return err
		}
		if err := write(filepath.Join(d, "cpu.cfs_quota_us"), strconv.Itoa(quotaUS(l.CPUs))); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		d := filepath.Join(Root, "memory", rel)
		if err := g.mkdir(d); err != nil {
			return err
		}
		if err := write(filepath.Join(d, "memory.limit_in_bytes"), strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
	}
	return nil
}

// quotaUS is the CFS quota in microseconds per 100 ms period for cpus CPUs,
// rounded: truncating would turn 0.29 CPUs into 28999 us.
func quotaUS(cpus float64) int { return int(math.Round(cpus * 100000)) }

// inherit copies a cpuset file from the parent directory when it is empty.
func inherit(dir, file string) error {
	cur, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return write(filepath.Join(dir, file), strings.TrimSpace(string(parent)))
}

func (g *Group) newV2(run runid.ID, name string, l Limits) error {
	// +cpu always: a group of its own for the scheduler, as a container has.
	ctrls := []string{"+cpu"}
	if l.CPUSet != "" {
		ctrls = append(ctrls, "+cpuset")
	}
	if l.MemoryBytes > 0 {
		ctrls = append(ctrls, "+memory")
	}
	enable := strings.Join(ctrls, " ")
	levels := []string{Root, filepath.Join(Root, Parent), filepath.Join(Root, Parent, string(run))}
	for i, d := range levels {
		if i > 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("cgroup: creating %s: %w", d, err)
			}
		}
		if err := write(filepath.Join(d, "cgroup.subtree_control"), enable); err != nil {
			return err
		}
	}
	d := filepath.Join(levels[2], name)
	if err := g.mkdir(d); err != nil {
		return err
	}
	if l.CPUSet != "" {
		if err := write(filepath.Join(d, "cpuset.cpus"), l.CPUSet); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if err := write(filepath.Join(d, "cpu.max"), fmt.Sprintf("%d 100000", quotaUS(l.CPUs))); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		if err := write(filepath.Join(d, "memory.max"), strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
	}
	return nil
}

// Wrap returns an argv that joins the group before exec'ing argv, so the
// limits apply from the first instruction: the shell writes its own PID into
// every cgroup.procs and then replaces itself with the server.
func (g *Group) Wrap(argv []string) []string {
	if g == nil || len(g.Dirs) == 0 {
		return argv
	}
	var procs []string
	for _, d := range g.Dirs {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	script := `for f in ` + strings.Join(procs, " ") + `; do echo $$ > "$f" || exit 126; done; exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "nearnative-cgroup"}, argv...)
}

// Add moves a running process (all its threads) into the group; the
// children it forks later are born there. A process that has exited
// meanwhile is not an error.
func (g *Group) Add(pid int) error {
	for _, d := range g.Dirs {
		err := write(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid))
		if err != nil && errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PIDs lists the processes in the group.
func (g *Group) PIDs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range g.Dirs {
		for _, p := range readPIDs(d) {
			if !seen[p] {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	return pids
}

func readPIDs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Remove kills any process left in the group and removes its directories.
// A group already gone is not an error.
func (g *Group) Remove() error {
	if g == nil {
		return nil
	}
	var errs []error
	for _, d := range g.Dirs {
		if err := removeDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeDir(d string) error {
	for i := 0; i < 50; i++ {
		pids := readPIDs(d)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("cgroup: %s still busy after killing its processes", d)
}

// Leftover is a run's cgroup parent directory found on the system.
type Leftover struct {
	Run runid.ID
	Dir string
}

// Leftovers lists nearnative/<run> directories in every hierarchy (for one run
// when run is non-empty): on v1 every mounted hierarchy, since LXC makes a
// container's groups (under nearnative/<run>, see package platforms/lxc) in
// each of them.
func Leftovers(run runid.ID) []Leftover {
	var out []Leftover
	parents := []string{filepath.Join(Root, Parent)}
	if !IsV2() {
		parents = nil
		ents, _ := os.ReadDir(Root)
		for _, e := range ents {
			if e.IsDir() {
				parents = append(parents, filepath.Join(Root, e.Name(), Parent))
			}
		}
	}
	for _, p := range parents {
		ents, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			id, err := runid.Parse(e.Name())
			if err != nil || (run != "" && id != run) {
				continue
			}
			out = append(out, Leftover{Run: id, Dir: filepath.Join(p, e.Name())})
		}
	}
	return out
}

// RemoveTree kills every process under dir and removes dir and its children,
// deepest first.
func RemoveTree(dir string) error {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := removeDir(dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CPUUsage returns the CPU time (user and system, every thread) that the
// group's processes have used since it was made, exited ones included: from
// cpuacct.usage on v1, from usage_usec in cpu.stat on v2. It is the same
// accounting Docker's engine reports for a container.
func (g *Group) CPUUsage() (time.Duration, error) {
	dir, v2, err := g.cpuDir()
	if err != nil {
		return 0, err
	}
	return readUsage(dir, v2)
}

// readUsage reads the CPU time accounted in the cgroup directory dir:
// cpuacct.usage (nanoseconds) on v1, usage_usec of cpu.stat on v2.
func readUsage(dir string, v2 bool) (time.Duration, error) {
	if !v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			return 0, fmt.Errorf("cgroup: reading CPU usage: %w", err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && ns < 0 {
			err = fmt.Errorf("negative usage %d", ns)
		}
		if err != nil {
			return 0, fmt.Errorf("cgroup: %s/cpuacct.usage: %w", dir, err)
		}
		return time.Duration(ns), nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("cgroup: reading CPU usage: %w", err)
	}
	us, err := ParseCPUStatUsage(string(b))
	if err == nil && us < 0 {
		err = fmt.Errorf("negative usage_usec %d", us)
	}
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s/cpu.stat: %w", dir, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// v1CPUMounts are the names under which a v1 host mounts the cpuacct
// controller (alone, or joined with cpu in either order).
var v1CPUMounts = []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"}

// UsageAt reads the CPU time accounted in a cgroup that another manager
// made (a container engine's docker/<id>, kubelet's kubepods/...): rel is
// its path relative to each hierarchy of the cgroup file systems mounted at
// root. It reads the v1 cpuacct controller under any of its mount names,
// else the v2 cpu.stat at root or, on a hybrid host, at root/unified.
// found is false when no hierarchy has the cgroup.
func UsageAt(root, rel string) (d time.Duration, found bool, err error) {
	for _, m := range v1CPUMounts {
		dir := filepath.Join(root, m, rel)
		if _, err := os.Stat(filepath.Join(dir, "cpuacct.usage")); err == nil {
			d, err := readUsage(dir, false)
			return d, true, err
		}
	}
	for _, base := range []string{filepath.Join(root, "unified"), root} {
		dir := filepath.Join(base, rel)
		if _, err := os.Stat(filepath.Join(dir, "cpu.stat")); err == nil {
			d, err := readUsage(dir, true)
			return d, true, err
		}
	}
	return 0, false, nil
}

// CPUSource says where CPUUsage reads, for the record: "cgroup v1 cpuacct
// nearnative/RUN/NAME" or "cgroup v2 cpu.stat nearnative/RUN/NAME".
func (g *Group) CPUSource() string {
	dir, v2, err := g.cpuDir()
	if err != nil {
		return "no CPU accounting group"
	}
	if v2 {
		return "cgroup v2 cpu.stat " + strings.TrimPrefix(dir, Root+"/")
	}
	return "cgroup v1 cpuacct " + strings.TrimPrefix(dir, filepath.Join(Root, "cpuacct")+"/")
}

// cpuDir is the group directory that accounts CPU time and whether it is v2.
func (g *Group) cpuDir() (string, bool, error) {
	if g == nil {
		return "", false, errors.New("cgroup: no group")
	}
	acct := filepath.Join(Root, "cpuacct") + "/"
	for _, d := range g.Dirs {
		if strings.HasPrefix(d, acct) {
			return d, false, nil
		}
	}
	if len(g.Dirs) == 1 && IsV2() {
		return g.Dirs[0], true, nil
	}
	return "", false, errors.New("cgroup: the group has no CPU accounting directory")
}

// ParseCPUStatUsage returns usage_usec from the text of a v2 cpu.stat file.
func ParseCPUStatUsage(text string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("usage_usec %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, errors.New("no usage_usec line")
}
