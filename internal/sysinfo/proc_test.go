package sysinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// statTail is /proc/PID/stat after the command name (fields 3..52) of a real
// process, with utime 1234, stime 567, cutime 8, cstime 9, 4 threads,
// starttime 31763 and last CPU 1.
const statTail = "S 22655 22655 20561 0 -1 4194304 99 0 0 0 1234 567 8 9 20 0 4 0 31763 3133440 382 18446744073709551615 94005966823424 94005966843305 140735044948704 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94005966859312 94005966860928 94006163841024 140735044950713 140735044950733 140735044950733 140735044952043 0\n"

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		comm    string
		wantErr bool
	}{
		{name: "plain", in: "22668 (redis-server) " + statTail, comm: "redis-server"},
		{name: "spaces and parentheses", in: "22668 (my (odd) ) name) " + statTail, comm: "my (odd) ) name"},
		{name: "empty name", in: "22668 () " + statTail, comm: ""},
		{name: "no parentheses", in: "22668 redis " + statTail, wantErr: true},
		{name: "truncated", in: "22668 (x) S 1 2 3", wantErr: true},
		{name: "bad pid", in: "abc (x) " + statTail, wantErr: true},
		{name: "bad utime", in: "1 (x) S 0 0 0 0 -1 0 0 0 0 0 zz 0 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseProcStat([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseProcStat succeeded: %+v", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProcStat: %v", err)
			}
			want := ProcStat{PID: 22668, Comm: tt.comm, State: "S", PPID: 22655, UTime: 1234, STime: 567,
				CUTime: 8, CSTime: 9, NumThreads: 4, StartTime: 31763, Processor: 1}
			if s != want {
				t.Errorf("got  %+v\nwant %+v", s, want)
			}
		})
	}
}

// schedSnippet is /proc/PID/sched of a Debian 12 process (6.x kernel).
const schedSnippet = `redis-server (22510, #threads: 5)
-------------------------------------------------------------------
se.exec_start                                :        315196.573892
se.vruntime                                  :            65.741268
se.sum_exec_runtime                          :             0.000000
se.nr_migrations                             :                   42
nr_switches                                  :                  310
nr_voluntary_switches                        :                  300
nr_involuntary_switches                      :                   10
se.load.weight                               :              1048576
policy                                       :                    0
prio                                         :                  120
clock-delta                                  :                   60
current_node=0, numa_group_id=0
numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0
`

func TestParseSched(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    SchedStats
		wantErr bool
	}{
		{name: "debian 12", in: schedSnippet,
			want: SchedStats{Migrations: 42, Switches: 310, VoluntarySwitches: 300, InvoluntarySwitches: 10, Threads: 1}},
		{name: "fractional counters", in: "se.nr_migrations : 7.000000\nnr_switches : 3\n",
			want: SchedStats{Migrations: 7, Switches: 3, Threads: 1}},
		{name: "no migrations line", in: "nr_switches : 3\n", wantErr: true},
		{name: "garbage value", in: "se.nr_migrations : lots\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSched(strings.NewReader(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseSched succeeded: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSched: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProcCPULive(t *testing.T) {
	u0, s0, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatalf("ProcCPU: %v", err)
	}
	sink += spin(300 * time.Millisecond)
	u1, s1, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatalf("ProcCPU: %v", err)
	}
	t.Logf("user %v -> %v, sys %v -> %v", u0, u1, s0, s1)
	if u1+s1 <= u0+s0 {
		t.Errorf("CPU time did not increase after spinning: %v -> %v", u0+s0, u1+s1)
	}
	if _, _, err := ProcCPU(1 << 30); err == nil {
		t.Errorf("ProcCPU of a missing process succeeded")
	}
}

func TestProcSchedLive(t *testing.T) {
	s, err := ProcSched(os.Getpid())
	if err != nil {
		t.Fatalf("ProcSched: %v", err)
	}
	t.Logf("%+v", s)
	if s.Threads < 2 {
		t.Errorf("summed %d threads, want several for a Go test binary", s.Threads)
	}
	if s.Switches <= 0 {
		t.Errorf("Switches = %d, want > 0", s.Switches)
	}
	m, err := ProcMigrations(os.Getpid())
	if err != nil {
		t.Fatalf("ProcMigrations: %v", err)
	}
	if m < 0 {
		t.Errorf("ProcMigrations = %d", m)
	}
	if _, err := ProcMigrations(1 << 30); err == nil {
		t.Errorf("ProcMigrations of a missing process succeeded")
	}
}

func TestProcTree(t *testing.T) {
	root := t.TempDir()
	write := func(pid, stat string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 7 is the server, 10 its worker, 11 the worker's helper; 12 is outside
	// the tree, 13 a child of the outsider.
	write("7", "7 (server) S 1 7 7 0 -1 0 0 0 0 0 150 50 10 5 20 0 1 0 100 0 0")
	write("10", "10 (worker) S 7 7 7 0 -1 0 0 0 0 0 100 20 3 2 20 0 1 0 100 0 0")
	write("11", "11 (helper) S 10 7 7 0 -1 0 0 0 0 0 40 10 0 0 20 0 1 0 100 0 0")
	write("12", "12 (other) S 1 12 12 0 -1 0 0 0 0 0 500 500 0 0 20 0 1 0 100 0 0")
	write("13", "13 (other-child) S 12 12 12 0 -1 0 0 0 0 0 500 500 0 0 20 0 1 0 100 0 0")
	tests := []struct {
		pid     int
		want    []int
		cpu     time.Duration
		wantErr bool
	}{
		{pid: 7, want: []int{7, 10, 11}, cpu: 2150*time.Millisecond + 1250*time.Millisecond + 500*time.Millisecond},
		{pid: 10, want: []int{10, 11}, cpu: 1750 * time.Millisecond},
		{pid: 13, want: []int{13}, cpu: 10 * time.Second},
		{pid: 99, wantErr: true},
	}
	for _, tt := range tests {
		tree, err := ProcTree(root, tt.pid)
		if (err != nil) != tt.wantErr {
			t.Fatalf("ProcTree(%d): err %v, want error %v", tt.pid, err, tt.wantErr)
		}
		var got []int
		for _, s := range tree {
			got = append(got, s.PID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ProcTree(%d) = %v, want %v", tt.pid, got, tt.want)
		}
		cpu, err := TreeCPU(root, tt.pid)
		if (err != nil) != tt.wantErr || cpu != tt.cpu {
			t.Errorf("TreeCPU(%d) = %v, %v; want %v", tt.pid, cpu, err, tt.cpu)
		}
	}
}

func TestTreeSchedLive(t *testing.T) {
	// A shell with a child: the tree's counters cover both processes.
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var tree []ProcStat
	for i := 0; i < 200 && len(tree) < 2; i++ {
		time.Sleep(10 * time.Millisecond)
		tree, _ = ProcTree("/proc", cmd.Process.Pid)
	}
	if len(tree) < 2 {
		t.Fatalf("ProcTree of a shell with a child = %d processes, want 2", len(tree))
	}
	s, err := TreeSched(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("TreeSched: %v", err)
	}
	if s.Threads != 2 || s.Switches <= 0 {
		t.Errorf("TreeSched = %+v, want 2 threads and some switches", s)
	}
	if _, err := TreeSched(1 << 30); err == nil {
		t.Errorf("TreeSched of a missing process succeeded")
	}
}
