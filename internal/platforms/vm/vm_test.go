package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// The test binary is the guest's /init in these tests, as nearnative is in
// real runs.
func TestMain(m *testing.M) {
	if vmagent.IsInit() {
		os.Exit(vmagent.Main())
	}
	if len(os.Args) > 1 && os.Args[1] == vmagent.StdioArg {
		os.Exit(agentMain(os.Args[2:])) // a sut host's agent (on_test.go)
	}
	os.Exit(m.Run())
}

func TestPickSubnet(t *testing.T) {
	run := runid.ID("20261121-201300-abcd")
	p, err := pickSubnet(run, "")
	if err != nil || !strings.HasPrefix(p, "10.213.") {
		t.Fatalf("pickSubnet = %q, %v", p, err)
	}
	q, err := pickSubnet(run, "10.213.0.0/16 dev x\n"+p+"0/24 dev nnb")
	if err != nil || q == p {
		t.Fatalf("pickSubnet with %s taken = %q, %v", p, q, err)
	}
}

func TestModuleOrder(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/a/virtio_ring.ko:\nkernel/a/virtio.ko: kernel/a/virtio_ring.ko\n" +
		"kernel/b/virtio_blk.ko: kernel/a/virtio.ko kernel/a/virtio_ring.ko\n"
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644)
	got, err := moduleOrder(dir, []string{"virtio_blk"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, filepath.Base(g))
	}
	if strings.Join(names, " ") != "virtio_ring.ko virtio.ko virtio_blk.ko" {
		t.Fatalf("order = %v", names)
	}
	if _, err := moduleOrder(dir, []string{"nope"}); err == nil {
		t.Fatal("unknown module: no error")
	}
}

func TestOptions(t *testing.T) {
	env := platform.Env{Run: runid.New()}
	if _, err := New("vm", env, state.Dir{Root: t.TempDir()}, platform.Options{CPUSet: "0"}, nil); err == nil {
		t.Fatal("cpuset accepted")
	}
	p, err := New("vm", env, state.Dir{Root: t.TempDir()}, platform.Options{VCPUs: 1, VMMemory: "512m"}, nil)
	if err != nil || p.vcpus != 1 || p.memMiB != 512 {
		t.Fatalf("New = %+v, %v", p, err)
	}
	if _, err := New("vm", env, state.Dir{Root: t.TempDir()}, platform.Options{VMMemory: "1m"}, nil); err == nil {
		t.Fatal("1m guest accepted")
	}
}

// testPlatform returns a platform of kind on the workload image, or skips.
func testPlatform(t *testing.T, ctx context.Context, kind string) (*Platform, runid.ID, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a QEMU guest; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for the bridge and tap")
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatalf("no Docker engine to export the workload image from: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	ref := os.Getenv("NEARNATIVE_TEST_VM_IMAGE")
	if ref == "" {
		cfg, err := image.DefaultConfig()
		if err != nil {
			t.Fatalf("no workload image config: %v", err)
		}
		var present bool
		ref, present, err = image.Current(ctx, eng.API(), cfg)
		if err != nil || !present {
			t.Fatalf("workload image %s not built (nearnative image build): %v", ref, err)
		}
	}
	run := runid.New()
	logDir := t.TempDir()
	env := platform.Env{Run: run, LogDir: logDir, Image: ref}
	p, err := NewKind(kind, kind, env, state.Home(), platform.Options{}, func(context.Context) (client.APIClient, error) { return eng.API(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx); err != nil {
		t.Fatalf("vm platform unavailable: %v", err)
	}
	t.Logf("acceleration: %s", p.Acceleration(ctx))
	return p, run, logDir
}

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Files: []platform.File{{Path: "hello.txt", Content: []byte("hi\n")}},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
		},
	}
}

