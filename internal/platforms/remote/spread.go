package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// spread is a topology whose Docker servers are placed on several sut
// hosts: one site per host, on that host's engine, each opened with the
// whole plan (it starts only the servers of its host).
//
// A server reaches a peer on its own host as it would on one host (the
// run's bridge, or 127.0.0.1 in one container); a peer on another host at
// that host's address: the port published there (docker-nat; docker-proxy
// with the run's rule that takes it to docker-proxy) or listened on there
// (docker-host). So a role that a role on another host names in After is
// published as the entry roles are; the connection leaves its container's
// host masqueraded by Docker, as any container's outgoing connection does.
type spread struct {
	d       *Docker
	hostOf  map[topology.ServerID]DockerHost
	sites   map[string]deploy.Site // by host name
	order   []string
	exposed map[string]bool // roles reached from another host
}

// openSpread opens one site per host of hosts.
func (d *Docker) openSpread(ctx context.Context, trial string, plan *topology.Plan, hostOf map[topology.ServerID]DockerHost, hosts []DockerHost) (_ deploy.Site, err error) {
	s := &spread{d: d, hostOf: hostOf, sites: map[string]deploy.Site{}, exposed: exposedRoles(plan, func(role string) string { return d.place(role).Name() })}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close(context.WithoutCancel(ctx)))
		}
	}()
	for _, h := range hosts {
		site, err := d.openOn(ctx, h, trial, s.planFor(plan))
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name(), err)
		}
		s.sites[h.Name()] = site
		s.order = append(s.order, h.Name())
	}
	return s, nil
}

// exposedRoles are the roles of plan that a role placed on another host
// names in After (hostOf names a role's host).
func exposedRoles(plan *topology.Plan, hostOf func(role string) string) map[string]bool {
	out := map[string]bool{}
	for _, r := range plan.Topology.Roles {
		if r.OnHost {
			continue
		}
		for _, a := range r.After {
			if ar, ok := plan.Topology.Role(a); ok && !ar.OnHost && hostOf(a) != hostOf(r.Name) {
				out[a] = true
			}
		}
	}
	return out
}

// planFor is plan with the exposed roles' servers marked Entry, which the
// Docker sites publish on their host's address.
func (s *spread) planFor(plan *topology.Plan) *topology.Plan {
	cp := *plan
	cp.Servers = make([]topology.Server, len(plan.Servers))
	for i, srv := range plan.Servers {
		cp.Servers[i] = s.server(srv)
	}
	return &cp
}

// server is srv as its host's site sees it: Entry when its role is reached
// from another host.
func (s *spread) server(srv topology.Server) topology.Server {
	if s.exposed[srv.ID.Role] {
		srv.Entry = true
	}
	return srv
}

func (s *spread) member(m deploy.Member) deploy.Member {
	m.Server = s.server(m.Server)
	return m
}

func (s *spread) siteOf(id topology.ServerID) (deploy.Site, DockerHost, error) {
	h := s.hostOf[id]
	if h == nil {
		return nil, nil, fmt.Errorf("%s: no sut host for %s", s.d.name, id.Name())
	}
	site := s.sites[h.Name()]
	if site == nil {
		return nil, nil, fmt.Errorf("%s: host %s of %s has no site open", s.d.name, h.Name(), id.Name())
	}
	return site, h, nil
}

// Port is the port a server listens on, chosen free on its host.
func (s *spread) Port(id topology.ServerID, port string) int {
	site, _, err := s.siteOf(id)
	if err != nil {
		return 0
	}
	return site.Port(id, port)
}

// OpenGroup opens the group's container on its members' host (Open
// refused groups spanning hosts).
func (s *spread) OpenGroup(ctx context.Context, group string, members []deploy.Member) error {
	if len(members) == 0 {
		return nil
	}
	site, _, err := s.siteOf(members[0].Server.ID)
	if err != nil {
		return err
	}
	ms := make([]deploy.Member, len(members))
	for i, m := range members {
		ms[i] = s.member(m)
	}
	return site.OpenGroup(ctx, group, ms)
}

// Start starts a server on its host's engine.
func (s *spread) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	site, _, err := s.siteOf(m.Server.ID)
	if err != nil {
		return nil, err
	}
	return site.Start(ctx, s.member(m))
}

// PeerAddr is the peer's address on the from server's host when both are
// on one host, else the address of the peer's host (where its port is
// published, or listened on under docker-host) and its port there.
func (s *spread) PeerAddr(from, to topology.Server, port string) (string, error) {
	site, toHost, err := s.siteOf(to.ID)
	if err != nil {
		return "", err
	}
	if fromHost := s.hostOf[from.ID]; fromHost != nil && fromHost.Name() == toHost.Name() {
		return site.PeerAddr(s.server(from), s.server(to), port)
	}
	if !s.exposed[to.ID.Role] {
		return "", fmt.Errorf("%s: %s is not published on host %s for %s on another host (a peer not named in its role's After)", s.d.name, to.ID.Name(), toHost.Name(), from.ID.Name())
	}
	return deploy.JoinPort(s.d.clientFor(toHost).ServerAddr(), site.Port(to.ID, port)), nil
}

// Places are every host's places, host by host.
func (s *spread) Places() []deploy.Place {
	var out []deploy.Place
	for _, n := range s.order {
		out = append(out, s.sites[n].Places()...)
	}
	return out
}

// Close closes every host's site.
func (s *spread) Close(ctx context.Context) error {
	var errs []error
	for i := len(s.order) - 1; i >= 0; i-- {
		errs = append(errs, s.sites[s.order[i]].Close(ctx))
	}
	return errors.Join(errs...)
}

var _ deploy.Site = (*spread)(nil)
