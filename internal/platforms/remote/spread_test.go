package remote

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// FakeHost is a sut host that is never reached (shared with the external
// tests of this package): ID is its name, IP its address.
type FakeHost struct{ ID, IP string }

func (h FakeHost) Name() string { return h.ID }
func (h FakeHost) Self() string { return "/var/tmp/nearnative/nearnative" }
func (h FakeHost) Addr() netip.Addr {
	if h.IP == "" {
		return netip.MustParseAddr("192.0.2.1")
	}
	return netip.MustParseAddr(h.IP)
}
func (h FakeHost) Agent() *vmagent.Client { return nil }
func (h FakeHost) CPUs() []int            { return []int{0, 1} }
func (h FakeHost) Dropped() error         { return nil }
func (h FakeHost) DockerSocket() string   { return "/var/run/docker.sock" }
func (h FakeHost) DialUnix(context.Context, string) (net.Conn, error) {
	return nil, errors.New("not reached")
}
func (h FakeHost) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("not reached")
}

// addrHost is a client host of which only ServerAddr is asked.
type addrHost struct {
	host.Host
	addr string
}

func (h addrHost) ServerAddr() string { return h.addr }

// recordSite is one host's site: it records what it was given.
type recordSite struct {
	host    string
	ports   map[topology.ServerID]int
	entries map[string]bool // servers given as Entry
	started []string
	closed  bool
}

func (r *recordSite) Port(id topology.ServerID, _ string) int { return r.ports[id] }
func (r *recordSite) OpenGroup(_ context.Context, _ string, ms []deploy.Member) error {
	for _, m := range ms {
		r.entries[m.Server.ID.Name()] = m.Server.Entry
	}
	return nil
}
func (r *recordSite) Start(_ context.Context, m deploy.Member) (platform.Server, error) {
	r.entries[m.Server.ID.Name()] = m.Server.Entry
	r.started = append(r.started, m.Server.ID.Name())
	return nil, nil
}
func (r *recordSite) PeerAddr(from, to topology.Server, port string) (string, error) {
	return "bridge-of-" + r.host + ":" + port, nil
}
func (r *recordSite) Places() []deploy.Place { return []deploy.Place{{Name: r.host}} }
func (r *recordSite) Close(context.Context) error {
	r.closed = true
	return nil
}

// TestSpread: servers on two sut hosts reach a peer on their own host as
// that host's site says, and a peer on the other at that host's address,
// where only the roles named across hosts are published.
func TestSpread(t *testing.T) {
	a, b := FakeHost{"sut1", "10.0.0.1"}, FakeHost{"sut2", "10.0.0.2"}
	// web (entry) -> app -> db, with db on the second host; cache beside
	// app on the first, named by app only.
	top := topology.Topology{Roles: []topology.Role{
		{Name: "db", Ports: []string{"pg"}},
		{Name: "cache", Ports: []string{"redis"}},
		{Name: "app", Ports: []string{"http"}, After: []string{"db", "cache"}},
		{Name: "web", Ports: []string{"http"}, After: []string{"app"}, Entry: true},
	}}
	placed := map[string]FakeHost{"db": b, "cache": a, "app": a, "web": a}
	id := func(role string) topology.ServerID { return topology.ServerID{Role: role} }
	srv := func(role string, entry bool) topology.Server {
		return topology.Server{ID: id(role), Group: "i0-" + role, Ports: []string{"p"}, Entry: entry}
	}
	plan := &topology.Plan{Topology: top, Servers: []topology.Server{srv("db", false), srv("cache", false), srv("app", false), srv("web", true)}}
	d := &Docker{name: "docker-nat", kind: platform.DockerNAT,
		place:     func(role string) DockerHost { return placed[role] },
		clientFor: func(h DockerHost) host.Host { return addrHost{addr: h.Addr().String()} }}
	hostOf, err := d.hostsOf(plan)
	if err != nil {
		t.Fatal(err)
	}
	s1 := &recordSite{host: "sut1", ports: map[topology.ServerID]int{id("cache"): 1001, id("app"): 1002, id("web"): 1003}, entries: map[string]bool{}}
	s2 := &recordSite{host: "sut2", ports: map[topology.ServerID]int{id("db"): 2001}, entries: map[string]bool{}}
	s := &spread{d: d, hostOf: hostOf, sites: map[string]deploy.Site{"sut1": s1, "sut2": s2}, order: []string{"sut1", "sut2"},
		exposed: exposedRoles(plan, func(role string) string { return placed[role].Name() })}
	if len(s.exposed) != 1 || !s.exposed["db"] {
		t.Fatalf("exposed = %v, want db only", s.exposed)
	}
	ctx := context.Background()
	for _, sv := range plan.Servers {
		if err := s.OpenGroup(ctx, sv.Group, []deploy.Member{{Server: sv}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Start(ctx, deploy.Member{Server: sv}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(s1.started, " ") != "i0-cache-0 i0-app-0 i0-web-0" || strings.Join(s2.started, " ") != "i0-db-0" {
		t.Errorf("started: sut1 %v, sut2 %v", s1.started, s2.started)
	}
	if !s2.entries["i0-db-0"] || s1.entries["i0-cache-0"] || s1.entries["i0-app-0"] || !s1.entries["i0-web-0"] {
		t.Errorf("published (Entry) as given to the sites: %v %v; want db (named across hosts) and web (entry) only", s1.entries, s2.entries)
	}
	for _, c := range []struct {
		from, to, want string
	}{
		{"app", "db", "10.0.0.2:2001"},       // across hosts: sut2's address, db's port there
		{"app", "cache", "bridge-of-sut1:p"}, // one host: its site's answer
		{"web", "app", "bridge-of-sut1:p"},
	} {
		got, err := s.PeerAddr(srv(c.from, false), srv(c.to, false), "p")
		if err != nil || got != c.want {
			t.Errorf("PeerAddr(%s -> %s) = %q, %v; want %q", c.from, c.to, got, err, c.want)
		}
	}
	if _, err := s.PeerAddr(srv("db", false), srv("cache", false), "p"); err == nil {
		t.Error("db reached cache on another host, which nothing published")
	}
	if got := s.Port(id("db"), "p"); got != 2001 {
		t.Errorf("Port(db) = %d, want sut2's 2001", got)
	}
	if len(s.Places()) != 2 {
		t.Errorf("Places() = %v, want one per host", s.Places())
	}
	if err := s.Close(ctx); err != nil || !s1.closed || !s2.closed {
		t.Errorf("Close: %v; closed %v %v", err, s1.closed, s2.closed)
	}
}
