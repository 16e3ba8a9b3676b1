package doctor

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Remote is a connected host of a hosts file, as the host checks need it
// (sshhost.Conn).
type Remote interface {
	Name() string
	// Output runs a shell command there and returns its stdout.
	Output(ctx context.Context, cmd string) ([]byte, error)
	// Offset is the host's clock offset from this machine, as read when
	// it connected.
	Offset() vmagent.Offset
}

// HostTools are the commands a sut or driver host needs: the workload
// packages' versions are compared across hosts.
var HostTools = []struct{ Tool, Package string }{
	{"redis-server", "redis-server"}, {"redis-benchmark", "redis-tools"}, {"taskset", "util-linux"}, {"sha256sum", "coreutils"},
}

// minFreeMB is the free space a host needs in /var/tmp (the pushed binary)
// and /tmp (servers' directories).
const minFreeMB = 512

// Hosts checks every connected host: the tools and their package
// versions (the same on every host), the clock offset against limit, free
// disk, and CPU accounting in /proc and cgroups. Each failure names the
// host and the fix.
func Hosts(ctx context.Context, hosts []Remote, limit time.Duration) []Check {
	var out []Check
	versions := map[string]map[string]string{} // package -> host -> version
	for _, h := range hosts {
		name := "host " + h.Name()
		for _, t := range HostTools {
			b, err := h.Output(ctx, "command -v "+t.Tool+" >/dev/null && dpkg-query -W -f='${Version}' "+t.Package+" 2>/dev/null || echo MISSING")
			v := strings.TrimSpace(string(b))
			if err != nil || v == "MISSING" || v == "" {
				out = append(out, Check{Name: name, Status: Fail, Detail: t.Tool + " missing", Fix: "on " + h.Name() + ": apt-get install --no-install-recommends " + t.Package})
				continue
			}
			if versions[t.Package] == nil {
				versions[t.Package] = map[string]string{}
			}
			versions[t.Package][h.Name()] = v
		}
		off := h.Offset()
		c := Check{Name: name, Status: OK, Detail: fmt.Sprintf("clock offset %v ± %v (limit %v)", off.Offset.Round(time.Microsecond), (off.RTT / 2).Round(time.Microsecond), limit)}
		if off.Bound() > limit { // the rule the run refuses a host by (sshhost.Set.CheckClocks)
			c.Status, c.Fix = Fail, "synchronise the clocks of "+h.Name()+" and this machine (chrony or systemd-timesyncd against one server), or raise clock_offset_max"
		}
		out = append(out, c)
		b, err := h.Output(ctx, "df -Pk /var/tmp /tmp | awk 'NR>1{print $4}'")
		free := strings.Fields(string(b))
		minKB := int64(-1)
		for _, f := range free {
			if n, err := strconv.ParseInt(f, 10, 64); err == nil && (minKB < 0 || n < minKB) {
				minKB = n
			}
		}
		switch {
		case err != nil || minKB < 0:
			out = append(out, Check{Name: name, Status: Warn, Detail: "free disk unknown: df failed"})
		case minKB/1024 < minFreeMB:
			out = append(out, Check{Name: name, Status: Fail, Detail: fmt.Sprintf("%d MB free in /var/tmp or /tmp, want %d", minKB/1024, minFreeMB), Fix: "free space on " + h.Name()})
		default:
			out = append(out, Check{Name: name, Status: OK, Detail: fmt.Sprintf("%d MB free in /var/tmp and /tmp", minKB/1024)})
		}
		b, _ = h.Output(ctx, "test -r /proc/self/stat && (test -d /sys/fs/cgroup/cpuacct || test -f /sys/fs/cgroup/cgroup.controllers) && echo yes")
		if strings.TrimSpace(string(b)) == "yes" {
			out = append(out, Check{Name: name, Status: OK, Detail: "CPU accounting: /proc and cgroups readable"})
		} else {
			out = append(out, Check{Name: name, Status: Fail, Detail: "CPU accounting: /proc/self/stat or the cgroup CPU controller unreadable", Fix: "mount /proc and the cgroup file system on " + h.Name()})
		}
	}
	pkgs := make([]string, 0, len(versions))
	for p := range versions {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		seen := map[string][]string{}
		for host, v := range versions[p] {
			seen[v] = append(seen[v], host)
		}
		if len(seen) == 1 {
			for v, hs := range seen {
				sort.Strings(hs)
				out = append(out, Check{Name: "hosts " + p, Status: OK, Detail: v + " on " + strings.Join(hs, ", ")})
			}
			continue
		}
		var parts []string
		for v, hs := range seen {
			sort.Strings(hs)
			parts = append(parts, v+" on "+strings.Join(hs, ", "))
		}
		sort.Strings(parts)
		out = append(out, Check{Name: "hosts " + p, Status: Fail, Detail: "versions differ: " + strings.Join(parts, "; "), Fix: "apt-get install --only-upgrade " + p + " on the hosts with the older one"})
	}
	return out
}

// DockerRemote is a sut host whose Docker engine the doctor asks about:
// its dockerd's socket, reached through the SSH connection
// (sshhost.Conn).
type DockerRemote interface {
	Name() string
	DockerSocket() string
	DialUnix(ctx context.Context, path string) (net.Conn, error)
}

// HostDocker checks that each sut host's Docker engine answers through
// the host's SSH connection, as docker-nat and docker-host there need it.
// An engine that does not answer is a warning: native runs without it.
func HostDocker(ctx context.Context, suts []DockerRemote) []Check {
	var out []Check
	for _, h := range suts {
		name := "host " + h.Name()
		sock := h.DockerSocket()
		eng, err := docker.ConnectVia(ctx, h.Name(), sock, func(ctx context.Context) (net.Conn, error) { return h.DialUnix(ctx, sock) })
		if err != nil {
			out = append(out, Check{Name: name, Status: Warn, Detail: "Docker: " + err.Error(),
				Fix: "on " + h.Name() + ": apt-get install docker.io and start dockerd, or name its socket with docker_socket: (only native runs there without it)"})
			continue
		}
		info, err := eng.Info(ctx)
		eng.Close()
		if err != nil {
			out = append(out, Check{Name: name, Status: Warn, Detail: "Docker: " + err.Error()})
			continue
		}
		out = append(out, Check{Name: name, Status: OK, Detail: fmt.Sprintf("Docker: dockerd %s at %s (storage %s, cgroup driver %s, cgroup v%s), through SSH: docker-nat and docker-host can run there",
			info.Version, sock, info.StorageDriver, info.CgroupDriver, info.CgroupVersion)})
	}
	return out
}