// TestGuestDockerRedis runs redis-server in a container of the guest's
// Docker engine, published on the guest's address and on its host network.
// vmDockerTest skips the test unless NEARNATIVE_VM_DOCKER_TEST=1 (vm-docker
// guests take minutes under TCG: make test-vm-docker) and returns its
// context, bounded to 20 minutes.
func vmDockerTest(t *testing.T) context.Context {
	t.Helper()
	if os.Getenv("NEARNATIVE_VM_DOCKER_TEST") != "1" {
		t.Skip("vm-docker guests take minutes under TCG: run `make test-vm-docker` (NEARNATIVE_VM_DOCKER_TEST=1)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestGuestDockerRedis builds the vm-docker disk (about 5 minutes under TCG
// on a fresh machine) and boots dockerd in guests (about a minute each), so
// it runs only when asked: make test-vm-docker, or NEARNATIVE_VM_DOCKER_TEST=1.
func TestGuestDockerRedis(t *testing.T) {
	ctx := vmDockerTest(t)
	for _, kind := range []string{KindDockerNAT, KindDockerHost} {
		t.Run(kind, func(t *testing.T) {
			p, run, _ := testPlatform(t, ctx, kind)
			defer func() {
				p.Close()
				assertClean(t, run)
			}()
			start := time.Now()
			srv, err := p.Start(ctx, "t1", redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Start took %v (disk cached: %v, built in %v): %s", time.Since(start), p.disk.Cached, p.disk.Took, srv.Describe())
			defer srv.Stop(ctx)
			addr := srv.Addr("redis")
			if err := redisproto.WaitReady(ctx, addr, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := redisproto.Ping(ctx, addr); err != nil {
				t.Errorf("PING %s: %v", addr, err)
			}
			if _, err := srv.(platform.CPUReporter).CPUTime(ctx); err != nil {
				t.Errorf("CPUTime: %v", err)
			}
			stop := time.Now()
			if err := srv.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
			t.Logf("Stop took %v", time.Since(stop))
			if kind == KindDockerNAT {
				res, err := p.RunJob(ctx, "t2", platform.Spec{Name: "version", Command: func(platform.Listen) []string {
					return []string{"redis-server", "--version"}
				}})
				if err != nil || !strings.Contains(string(res.Stdout), "Redis server v=") {
					t.Errorf("RunJob: %+v, %v", res, err)
				}
			}
		})
	}
}

// TestGuestUserNet checks the fallback when no bridge can be made: QEMU
// user-mode networking with the server's port forwarded from 127.0.0.1.
func TestGuestUserNet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, run, _ := testPlatform(t, ctx, platform.VM)
	p.ForceUserNet = true
	defer func() {
		p.Close()
		assertClean(t, run)
	}()
	srv, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	t.Logf("%s", srv.Describe())
	if !strings.Contains(srv.Describe(), "user-mode networking (fallback: forced)") {
		t.Errorf("Describe does not label the fallback: %s", srv.Describe())
	}
	addr := srv.Addr("redis")
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("Addr = %s, want 127.0.0.1:port", addr)
	}
	if err := redisproto.WaitReady(ctx, addr, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.(platform.CPUReporter).CPUTime(ctx); err != nil {
		t.Errorf("CPUTime: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestGuestRedis boots a real guest under the probed acceleration from the
// workload image, runs redis-server in it, pings it from the host, runs a
// job, shuts down and checks that nothing is left.
func TestGuestRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a QEMU guest; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for the bridge and tap")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatalf("no Docker engine to export the workload image from: %v", err)
	}
	defer eng.Close()
	ref := os.Getenv("NEARNATIVE_TEST_VM_IMAGE")
	if ref == "" {
		cfg, err := image.DefaultConfig()
		if err != nil {
			t.Fatalf("no workload image config: %v", err)
		}
		var present bool
		ref, present, err = image.Current(ctx, eng.API(), cfg)
		if err != nil || !present {
			t.Fatalf("workload image %s not built (nearnative image build): %v", ref, err)
		}
	}
	run := runid.New()
	logDir := t.TempDir()
	env := platform.Env{Run: run, LogDir: logDir, Image: ref}
	// The vm's client-host test too: the load comes from a namespace of
	// the run, routed through this machine to the guests' bridge.
	ch, err := host.NewNS(ctx, run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatalf("client host: %v", err)
	}
	defer ch.Close(context.Background())
	env.Client = ch
	p, err := New("vm", env, state.Home(), platform.Options{}, func(context.Context) (client.APIClient, error) { return eng.API(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx); err != nil {
		t.Fatalf("vm platform unavailable: %v", err)
	}
	t.Logf("acceleration: %s", p.Acceleration(ctx))
	defer func() {
		p.Close()
		assertClean(t, run)
	}()

	start := time.Now()
	spec := platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Files: []platform.File{{Path: "hello.txt", Content: []byte("hi\n")}},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
		},
	}
	srv, err := p.Start(ctx, "t1", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %v (disk cached: %v, built in %v): %s", time.Since(start), p.disk.Cached, p.disk.Took, srv.Describe())
	if p.probe.Emulated() && !strings.Contains(srv.Describe(), EmulatedNote) {
		t.Errorf("Describe under TCG lacks %q: %s", EmulatedNote, srv.Describe())
	}
	addr := srv.Addr("redis")
	if err := redisproto.WaitReady(ctx, addr, 60*time.Second); err != nil {
		srv.Stop(ctx)
		t.Fatal(err)
	}
	if err := redisproto.Ping(ctx, addr); err != nil {
		t.Errorf("PING %s: %v", addr, err)
	}
	if c, err := ch.DialContext(ctx, "tcp", addr); err != nil {
		t.Errorf("the guest's redis at %s from the client host: %v", addr, err)
	} else {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("PING\r\n"))
		b := make([]byte, 7)
		if n, err := io.ReadFull(c, b); err != nil || string(b[:n]) != "+PONG\r\n" {
			t.Errorf("PING %s from the client host: %q %v", addr, b[:n], err)
		}
		c.Close()
	}
	checkTokenPrivate(t, run)
	cpu, err := srv.(platform.CPUReporter).CPUTime(ctx)
	if err != nil {
		t.Errorf("CPUTime: %v", err)
	}
	t.Logf("redis-server CPU so far: %v", cpu)
	stopStart := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(stopStart))
	if _, err := os.Stat(filepath.Join(logDir, "t1-redis-console.log")); err != nil {
		t.Errorf("no console log: %v", err)
	}

	jobStart := time.Now()
	res, err := p.RunJob(ctx, "t2", platform.Spec{Name: "version", Command: func(platform.Listen) []string {
		return []string{"redis-server", "--version"}
	}})
	if err != nil {
		t.Fatalf("RunJob: %v (stderr %s)", err, res.Stderr)
	}
	t.Logf("job took %v (command %v): %s", time.Since(jobStart), res.Wall, strings.TrimSpace(string(res.Stdout)))
	if !strings.Contains(string(res.Stdout), "Redis server v=") {
		t.Errorf("job output %q", res.Stdout)
	}
	// A guest left running (as by a crashed run) is found and removed by
	// the Sweeper.
	g, err := p.boot(ctx, "t4-orphan", nil)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Sweeper{}.Runs(ctx)
	if err != nil || !slices.Contains(runs, run) {
		t.Errorf("Sweeper.Runs = %v, %v; want %s among them", runs, err, run)
	}
	removed, err := Sweeper{}.Remove(ctx, run)
	if err != nil {
		t.Errorf("Sweeper.Remove: %v", err)
	}
	t.Logf("swept: %v", removed)
	<-g.done
	if qs := QEMUProcesses(run); len(qs) > 0 {
		t.Errorf("qemu processes left after the sweep: %v", qs)
	}
	p.Close()
	res, err = p.RunJob(ctx, "t3", platform.Spec{Name: "fail", Command: func(platform.Listen) []string {
		return []string{"sh", "-c", "echo oops >&2; exit 3"}
	}})
	if err == nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr)) != "oops" {
		t.Errorf("failing job: %+v, %v", res, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// assertClean checks that a run left no qemu process, link or overlay.
func assertClean(t *testing.T, run runid.ID) {
	t.Helper()
	links, err := RunLinks(run)
	if err != nil {
		t.Error(err)
	}
	if len(links) > 0 {
		t.Errorf("links left: %v", links)
	}
	if qs := QEMUProcesses(run); len(qs) > 0 {
		t.Errorf("qemu processes left: %v", qs)
	}
	if dirs, _ := state.TempDirs(run); len(dirs) > 0 {
		t.Errorf("temp dirs (overlays) left: %v", dirs)
	}
}

// checkTokenPrivate: the agent's token is on no QEMU command line (which
// every local user can read) but in a firmware file only root can read.
func checkTokenPrivate(t *testing.T, run runid.ID) {
	t.Helper()
	qs := QEMUProcesses(run)
	if len(qs) == 0 {
		t.Fatal("no QEMU process of the run")
	}
	for _, q := range qs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", q.PID))
		if err != nil {
			t.Fatal(err)
		}
		argv := strings.Split(string(b), "\x00")
		if strings.Contains(string(b), vmagent.ParamToken) {
			t.Errorf("the agent's token is on QEMU's command line: %q", argv)
		}
		file := ""
		for i, a := range argv {
			if a == "-fw_cfg" && i+1 < len(argv) {
				_, file, _ = strings.Cut(argv[i+1], ",file=")
			}
		}
		st, err := os.Stat(file)
		if err != nil {
			t.Fatalf("token file %q from %q: %v", file, argv, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("token file %s has mode %v, want 0600", file, st.Mode().Perm())
		}
	}
}
