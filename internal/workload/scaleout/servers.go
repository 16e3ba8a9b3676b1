package scaleout

import (
	"context"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/topology"
)

// Role names of the topology.
const (
	// RoleBase is the baseline's Redis: one server holding the whole key
	// space, driven directly.
	RoleBase = "base"
	// RoleRedis are the scale-out system's shards.
	RoleRedis  = "redis"
	RoleProxy  = "twemproxy"
	RoleLB     = "haproxy"
	PortRedis  = "redis"
	PortProxy  = "proxy"
	PortStats  = "stats"
	PortLB     = "lb"
	DataPath   = "/data" // where a Redis's data volume is mounted in a container or guest
	AOFDirName = "appendonlydir"
)

// ShardName is the name twemproxy knows Redis shard i by: ketama hashes the
// names, not the addresses, so a key's shard is the same on every platform
// and the data loaded once per shard fits every trial.
func ShardName(i int) string { return "redis" + strconv.Itoa(i) }

// inside reports whether a server started with l runs in a container or a
// guest, where a volume is seen at its Path rather than its HostPath.
func inside(l platform.Listen) bool {
	return l.Dir == platform.ContainerDir || strings.HasPrefix(l.Dir, platform.ContainerDir+"/")
}

// redisConf is a Redis server's configuration: AOF with appendfsync
// everysec (the seed's persistence), no RDB snapshots, the data in dataDir
// (its AOF directory copied from the cache), nothing else but the address.
func redisConf(l platform.Listen, dataDir string, aof bool) string {
	appendonly := "no"
	if aof {
		appendonly = "yes"
	}
	return fmt.Sprintf(`bind %s
port %d
protected-mode no
daemonize no
dir %s
save ""
appendonly %s
appenddirname %s
appendfsync everysec
aof-use-rdb-preamble yes
maxclients 10000
tcp-backlog 4096
loglevel notice
logfile ""
`, l.Host, l.Port(PortRedis), dataDir, appendonly, AOFDirName)
}

// redisSpec is Redis server id whose data directory is the volume at
// hostData (a copy of a shard's cached AOF directory, or empty for the
// loader), seen at DataPath/<server> in a container or guest (a guest may
// hold several Redis). aof false is the loader's setting: it loads without
// logging, then turns the AOF on.
func redisSpec(id topology.ServerID, hostData string, aof bool) platform.Spec {
	mount := path.Join(DataPath, id.Name())
	dataDir := func(l platform.Listen) string {
		if inside(l) {
			return mount
		}
		return hostData
	}
	return platform.Spec{
		Ports: []string{PortRedis},
		User:  "redis",
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", path.Join(l.Dir, "redis.conf")}
		},
		Render: func(l platform.Listen) []platform.File {
			return []platform.File{{Path: "redis.conf", Content: []byte(redisConf(l, dataDir(l), aof))}}
		},
		Volumes: []platform.Volume{{HostPath: hostData, Path: mount, Own: true}},
	}
}

// ProxyTimeout is how long twemproxy waits for a Redis reply before it
// answers the client with an error.
const ProxyTimeout = 10 * time.Second

// proxyConf is twemproxy's pool: ketama over fnv1a_64, Redis protocol, every
// shard as ip:port:1 with its name; servers are never ejected (the key ->
// shard map must not change during a trial: a server's failure shows as
// errors, and the trial fails).
func proxyConf(l platform.Listen, shards []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scaleout:\n  listen: %s\n  hash: fnv1a_64\n  distribution: ketama\n  redis: true\n  timeout: %d\n  auto_eject_hosts: false\n  preconnect: true\n  server_connections: 1\n  servers:\n",
		net.JoinHostPort(l.Host, strconv.Itoa(l.Port(PortProxy))), ProxyTimeout.Milliseconds())
	for i, a := range shards {
		fmt.Fprintf(&b, "   - %s:1 %s\n", a, ShardName(i))
	}
	return b.String()
}

