package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// viaDialer connects to the local dockerd as a remote engine would be
// reached: through a dial function (an SSH channel in use), so that
// nothing of it is read from this machine's /proc or cgroups.
func viaDialer(t *testing.T) *Daemon {
	t.Helper()
	needEngine(t)
	dials := 0
	eng, err := ConnectVia(context.Background(), "sut9", "/var/run/docker.sock", func(ctx context.Context) (net.Conn, error) {
		dials++
		var d net.Dialer
		return d.DialContext(ctx, "unix", "/var/run/docker.sock")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if dials == 0 || !eng.Remote() || eng.local() {
		t.Fatalf("dials %d, remote %v, local %v: want the dialer used and the engine remote", dials, eng.Remote(), eng.local())
	}
	if !strings.Contains(eng.Host(), "on host sut9") {
		t.Fatalf("Host() = %q, want the host named", eng.Host())
	}
	return eng
}

func TestSiteRefusesPathsOtherMachinesCannotReach(t *testing.T) {
	eng := viaDialer(t)
	_, img := needEngine(t)
	env := platform.Env{Image: img}
	_, err := NewOn(platform.DockerNetwork, "dn", env, eng, platform.Options{}, Site{Host: "sut9"})
	if !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "not offered on sut host sut9") {
		t.Errorf("docker-network: %v, want it refused as unavailable", err)
	}
	local, _ := needEngine(t)
	if _, err := NewOn(platform.DockerNAT, "n", env, local, platform.Options{}, Site{Host: "sut9"}); err == nil {
		t.Error("NewOn took this machine's engine as a remote one")
	}
}

// TestSiteServes runs docker-nat and docker-host on an engine reached
// through a dialer: the ports come from the site, the server answers at
// the client host's server address, its CPU comes from the stats API and
// its machine from the site.
func TestSiteServes(t *testing.T) {
	eng := viaDialer(t)
	for _, kind := range RemoteKinds {
		t.Run(kind, func(t *testing.T) {
			_, env := newPlatform(t, kind, kind, platform.Options{}) // the run, its client host and the leftovers check
			if kind == platform.DockerProxy {
				// Drivers on other machines, not this one's loopback: a
				// client host in a namespace, as for docker-nat.
				env.Client = testClient(t, platform.DockerNAT, env.Run)
			}
			var closers []func() error
			defer func() {
				for _, c := range closers {
					if err := c(); err != nil {
						t.Errorf("Close: %v", err)
					}
				}
			}()
			asked := 0
			var routed []netip.Prefix
			unrouted := 0
			var put, owned []string
			machine := platform.MachineSample{Name: "sut9", SUT: true}
			site := Site{
				Host: "sut9",
				FreePorts: func(ctx context.Context, addr string, n int) ([]int, error) {
					asked++
					// docker-bridge's ports are the container's own: any
					// free number (the host's loopback is asked).
					if want := env.ClientHost().ServerAddr(); kind == platform.DockerBridge && addr != "127.0.0.1" || kind != platform.DockerBridge && addr != want {
						t.Errorf("ports asked on %s, want the server address %s", addr, env.ClientHost().ServerAddr())
					}
					ps, err := platform.FreePorts(addr, n)
					return ps, err
				},
				Machine:    "sut host sut9",
				MachineCPU: func(context.Context) (platform.MachineSample, error) { return machine, nil },
				Migrations: func(_ context.Context, pid int) (int64, error) { return sysinfo.ProcMigrations(pid) },
				// The trees are here already: the engine's host is this one.
				PutVolume: func(_ context.Context, path string) error { put = append(put, path); return nil },
				Own: func(_ context.Context, path string, uid, gid int) error {
					owned = append(owned, path)
					return os.Chown(path, uid, gid)
				},
				Run: func(ctx context.Context, what string, argv ...string) ([]byte, error) {
					out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
					if err != nil {
						return out, fmt.Errorf("%s: %w", what, err)
					}
					return out, nil
				},
				ProcCPU: func(_ context.Context, pid int) (time.Duration, error) {
					st, err := sysinfo.ReadProcStat(pid)
					return st.CPU(), err
				},
				// The client host in its namespace stands for the driver
				// hosts: its route to the bridge, from its address.
				RouteDrivers: func(ctx context.Context, dst netip.Prefix, gw netip.Addr) ([]netip.Addr, func(context.Context) error, error) {
					routed = append(routed, dst)
					if gw.String() != env.ClientHost().ServerAddr() {
						t.Errorf("routed via %s, want the server address %s", gw, env.ClientHost().ServerAddr())
					}
					if err := env.ClientHost().Route(ctx, dst); err != nil {
						return nil, nil, err
					}
					from := netip.MustParseAddr(env.ClientHost().ClientAddr())
					return []netip.Addr{from}, func(context.Context) error { unrouted++; return nil }, nil
				},
			}
			p, err := NewOn(kind, kind, env, eng, platform.Options{}, site)
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := p.(platform.Closer); ok {
				closers = append(closers, c.Close)
			}
			s := start(t, p, "t1", redisSpec("redis"))
			if asked != 1 {
				t.Fatalf("the site was asked for ports %d times, want 1", asked)
			}
			host, _, _ := net.SplitHostPort(s.Addr("redis"))
			if kind == platform.DockerBridge {
				// The container's own address, on the routed bridge.
				if a, err := netip.ParseAddr(host); err != nil || len(routed) != 1 || !routed[0].Contains(a) {
					t.Fatalf("server at %s, want an address of the routed bridge %v", s.Addr("redis"), routed)
				}
			} else if host != env.ClientHost().ServerAddr() {
				t.Fatalf("server at %s, want the server address %s", s.Addr("redis"), env.ClientHost().ServerAddr())
			}
			pingFrom(t, env.ClientHost(), s.Addr("redis"))
			mr, ok := s.(platform.MachineReporter)
			if !ok || mr.Machine() != "sut host sut9" {
				t.Fatalf("server %T is not the site's machine reporter", s)
			}
			if m, err := mr.MachineCPU(context.Background()); err != nil || m.Name != "sut9" {
				t.Fatalf("MachineCPU: %+v, %v", m, err)
			}
			if d := s.(platform.CPUDescriber).CPUSource(); !strings.Contains(d, "stats API") {
				t.Fatalf("CPU source %q, want the engine's stats API", d)
			}
			if _, err := s.(platform.CPUReporter).CPUTime(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.Describe(), "on sut host sut9") {
				t.Fatalf("Describe() = %q, want the host named", s.Describe())
			}
			// A volume goes to the host first, and to the server's user.
			spec := redisSpec("redis")
			vol := t.TempDir()
			spec.User = "65534:65534"
			spec.Volumes = []platform.Volume{{HostPath: vol, Path: "/data", Own: true}}
			start(t, p, "t2", spec)
			if len(put) != 1 || put[0] != vol || len(owned) != 1 || owned[0] != vol {
				t.Fatalf("volume %s: put %v, owned %v: want it put on the host and given to the server's user there", vol, put, owned)
			}
			if kind == platform.DockerProxy {
				proxied(t, s, env.Run, env.ClientHost())
			}
			if kind == platform.DockerBridge {
				bridged(t, p, routed, &unrouted, env)
			}
		})
	}
}

// proxied checks docker-proxy on a site: the server's port has the run's
// nat rule that keeps it from DNAT while it runs, and none once it stops;
// its docker-proxy process was found and its CPU is the server's overhead.
func proxied(t *testing.T, s platform.Server, run runid.ID, client interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr("redis"))
	rule := func() bool {
		out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "--dport "+port+" ") && strings.Contains(l, runid.Label+"="+string(run)) && strings.HasSuffix(l, "-j ACCEPT") {
				return true
			}
		}
		return false
	}
	if !rule() {
		t.Fatalf("no nat rule of run %s keeps port %s from DNAT", run, port)
	}
	// A connection from the client host is docker-proxy's socket (under
	// DNAT it would be the container's, in its own namespace).
	c, err := client.DialContext(context.Background(), "tcp", s.Addr("redis"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := exec.Command("ss", "-tnpH", "state", "established", "( sport = :"+port+" )").Output()
	if err != nil || !strings.Contains(string(out), `"docker-proxy"`) {
		t.Errorf("the client's connection to port %s is not docker-proxy's (ss: %q, %v)", port, out, err)
	}
	rs, ok := s.(remoteServer)
	if !ok || len(rs.proxyPIDs) == 0 {
		t.Fatalf("server %T: no docker-proxy process found", s)
	}
	if _, err := s.(platform.OverheadReporter).OverheadCPUTime(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Describe(), "userland docker-proxy") {
		t.Errorf("Describe() = %q, want the proxy path", s.Describe())
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rule() {
		t.Errorf("the nat rule of port %s outlived its server", port)
	}
}

// bridged checks docker-bridge on a site: the driver hosts were routed to
// the bridge once, the host accepts their forwarded connections by a rule
// of the run in DOCKER-USER, and Close removes the rule and the routes.
func bridged(t *testing.T, p platform.Platform, routed []netip.Prefix, unrouted *int, env platform.Env) {
	t.Helper()
	if len(routed) != 1 {
		t.Fatalf("routed %v, want the default bridge once", routed)
	}
	rule := func() bool {
		out, err := exec.Command("iptables", "-w", "-S", "DOCKER-USER").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(out), "-s "+env.ClientHost().ClientAddr()+"/32 -d "+routed[0].String()) &&
			strings.Contains(string(out), runid.Label+"="+string(env.Run))
	}
	if !rule() {
		t.Fatalf("no DOCKER-USER rule of run %s accepts %s to %s", env.Run, env.ClientHost().ClientAddr(), routed[0])
	}
	if err := p.(platform.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if rule() || *unrouted != 1 {
		t.Errorf("after Close: rule left %v, routes undone %d times (want 1)", rule(), *unrouted)
	}
}

// TestSiteRuntimeChecks: a runtime's checks of the engine's machine (the
// runtime's binary, crun's cgroup layout, gVisor's netstack) go to the
// sut host through the site, and a refusal names the host.
func TestSiteRuntimeChecks(t *testing.T) {
	eng := viaDialer(t)
	_, img := needEngine(t)
	rts, err := eng.Runtimes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind, runtime string
		missing       string // a path the host lacks
		layout        string // the host's unified controllers
		want          string // "" for ok
	}{
		{platform.DockerCrunHost, RuntimeCrun, "", "", ""},
		{platform.DockerCrunHost, RuntimeCrun, "crun", "", "is not on sut host sut9"},
		{platform.DockerCrunBridge, RuntimeCrun, "", "hugetlb", "sut host sut9: crun refuses a hybrid cgroup layout"},
		{platform.DockerRunscNAT, RuntimeRunsc, "", "", ""},
		{platform.DockerRunscNAT, RuntimeRunsc, "runsc", "", "is not on sut host sut9"},
		{platform.DockerCrunHost, RuntimeCrun, "broken", "", "sut host sut9: the agent is gone"},
	} {
		t.Run(c.kind+" "+c.missing+c.layout, func(t *testing.T) {
			if _, ok := rts[c.runtime]; !ok {
				t.Skipf("dockerd has no runtime %s registered (make setup)", c.runtime)
			}
			var asked []string
			site := Site{Host: "sut9", Run: func(_ context.Context, _ string, argv ...string) ([]byte, error) {
				asked = append(asked, strings.Join(argv, " "))
				switch {
				case c.missing == "broken":
					return nil, errors.New("the agent is gone")
				case argv[0] == "sh" && strings.Contains(argv[2], "echo yes"):
					if c.missing != "" && strings.HasSuffix(argv[len(argv)-1], "/"+c.missing) {
						return []byte("no\n"), nil
					}
					return []byte("yes\n"), nil
				case argv[0] == "sh":
					return []byte(c.layout + "\n"), nil
				case argv[0] == "unshare":
					return nil, errors.New("exit status 1") // netstack not refused
				}
				return nil, nil
			}}
			p, err := NewOn(c.kind, c.kind, platform.Env{Image: img}, eng, platform.Options{}, site)
			if err != nil {
				t.Fatal(err)
			}
			err = p.(*dockerPlatform).checkRuntime(context.Background())
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("checkRuntime: %v, want %q", err, c.want)
			}
			if len(asked) == 0 || !strings.Contains(asked[0], "echo yes") || !strings.HasSuffix(asked[0], "/"+c.runtime) {
				t.Errorf("asked the host %q, want the runtime's binary looked for there first", asked)
			}
		})
	}
}
