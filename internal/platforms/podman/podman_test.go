package podman

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
)

func TestParseSubRange(t *testing.T) {
	text := "alice:100000:65536\nnearnative-rootless:165536:65536\n1005:300000:10\n"
	for _, c := range []struct {
		name, uid   string
		start, size int
		ok          bool
	}{
		{"nearnative-rootless", "1001", 165536, 65536, true},
		{"bob", "1005", 300000, 10, true},
		{"carol", "1006", 0, 0, false},
	} {
		s, n, ok := parseSubRange(strings.NewReader(text), c.name, c.uid)
		if s != c.start || n != c.size || ok != c.ok {
			t.Errorf("%s: %d %d %v, want %d %d %v", c.name, s, n, ok, c.start, c.size, c.ok)
		}
	}
	sub := [2]int{100000, 65536}
	for _, c := range [][2]int{{0, 1001}, {1, 100000}, {999, 100998}, {70000, 65534}} {
		if got := mapID(c[0], 1001, sub); got != c[1] {
			t.Errorf("mapID(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", fmt.Sprint(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no"}
		},
	}
}

// newPlatform makes a platform of kind for a fresh run with a client host
// of its own.
func newPlatform(t *testing.T, kind string) (*Platform, platform.Env, *docker.Daemon) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Podman; skipped in -short mode")
	}
	eng, ref := testenv.WorkloadImage(t)
	run := runid.New()
	client, err := host.NewNS(context.Background(), run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatalf("client host: %v", err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	env := platform.Env{Run: run, LogDir: t.TempDir(), Image: ref, Client: client, Log: testenv.Log{T: t}}
	p, err := New(kind, kind, env, platform.Options{}, func(context.Context) (*docker.Daemon, error) { return eng, nil })
	if err != nil {
		t.Fatal(err)
	}
	return p, env, eng
}

// TestPodman starts Redis on each Podman platform: the server is reached
// from the client host on the published port of the client link's
// host-side address, its CPU is read from the container's cgroup (the one
// nearnative made, rootless), and Stop and Close leave no container,
// service, cgroup or directory of the run.
func TestPodman(t *testing.T) {
	for _, kind := range []string{platform.Podman, platform.PodmanRootless} {
		t.Run(kind, func(t *testing.T) {
			p, env, _ := newPlatform(t, kind)
			defer p.Close()
			ctx := context.Background()
			if err := p.Check(ctx); err != nil {
				t.Fatalf("Check (make setup prepares Podman): %v", err)
			}
			s, err := p.Start(ctx, "t1", redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop(ctx)
			addr := s.Addr("redis")
			if !strings.HasPrefix(addr, env.Client.ServerAddr()+":") {
				t.Errorf("address %s, want the client link's host-side address %s", addr, env.Client.ServerAddr())
			}
			if err := waitFrom(ctx, env.Client, addr); err != nil {
				t.Fatalf("from the client host: %v; %s", err, s.Describe())
			}
			t.Logf("%s", s.Describe())
			if d := s.Describe(); !strings.Contains(d, "Podman") || !strings.Contains(d, "published "+addr) {
				t.Errorf("Describe() = %q, want Podman and the published address", d)
			}
			// What publishes the port is what the service reports, not
			// assumed: rootful, its network backend (setup installs netavark).
			if kind == platform.Podman && (p.svc.backend == "" || !strings.Contains(s.Describe(), publishVia(p.svc.backend))) {
				t.Errorf("network backend %q, Describe() = %q: want the backend the service reports, and the port published by it", p.svc.backend, s.Describe())
			}
			cpu := s.(platform.CPUReporter)
			before, err := cpu.CPUTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 1000; i++ {
				if err := redisproto.PingDial(ctx, env.Client.DialContext, addr); err != nil {
					t.Fatal(err)
				}
			}
			after, err := cpu.CPUTime(ctx)
			if err != nil || after <= before {
				t.Errorf("CPU time %v then %v (%v): want it to grow with the load", before, after, err)
			}
			src := s.(platform.CPUDescriber).CPUSource()
			if kind == platform.PodmanRootless {
				if !strings.Contains(src, "nearnative/"+string(env.Run)) {
					t.Errorf("CPUSource() = %q, want the run's cgroup", src)
				}
				over, err := s.(platform.OverheadReporter).OverheadCPUTime(ctx)
				if err != nil || over <= 0 {
					t.Errorf("rootlessport and slirp4netns used %v (%v), want some CPU for 1000 connections", over, err)
				}
			}
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			// A job writes a host directory of root's, mode 0700 (fio's
			// data directory): a rootless container's root must own it.
			vol, err := os.MkdirTemp("", "nn-podman-test-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(vol)
			res, err := p.RunJob(ctx, "t1", platform.Spec{Name: "job", Volumes: []platform.Volume{{HostPath: vol, Path: "/data"}},
				Command: func(platform.Listen) []string { return []string{"sh", "-c", "echo written > /data/f && cat /data/f"} }})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != "written" {
				t.Errorf("job writing a volume: %v (%s%s)", err, res.Stdout, res.Stderr)
			}
			if runs, err := p.svc.Engine().Runs(ctx); err != nil || contains(runs, env.Run) {
				t.Errorf("after Stop the run still has containers (%v)", err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if left := leftovers(env.Run); len(left) > 0 {
				t.Errorf("left after Close: %v", left)
			}
		})
	}
}

// TestPodmanCrashCleanup kills a run's service and leaves its container, as
// a crash would, and checks that cleanup's sweepers (processes, then
// Podman's containers, cgroups, temp dirs) leave nothing of it.
func TestPodmanCrashCleanup(t *testing.T) {
	for _, kind := range []string{platform.Podman, platform.PodmanRootless} {
		t.Run(kind, func(t *testing.T) {
			p, env, _ := newPlatform(t, kind)
			ctx := context.Background()
			s, err := p.Start(ctx, "t1", redisSpec())
			if err != nil {
				p.Close() // no crash yet: its service must not outlive the test
				t.Fatal(err)
			}
			if err := waitFrom(ctx, env.Client, s.Addr("redis")); err != nil {
				s.Stop(ctx)
				p.Close()
				t.Fatal(err)
			}
			// The crash: the service and what it forked die, the
			// container stays.
			syscall.Kill(-p.svc.cmd.Process.Pid, syscall.SIGKILL)
			<-p.svc.done
			dir := state.Dir{Root: t.TempDir()}
			sweepers := []cleanup.Sweeper{cleanup.Processes{Dir: dir}, Sweeper{Rootless: kind == platform.PodmanRootless}, cleanup.Cgroups{}, cleanup.TempDirs{}}
			rep := cleanup.Clean(ctx, dir, sweepers, cleanup.Options{Run: env.Run})
			t.Logf("removed %q", rep.Removed)
			if len(rep.Errors) > 0 {
				t.Errorf("cleanup errors: %v", rep.Errors)
			}
			found := false
			for _, r := range rep.Removed {
				found = found || strings.Contains(r, "Podman container "+docker.ContainerName(env.Run, "t1", "redis"))
			}
			if !found {
				t.Errorf("cleanup did not remove the container: %q", rep.Removed)
			}
			if runs, err := (Sweeper{Rootless: kind == platform.PodmanRootless}).Runs(ctx); err != nil || contains(runs, env.Run) {
				t.Errorf("after cleanup Podman still has containers of the run (%v)", err)
			}
			if left := leftovers(env.Run); len(left) > 0 {
				t.Errorf("left after cleanup: %v", left)
			}
			p.svc = nil // gone; Close has nothing to stop
			p.Close()
		})
	}
}

// waitFrom waits for Redis at addr to answer the client host.
func waitFrom(ctx context.Context, h host.Host, addr string) error {
	return platform.WaitReady(ctx, 20*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		return redisproto.PingDial(ctx, h.DialContext, addr)
	})
}

func contains(ids []runid.ID, id runid.ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// leftovers lists what of run is left on this machine: processes carrying
// its ID, its temp dirs, its cgroups.
func leftovers(run runid.ID) []string {
	var out []string
	key := []byte(runid.EnvVar + "=" + string(run))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, key) {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			out = append(out, "process "+e.Name()+" "+strings.TrimSpace(string(comm)))
		}
	}
	dirs, _ := state.TempDirs(run)
	for _, d := range dirs {
		out = append(out, "temp dir "+d)
	}
	for _, l := range cgroup.Leftovers(run) {
		out = append(out, "cgroup "+l.Dir)
	}
	return out
}

// TestServiceExitEndsWait: a service that exits at once (a Podman that
// cannot use its storage here, as in a container whose root is overlayfs)
// fails StartService at once with its log, instead of waiting out the
// 30 s start timeout: every run's reaping starts two of these. A fake
// podman on PATH stands in for the broken one.
func TestServiceExitEndsWait(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho 'Error: kernel does not support overlay fs' >&2\nexit 125\n"
	if err := os.WriteFile(filepath.Join(dir, "podman"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	_, err := StartService(context.Background(), runid.New(), false)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("StartService took %v after the service exited (the start timeout is %v)", took, startTimeout)
	}
	if err == nil || !strings.Contains(err.Error(), "the service exited") || !strings.Contains(err.Error(), "does not support overlay") {
		t.Errorf("err = %v, want the exit and the service's log", err)
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }
