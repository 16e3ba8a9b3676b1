package native

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
)

// A topology group of several servers (the servers of one instance under
// container-per-instance, roles that share a Group) is one container on the
// Docker platforms: one cgroup in every controller, so the scheduler sees the
// group as one entity whose tasks compete with each other, a CPU quota or a
// memory limit covers the group together, and the CPU set is the union of
// the members' (each member pinned within it, by taskset, when its own set
// is narrower). Natively such a group gets one cgroup the same way, so that
// a native row differs from a container row by what the container adds, not
// by how the scheduler groups the servers: with a cgroup per server, a
// saturated machine gives each server (Apache, PostgreSQL) an equal share
// at its level, while in the container the instance's processes compete one
// by one.
//
// Each member's CPU time and migrations are then read from its process tree
// (its living workers and what they have reaped), as the supervisor in a
// container-per-instance container reads them: the shared cgroup's counter
// is the group's.

// sharedGroup is the cgroup the servers of one topology group share.
type sharedGroup struct {
	name   string
	cpuset string // the group's: the union of its members' sets when every member has one
	g      *cgroup.Group
}

// openShared creates the cgroup of a topology group whose members run
// confined to cpusets (one per member, "" for an unconfined one). It
// returns nil, without error, where native servers get no cgroup at all
// (not root, no limits).
func (p *Platform) openShared(trial, group string, cpusets []string) (*sharedGroup, error) {
	sg := &sharedGroup{name: trial + "-" + group, cpuset: topology.GroupCPUs(cpusets)}
	lim := cgroup.Limits{CPUSet: sg.cpuset, CPUs: p.opt.CPUs, MemoryBytes: p.opt.MemoryBytes()}
	if lim.Empty() && os.Geteuid() != 0 {
		return nil, nil
	}
	g, err := cgroup.New(p.env.Run, sg.name, lim)
	if err != nil {
		return nil, fmt.Errorf("the cgroup of group %s: %w", group, err)
	}
	sg.g = g
	return sg, nil
}

// pin confines argv to cpuset by taskset when the group's cgroup does not
// already confine it exactly so (the supervisor in a container does the same).
func (sg *sharedGroup) pin(argv []string, cpuset string) ([]string, error) {
	if cpuset == "" || cpuset == sg.cpuset {
		return argv, nil
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("pinning %s to CPUs %s: %w", argv[0], cpuset, err)
	}
	return append([]string{ts, "-c", cpuset}, argv...), nil
}

// remove removes the group's cgroup (and any process left in it); the site
// calls it when the group's servers have stopped.
func (sg *sharedGroup) remove() error {
	if sg == nil {
		return nil
	}
	return sg.g.Remove()
}

// treeSource says how a member of a shared group is measured.
func (sg *sharedGroup) treeSource() string {
	return fmt.Sprintf("the server's process tree (its living workers and what they have reaped), read from /proc; it shares cgroup %s/%s with the other servers of its group, as they share a container on the Docker platforms",
		cgroup.Parent, sg.name)
}

// treeCPU is the CPU time of a shared group's member: its process tree.
func treeCPU(pid int) (time.Duration, error) {
	return sysinfo.TreeCPU("/proc", pid)
}

// treeMigrations is the migration count of a shared group's member: its
// process tree's.
func treeMigrations(pid int) (int64, error) {
	s, err := sysinfo.TreeSched(pid)
	return s.Migrations, err
}
