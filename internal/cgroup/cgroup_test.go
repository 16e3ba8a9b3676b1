package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// needRoot skips unless the test can create cgroups on this machine.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	if _, err := os.Stat(Root); err != nil {
		t.Skipf("no cgroup file system at %s", Root)
	}
}

// freshRun returns a new run ID whose cgroups are all removed when the test ends.
func freshRun(t *testing.T) runid.ID {
	t.Helper()
	id := runid.New()
	t.Cleanup(func() {
		for _, l := range Leftovers(id) {
			if err := RemoveTree(l.Dir); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return id
}

// controllerDir is where a controller's group run/name lives (v1 layout) or
// the group itself (v2).
func controllerDir(ctrl string, run runid.ID, name string) string {
	if IsV2() {
		return filepath.Join(Root, Parent, string(run), name)
	}
	return filepath.Join(Root, ctrl, Parent, string(run), name)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestLimitsEmpty(t *testing.T) {
	tests := []struct {
		l    Limits
		want bool
	}{
		{Limits{}, true},
		{Limits{CPUSet: "0"}, false},
		{Limits{CPUs: 0.5}, false},
		{Limits{MemoryBytes: 1}, false},
	}
	for _, tt := range tests {
		if got := tt.l.Empty(); got != tt.want {
			t.Errorf("%+v.Empty() = %v", tt.l, got)
		}
	}
}

func TestWrapNoGroup(t *testing.T) {
	argv := []string{"sleep", "1"}
	var nilGroup *Group
	if got := nilGroup.Wrap(argv); !reflect.DeepEqual(got, argv) {
		t.Errorf("nil group Wrap = %q", got)
	}
	if got := (&Group{}).Wrap(argv); !reflect.DeepEqual(got, argv) {
		t.Errorf("empty group Wrap = %q", got)
	}
	if err := nilGroup.Remove(); err != nil {
		t.Errorf("nil group Remove: %v", err)
	}
}

func TestWrapArgv(t *testing.T) {
	g := &Group{Dirs: []string{"/cg/a", "/cg/b"}}
	got := g.Wrap([]string{"redis-server", "--port", "1"})
	if len(got) != 7 || got[0] != "/bin/sh" || got[1] != "-c" || got[3] != "nearnative-cgroup" ||
		!reflect.DeepEqual(got[4:], []string{"redis-server", "--port", "1"}) {
		t.Fatalf("Wrap = %q", got)
	}
	for _, f := range []string{"/cg/a/cgroup.procs", "/cg/b/cgroup.procs", `exec "$@"`} {
		if !strings.Contains(got[2], f) {
			t.Errorf("script %q lacks %q", got[2], f)
		}
	}
}

func TestWrapFailsWhenJoinFails(t *testing.T) {
	// The server must not start outside its group.
	g := &Group{Dirs: []string{filepath.Join(t.TempDir(), "missing")}}
	argv := g.Wrap([]string{"/bin/sh", "-c", "echo started"})
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 126 {
		t.Fatalf("wrapped command with an unjoinable group: %v, output %q; want exit 126", err, out)
	}
	if strings.Contains(string(out), "started") {
		t.Error("the command ran although joining the group failed")
	}
}

func TestNewLimits(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name  string
		l     Limits
		files map[string]map[string]string // controller -> file -> want (v1)
	}{
		{"cpuset", Limits{CPUSet: "0"}, map[string]map[string]string{"cpuset": {"cpuset.cpus": "0"}}},
		{"cpus", Limits{CPUs: 0.5}, map[string]map[string]string{"cpu": {"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}}},
		// 0.29*100000 is 28999.999... in floating point; the quota must not be truncated.
		{"cpus 0.29", Limits{CPUs: 0.29}, map[string]map[string]string{"cpu": {"cpu.cfs_quota_us": "29000"}}},
		{"cpus 1.5", Limits{CPUs: 1.5}, map[string]map[string]string{"cpu": {"cpu.cfs_quota_us": "150000"}}},
		{"memory", Limits{MemoryBytes: 64 << 20}, map[string]map[string]string{"memory": {"memory.limit_in_bytes": strconv.Itoa(64 << 20)}}},
		{"all", Limits{CPUSet: "0-1", CPUs: 1, MemoryBytes: 128 << 20}, map[string]map[string]string{
			"cpuset": {"cpuset.cpus": "0-1"},
			"cpu":    {"cpu.cfs_quota_us": "100000"},
			"memory": {"memory.limit_in_bytes": strconv.Itoa(128 << 20)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := freshRun(t)
			g, err := New(run, "srv", tt.l)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Remove()
			if IsV2() {
				if len(g.Dirs) != 1 {
					t.Fatalf("v2 group dirs %v", g.Dirs)
				}
				return
			}
			// The cpuacct tracking group always comes first.
			want := []string{controllerDir("cpuacct", run, "srv")}
			for _, ctrl := range []string{"cpuset", "cpu", "memory"} { // the order New creates them in
				files, ok := tt.files[ctrl]
				if !ok && ctrl == "cpu" {
					// A cpu group always exists (no quota): group scheduling
					// must treat native like a container.
					ok = true
					d := controllerDir("cpu", run, "srv")
					if q := readFile(t, filepath.Join(d, "cpu.cfs_quota_us")); q != "-1" {
						t.Errorf("cpu group without a cpus limit has quota %q, want -1", q)
					}
				}
				if !ok {
					if _, err := os.Stat(controllerDir(ctrl, run, "srv")); err == nil {
						t.Errorf("%s group created without a %s limit", ctrl, ctrl)
					}
					continue
				}
				d := controllerDir(ctrl, run, "srv")
				want = append(want, d)
				for f, v := range files {
					if got := readFile(t, filepath.Join(d, f)); got != v {
						t.Errorf("%s/%s = %q, want %q", d, f, got, v)
					}
				}
			}
			if !reflect.DeepEqual(g.Dirs, want) {
				t.Errorf("Dirs = %v, want %v", g.Dirs, want)
			}
			if tt.l.CPUSet != "" {
				// Every cpuset level needs mems before a task can join.
				for _, d := range []string{filepath.Join(Root, "cpuset", Parent), filepath.Join(Root, "cpuset", Parent, string(run)), controllerDir("cpuset", run, "srv")} {
					if readFile(t, filepath.Join(d, "cpuset.mems")) == "" || readFile(t, filepath.Join(d, "cpuset.cpus")) == "" {
						t.Errorf("%s has empty cpuset.cpus or cpuset.mems", d)
					}
				}
			}
			if err := g.Remove(); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			for _, d := range g.Dirs {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("%s still there after Remove: %v", d, err)
				}
			}
			if err := g.Remove(); err != nil {
				t.Errorf("second Remove (already gone): %v", err)
			}
		})
	}
}

func TestNewEmpty(t *testing.T) {
	needRoot(t)
	run := freshRun(t)
	g, err := New(run, "srv", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Without limits the group still tracks its processes and is a group
	// of its own for the scheduler.
	want := []string{controllerDir("cpuacct", run, "srv"), controllerDir("cpu", run, "srv")}
	if IsV2() {
		want = []string{filepath.Join(Root, Parent, string(run), "srv")}
	}
	if !reflect.DeepEqual(g.Dirs, want) {
		t.Errorf("group without limits has dirs %v, want %v", g.Dirs, want)
	}
	g.Remove()
}

func TestNewBadCPUSet(t *testing.T) {
	needRoot(t)
	run := freshRun(t)
	g, err := New(run, "srv", Limits{CPUSet: "4095", MemoryBytes: 64 << 20})
	if err == nil {
		g.Remove()
		t.Fatal("New with a CPU this machine lacks succeeded")
	}
	if !strings.Contains(err.Error(), "cpuset.cpus") {
		t.Errorf("error %q does not name the file", err)
	}
	if _, err := os.Stat(controllerDir("cpuset", run, "srv")); !os.IsNotExist(err) {
		t.Errorf("failed New left its group behind: %v", err)
	}
}

// cgroupOf returns the /proc/PID/cgroup paths by controller.
func cgroupOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m
}

func TestWrapJoinsGroupAndRemoveKills(t *testing.T) {
	needRoot(t)
	run := freshRun(t)
	g, err := New(run, "sleeper", Limits{CPUSet: "0", CPUs: 0.5, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })

	argv := g.Wrap([]string{"sleep", "5"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	pid := cmd.Process.Pid

	// Wait for the shell to exec sleep; by then it has joined every group.
	deadline := time.Now().Add(3 * time.Second)
	for {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is %q, not sleep, after 3s", pid, comm)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := "/" + filepath.Join(Parent, string(run), "sleeper")
	cg := cgroupOf(t, pid)
	ctrls := []string{"cpuset", "cpu", "memory"}
	if IsV2() {
		ctrls = []string{""}
	}
	for _, c := range ctrls {
		if cg[c] != want {
			t.Errorf("sleep is in %s group %q, want %q", c, cg[c], want)
		}
	}
	if pids := g.PIDs(); !slices.Contains(pids, pid) {
		t.Errorf("PIDs() = %v, want it to contain %d", pids, pid)
	}

	if err := g.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("sleep ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("sleep still running 3s after Remove")
	}
	for _, d := range g.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove", d)
		}
	}
}

func TestLeftoversAndRemoveTree(t *testing.T) {
	needRoot(t)
	run := freshRun(t)
	other := freshRun(t)
	for other == run {
		other = freshRun(t)
	}
	if l := Leftovers(run); len(l) != 0 {
		t.Fatalf("leftovers of a fresh run: %v", l)
	}
	var gs []*Group
	for _, name := range []string{"a", "b"} {
		g, err := New(run, name, Limits{CPUSet: "0", CPUs: 0.5, MemoryBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	og, err := New(other, "a", Limits{CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}

	// A process left in one of the groups, as after a crash.
	argv := gs[1].Wrap([]string{"sleep", "5"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	deadline := time.Now().Add(3 * time.Second)
	for len(gs[1].PIDs()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	// A hierarchy nearnative's own groups do not use (LXC makes its
	// containers' groups in every one) is found too.
	lxcLike := ""
	if !IsV2() {
		if d := filepath.Join(Root, "pids", Parent, string(run)); os.MkdirAll(d, 0o755) == nil {
			lxcLike = d
			t.Cleanup(func() { os.Remove(d) })
		}
	}
	got := Leftovers(run)
	var dirs []string
	for _, l := range got {
		if l.Run != run {
			t.Errorf("Leftovers(%s) returned run %s", run, l.Run)
		}
		dirs = append(dirs, l.Dir)
	}
	var want []string
	if IsV2() {
		want = []string{filepath.Join(Root, Parent, string(run))}
	} else {
		// In the order of the hierarchies' names; cpu exists even
		// without a quota.
		for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
			want = append(want, filepath.Join(Root, c, Parent, string(run)))
		}
		if lxcLike != "" {
			want = append(want, lxcLike)
			sort.Strings(want)
		}
	}
	if !reflect.DeepEqual(dirs, want) {
		t.Errorf("Leftovers(%s) dirs = %v, want %v", run, dirs, want)
	}

	all := Leftovers("")
	has := func(id runid.ID) bool {
		for _, l := range all {
			if l.Run == id {
				return true
			}
		}
		return false
	}
	if !has(run) || !has(other) {
		t.Errorf("Leftovers(\"\") lacks %s or %s: %v", run, other, all)
	}

	for _, l := range got {
		if err := RemoveTree(l.Dir); err != nil {
			t.Errorf("RemoveTree(%s): %v", l.Dir, err)
		}
	}
	if l := Leftovers(run); len(l) != 0 {
		t.Errorf("leftovers after RemoveTree: %v", l)
	}
	select {
	case err := <-done:
		done <- err
	case <-time.After(3 * time.Second):
		t.Error("process in the removed tree still running")
	}
	// The other run is untouched.
	for _, d := range og.Dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("other run's group %s gone: %v", d, err)
		}
	}
	if err := RemoveTree(filepath.Join(Root, "cpu", Parent, "19990101-000000-0000")); err != nil {
		t.Errorf("RemoveTree of a missing dir: %v", err)
	}
}

// TestCPUUsage runs a busy loop in a group and checks that the group's CPU
// accounting counts it: about the process's own /proc time, and growing.
func TestCPUUsage(t *testing.T) {
	needRoot(t)
	run := freshRun(t)
	g, err := New(run, "spinner", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })
	if src := g.CPUSource(); !strings.Contains(src, string(run)+"/spinner") || !strings.HasPrefix(src, "cgroup v") {
		t.Errorf("CPUSource = %q, want the cgroup version and the group", src)
	}
	before, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	// A fixed amount of work (not of wall time: the machine may be busy),
	// then exit: its CPU stays counted.
	argv := g.Wrap([]string{"/bin/sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`})
	cmd := exec.Command(argv[0], argv[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	own := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	used := after - before
	// The group counts what the process's own rusage says, give or take
	// the accounting's granularity.
	if !(own > 0) || used < own*8/10 || used > own*3/2+20*time.Millisecond {
		t.Errorf("group counted %v over the loop, its rusage says %v", used, own)
	}
}

func TestParseCPUStatUsage(t *testing.T) {
	tests := []struct {
		text    string
		want    int64
		wantErr bool
	}{
		{"usage_usec 12345\nuser_usec 10000\nsystem_usec 2345\n", 12345, false},
		{"user_usec 1\n", 0, true},
		{"usage_usec x\n", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUStatUsage(tt.text)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseCPUStatUsage(%q) = %d, %v; want %d, error %v", tt.text, got, err, tt.want, tt.wantErr)
		}
	}
}
