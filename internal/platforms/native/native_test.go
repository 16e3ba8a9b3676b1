package native

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
		},
	}
}

func newPlatform(t *testing.T, opt platform.Options) (*Platform, runid.ID, state.Dir) {
	t.Helper()
	dir := state.Dir{Root: t.TempDir()}
	run := runid.New()
	p, err := New("native", platform.Env{Run: run, LogDir: filepath.Join(dir.RunDir(run), "logs")}, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, run, dir
}

func TestRedisPing(t *testing.T) {
	p, _, _ := newPlatform(t, platform.Options{})
	ctx := context.Background()
	s, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if !strings.HasPrefix(s.Addr("redis"), "127.0.0.1:") {
		t.Fatalf("native address %s is not on loopback", s.Addr("redis"))
	}
	if err := redisproto.WaitReady(ctx, s.Addr("redis"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := redisproto.Ping(ctx, s.Addr("redis")); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

func TestStartStopNoLeaks(t *testing.T) {
	p, run, dir := newPlatform(t, platform.Options{})
	ctx := context.Background()
	var pids []int
	for i := 0; i < 20; i++ {
		s, err := p.Start(ctx, "t"+strconv.Itoa(i), redisSpec())
		if err != nil {
			t.Fatal(err)
		}
		if err := redisproto.WaitReady(ctx, s.Addr("redis"), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, s.(*server).cmd.Process.Pid)
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// The port is free again at once.
		l, err := net.Listen("tcp", s.Addr("redis"))
		if err != nil {
			t.Fatalf("port still held after Stop: %v", err)
		}
		l.Close()
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still exists after Stop", pid)
		}
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("temp dirs left: %v", left)
	}
	if files, _ := filepath.Glob(filepath.Join(ProcDir(dir, run), "*.json")); len(files) > 0 {
		t.Errorf("state files left: %v", files)
	}
	logs, _ := filepath.Glob(filepath.Join(dir.RunDir(run), "logs", "*.log"))
	if len(logs) != 20 {
		t.Errorf("want 20 server logs kept, got %d", len(logs))
	}
}

func TestLimitsApplied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroup limits need root")
	}
	p, run, _ := newPlatform(t, platform.Options{CPUSet: "0", CPUs: 0.5, Memory: "256m"})
	ctx := context.Background()
	s, err := p.Start(ctx, "lim", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if err := redisproto.WaitReady(ctx, s.Addr("redis"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pid := s.(*server).cmd.Process.Pid
	// The server itself (not only the wrapper shell) is in the group with the limits.
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cg), "/nearnative/"+string(run)+"/lim-redis") {
		t.Fatalf("server not in its cgroup:\n%s", cg)
	}
	comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if strings.TrimSpace(string(comm)) != "redis-server" {
		t.Fatalf("pid %d is %q, want redis-server (wrapper must exec)", pid, comm)
	}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if !strings.Contains(string(status), "Cpus_allowed_list:\t0\n") {
		t.Errorf("cpuset not applied:\n%s", status)
	}
	if !cgroup.IsV2() {
		q, _ := os.ReadFile(filepath.Join(cgroup.Root, "cpu", cgroup.Parent, string(run), "lim-redis", "cpu.cfs_quota_us"))
		if strings.TrimSpace(string(q)) != "50000" {
			t.Errorf("cpu quota = %q, want 50000", q)
		}
		m, _ := os.ReadFile(filepath.Join(cgroup.Root, "memory", cgroup.Parent, string(run), "lim-redis", "memory.limit_in_bytes"))
		if strings.TrimSpace(string(m)) != strconv.Itoa(256<<20) {
			t.Errorf("memory limit = %q", m)
		}
	}
	s.Stop(ctx)
	p.Close()
	if left := cgroup.Leftovers(run); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

func TestServerExitingAtOnceIsReported(t *testing.T) {
	p, _, _ := newPlatform(t, platform.Options{})
	spec := redisSpec()
	spec.Command = func(l platform.Listen) []string {
		return []string{"redis-server", "--no-such-option", "1"}
	}
	_, err := p.Start(context.Background(), "bad", spec)
	if err == nil || !strings.Contains(err.Error(), "exited at once") || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("want an exit-at-once error with the log tail, got %v", err)
	}
}

func TestFilesLandInPrivateDir(t *testing.T) {
	p, _, _ := newPlatform(t, platform.Options{})
	spec := redisSpec()
	spec.Files = []platform.File{{Path: "conf/redis.conf", Content: []byte("save \"\"\nappendonly no\n")}}
	spec.Command = func(l platform.Listen) []string {
		return []string{"redis-server", filepath.Join(l.Dir, "conf/redis.conf"), "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis"))}
	}
	ctx := context.Background()
	s, err := p.Start(ctx, "conf", spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if err := redisproto.WaitReady(ctx, s.Addr("redis"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestRunJob(t *testing.T) {
	p, run, _ := newPlatform(t, platform.Options{})
	ctx := context.Background()
	spec := platform.Spec{Name: "job",
		Files: []platform.File{{Path: "in.txt", Content: []byte("hello\n")}},
		Command: func(l platform.Listen) []string {
			return []string{"sh", "-c", "cat " + filepath.Join(l.Dir, "in.txt") + "; echo oops >&2; exit 3"}
		}}
	res, err := p.RunJob(ctx, "j1", spec)
	if err == nil || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("want exit-code error, got %v", err)
	}
	if string(res.Stdout) != "hello\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Errorf("got stdout %q stderr %q code %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	spec.Command = func(platform.Listen) []string { return []string{"sleep", "30"} }
	start := time.Now()
	if _, err := p.RunJob(cctx, "j2", spec); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled job: err %v after %v", err, time.Since(start))
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("temp dirs left: %v", left)
	}
}

// TestRunJobKillsSetsidChildren: a child that starts its own session leaves
// the process group; the job's cgroup still reaches it.
func TestRunJobKillsSetsidChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tracking groups need root")
	}
	p, run, _ := newPlatform(t, platform.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	spec := platform.Spec{Name: "escape", Command: func(platform.Listen) []string {
		return []string{"sh", "-c", "setsid sleep 60 & sleep 60"}
	}}
	if _, err := p.RunJob(ctx, "esc", spec); err == nil {
		t.Fatal("cancelled job returned no error")
	}
	time.Sleep(100 * time.Millisecond)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "NEARNATIVE_RUN="+string(run)) {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			t.Errorf("process %s (%s) of the job survived", e.Name(), strings.TrimSpace(string(comm)))
		}
	}
}

