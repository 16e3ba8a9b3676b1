package vm

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// TestGuestTopology deploys HAProxy in front of a Redis on two instances
// spread over two guests: each guest holds one instance, HAProxy reaches its
// Redis at the guest's address, and a volume prepared on the host is copied
// into the guest and given to the server's user.
func TestGuestTopology(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	p, run, _ := testPlatform(t, ctx, platform.VM)
	defer func() {
		p.Close()
		assertClean(t, run)
	}()
	vol := t.TempDir()
	os.WriteFile(filepath.Join(vol, "seed.txt"), []byte("from the host\n"), 0o644)
	topo := lbTopology(vol, 2, 2)
	d, err := deploy.Deploy(ctx, p, "t1", topo, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	for _, w := range d.Where() {
		t.Log(w)
	}
	guests := map[string]bool{}
	for _, pl := range d.Places() {
		guests[pl.Address] = true
		if len(pl.Servers) != 2 {
			t.Errorf("place %s holds %v, want one instance (redis and lb)", pl.Name, pl.Servers)
		}
	}
	if len(guests) != 2 {
		t.Fatalf("places %+v: want two guests", d.Places())
	}
	for i, addr := range d.Entries("lb", "lb") {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n%d\r\n", i)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, "+OK") {
			t.Fatalf("SET through lb %d answered %q", i, line)
		}
	}
	for _, r := range d.Role("redis") {
		g := r.Srv.(*guestProc)
		res, err := g.vg.g.agent.Run(ctx, vmagentProc("stat", "-c", "%U %n", "/data/seed.txt"))
		if err != nil || !strings.HasPrefix(string(res.Stdout), "redis /data/seed.txt") {
			t.Errorf("the volume in guest %d: %q %v", g.vg.index, res.Stdout, err)
		}
	}
}

// lbTopology is HAProxy in front of a Redis whose data directory is the
// volume vol, given to the redis user, on instances instances spread over
// vms guests.
func lbTopology(vol string, instances, vms int) topology.Topology {
	return topology.Topology{
		Instances: instances, VMs: vms,
		Roles: []topology.Role{
			{Name: "redis", Ports: []string{"redis"},
				Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
				Spec: func(topology.ServerID, topology.Peers) (platform.Spec, error) {
					s := redisSpec()
					s.Files = nil
					s.User = "redis"
					s.Volumes = []platform.Volume{{HostPath: vol, Path: "/data", Own: true}}
					cmd := s.Command
					s.Command = func(l platform.Listen) []string { return append(cmd(l)[:len(cmd(l))-1], "/data") }
					return s, nil
				}},
			{Name: "lb", Ports: []string{"lb"}, After: []string{"redis"}, Entry: true,
				Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
				Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
					backend := peers.Addr("redis", 0, "redis")
					return platform.Spec{Ports: []string{"lb"},
						Command: func(l platform.Listen) []string { return []string{"haproxy", "-db", "-f", l.Dir + "/h.cfg"} },
						Render: func(l platform.Listen) []platform.File {
							cfg := fmt.Sprintf("defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\nfrontend f\n  bind %s:%d\n  default_backend b\nbackend b\n  server r %s\n", l.Host, l.Port("lb"), backend)
							return []platform.File{{Path: "h.cfg", Content: []byte(cfg)}}
						}}, nil
				}},
		},
	}
}

func vmagentProc(argv ...string) vmagent.Proc { return vmagent.Proc{Argv: argv, Dir: "/"} }
