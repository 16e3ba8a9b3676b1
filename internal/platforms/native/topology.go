package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
)

// Machine implements deploy.Backend.
func (p *Platform) Machine() topology.Machine {
	return topology.Machine{CPUs: deploy.HostCPUs(), Pin: p.opt.Pin}
}

// Open implements deploy.Backend: natively every server is a host process
// on the platform's address (the client host's ServerAddr) with ports of
// its own, and peers reach each other there.
func (p *Platform) Open(ctx context.Context, trial string, plan *topology.Plan) (deploy.Site, error) {
	ports, err := deploy.Ports(plan, p.pickOn())
	if err != nil {
		return nil, err
	}
	return &site{p: p, trial: trial, plan: plan, ports: ports}, nil
}

type site struct {
	p       *Platform
	trial   string
	plan    *topology.Plan
	ports   map[topology.ServerID]map[string]int
	started []string
	// shared holds the cgroups of the groups of several servers (group.go).
	shared map[string]*sharedGroup
}

func (s *site) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

// cpuset is where member m may run: its placement's CPUs, else the
// platform's.
func (s *site) cpuset(m deploy.Member) string {
	if m.Server.CPUSet != "" {
		return m.Server.CPUSet
	}
	return s.p.opt.CPUSet
}

// OpenGroup implements deploy.Site: a group of several servers (what a
// Docker platform runs in one container) gets one cgroup, as a container
// has (group.go); a group of one server, or the roles beside the driver,
// get a cgroup per server when it starts.
func (s *site) OpenGroup(ctx context.Context, group string, members []deploy.Member) error {
	if len(members) < 2 || members[0].Server.OnHost {
		return nil
	}
	var sets []string
	for _, m := range members {
		sets = append(sets, s.cpuset(m))
	}
	sg, err := s.p.openShared(s.trial, group, sets)
	if err != nil || sg == nil {
		return err
	}
	if s.shared == nil {
		s.shared = map[string]*sharedGroup{}
	}
	s.shared[group] = sg
	return nil
}

func (s *site) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	srv, err := s.p.start(ctx, s.trial, m.Spec, s.ports[m.Server.ID], s.cpuset(m), s.shared[m.Server.Group])
	if err != nil {
		return nil, err
	}
	s.started = append(s.started, m.Server.ID.Name())
	return srv, nil
}

func (s *site) PeerAddr(from, to topology.Server, port string) (string, error) {
	return deploy.JoinPort(s.p.listen, s.Port(to.ID, port)), nil
}

func (s *site) Places() []deploy.Place {
	detail := "processes on " + s.p.listen + " with ports of their own, each in its own cgroup"
	if len(s.shared) > 0 {
		detail = "processes on " + s.p.listen + " with ports of their own; the servers of a group (what a Docker platform runs in one container) share one cgroup, the others have one each"
	}
	return []deploy.Place{{Name: "host", Kind: "host", CPUs: s.p.opt.CPUSet, Servers: s.started, Detail: detail}}
}

// Close implements deploy.Site: it removes the groups' shared cgroups, whose
// servers have stopped.
func (s *site) Close(ctx context.Context) error {
	var errs []error
	for _, sg := range s.shared {
		if err := sg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	s.shared = nil
	return errors.Join(errs...)
}

// LogTail implements deploy.LogTailer.
func (s *server) LogTail(ctx context.Context, lines int) string {
	if s.log == nil {
		return ""
	}
	return tail(s.log.Name(), lines)
}

// Exited implements deploy.Exiter.
func (s *server) Exited(ctx context.Context) error {
	if s.done == nil {
		return errors.New("not started")
	}
	select {
	case <-s.done:
		return fmt.Errorf("exited (%v)", s.proc.Err())
	default:
		return nil
	}
}

// Migrations implements deploy.Scheduler: every thread of every process in
// the server's cgroup (or of its process when it has none).
func (s *server) Migrations(ctx context.Context) (int64, error) {
	if s.shared != nil && s.cmd != nil && s.cmd.Process != nil {
		return treeMigrations(s.cmd.Process.Pid)
	}
	var pids []int
	if s.group != nil {
		pids = s.group.PIDs()
	} else if s.cmd != nil && s.cmd.Process != nil {
		pids = []int{s.cmd.Process.Pid}
	}
	var n int64
	for _, pid := range pids {
		m, err := sysinfo.ProcMigrations(pid)
		if err != nil {
			continue // exited between the listing and the read
		}
		n += m
	}
	return n, nil
}
