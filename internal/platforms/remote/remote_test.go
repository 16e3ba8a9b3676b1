package remote_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sshhost"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/testbed"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// The test binary is pushed to the test-bed hosts and serves as
// nearnative's agent command there (with --free-ports too).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == vmagent.StdioArg {
		fs := flag.NewFlagSet("agent", flag.ExitOnError)
		n := fs.Int("free-ports", 0, "")
		on := fs.String("on", "127.0.0.1", "")
		fs.Parse(os.Args[2:])
		if *n > 0 {
			ports, err := platform.FreePorts(*on, *n)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			for _, p := range ports {
				fmt.Print(p, " ")
			}
			os.Exit(0)
		}
		if err := vmagent.ServeStdio(context.Background(), os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// connectTestBed builds test bed cfg (taken down when the test ends) and
// connects to its hosts (closed when the test ends).
func connectTestBed(t *testing.T, cfg testbed.Config) *sshhost.Set {
	t.Helper()
	ctx := context.Background()
	file, err := testbed.Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testbed.Down(context.Background(), cfg) })
	f, err := hostfile.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := sshhost.ConnectAll(ctx, f, sshhost.Options{RemoteBinary: filepath.Join(t.TempDir(), "nearnative")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

// TestNativeOnSUTHost: a server on the sut host listens on that host's
// address alone (never a wildcard), is reached from the driver host,
// reports its CPU, and Stop removes its process and directory.
func TestNativeOnSUTHost(t *testing.T) {
	if err := testbed.Check(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	ctx := context.Background()
	cfg := testbed.Config{Dir: t.TempDir(), Tag: fmt.Sprintf("r%02d", rand.IntN(100)), Hosts: 2}
	set := connectTestBed(t, cfg)
	sut := set.SUT("redis")
	env := platform.Env{Run: runid.New(), LogDir: t.TempDir(), Client: set.Client(sut)}
	p, err := remote.New("native", func(string) remote.Agent { return sut }, []remote.Agent{sut}, env, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := platform.Spec{Name: "redis", Ports: []string{"redis"}, User: "redis",
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")), "--save", "", "--protected-mode", "no", "--dir", l.Dir}
		}}
	srv, err := p.Start(ctx, "t1", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) }) // a second Stop is no error
	addr := srv.Addr("redis")
	host, port, _ := net.SplitHostPort(addr)
	if host != sut.Host.Address {
		t.Fatalf("server at %s, want the sut host's address %s", addr, sut.Host.Address)
	}
	// Reached from the driver host, through its SSH connection.
	drv := set.Client(sut)
	if err := redisproto.PingDial(ctx, drv.DialContext, addr); err != nil {
		t.Fatalf("PING from driver host: %v", err)
	}
	out, err := exec.Command("nsenter", "--net=/run/netns/nntb-"+cfg.Tag+"1", "ss", "-ltnH").Output()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, ":"+port+" ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], sut.Host.Address+":"+port) {
		t.Fatalf("listening sockets on port %s: %q, want only %s", port, lines, addr)
	}
	cpu, err := srv.(platform.CPUReporter).CPUTime(ctx)
	if err != nil || cpu < 0 {
		t.Fatalf("CPU time %v, %v", cpu, err)
	}
	// The test bed's hosts are this machine: its machine reads as this one,
	// which the CPU account then reads here rather than twice.
	ms, err := srv.(platform.MachineReporter).MachineCPU(ctx)
	local, _ := sysinfo.BootID()
	if err != nil || ms.BootID != local || !ms.SUT || ms.Name != sut.Host.Name || len(ms.Sample.PerCPU) == 0 {
		t.Fatalf("machine %s (boot %s, sut %v, %d CPUs), %v; want %s, this machine's boot %s, a sut", ms.Name, ms.BootID, ms.SUT, len(ms.Sample.PerCPU), err, sut.Host.Name, local)
	}
	dirs, _ := filepath.Glob("/tmp/" + runid.Prefix + string(env.Run) + "-*")
	if len(dirs) != 1 {
		t.Fatalf("server directories %v, want one", dirs)
	}
	if err := srv.(deploy.Exiter).Exited(ctx); err != nil {
		t.Fatalf("Exited while it runs: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// Its output is kept in the run's log directory, as a local server's.
	if b, err := os.ReadFile(filepath.Join(env.LogDir, "t1-redis.log")); err != nil || !strings.Contains(string(b), "Ready to accept connections") {
		t.Fatalf("server log %q, %v", b, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for redisproto.PingDial(ctx, drv.DialContext, addr) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the server still answers after Stop")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(dirs[0]); err == nil {
		t.Fatalf("%s left after Stop", dirs[0])
	}
}

func TestRefusal(t *testing.T) {
	if err := remote.Refusal(platform.Native, "sut1"); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{platform.DockerNAT, platform.DockerHost, platform.DockerProxy, platform.DockerCrunHost} {
		// Built by NewDocker, which refuses the paths other machines
		// cannot reach (package docker's tests).
		if err := remote.Refusal(base, "sut1"); err != nil || !remote.IsDocker(base) {
			t.Errorf("%s on a remote host: %v", base, err)
		}
	}
	if err := remote.Refusal(platform.Podman, "sut1"); err != nil {
		t.Errorf("rootful podman on a remote host: %v", err)
	}
	for _, base := range []string{platform.K8sPod, platform.PodmanRootless, platform.LXC} {
		err := remote.Refusal(base, "sut1")
		if !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "not built for remote hosts yet") {
			t.Errorf("%s on a remote host: %v", base, err)
		}
	}

}
