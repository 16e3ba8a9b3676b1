package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/nearnative/nearnative/internal/deploy"
	"github.com/nearnative/nearnative/internal/platform"
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
	ports, err := deploy.Ports(plan, p.pickOn)
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
}

func (s *site) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

func (s *site) OpenGroup(ctx context.Context, group string, members []deploy.Member) error {
	return nil
}

func (s *site) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	cpuset := s.p.opt.CPUSet
	if m.Server.CPUSet != "" {
		cpuset = m.Server.CPUSet
	}
	srv, err := s.p.start(ctx, s.trial, m.Spec, s.ports[m.Server.ID], cpuset)
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
	return []deploy.Place{{Name: "host", Kind: "host", CPUs: s.p.opt.CPUSet, Servers: s.started,
		Detail: "processes on " + s.p.listen + " with ports of their own, each in its own cgroup"}}
}

func (s *site) Close(ctx context.Context) error { return nil }

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
