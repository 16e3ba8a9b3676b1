package lxc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/vmagent"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Files: []platform.File{{Path: "redis.conf", Content: []byte("save \"\"\nappendonly no\n")}},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", l.Dir + "/redis.conf", "--bind", l.Host, "--port", fmt.Sprint(l.Port("redis")), "--protected-mode", "no"}
		},
	}
}

// newPlatform makes the lxc platform for a fresh run with a client host of
// its own; state (the root file system cache) goes under the default
// state directory, which make setup's runs share.
func newPlatform(t *testing.T, opt platform.Options) (*Platform, platform.Env) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts LXC containers; skipped in -short mode")
	}
	eng, ref := testenv.WorkloadImage(t)
	run := runid.New()
	client, err := host.NewNS(context.Background(), run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatalf("client host: %v", err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	env := platform.Env{Run: run, LogDir: t.TempDir(), Image: ref, Client: client, Log: testenv.Log{T: t}}
	p, err := New(platform.LXC, env, state.Home(), opt, func(context.Context) (*docker.Daemon, error) { return eng, nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background()); err != nil {
		t.Fatalf("Check (make setup installs LXC): %v", err)
	}
	return p, env
}

func waitFrom(ctx context.Context, h host.Host, addr string) error {
	return platform.WaitReady(ctx, 20*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		return redisproto.PingDial(ctx, h.DialContext, addr)
	})
}

// TestLXC starts Redis in an LXC container: its agent starts the server on
// the container's address with its file, the client host reaches it over
// the run's bridge, its CPU comes from the container's cgroup (limits
// applied there), a job runs inside too, and Stop and Close leave no
// container, link, cgroup or directory of the run.
func TestLXC(t *testing.T) {
	p, env := newPlatform(t, platform.Options{CPUSet: "0", Memory: "512m"})
	defer p.Close()
	ctx := context.Background()
	s, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	addr := s.Addr("redis")
	if err := waitFrom(ctx, env.Client, addr); err != nil {
		t.Fatalf("from the client host: %v; %s", err, s.Describe())
	}
	t.Logf("%s", s.Describe())
	if !strings.HasPrefix(addr, "10.213.") || !strings.Contains(s.Describe(), "LXC container") {
		t.Errorf("address %s, Describe %q: want the container's bridge address", addr, s.Describe())
	}
	c := s.(*server).c
	if b, err := os.ReadFile(filepath.Join(cgroup.Root, "cpuset", c.cgroup, "cpuset.cpus")); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Errorf("cpuset.cpus of the container = %q, want 0", b)
	}
	cpu := s.(platform.CPUReporter)
	before, err := cpu.CPUTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if err := redisproto.PingDial(ctx, env.Client.DialContext, addr); err != nil {
			t.Fatal(err)
		}
	}
	after, err := cpu.CPUTime(ctx)
	if err != nil || after <= before {
		t.Errorf("CPU time %v then %v (%v): want it to grow with the load", before, after, err)
	}
	res, err := p.RunJob(ctx, "t1", platform.Spec{Name: "job", Command: func(l platform.Listen) []string {
		return []string{"sh", "-c", "cat /proc/1/cmdline | tr '\\0' ' '; hostname"}
	}})
	if err != nil || !strings.Contains(string(res.Stdout), vmagent.SupervisorPath) {
		t.Errorf("job: %v, stdout %q: want it to run in a container whose init is the agent", err, res.Stdout)
	}
	// A server reaches another server's container across the run's bridge
	// (its Listen admits the bridge's subnet).
	host, port, _ := net.SplitHostPort(addr)
	res, err = p.RunJob(ctx, "t1", platform.Spec{Name: "peer", Command: func(l platform.Listen) []string {
		return []string{"timeout", "10", "redis-cli", "-h", host, "-p", port, "ping"}
	}})
	if err != nil || !strings.Contains(string(res.Stdout), "PONG") {
		t.Errorf("a peer container asking the server at %s: %v, stdout %q stderr %q: want PONG", addr, err, res.Stdout, res.Stderr)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.LogDir, "t1-redis.log")); err != nil {
		t.Errorf("the server's log: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(env.Run); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
}

// TestLXCCrashCleanup leaves a running container behind, as a crashed run
// would, and checks that cleanup's process, link, cgroup and temp-dir
// sweepers leave nothing of it.
func TestLXCCrashCleanup(t *testing.T) {
	p, env := newPlatform(t, platform.Options{})
	ctx := context.Background()
	s, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFrom(ctx, env.Client, s.Addr("redis")); err != nil {
		t.Fatal(err)
	}
	dir := state.Dir{Root: t.TempDir()}
	sweepers := append([]cleanup.Sweeper{cleanup.Processes{Dir: dir}, cleanup.Cgroups{}, cleanup.TempDirs{}}, cleanup.NetworkSweepers()...)
	rep := cleanup.Clean(ctx, dir, sweepers, cleanup.Options{Run: env.Run})
	t.Logf("removed %q", rep.Removed)
	if len(rep.Errors) > 0 {
		t.Errorf("cleanup errors: %v", rep.Errors)
	}
	deadline := time.Now().Add(5 * time.Second)
	left := leftovers(env.Run)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left = leftovers(env.Run)
	}
	if len(left) > 0 {
		t.Errorf("left after cleanup: %v", left)
	}
	p.mu.Lock()
	p.live, p.br, p.path = map[string]*container{}, nil, ""
	p.mu.Unlock()
}

// leftovers lists what of run is left: processes carrying its ID, links
// with its alias, iptables rules with its comment, cgroups, temp dirs.
func leftovers(run runid.ID) []string {
	var out []string
	key := []byte(runid.EnvVar + "=" + string(run))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, key) {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join("/proc", e.Name()), &st) == nil {
				comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
				out = append(out, "process "+e.Name()+" "+strings.TrimSpace(string(comm)))
			}
		}
	}
	// The platform's links (its bridge and veths: nnx...); the client
	// host's carry the same alias.
	b, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "nnx"+run.Short()) {
			out = append(out, "link "+strings.TrimSuffix(f[1], ":"))
		}
	}
	// The bridge's forward rule, by the run's comment and the bridge's
	// name (the client host's rules go when the test ends).
	rules, _ := exec.Command("iptables-save").Output()
	for _, l := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(l, "-A ") && strings.Contains(l, runid.Label+"="+string(run)) && strings.Contains(l, "nnx"+run.Short()) {
			out = append(out, "iptables rule "+l)
		}
	}
	for _, l := range cgroup.Leftovers(run) {
		out = append(out, "cgroup "+l.Dir)
	}
	dirs, _ := state.TempDirs(run)
	for _, d := range dirs {
		out = append(out, "temp dir "+d)
	}
	return out
}
