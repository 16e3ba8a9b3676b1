package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// Open implements deploy.Backend. A group of servers (one server, roles
// sharing a Group, or a whole instance under container-per-instance) is one
// pod with a container per server, labelled with its instance; servers of a
// pod reach each other on 127.0.0.1, servers of different pods by pod IP
// (k8s-pod, k8s-guaranteed), by their Service's ClusterIP (k8s-service,
// k8s-nodeport: the path a Service name resolves to) or on the client host's
// server address on the shared host network (k8s-hostnet). Entry servers
// are reached as on Start.
// Placement by CPU set does not apply to pods (the CPU manager places
// Guaranteed pods); Places says so.
func (p *platformImpl) Open(ctx context.Context, trial string, plan *topology.Plan) (deploy.Site, error) {
	ports, err := deploy.Ports(plan, p.pickOn())
	if err != nil {
		return nil, err
	}
	return &site{p: p, trial: trial, plan: plan, ports: ports, pods: map[string]*pod{}}, nil
}

type site struct {
	p     *platformImpl
	trial string
	plan  *topology.Plan
	ports map[topology.ServerID]map[string]int

	mu    sync.Mutex
	pods  map[string]*pod
	order []string
}

func (s *site) Port(id topology.ServerID, port string) int { return deploy.PortOf(s.ports, id, port) }

func (s *site) shared(group string) bool { return len(s.plan.Group(group)) > 1 }

// OpenGroup creates the group's pod with every member's container and waits
// until they run; the servers' own readiness is probed by deploy.
func (s *site) OpenGroup(ctx context.Context, group string, members []deploy.Member) error {
	shared := len(members) > 1
	var ms []member
	for _, dm := range members {
		l := platform.Listen{Host: s.p.listenHost(), Ports: s.ports[dm.Server.ID], Dir: listenDir(dm.Spec, shared)}
		argv := dm.Spec.Command(l)
		if len(argv) == 0 {
			return fmt.Errorf("server %s: empty command", dm.Spec.Name)
		}
		ms = append(ms, member{spec: dm.Spec, listen: l, argv: argv, entry: dm.Server.Entry, instance: dm.Server.ID.Instance, role: dm.Server.ID.Role})
	}
	pd, err := s.p.createPod(ctx, s.trial, group, ms, s.p.kind == Service || s.p.kind == NodePort)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pods[group] = pd
	s.order = append(s.order, group)
	s.mu.Unlock()
	return nil
}

func (s *site) pod(group string) (*pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd, ok := s.pods[group]
	if !ok {
		return nil, fmt.Errorf("pod of group %s is not open", group)
	}
	return pd, nil
}

// Start implements deploy.Site: the server's container already runs in its
// group's pod.
func (s *site) Start(ctx context.Context, m deploy.Member) (platform.Server, error) {
	pd, err := s.pod(m.Server.Group)
	if err != nil {
		return nil, err
	}
	for _, mm := range pd.members {
		if mm.spec.Name == m.Spec.Name {
			return &server{pd: pd, m: mm}, nil
		}
	}
	return nil, fmt.Errorf("server %s is not in pod %s", m.Spec.Name, pd.name)
}

// PeerAddr implements deploy.Site.
func (s *site) PeerAddr(from, to topology.Server, port string) (string, error) {
	n := s.Port(to.ID, port)
	if s.p.kind == HostNet {
		return deploy.JoinPort(s.p.listenHost(), n), nil
	}
	if from.Group == to.Group && s.shared(to.Group) {
		return deploy.JoinPort("127.0.0.1", n), nil
	}
	pd, err := s.pod(to.Group)
	if err != nil {
		return "", err
	}
	if s.p.kind == Service || s.p.kind == NodePort {
		pd.mu.Lock()
		svc := pd.services[to.ID.Name()]
		pd.mu.Unlock()
		if svc == nil || svc.Spec.ClusterIP == "" {
			return "", fmt.Errorf("%s has no Service address", to.ID.Name())
		}
		return deploy.JoinPort(svc.Spec.ClusterIP, n), nil
	}
	if pd.ip == "" {
		return "", fmt.Errorf("%s has no pod IP yet", to.ID.Name())
	}
	return deploy.JoinPort(pd.ip, n), nil
}

// Places implements deploy.Site.
func (s *site) Places() []deploy.Place {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []deploy.Place
	for _, g := range s.order {
		pd := s.pods[g]
		var names []string
		cpus := ""
		for _, m := range pd.members {
			names = append(names, m.spec.Name)
			if c := pd.cpuset(m.container()); c != "" && s.p.kind == Guaranteed {
				cpus = c
			}
		}
		detail := fmt.Sprintf("node %s, QoS %s, image %s", pd.nodeName, pd.qos, s.p.env.Image)
		if len(pd.members) > 1 {
			detail += "; a container per server, peers on 127.0.0.1"
		}
		var pinned []string
		for _, sv := range s.plan.Group(g) {
			if sv.CPUSet != "" {
				pinned = append(pinned, sv.ID.Name())
			}
		}
		if len(pinned) > 0 {
			detail += "; the placement's CPU sets of " + strings.Join(pinned, ", ") + " do not apply to pods (the CPU manager places them)"
		}
		addr := pd.ip
		if s.p.kind == HostNet {
			addr = "host network"
		}
		out = append(out, deploy.Place{Name: pd.ns + "/" + pd.name, Kind: "pod", Address: addr, CPUs: cpus, Servers: names, Detail: detail})
	}
	return out
}

// Close implements deploy.Site: every pod goes, with its Services.
func (s *site) Close(ctx context.Context) error {
	s.mu.Lock()
	pods := make([]*pod, 0, len(s.order))
	for _, g := range s.order {
		pods = append(pods, s.pods[g])
	}
	s.mu.Unlock()
	var errs []error
	for i := len(pods) - 1; i >= 0; i-- {
		errs = append(errs, pods[i].delete(ctx))
	}
	return errors.Join(errs...)
}
