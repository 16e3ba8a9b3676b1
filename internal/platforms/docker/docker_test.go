package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// Every Docker platform is a Checker.
var _ platform.Checker = (*dockerPlatform)(nil)

// TestKinds is the client-host test of each Docker path: the server is
// reached from the client host the run gives the platform (a namespace over
// a veth, docker-proxy's on this machine), at the address the path names,
// never the machine's primary address.
func TestKinds(t *testing.T) {
	primary, err := PrimaryAddr()
	if err != nil {
		t.Fatalf("PrimaryAddr: %v", err)
	}
	tests := []struct {
		kind     string
		wantHost func(t *testing.T, host, containerIP, server string)
		wantDesc string
	}{
		{platform.DockerNAT, func(t *testing.T, host, _, server string) {
			if host == "127.0.0.1" || host == primary.String() || host != server {
				t.Errorf("client host %s, want the client link's host-side address %s (not the primary address %s)", host, server, primary)
			}
		}, "(iptables DNAT)"},
		{platform.DockerProxy, func(t *testing.T, host, _, _ string) {
			if host != "127.0.0.1" {
				t.Errorf("client host %s, want 127.0.0.1", host)
			}
		}, "(userland docker-proxy)"},
		{platform.DockerBridge, func(t *testing.T, host, ip, _ string) {
			if !strings.HasPrefix(host, "172.") || host != ip {
				t.Errorf("client host %s, want the container's bridge address %s", host, ip)
			}
		}, "(veth, no NAT)"},
		{platform.DockerHost, func(t *testing.T, host, ip, server string) {
			if host != server || host == "127.0.0.1" || ip != "" {
				t.Errorf("client host %s (bridge IP %q), want the client link's host-side address %s on the host network", host, ip, server)
			}
		}, "on the host network"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			p, env := newPlatform(t, tt.kind, tt.kind, platform.Options{})
			if err := p.Check(context.Background()); err != nil {
				t.Fatalf("Check: %v", err)
			}
			s := start(t, p, "t1", redisSpec("redis"))
			addr := s.Addr("redis")
			pingRedis(t, addr)
			pingFrom(t, env.ClientHost(), addr)

			t.Logf("%s: %s", addr, s.Describe())
			host, _, _ := net.SplitHostPort(addr)
			tt.wantHost(t, host, s.(*server).bridgeIP, env.ClientHost().ServerAddr())
			if d := s.Describe(); !strings.Contains(d, tt.wantDesc) || !strings.Contains(d, ContainerName(env.Run, "t1", "redis")) {
				t.Errorf("Describe() = %q, want it to name the container and contain %q", d, tt.wantDesc)
			}
			if c := s.Command(); c[0] != "redis-server" || !slices.Contains(c, "--port") {
				t.Errorf("Command() = %q", c)
			}

			for i := 0; i < 2; i++ { // the second Stop is a no-op
				if err := s.Stop(context.Background()); err != nil {
					t.Fatalf("Stop #%d: %v", i+1, err)
				}
			}
			if _, err := testEng.API().ContainerInspect(context.Background(), s.(*server).id); !errdefs.IsNotFound(err) {
				t.Errorf("container still there after Stop (inspect err %v)", err)
			}
			log, err := os.ReadFile(filepath.Join(env.LogDir, "t1-redis.log"))
			if err != nil || !strings.Contains(string(log), "Ready to accept connections") {
				t.Errorf("log file: err %v, content %q", err, log)
			}
		})
	}
}

func TestOptionsApplied(t *testing.T) {
	opt := platform.Options{CPUSet: "0", CPUs: 0.8, Memory: "256m"}
	p, env := newPlatform(t, platform.DockerNAT, "docker-nat-pinned", opt)
	s := start(t, p, "t2", redisSpec("redis"))
	pingRedis(t, s.Addr("redis"))
	insp, err := testEng.API().ContainerInspect(context.Background(), s.(*server).id)
	if err != nil {
		t.Fatal(err)
	}
	r := insp.HostConfig.Resources
	if r.CpusetCpus != "0" || r.NanoCPUs != 800000000 || r.Memory != 256<<20 {
		t.Errorf("resources cpuset %q nanocpus %d memory %d, want 0, 800000000, %d", r.CpusetCpus, r.NanoCPUs, r.Memory, 256<<20)
	}
	t.Logf("memory swap %d, warnings %q", r.MemorySwap, s.(*server).warnings)
	if r.MemorySwap != 256<<20 && len(s.(*server).warnings) == 0 {
		t.Errorf("memory swap %d, want %d or a warning", r.MemorySwap, 256<<20)
	}
	wantLabels := map[string]string{runid.Label: string(env.Run), runid.LabelRole: "redis", LabelTrial: "t2", LabelPlatform: "docker-nat-pinned"}
	for k, v := range wantLabels {
		if insp.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, insp.Config.Labels[k], v)
		}
	}
	if !strings.Contains(s.Describe(), "cpuset=0,cpus=0.8,memory=256m") {
		t.Errorf("Describe() = %q, want the options", s.Describe())
	}
}

