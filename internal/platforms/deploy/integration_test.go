package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// The test binary doubles as the supervisor of container-per-instance
// containers (it is bind-mounted into them).
func TestMain(m *testing.M) {
	if code, ok := vmagent.Entry(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// haproxyRedis is HAProxy (tcp, round robin) in front of two redis-servers.
func haproxyRedis(layout string) topology.Topology {
	return topology.Topology{
		Layout: layout,
		Roles: []topology.Role{
			{
				Name: "redis", Count: 2, Ports: []string{"redis"},
				Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
				Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
					return platform.Spec{Ports: []string{"redis"}, Command: func(l platform.Listen) []string {
						return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
							"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
					}}, nil
				},
			},
			{
				Name: "lb", Ports: []string{"lb"}, After: []string{"redis"}, Entry: true,
				Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
				Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
					backends := peers.All("redis", "redis")
					return platform.Spec{
						Ports: []string{"lb"},
						Command: func(l platform.Listen) []string {
							return []string{"haproxy", "-db", "-f", l.Dir + "/haproxy.cfg"}
						},
						Render: func(l platform.Listen) []platform.File {
							return []platform.File{{Path: "haproxy.cfg", Content: []byte(haproxyConfig(l, backends))}}
						},
					}, nil
				},
			},
		},
	}
}

func haproxyConfig(l platform.Listen, backends []string) string {
	var b strings.Builder
	b.WriteString("global\n  maxconn 4096\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n")
	fmt.Fprintf(&b, "frontend fe\n  bind %s\n  default_backend redis\nbackend redis\n  balance roundrobin\n", net.JoinHostPort(l.Host, strconv.Itoa(l.Port("lb"))))
	for i, a := range backends {
		fmt.Fprintf(&b, "  server r%d %s\n", i, a)
	}
	return b.String()
}

func TestHAProxyInFrontOfTwoRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts real servers")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (make test runs as root)")
	}
	cases := []struct {
		kind, layout string
		lbOnHost     bool
	}{
		{platform.Native, topology.ContainerPerServer, false},
		{platform.DockerBridge, topology.ContainerPerServer, false},
		{platform.DockerBridge, topology.ContainerPerInstance, false},
		{platform.DockerHost, topology.ContainerPerServer, false},
		{platform.DockerHost, topology.ContainerPerInstance, false},
		{platform.DockerNAT, topology.ContainerPerInstance, false},
		// The seed's load balancers on a host of their own: HAProxy beside
		// the driver reaches the Redis at their NAT-published addresses.
		{platform.DockerNAT, topology.ContainerPerServer, true},
	}
	run := runid.New()
	root := t.TempDir()
	kinds := []string{}
	seen := map[string]bool{}
	for _, c := range cases {
		if !seen[c.kind] {
			seen[c.kind] = true
			kinds = append(kinds, c.kind)
		}
	}
	plats := testenv.Platforms(t, run, root, kinds...) // native among them
	for i, c := range cases {
		t.Run(c.kind+"/"+c.layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			topo := haproxyRedis(c.layout)
			topo.Roles[1].OnHost = c.lbOnHost
			opt := deploy.Options{Log: testenv.Log{T: t}, Host: plats[platform.Native].(deploy.Backend)}
			d, err := deploy.Deploy(ctx, plats[c.kind], fmt.Sprintf("t%d", i), topo, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := d.Stop(context.Background()); err != nil {
					t.Errorf("stop: %v", err)
				}
			})
			for _, w := range d.Where() {
				t.Log(w)
			}
			entries := d.Entries("lb", "lb")
			if len(entries) != 1 {
				t.Fatalf("lb entries = %v, want one", entries)
			}
			obs, err := d.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// 20 connections through HAProxy, round robin over the two.
			for k := 0; k < 20; k++ {
				if err := setMany(ctx, entries[0], k, 25); err != nil {
					t.Fatal(err)
				}
			}
			lay, err := obs.Layout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(lay.CPUs) == 0 || len(lay.Servers) != 3 || lay.Interval <= 0 {
				t.Errorf("layout %+v: want the host's CPUs and 3 servers observed", lay)
			}
			for _, sv := range lay.Servers {
				if sv.MigrationsPerSec < 0 || sv.Place == "" {
					t.Errorf("server %+v: want its place and a migration rate", sv)
				}
			}
			t.Log(deploy.Summary(lay))
			if err := d.Check(ctx); err != nil {
				t.Fatalf("a server died: %v", err)
			}
			redises := d.Role("redis")
			if len(redises) != 2 {
				t.Fatalf("%d redis servers, want 2", len(redises))
			}
			total := 0
			for _, r := range redises {
				n, err := dbsize(ctx, r.Srv.Addr("redis"))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s holds %d keys", r.ID.Name(), n)
				if n < 100 {
					t.Errorf("%s holds %d keys: HAProxy did not spread the 20 connections (want about 250 each)", r.ID.Name(), n)
				}
				total += n
			}
			if total != 500 {
				t.Errorf("the two redis hold %d keys in all, want 500", total)
			}
			if c.lbOnHost {
				for _, r := range redises {
					if h, _, _ := net.SplitHostPort(r.Srv.Addr("redis")); !host.Pool.Contains(netip.MustParseAddr(h)) {
						t.Errorf("%s at %s: a peer of a host role is not published on the NAT address (the client link's host side)", r.ID.Name(), r.Srv.Addr("redis"))
					}
				}
			}
			if c.layout == topology.ContainerPerInstance && c.kind != platform.Native {
				if p := d.Places(); len(p) != 1 || len(p[0].Servers) != 3 {
					t.Errorf("container-per-instance: places %+v, want one container holding 3 servers", p)
				}
			}
		})
	}
}

// setMany sends n SETs over one connection to addr.
func setMany(ctx context.Context, addr string, conn, n int) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	rd := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("c%d-k%d", conn, i)
		fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nx\r\n", len(key), key)
		line, err := rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("SET through %s: %w", addr, err)
		}
		if !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("SET through %s answered %q", addr, line)
		}
	}
	return nil
}

func dbsize(ctx context.Context, addr string) (int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "*1\r\n$6\r\nDBSIZE\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, ":")))
}
