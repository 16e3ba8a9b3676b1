package remote

import (
	"context"
	"fmt"
	"sort"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// Machine implements deploy.Backend: the CPUs of the host the first role
// is placed on (every sut host of a run is planned alike).
func (pl *Platform) Machine() topology.Machine {
	return topology.Machine{CPUs: pl.place("").CPUs(), Pin: pl.opt.Pin}
}

// Open implements deploy.Backend: every server runs on the sut host its
// role is placed on, with ports free there; a peer reaches it at that
// host's address.
func (pl *Platform) Open(ctx context.Context, trial string, plan *topology.Plan) (deploy.Site, error) {
	s := &site{p: pl, trial: trial, ports: map[topology.ServerID]map[string]int{}, hosts: map[topology.ServerID]on{}, started: map[string][]string{}}
	need := map[string]int{}
	byHost := map[string]on{}
	for _, srv := range plan.Servers {
		o := on{pl, pl.place(srv.ID.Role)}
		s.hosts[srv.ID] = o
		byHost[o.host.Name()] = o
		need[o.host.Name()] += len(srv.Ports)
	}
	free := map[string][]int{}
	for name, n := range need {
		ps, err := byHost[name].freePorts(ctx, n)
		if err != nil {
			return nil, err
		}
		free[name] = ps
	}
	for _, srv := range plan.Servers {
		name := s.hosts[srv.ID].host.Name()
		m := map[string]int{}
		for _, port := range srv.Ports {
			m[port], free[name] = free[name][0], free[name][1:]
		}
		s.ports[srv.ID] = m
	}
	return s, nil
}

type site struct {
	p       *Platform
	trial   string
	ports   map[topology.ServerID]map[string]int
	hosts   map[topology.ServerID]on
	started map[string][]string // host -> servers
}

func (s *site) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

// OpenGroup implements deploy.Site: a group is nothing of its own on a
// remote host (each server is a process of the agent).
func (s *site) OpenGroup(context.Context, string, []deploy.Member) error { return nil }

func (s *site) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	o := s.hosts[m.Server.ID]
	cpuset := m.Server.CPUSet
	if cpuset == "" {
		cpuset = s.p.opt.CPUSet
	}
	srv, err := o.start(ctx, s.trial, m.Spec, s.ports[m.Server.ID], cpuset)
	if err != nil {
		return nil, err
	}
	s.started[o.host.Name()] = append(s.started[o.host.Name()], m.Server.ID.Name())
	return srv, nil
}

// PeerAddr implements deploy.Site: the address of the host the peer is
// placed on, and its port there.
func (s *site) PeerAddr(from, to topology.Server, port string) (string, error) {
	o, ok := s.hosts[to.ID]
	if !ok {
		return "", fmt.Errorf("no host for %s", to.ID.Name())
	}
	return deploy.JoinPort(o.host.Addr().String(), s.Port(to.ID, port)), nil
}

func (s *site) Places() []deploy.Place {
	var names []string
	for n := range s.started {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []deploy.Place
	for _, n := range names {
		var addr string
		for _, o := range s.hosts {
			if o.host.Name() == n {
				addr = o.host.Addr().String()
				break
			}
		}
		out = append(out, deploy.Place{Name: n, Kind: s.p.kind, CPUs: s.p.opt.CPUSet, Servers: s.started[n],
			Detail: "processes of nearnative's agent on " + s.p.kind + " " + n + ", listening on " + addr + " with ports of their own"})
	}
	return out
}

func (s *site) Close(context.Context) error { return nil }