func TestStartStopNoLeaks(t *testing.T) {
	kinds := []string{platform.DockerHost, platform.DockerBridge, platform.DockerProxy, platform.DockerNAT}
	ps := map[string]*dockerPlatform{}
	var env platform.Env
	for i, k := range kinds {
		p, e := newPlatform(t, k, k, platform.Options{})
		if i > 0 { // one run for all four platforms
			p.env = env
		} else {
			env = e
		}
		ps[k] = p
	}
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		p := ps[kinds[i%len(kinds)]]
		s, err := p.Start(ctx, fmt.Sprintf("r%d", i), redisSpec("redis"))
		if err != nil {
			t.Fatalf("start #%d on %s: %v", i, p.name, err)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("stop #%d on %s: %v", i, p.name, err)
		}
	}
	if cs := runContainers(t, testEng, env.Run); len(cs) != 0 {
		t.Errorf("%d containers left after 20 start/stop cycles: %v", len(cs), cs[0].Names)
	}
	logs, _ := filepath.Glob(filepath.Join(env.LogDir, "*.log"))
	if len(logs) != 20 {
		t.Errorf("%d log files, want 20", len(logs))
	}
}

func TestRemoveRun(t *testing.T) {
	ctx := context.Background()
	p, env := newPlatform(t, platform.DockerBridge, "b", platform.Options{})
	other, otherEnv := newPlatform(t, platform.DockerHost, "h", platform.Options{})
	a := start(t, p, "t1", redisSpec("a"))
	b := start(t, p, "t1", redisSpec("b"))
	keep := start(t, other, "t1", redisSpec("keep"))
	netName := runid.Prefix + string(env.Run) + "-net"
	if _, err := testEng.API().NetworkCreate(ctx, netName, network.CreateOptions{Labels: map[string]string{runid.Label: string(env.Run)}}); err != nil {
		t.Fatalf("creating a labelled network: %v", err)
	}

	runs, err := testEng.Runs(ctx)
	if err != nil || !slices.Contains(runs, env.Run) || !slices.Contains(runs, otherEnv.Run) {
		t.Fatalf("Runs() = %v, %v; want both %s and %s", runs, err, env.Run, otherEnv.Run)
	}

	removed, err := testEng.RemoveRun(ctx, env.Run)
	if err != nil {
		t.Fatalf("RemoveRun: %v", err)
	}
	want := []string{
		fmt.Sprintf("container %s (run %s)", ContainerName(env.Run, "t1", "a"), env.Run),
		fmt.Sprintf("container %s (run %s)", ContainerName(env.Run, "t1", "b"), env.Run),
		fmt.Sprintf("network %s (run %s)", netName, env.Run),
	}
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Errorf("RemoveRun removed\n%q\nwant\n%q", removed, want)
	}
	if again, err := testEng.RemoveRun(ctx, env.Run); err != nil || len(again) != 0 {
		t.Errorf("second RemoveRun: %v, %v; want nothing", again, err)
	}
	runs, _ = testEng.Runs(ctx)
	if slices.Contains(runs, env.Run) || !slices.Contains(runs, otherEnv.Run) {
		t.Errorf("after RemoveRun, Runs() = %v: want %s gone and %s kept", runs, env.Run, otherEnv.Run)
	}
	pingRedis(t, keep.Addr("redis"))
	for _, s := range []platform.Server{a, b} { // already gone: Stop is fine
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop after RemoveRun: %v", err)
		}
	}
}

func TestExitAtOnce(t *testing.T) {
	p, env := newPlatform(t, platform.DockerBridge, "docker-bridge", platform.Options{})
	spec := platform.Spec{
		Name:    "bad",
		Ports:   []string{"redis"},
		Command: func(l platform.Listen) []string { return []string{"redis-server", "--port", "not-a-port"} },
	}
	_, err := p.Start(context.Background(), "t1", spec)
	if err == nil {
		t.Fatal("Start succeeded for a server that exits at once")
	}
	for _, want := range []string{"exited at once with code 1", "last log lines:", "FATAL CONFIG FILE ERROR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if cs := runContainers(t, testEng, env.Run); len(cs) != 0 {
		t.Errorf("failed Start left %d containers", len(cs))
	}
	if log, _ := os.ReadFile(filepath.Join(env.LogDir, "t1-bad.log")); !strings.Contains(string(log), "FATAL") {
		t.Errorf("log of the failed start = %q, want the redis error", log)
	}
}

