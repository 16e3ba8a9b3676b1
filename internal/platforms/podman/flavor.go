package podman

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Podman's networks and interfaces (its defaults in 4.x).
const (
	rootfulNetwork = "podman" // the default network, a bridge
	rootlessMode   = "slirp4netns"
)

// rootfulBridge is the host interface of the default network with the
// network backend the service reports (Podman's default names; podman0,
// netavark's, when the service does not say).
func rootfulBridge(backend string) string {
	if backend == "cni" {
		return "cni-podman0"
	}
	return "podman0"
}

// publishVia says what forwards a rootful container's published port
// with the service's network backend.
func publishVia(backend string) string {
	switch backend {
	case "netavark":
		return "netavark's iptables DNAT"
	case "cni":
		return "the CNI portmap plugin's iptables DNAT"
	}
	return "Podman's port publishing (its network backend unreported)"
}

// slirpNet is the subnet slirp4netns gives a rootless container; the
// container's connections from rootlessport come from it.
var slirpNet = netip.MustParsePrefix("10.0.2.0/24")

// conmonNPROC is the process limit Podman's conmon runs with (podman 4.3.1
// lowers its own and conmon's RLIMIT_NPROC to it): a container may not
// ask for more without CAP_SYS_RESOURCE.
const conmonNPROC = 32768

// RootfulFlavor says where a rootful Podman service named name (for
// descriptions: "Podman 4.3.1") differs from dockerd, with the network
// backend it reports ("netavark", "cni" or "").
func RootfulFlavor(name, backend string) docker.Flavor {
	return docker.Flavor{
		Name:       name,
		Network:    rootfulNetwork,
		Bridge:     rootfulBridge(backend),
		PublishVia: publishVia(backend),
		Ulimits:    ulimits(),
		CgroupDirs: func(id string) []string {
			return []string{"libpod_parent/libpod-" + id, "machine.slice/libpod-" + id + ".scope"}
		},
	}
}

// flavor says where Podman's service differs from dockerd.
func (s *Service) flavor() docker.Flavor {
	f := RootfulFlavor(s.describe(), s.backend)
	if s.rootless {
		f.NetworkMode = rootlessMode
		f.PublishVia = "rootlessport, Podman's rootlesskit port handler, into the container's slirp4netns namespace"
		f.From = []netip.Prefix{slirpNet}
		f.CgroupDirs = nil
		f.LimitsByTrack = true
		f.Track = s.track
		f.MapOwner = s.mapOwner
	}
	return f
}

var (
	versionOnce sync.Once
	version     string
)

// podmanVersion is the installed Podman's version ("" when it does not
// say), asked once.
func podmanVersion() string {
	versionOnce.Do(func() {
		out, err := exec.Command("podman", "version", "--format", "{{.Client.Version}}").Output()
		if err == nil {
			version = strings.TrimSpace(string(out))
		}
	})
	return version
}

// describe names the engine for descriptions: "Podman 4.3.1", "Podman
// 4.3.1, rootless as nearnative-rootless".
func (s *Service) describe() string {
	d := "Podman"
	if v := podmanVersion(); v != "" {
		d += " " + v
	}
	if s.rootless {
		d += ", rootless as " + s.user.Username
	}
	return d
}

// ulimits are the open-file and process limits every container gets: the
// ones nearnative itself runs with (which Docker's containers inherit from
// dockerd), the process limit no higher than conmon's. Podman would
// otherwise ask for limits above the hard limits of root without
// CAP_SYS_RESOURCE, and crun's setrlimit fails.
func ulimits() []*container.Ulimit {
	var nofile, nproc unix.Rlimit
	var out []*container.Ulimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile) == nil {
		out = append(out, &container.Ulimit{Name: "nofile", Soft: int64(nofile.Max), Hard: int64(nofile.Max)})
	}
	if unix.Getrlimit(unix.RLIMIT_NPROC, &nproc) == nil {
		n := min(int64(nproc.Max), conmonNPROC)
		out = append(out, &container.Ulimit{Name: "nproc", Soft: n, Hard: n})
	}
	return out
}

// mapOwner maps a user of a rootless container to the host's ids: the
// container's root is the rootless user, its uid n the n-th id of the
// user's subordinate range.
func (s *Service) mapOwner(uid, gid int) (int, int) {
	return mapID(uid, s.uid, s.subUID), mapID(gid, s.gid, s.subGID)
}

// mapID maps id of a user namespace whose 0 is self and whose 1.. are
// sub[0]...
func mapID(id, self int, sub [2]int) int {
	if id == 0 {
		return self
	}
	if id-1 < sub[1] {
		return sub[0] + id - 1
	}
	return 65534 // unmapped: the overflow id
}

