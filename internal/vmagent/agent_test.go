package vmagent

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// The API runs in-process here: the agent needs PID 1 only for booting.
func testAgent(t *testing.T) (*Client, chan struct{}) {
	t.Helper()
	a := newAgent("secret")
	a.logDir = t.TempDir()
	off := make(chan struct{}, 1)
	srv := httptest.NewServer(a.handler(func() { off <- struct{}{} }))
	t.Cleanup(srv.Close)
	t.Cleanup(a.killAll)
	c := NewClient("127.0.0.1", "secret")
	c.Base = srv.URL
	return c, off
}

func TestAuth(t *testing.T) {
	c, _ := testAgent(t)
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	bad := *c
	bad.Token = "wrong"
	if err := bad.Ping(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestStartCPUStop(t *testing.T) {
	c, _ := testAgent(t)
	ctx := context.Background()
	dir := t.TempDir()
	pid, err := c.Start(ctx, Proc{Name: "spin", Dir: dir,
		Files: []File{{Path: "sub/script.sh", Content: []byte("echo started; while :; do :; done\n"), Mode: 0o755}},
		Argv:  []string{"sh", "sub/script.sh"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cpu, err := c.CPUTime(ctx, pid)
	if err != nil || cpu <= 0 {
		t.Errorf("CPUTime = %v, %v; want > 0 for a busy loop", cpu, err)
	}
	out, err := c.Stop(ctx, pid, time.Second)
	if err != nil || !strings.Contains(string(out), "started") {
		t.Errorf("Stop = %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); !strings.Contains(string(b), ") Z") {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := c.Stop(ctx, pid, time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := c.Start(ctx, Proc{Argv: []string{"sh", "-c", "exit 2"}, Dir: dir}); err == nil {
		t.Error("a process that exits at once: no error")
	}
}

func TestRun(t *testing.T) {
	c, _ := testAgent(t)
	ctx := context.Background()
	r, err := c.Run(ctx, Proc{Argv: []string{"sh", "-c", "cat in.txt; echo err >&2; exit 3"}, Dir: t.TempDir(),
		Env: map[string]string{"X": "1"}, Files: []File{{Path: "in.txt", Content: []byte("hello\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "hello\n" || string(r.Stderr) != "err\n" || r.ExitCode != 3 {
		t.Errorf("Run = %+v", r)
	}
	if _, err := c.Run(ctx, Proc{Argv: []string{"no-such-binary-here"}}); err == nil {
		t.Error("missing binary: no error")
	}
	if _, err := c.Run(ctx, Proc{Argv: []string{"true"}, Dir: t.TempDir(), Files: []File{{Path: "../x"}}}); err == nil {
		t.Error("file outside the dir: no error")
	}
}

func TestPoweroff(t *testing.T) {
	c, off := testAgent(t)
	if err := c.Poweroff(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-off:
	case <-time.After(5 * time.Second):
		t.Fatal("poweroff not called")
	}
}

func TestProcCPUAndZombies(t *testing.T) {
	root := t.TempDir()
	write := func(pid, stat string) {
		os.MkdirAll(filepath.Join(root, pid), 0o755)
		os.WriteFile(filepath.Join(root, pid, "stat"), []byte(stat), 0o644)
	}
	write("7", "7 (redis server) S 1 7 7 0 -1 0 0 0 0 0 150 50 10 5 20 0 1 0 100 0 0")
	write("8", "8 (shim) Z 1 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0")
	write("9", "9 (x) Z 7 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0")
	d, err := ProcCPU(root, 7)
	if err != nil || d != 2150*time.Millisecond {
		t.Errorf("ProcCPU = %v, %v; want 2.15s", d, err)
	}
	// Living workers (a prefork server's children, and a grandchild) count
	// with the tree; a process outside it does not.
	write("10", "10 (worker) S 7 7 7 0 -1 0 0 0 0 0 100 20 3 2 20 0 1 0 100 0 0")
	write("11", "11 (helper) S 10 7 7 0 -1 0 0 0 0 0 40 10 0 0 20 0 1 0 100 0 0")
	write("12", "12 (other) S 1 12 12 0 -1 0 0 0 0 0 500 500 0 0 20 0 1 0 100 0 0")
	if d, err := ProcCPU(root, 7); err != nil || d != 2150*time.Millisecond+1250*time.Millisecond+500*time.Millisecond {
		t.Errorf("ProcCPU with living descendants = %v, %v; want 3.9s", d, err)
	}
	if d, err := ProcCPU(root, 10); err != nil || d != 1750*time.Millisecond {
		t.Errorf("ProcCPU of the worker = %v, %v; want 1.75s", d, err)
	}
	if z := orphanZombies(root); len(z) != 1 || z[0] != 8 {
		t.Errorf("orphanZombies = %v; want [8]", z)
	}
}

func TestParseCmdline(t *testing.T) {
	m := ParseCmdline("console=ttyS0 rw nn.ip=10.213.4.2/24 nn.token=abc\n")
	if m[ParamIP] != "10.213.4.2/24" || m[ParamToken] != "abc" || m["rw"] != "" {
		t.Fatalf("ParseCmdline = %v", m)
	}
}

// TestMachineCPU: the agent's machine counters are this machine's (the
// test runs the agent here), named by its boot ID, and advance.
func TestMachineCPU(t *testing.T) {
	c, _ := testAgent(t)
	ctx := context.Background()
	id0, s0, err := c.MachineCPU(ctx)
	if err != nil {
		t.Fatal(err)
	}
	local, err := sysinfo.BootID()
	if err != nil || id0 != local {
		t.Errorf("boot ID %q, want this machine's %q (%v)", id0, local, err)
	}
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	_, s1, err := c.MachineCPU(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := s0.Delta(s1)
	if d.Interval <= 0 || d.TotalSeconds <= 0 || len(s1.PerCPU) == 0 {
		t.Errorf("delta %+v: want time and CPU counters that advance", d)
	}
}