func TestPortInUse(t *testing.T) {
	for _, kind := range []string{platform.DockerProxy, platform.DockerNAT, platform.DockerHost} {
		t.Run(kind, func(t *testing.T) {
			p, env := newPlatform(t, kind, kind, platform.Options{})
			tt := struct{ kind, host string }{kind, env.ClientHost().ServerAddr()} // where the port is taken
			l, err := net.Listen("tcp", net.JoinHostPort(tt.host, "0"))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			p.pickPorts = func(context.Context, platform.Spec, string) (map[string]int, error) {
				return map[string]int{"redis": port}, nil
			}
			_, err = p.Start(context.Background(), "t1", redisSpec("redis"))
			want := fmt.Sprintf("port %d (redis) on %s", port, tt.host)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "already in use") {
				t.Errorf("Start with port %s:%d taken: error %v, want it to say %q ... already in use", tt.host, port, err, want)
			}
			if cs := runContainers(t, testEng, env.Run); len(cs) != 0 {
				t.Errorf("failed Start left %d containers", len(cs))
			}
		})
	}
}

func TestSpecFilesVolumesUserEnv(t *testing.T) {
	p, _ := newPlatform(t, platform.DockerBridge, "docker-bridge", platform.Options{})
	data := t.TempDir()
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	var listen platform.Listen
	spec := platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			listen = l
			return []string{"redis-server", l.Dir + "/conf/redis.conf", "--port", fmt.Sprint(l.Port("redis"))}
		},
		Env:     map[string]string{"NN_TEST": "1"},
		User:    "65534:65534",
		Volumes: []platform.Volume{{HostPath: data, Path: "/data"}},
		Files: []platform.File{{
			Path:    "conf/redis.conf",
			Content: []byte("bind 0.0.0.0\nsave \"\"\nappendonly no\nprotected-mode no\ndir " + platform.ContainerDir + "\nlogfile /data/redis.log\n"),
		}},
	}
	s := start(t, p, "t1", spec)
	if listen.Dir != platform.ContainerDir {
		t.Errorf("Listen.Dir = %q, want %q", listen.Dir, platform.ContainerDir)
	}
	pingRedis(t, s.Addr("redis"))
	// SAVE writes dump.rdb into the server's directory as user 65534.
	if got, err := redisCommand(s.Addr("redis"), "SAVE"); err != nil || got != "+OK" {
		t.Errorf("SAVE in %s as user 65534: %q, %v", platform.ContainerDir, got, err)
	}
	insp, err := testEng.API().ContainerInspect(context.Background(), s.(*server).id)
	if err != nil {
		t.Fatal(err)
	}
	if insp.Config.User != "65534:65534" || !slices.Contains(insp.Config.Env, "NN_TEST=1") || insp.Config.WorkingDir != platform.ContainerDir {
		t.Errorf("user %q env %q workdir %q", insp.Config.User, insp.Config.Env, insp.Config.WorkingDir)
	}
	log, err := os.ReadFile(filepath.Join(data, "redis.log"))
	if err != nil || !strings.Contains(string(log), "Ready to accept connections") {
		t.Errorf("redis log in the volume: %v %q", err, log)
	}
}

func TestDaemonDown(t *testing.T) {
	tests := []struct {
		host  string
		cause string
	}{
		{"unix:///nonexistent/docker.sock", "dial unix /nonexistent/docker.sock: connect: no such file or directory"},
		{"tcp://127.0.0.1:1", "Cannot connect to the Docker daemon at tcp://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tt.host)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			eng, err := Connect(ctx)
			if err == nil {
				eng.Close()
				t.Fatal("Connect succeeded without a daemon")
			}
			msg := err.Error()
			prefix := "cannot reach the Docker daemon (" + tt.host + "): " + tt.cause
			suffix := ": start it with `make setup` or `dockerd &`"
			if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, suffix) || strings.Contains(msg, "\n") {
				t.Errorf("error %q\nwant one line %q...%q", msg, prefix, suffix)
			}
			if !errors.Is(err, platform.ErrUnavailable) {
				t.Errorf("error does not match platform.ErrUnavailable")
			}
		})
	}
}

func TestCheckImageMissing(t *testing.T) {
	eng, _ := needEngine(t)
	env := platform.Env{Run: runid.New(), Image: "nearnative/does-not-exist:1"}
	p, err := New(platform.DockerProxy, "docker-proxy", env, eng, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.(platform.Checker).Check(context.Background())
	want := "image nearnative/does-not-exist:1 missing: run `nearnative image build`"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, platform.ErrUnavailable) {
		t.Errorf("Check() = %v, want an ErrUnavailable saying %q", err, want)
	}
}

func TestEngineInfo(t *testing.T) {
	eng, img := needEngine(t)
	info, err := eng.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || info.APIVersion == "" || info.StorageDriver == "" || info.CgroupDriver == "" || info.Error != "" {
		t.Errorf("Info() = %+v", info)
	}
	t.Logf("engine: %+v", info)
	for _, tt := range []struct {
		ref  string
		want bool
	}{{img, true}, {"nearnative/does-not-exist:1", false}} {
		if got, err := eng.imageExists(context.Background(), tt.ref); got != tt.want || err != nil {
			t.Errorf("imageExists(%s) = %v, %v; want %v", tt.ref, got, err, tt.want)
		}
	}
}