// TestStartWaitsOnlyForTheExec: a good server's start returns shortly after
// the server has exec'd (the early-exit window), not after the exec timeout.
func TestStartWaitsOnlyForTheExec(t *testing.T) {
	p, _, _ := newPlatform(t, platform.Options{})
	ctx := context.Background()
	start := time.Now()
	s, err := p.Start(ctx, "quick", redisSpec())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if took >= execTimeout {
		t.Errorf("Start took %v: it waited for the exec timeout instead of the server's exec", took)
	}
}

// TestClientHost is native's client-host test: with the run's client in a
// network namespace, a native server listens on the link's host-side
// address (not 127.0.0.1, not a wildcard) and the client reaches it over
// the link; a server beside the driver runs inside the namespace, on its
// side of the link, which the driver reaches as a neighbour and this
// machine reaches for its readiness probe.
func TestClientHost(t *testing.T) {
	if err := host.Check(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	dir := state.Dir{Root: t.TempDir()}
	run := runid.New()
	c, err := host.NewNS(ctx, run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	env := platform.Env{Run: run, LogDir: filepath.Join(dir.RunDir(run), "logs"), Client: c}

	p, err := New("native", env, dir, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if h, _, _ := net.SplitHostPort(s.Addr("redis")); h != c.ServerAddr() {
		t.Fatalf("native address %s, want the client link's host side %s", s.Addr("redis"), c.ServerAddr())
	}
	if err := redisproto.WaitReady(ctx, s.Addr("redis"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pingFrom(t, c, s.Addr("redis"))
	if !strings.Contains(s.Describe(), "client via "+c.ServerAddr()) {
		t.Errorf("Describe = %q", s.Describe())
	}

	b, err := Beside("host", env, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bs, err := b.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Stop(ctx)
	if h, _, _ := net.SplitHostPort(bs.Addr("redis")); h != c.ClientAddr() {
		t.Fatalf("beside the driver: address %s, want the namespace's side %s", bs.Addr("redis"), c.ClientAddr())
	}
	if err := redisproto.WaitReady(ctx, bs.Addr("redis"), 10*time.Second); err != nil {
		t.Fatalf("this machine cannot reach the server beside the driver: %v", err)
	}
	pingFrom(t, c, bs.Addr("redis"))
	// It runs in the namespace: its network namespace is the client's.
	pid := bs.(*server).cmd.Process.Pid
	nsOf := func(pid string) string { l, _ := os.Readlink("/proc/" + pid + "/ns/net"); return l }
	if got, self := nsOf(strconv.Itoa(pid)), nsOf("self"); got == self || got == "" {
		t.Errorf("the server beside the driver runs in this machine's namespace (%s)", got)
	}
}

// pingFrom PINGs the Redis at addr from client host c.
func pingFrom(t *testing.T, c host.Host, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s from the client host: %v", addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	conn.Write([]byte("PING\r\n"))
	buf := make([]byte, 7)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING %s from the client host: %q %v", addr, buf[:n], err)
	}
}

// TestStartPicksPortsAgain: a port picked free and taken before the
// server binds it (by another process's connection) makes Start pick
// again, up to portTries times, then fail saying so.
func TestStartPicksPortsAgain(t *testing.T) {
	p, run, _ := newPlatform(t, platform.Options{})
	ctx := context.Background()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	picks := 0
	p.assign = func(spec platform.Spec, host string) (map[string]int, error) {
		picks++
		if picks == 1 {
			return map[string]int{"redis": busy}, nil
		}
		return platform.AssignPorts(spec, host)
	}
	s, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatalf("Start with its first port taken: %v", err)
	}
	s.Stop(ctx)
	if picks != 2 || s.Addr("redis") == net.JoinHostPort("127.0.0.1", strconv.Itoa(busy)) {
		t.Errorf("%d picks, server at %s (port %d was taken)", picks, s.Addr("redis"), busy)
	}

	picks = 0
	p.assign = func(platform.Spec, string) (map[string]int, error) {
		picks++
		return map[string]int{"redis": busy}, nil
	}
	if _, err := p.Start(ctx, "t2", redisSpec()); err == nil || !strings.Contains(err.Error(), "is in use") || picks != portTries {
		t.Errorf("Start with every pick taken = %v after %d picks, want %d", err, picks, portTries)
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("temp dirs left: %v", left)
	}
}
