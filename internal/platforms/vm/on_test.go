package vm

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/tailbuf"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// agentMain is this test binary as nearnative's agent command on a sut
// host: --free-ports, --vm-probe, or the agent itself on stdio.
func agentMain(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	n := fs.Int("free-ports", 0, "")
	on := fs.String("on", "127.0.0.1", "")
	probe := fs.Bool("vm-probe", false, "")
	kernel := fs.String("kernel", "", "")
	fs.Parse(args)
	switch {
	case *n > 0:
		ports, err := platform.FreePorts(*on, *n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, p := range ports {
			fmt.Print(p, " ")
		}
		return 0
	case *probe:
		r, err := vmprobe.ProbeKernel(context.Background(), vmprobe.Kernel{Image: *kernel})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return 0
	}
	if err := vmagent.ServeStdio(context.Background(), os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// agentHost is a sut host that is this machine, reached as a remote one
// is: its agent is this test binary started on stdio, as over SSH.
type agentHost struct {
	name  string // "" is local-as-remote
	agent *vmagent.Client
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

func startAgentHost(t *testing.T, ctx context.Context, name string) *agentHost {
	t.Helper()
	cmd := exec.Command(os.Args[0], vmagent.StdioArg)
	stdin, _ := cmd.StdinPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, token, err := vmagent.Handshake(ctx, stdin, stderr, &tailbuf.Buffer{Max: 4096}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := &agentHost{name: name, stdin: stdin, cmd: cmd}
	h.agent = vmagent.NewClientDial(addr, token, h.DialContext)
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return h
}

func (h *agentHost) Name() string {
	if h.name == "" {
		return "local-as-remote"
	}
	return h.name
}
func (h *agentHost) Self() string           { return os.Args[0] }
func (h *agentHost) Addr() netip.Addr       { return netip.MustParseAddr("127.0.0.1") }
func (h *agentHost) Agent() *vmagent.Client { return h.agent }
func (h *agentHost) CPUs() []int            { return deploy.HostCPUs() }
func (h *agentHost) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// onHostPlatform is the platform kind whose guests boot on a "sut host"
// (this machine through an agent on stdio), checked; when the test ends it
// is closed and nothing of its run may be left. Each of others is one
// more such host (a sibling agent) that placed may place roles on.
func onHostPlatform(t *testing.T, ctx context.Context, kind string, placed map[string]string, others ...string) *Platform {
	t.Helper()
	local, run, _ := testPlatform(t, ctx, kind)
	hosts := []Host{startAgentHost(t, ctx, "")}
	for _, n := range others {
		hosts = append(hosts, startAgentHost(t, ctx, n))
	}
	p, err := NewOn(kind, kind, local.env, state.Home(), platform.Options{}, local.api, hosts, func(role string) string { return placed[role] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		assertClean(t, run)
	})
	if err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return p
}

// TestGuestOnHost boots a real guest on a "sut host" (this machine through
// an agent on stdio, as over SSH): the kernel, initramfs and qcow2 disk are
// staged in StageDir there, QEMU is the agent's process, the server answers
// on the host's address, its CPU and the host's machine figures come
// through the agent, and Stop leaves no QEMU, no temp dir; then a
// topology (HAProxy before Redis) in one guest there, two guests refused.
func TestGuestOnHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	placed := map[string]string{}
	p := onHostPlatform(t, ctx, platform.VM, placed, "second")
	srv, err := p.Start(ctx, "t1", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	d := srv.Describe()
	if !strings.Contains(d, "QEMU guest on sut host local-as-remote") {
		t.Errorf("Describe = %s", d)
	}
	addr := srv.Addr("redis")
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("Addr = %s, want the host's address", addr)
	}
	if err := redisproto.WaitReady(ctx, addr, 60*time.Second); err != nil {
		t.Fatalf("redis at %s: %v", addr, err)
	}
	if cpu, err := srv.(platform.CPUReporter).CPUTime(ctx); err != nil || cpu <= 0 {
		t.Errorf("CPUTime = %v, %v", cpu, err)
	}
	mr, ok := srv.(platform.MachineReporter)
	if !ok {
		t.Fatal("a guest's server on a sut host reports no machine")
	}
	if m, err := mr.MachineCPU(ctx); err != nil || !m.SUT || m.Name != "local-as-remote" {
		t.Errorf("MachineCPU = %+v, %v", m, err)
	}
	for _, f := range p.staged {
		if !strings.HasPrefix(f, StageDir+"/") {
			t.Errorf("staged at %s, want under %s", f, StageDir)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("staged file: %v", err)
		}
	}
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}

	// A topology: HAProxy and Redis in one guest there, HAProxy reaching
	// Redis at the guest's address, the client at the host's forwards.
	vol := t.TempDir()
	os.WriteFile(filepath.Join(vol, "seed.txt"), []byte("from the host\n"), 0o644)
	// Two guests, HAProxy in one reaching Redis in the other at its
	// forward (the host's loopback here, QEMU's gateway seen from a
	// guest); then Redis placed on the second host, its guest booted
	// there, HAProxy on the first reaching it at that host's forward.
	for _, on := range []string{"", "second"} {
		placed["redis"] = on
		two := lbTopology(vol, 1, 2)
		two.Roles[0].OwnGuest = true
		dep, err := deploy.Deploy(ctx, p, "t2"+on, two, deploy.Options{})
		if err != nil {
			t.Fatalf("two guests, redis placed on %q: %v", on, err)
		}
		where := strings.Join(dep.Where(), "\n")
		t.Log(where)
		if on != "" && !strings.Contains(where, "sut host "+on) {
			t.Errorf("redis placed on %s, ran: %s", on, where)
		}
		for _, addr := range dep.Entries("lb", "lb") {
			if err := redisproto.Ping(ctx, addr); err != nil {
				t.Errorf("PING through lb %s to redis in another guest (placed on %q): %v", addr, on, err)
			}
		}
		if err := dep.Stop(ctx); err != nil {
			t.Errorf("stopping the topology: %v", err)
		}
	}
	placed["redis"] = ""
	dep, err := deploy.Deploy(ctx, p, "t3", lbTopology(vol, 1, 1), deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dep.Stop(context.Background())
	for _, w := range dep.Where() {
		t.Log(w)
	}
	for _, addr := range dep.Entries("lb", "lb") {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("lb at %s, want the host's address", addr)
		}
		if err := redisproto.Ping(ctx, addr); err != nil {
			t.Errorf("PING through lb %s: %v", addr, err)
		}
	}
	for _, r := range dep.Role("redis") {
		rp, ok := r.Srv.(remoteProc)
		if !ok {
			t.Fatalf("a topology's server on a sut host is %T, want remoteProc", r.Srv)
		}
		if m, err := rp.MachineCPU(ctx); err != nil || !m.SUT {
			t.Errorf("MachineCPU = %+v, %v", m, err)
		}
		res, err := rp.vg.g.agent.Run(ctx, vmagentProc("stat", "-c", "%U %n", "/data/seed.txt"))
		if err != nil || !strings.HasPrefix(string(res.Stdout), "redis /data/seed.txt") {
			t.Errorf("the volume in the guest: %q %v", res.Stdout, err)
		}
	}
	if err := dep.Stop(ctx); err != nil {
		t.Errorf("stopping the topology: %v", err)
	}
}

// TestGuestDockerOnHost boots vm-docker and vm-docker-host guests on a "sut
// host" as TestGuestOnHost does: the disk seeded here with the workload
// image is staged there as qcow2, the container answers on the host's
// address through QEMU's forward (and, on vm-docker, the guest engine's
// DNAT), the host reports its machine, and Stop leaves nothing behind.
// Minutes under TCG: make test-vm-docker (NEARNATIVE_VM_DOCKER_TEST=1).
func TestGuestDockerOnHost(t *testing.T) {
	ctx := vmDockerTest(t)
	for _, kind := range []string{KindDockerNAT, KindDockerHost} {
		t.Run(kind, func(t *testing.T) {
			p := onHostPlatform(t, ctx, kind, nil)
			srv, err := p.Start(ctx, "t1", redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(ctx)
			if d := srv.Describe(); !strings.Contains(d, "QEMU guest on sut host local-as-remote") || !strings.Contains(d, "Docker engine") {
				t.Errorf("Describe = %s", d)
			}
			if !strings.HasSuffix(p.stagedDisk, ".qcow2") || !strings.Contains(p.stagedDisk, "disk-docker-") {
				t.Errorf("staged disk %s, want the vm-docker disk as qcow2", p.stagedDisk)
			}
			addr := srv.Addr("redis")
			if !strings.HasPrefix(addr, "127.0.0.1:") {
				t.Errorf("Addr = %s, want the host's address", addr)
			}
			if err := redisproto.WaitReady(ctx, addr, 60*time.Second); err != nil {
				t.Fatalf("redis at %s: %v", addr, err)
			}
			if m, err := srv.(platform.MachineReporter).MachineCPU(ctx); err != nil || !m.SUT {
				t.Errorf("MachineCPU = %+v, %v", m, err)
			}
			if cpu, err := srv.(platform.CPUReporter).CPUTime(ctx); err != nil || cpu <= 0 {
				t.Errorf("CPUTime = %v, %v", cpu, err)
			}
			if err := srv.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

// TestHostFor: a role's guest boots on the sut host it is placed on (the
// first without place:), a host the platform has no guests on is refused,
// and so is a guest that would hold roles placed on two hosts; guests on
// this machine know no placement.
func TestHostFor(t *testing.T) {
	placed := map[string]string{"web": "sut2", "db": "local-as-remote", "cache": "", "x": "sut3"}
	on := func(role string) string { return placed[role] }
	p := &Platform{name: "vm", on: &agentHost{}, placedOn: on}
	sib := &Platform{name: "vm", on: &agentHost{name: "sut2"}, placedOn: on}
	p.siblings = []*Platform{sib}
	for _, c := range []struct {
		role string
		want *Platform // nil: refused
	}{{"db", p}, {"cache", p}, {"unplaced", p}, {"web", sib}, {"x", nil}} {
		got, err := p.hostFor(c.role)
		if got != c.want {
			t.Errorf("hostFor(%s) = %v, want %v", c.role, got, c.want)
		}
		if c.want == nil && (!errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "x is placed on sut host sut3") || !strings.Contains(err.Error(), "local-as-remote, sut2")) {
			t.Errorf("hostFor(%s): %v, want unavailable naming the host and the platform's hosts", c.role, err)
		}
	}
	if _, err := p.Start(context.Background(), "t1", platform.Spec{Name: "x", Command: func(platform.Listen) []string { return []string{"true"} }}); !errors.Is(err, platform.ErrUnavailable) {
		t.Errorf("Start of a server placed on no guest host: %v, want unavailable", err)
	}
	srv := func(role string) topology.Server { return topology.Server{ID: topology.ServerID{Role: role}} }
	hosts, err := p.guestHosts([][]topology.Server{{srv("db"), srv("cache")}, {srv("web")}})
	if err != nil || len(hosts) != 2 || hosts[0] != p || hosts[1] != sib {
		t.Errorf("guestHosts = %v, %v, want this host's guest then sut2's", hosts, err)
	}
	if _, err := p.guestHosts([][]topology.Server{{srv("db"), srv("web")}}); !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "place them on one host") {
		t.Errorf("a guest of roles placed on two hosts: %v, want refused with the fix", err)
	}
	local := &Platform{name: "vm"}
	if got, err := local.hostFor("web"); got != local || err != nil {
		t.Errorf("guests on this machine know no placement: %v %v", got, err)
	}
}