// tracker accounts for a rootless container's CPU: on cgroup v1 rootless
// Podman gives a container no cgroup of its own, so nearnative makes one
// under nearnative/<run> (with the platform's CPU set, quota and memory
// limit) and moves the container's processes into it as soon as it runs;
// what they fork later is born there.
type tracker struct {
	g       *cgroup.Group
	c       docker.Container
	sandbox uint64 // inode of the container's network namespace
}

// track implements docker.Flavor.Track for rootless containers.
func (s *Service) track(ctx context.Context, c docker.Container) (docker.Tracker, error) {
	if c.PID <= 0 {
		return nil, fmt.Errorf("rootless container %s has no process", c.Name)
	}
	g, err := cgroup.New(s.run, "podman-"+c.Name, cgroup.Limits{CPUSet: c.CPUSet, CPUs: c.CPUs, MemoryBytes: c.Memory})
	if err != nil {
		return nil, err
	}
	t := &tracker{g: g, c: c}
	// Twice: a process forked between the scan and the move is caught by
	// the second scan.
	for i := 0; i < 2; i++ {
		for _, pid := range descendants("/proc", c.PID) {
			if err := g.Add(pid); err != nil {
				g.Remove()
				return nil, fmt.Errorf("moving the processes of rootless container %s into %s: %w", c.Name, g.CPUSource(), err)
			}
		}
	}
	// The namespace's inode as the container's first process holds it:
	// SandboxKey is a bind mount in the rootless user's mount namespace,
	// a plain file from here.
	var st unix.Stat_t
	if unix.Stat(filepath.Join("/proc", strconv.Itoa(c.PID), "ns", "net"), &st) == nil {
		t.sandbox = st.Ino
	}
	return t, nil
}

func (t *tracker) CPUTime(ctx context.Context) (time.Duration, error) { return t.g.CPUUsage() }

func (t *tracker) CPUSource() string {
	return "the cgroup nearnative made for the rootless container (rootless Podman gives it none on cgroup v1), its processes moved in when it started: " + t.g.CPUSource()
}

// OverheadCPUTime is the CPU time of the helpers that carry the
// container's traffic: its slirp4netns, and the rootlessport pair that
// forwards its published ports (the child runs in the container's network
// namespace, the parent listens on the host).
func (t *tracker) OverheadCPUTime(ctx context.Context) (time.Duration, error) {
	return helperCPU("/proc", t.c.SandboxKey, t.sandbox), nil
}

// Release removes the container's cgroup, and the run's parent groups once
// they are empty (another platform of the run may still use them).
func (t *tracker) Release() error {
	err := t.g.Remove()
	for _, d := range t.g.Dirs {
		os.Remove(filepath.Dir(d))
	}
	return err
}

// helperCPU sums the CPU time of the slirp4netns whose argv names the
// network namespace at sandboxKey and of the rootlessport processes in
// that namespace (inode ns) and their parents.
func helperCPU(procRoot, sandboxKey string, ns uint64) time.Duration {
	var sum time.Duration
	counted := map[int]bool{}
	add := func(pid int) {
		if counted[pid] {
			return
		}
		if st, err := sysinfo.ReadProcStatAt(procRoot, pid); err == nil {
			counted[pid] = true
			sum += st.CPU()
		}
	}
	for _, p := range sysinfo.Procs(procRoot, "slirp4netns", "rootlessport", "exe") {
		switch {
		case p.Comm == "slirp4netns" && sandboxKey != "" && slices.Contains(p.Args, sandboxKey):
			add(p.PID)
		case ns != 0 && (p.Comm == "rootlessport" || (len(p.Args) > 0 && p.Args[0] == "rootlessport-child")):
			var st unix.Stat_t
			if unix.Stat(filepath.Join(procRoot, strconv.Itoa(p.PID), "ns", "net"), &st) != nil || st.Ino != ns {
				continue
			}
			add(p.PID)
			if ps, err := sysinfo.ReadProcStatAt(procRoot, p.PID); err == nil && ps.PPID > 1 {
				add(ps.PPID)
			}
		}
	}
	return sum
}

// descendants lists pid and every living descendant under procRoot.
func descendants(procRoot string, pid int) []int {
	children := map[int][]int{}
	paths, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*"))
	for _, p := range paths {
		n, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if st, err := sysinfo.ReadProcStatAt(procRoot, n); err == nil {
			children[st.PPID] = append(children[st.PPID], n)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	if _, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(pid))); err != nil {
		return nil
	}
	return out
}