// proxySpec is one twemproxy (Debian's nutcracker) in front of shards. Its
// statistics (per-server errors and timeouts) are served on the stats port,
// refreshed every 500 ms. Its log goes to the server's output (Debian's
// nutcracker logs to /var/log/nutcracker otherwise).
func proxySpec(shards []string) platform.Spec {
	return platform.Spec{
		Ports: []string{PortProxy, PortStats},
		Command: func(l platform.Listen) []string {
			return []string{"nutcracker", "-c", path.Join(l.Dir, "nutcracker.yml"), "-s", strconv.Itoa(l.Port(PortStats)),
				"-a", l.Host, "-i", "500", "-p", path.Join(l.Dir, "nutcracker.pid"), "-o", "/dev/stderr"}
		},
		Render: func(l platform.Listen) []platform.File {
			return []platform.File{{Path: "nutcracker.yml", Content: []byte(proxyConf(l, shards))}}
		},
	}
}

// lbConf is HAProxy in TCP mode spreading connections round robin over the
// twemproxies.
func lbConf(l platform.Listen, proxies []string, maxconn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn %d\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n", maxconn)
	fmt.Fprintf(&b, "frontend redis\n  bind %s\n  maxconn %d\n  default_backend twemproxy\nbackend twemproxy\n  balance roundrobin\n",
		net.JoinHostPort(l.Host, strconv.Itoa(l.Port(PortLB))), maxconn)
	for i, a := range proxies {
		fmt.Fprintf(&b, "  server t%d %s maxconn %d\n", i, a, maxconn)
	}
	return b.String()
}

func lbSpec(proxies []string, maxconn int) platform.Spec {
	return platform.Spec{
		Ports: []string{PortLB},
		Command: func(l platform.Listen) []string {
			return []string{"haproxy", "-db", "-f", path.Join(l.Dir, "haproxy.cfg")}
		},
		Render: func(l platform.Listen) []platform.File {
			return []platform.File{{Path: "haproxy.cfg", Content: []byte(lbConf(l, proxies, maxconn))}}
		},
	}
}

func ping(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) }

// Data is where each Redis's data lives on the host for one deployment:
// the baseline's and every shard's directory (each a copy of the cache, or
// an empty one for the loader).
type Data struct {
	Base   string
	Shards []string
	// AOF is false for the loader, which turns the AOF on after loading.
	AOF bool
}

// Topology is the scale-out system for settings s with data d: the
// baseline's Redis and N shards in the first wave, K twemproxies, one
// HAProxy (the proxies beside the driver when s.LBOnHost), and the
// placement the settings and the platform ask for.
func (s Settings) Topology(d Data, pinBase string) topology.Topology {
	redisReady := s.ReadyTimeout()
	conns := s.Drivers * s.Clients
	t := topology.Topology{
		Roles: []topology.Role{
			{Name: RoleBase, Ports: []string{PortRedis}, Entry: true, Ready: ping, ReadyTimeout: redisReady,
				Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
					return redisSpec(id, d.Base, d.AOF), nil
				}},
			{Name: RoleRedis, Count: s.Redis, Ports: []string{PortRedis}, Ready: ping, ReadyTimeout: redisReady, GuestPerServer: true,
				Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
					return redisSpec(id, d.Shards[id.Index], d.AOF), nil
				}},
			{Name: RoleProxy, Count: s.Twemproxies, Ports: []string{PortProxy, PortStats}, After: []string{RoleRedis}, OnHost: s.LBOnHost,
				Ready: ping, ReadyPort: PortProxy,
				Spec: func(_ topology.ServerID, peers topology.Peers) (platform.Spec, error) {
					return proxySpec(peers.All(RoleRedis, PortRedis)), nil
				}},
			{Name: RoleLB, Ports: []string{PortLB}, After: []string{RoleProxy}, Entry: true, OnHost: s.LBOnHost, Ready: ping,
				Spec: func(_ topology.ServerID, peers topology.Peers) (platform.Spec, error) {
					return lbSpec(peers.All(RoleProxy, PortProxy), conns+1000), nil
				}},
		},
		VMs:        1,
		Overcommit: s.Overcommit,
		Placement:  topology.Placement{Pin: s.Pin, PinRoles: []string{RoleRedis}, DriverCPUs: s.DriverCPUs},
	}
	if s.Guests == GuestsPerRedis {
		t.VMs = s.Redis
	}
	if pinBase != "" {
		t.Placement.Roles = map[string]string{RoleBase: pinBase}
	}
	return t
}
