package vm

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/tailbuf"
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
	agent *vmagent.Client
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

func startAgentHost(t *testing.T, ctx context.Context) *agentHost {
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
	h := &agentHost{stdin: stdin, cmd: cmd}
	h.agent = vmagent.NewClientDial(addr, token, h.DialContext)
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return h
}

func (h *agentHost) Name() string           { return "local-as-remote" }
func (h *agentHost) Self() string           { return os.Args[0] }
func (h *agentHost) Addr() netip.Addr       { return netip.MustParseAddr("127.0.0.1") }
func (h *agentHost) Agent() *vmagent.Client { return h.agent }
func (h *agentHost) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestGuestOnHost boots a real guest on a "sut host" (this machine through
// an agent on stdio, as over SSH): the kernel, initramfs and qcow2 disk are
// staged in StageDir there, QEMU is the agent's process, the server answers
// on the host's address, its CPU and the host's machine figures come
// through the agent, and Stop leaves no QEMU, no temp dir; topologies and
// vm-docker are refused.
func TestGuestOnHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	local, run, _ := testPlatform(t, ctx, platform.VM)
	h := startAgentHost(t, ctx)
	p, err := NewOn(platform.VM, "vm", local.env, state.Home(), platform.Options{}, local.api, h)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Close()
		assertClean(t, run)
	}()
	if err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
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
	if _, err := p.Open(ctx, "t2", nil); err == nil || !strings.Contains(err.Error(), "not built yet") {
		t.Errorf("a topology on a sut host: %v", err)
	}
	if _, err := NewOn(platform.VMDocker, "vm-docker", local.env, state.Home(), platform.Options{}, local.api, h); err == nil {
		t.Error("vm-docker on a sut host was not refused")
	}
}
