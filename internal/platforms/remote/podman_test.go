package remote_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testbed"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// TestPodmanOnSUTHost: rootful Podman on a test-bed sut host: its service
// started there by the host's agent and driven through the SSH
// connection, the image copied into its storage, the server published on
// the host's address and reached from the driver host; Close removes the
// container, stops the service and removes its directory.
func TestPodmanOnSUTHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Podman on a test bed; skipped in -short mode")
	}
	if err := testbed.Check(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	if err := docker.CrunCgroupLayout(); err != nil {
		t.Skip(err)
	}
	local, ref := testenv.WorkloadImage(t)
	ctx := context.Background()
	set := connectTestBed(t, testbed.Config{Dir: t.TempDir(), Tag: fmt.Sprintf("p%02d", rand.IntN(100)), Hosts: 2})
	sut := set.SUT("redis")
	run := runid.New()
	env := platform.Env{Run: run, LogDir: t.TempDir(), Image: ref, Client: set.Client(sut)}
	services := &remote.PodmanServices{Run: run, Local: func(context.Context) (*docker.Daemon, error) { return local, nil }}
	p, err := remote.NewPodman("podman", func(string) remote.DockerHost { return sut }, []remote.DockerHost{sut}, env, platform.Options{}, services,
		func(remote.DockerHost) host.Host { return set.Client(sut) })
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	if err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	srv, err := p.Start(ctx, "t1", platform.Spec{Name: "redis", Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", fmt.Sprint(l.Port("redis")), "--save", "", "--appendonly", "no", "--protected-mode", "no"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if d := srv.Describe(); !strings.Contains(d, "Podman") || !strings.Contains(d, "sut host "+sut.Host.Name) {
		t.Errorf("Describe = %s, want Podman on the sut host", d)
	}
	addr := srv.Addr("redis")
	if h, _, _ := strings.Cut(addr, ":"); h != sut.Host.Address {
		t.Errorf("server at %s, want the sut host's address %s", addr, sut.Host.Address)
	}
	if err := redisproto.PingDial(ctx, set.Client(sut).DialContext, addr); err != nil {
		t.Fatalf("PING from the driver host: %v", err)
	}
	if cpu, err := srv.(platform.CPUReporter).CPUTime(ctx); err != nil || cpu <= 0 {
		t.Errorf("CPUTime = %v, %v", cpu, err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	// Nothing of the run is left there: no process labelled with it, no
	// directory.
	out, err := sut.Agent().Output(ctx, vmagent.Proc{Name: "check", Dir: "/", Argv: []string{"sh", "-c",
		`ls -d /tmp/` + runid.Prefix + string(run) + `-podman-* 2>/dev/null; grep -l "` + runid.EnvVar + `=` + string(run) + `" /proc/[0-9]*/environ 2>/dev/null; true`}})
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("left on the sut host after Close: %q %v", out, err)
	}
}
