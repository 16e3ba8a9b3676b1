package cleanup

import (
	"context"
	"encoding/json"
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

	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// fakeSweeper owns the given runs and records what it is asked.
type fakeSweeper struct {
	kind      string
	runs      []runid.ID
	runsErr   error
	removeErr error
	log       *[]string // shared between sweepers to check their order
	runsCalls int
}

func (f *fakeSweeper) Kind() string { return f.kind }

func (f *fakeSweeper) Runs(ctx context.Context) ([]runid.ID, error) {
	f.runsCalls++
	return f.runs, f.runsErr
}

func (f *fakeSweeper) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	*f.log = append(*f.log, f.kind+" "+string(run))
	if f.removeErr != nil {
		return nil, f.removeErr
	}
	return []string{f.kind + " of " + string(run)}, nil
}

// ids returns n distinct run IDs in sorted order.
func ids(n int) []runid.ID {
	set := map[runid.ID]bool{}
	for len(set) < n {
		set[runid.New()] = true
	}
	var out []runid.ID
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestClean(t *testing.T) {
	r := ids(3)
	a, b, c := r[0], r[1], r[2] // a crashed, b alive, c unknown here
	as, bs, cs := string(a), string(b), string(c)
	tests := []struct {
		name        string
		opt         Options
		wantLog     []string
		wantAlive   []runid.ID
		wantUnknown []runid.ID
		wantRuns    int // calls of each sweeper's Runs
		wantRemoved int
	}{
		{"the crashed run; the live and the unknown one are skipped", Options{},
			[]string{"procs " + as, "dirs " + as}, []runid.ID{b}, []runid.ID{c}, 1, 2},
		{"orphans: the unknown one too", Options{Orphans: true},
			[]string{"procs " + as, "dirs " + as, "procs " + cs, "dirs " + cs}, []runid.ID{b}, nil, 1, 4},
		{"force cleans every run", Options{Force: true},
			[]string{"procs " + as, "dirs " + as, "procs " + bs, "dirs " + bs, "procs " + cs, "dirs " + cs}, nil, nil, 1, 6},
		{"one unknown run, named", Options{Run: c},
			[]string{"procs " + cs, "dirs " + cs}, nil, nil, 0, 2},
		{"one live run", Options{Run: b},
			nil, []runid.ID{b}, nil, 0, 0},
		{"one live run, forced", Options{Run: b, Force: true},
			[]string{"procs " + bs, "dirs " + bs}, nil, nil, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Locks of this test only, not the machine-wide lock directory.
			t.Setenv(state.EnvLockDir, t.TempDir())
			dir := state.Dir{Root: t.TempDir()}
			lock, err := dir.AcquireLock(b)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Release()
			// A stale lock file left by a crashed run a.
			if err := os.WriteFile(filepath.Join(dir.LockDir(), string(a)), []byte("1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var log []string
			procs := &fakeSweeper{kind: "procs", runs: []runid.ID{c, b, "../../canary"}, log: &log}
			dirs := &fakeSweeper{kind: "dirs", runs: []runid.ID{a, c}, log: &log}
			rep := Clean(context.Background(), dir, []Sweeper{procs, dirs}, tt.opt)

			if !reflect.DeepEqual(log, tt.wantLog) {
				t.Errorf("removals %q, want %q", log, tt.wantLog)
			}
			if !reflect.DeepEqual(rep.Alive, tt.wantAlive) {
				t.Errorf("Alive %v, want %v", rep.Alive, tt.wantAlive)
			}
			if !reflect.DeepEqual(rep.Unknown, tt.wantUnknown) {
				t.Errorf("Unknown %v, want %v", rep.Unknown, tt.wantUnknown)
			}
			if procs.runsCalls != tt.wantRuns || dirs.runsCalls != tt.wantRuns {
				t.Errorf("Runs called %d and %d times, want %d", procs.runsCalls, dirs.runsCalls, tt.wantRuns)
			}
			if len(rep.Removed) != tt.wantRemoved {
				t.Errorf("Removed %q, want %d entries", rep.Removed, tt.wantRemoved)
			}
			if len(rep.Errors) != 0 {
				t.Errorf("Errors %v", rep.Errors)
			}
			// The forged ID is reported, never swept.
			if tt.opt.Run == "" {
				if len(rep.Invalid) != 1 || !strings.Contains(rep.Invalid[0], `"../../canary"`) || !strings.Contains(rep.Invalid[0], "procs") {
					t.Errorf("Invalid %q, want the forged ID from procs", rep.Invalid)
				}
			}
			// One report per run swept.
			if len(rep.Runs)*2 != len(tt.wantLog) {
				t.Errorf("Runs %+v for removals %q", rep.Runs, tt.wantLog)
			}
			// A cleaned dead run's lock file goes; the live run b keeps its
			// lock, skipped or forced, so it goes on looking alive.
			for _, id := range []runid.ID{a, b, c} {
				cleaned := slices.Contains(log, "procs "+string(id))
				_, err := os.Stat(filepath.Join(dir.LockDir(), string(id)))
				if cleaned && id != b && err == nil {
					t.Errorf("lock file of cleaned run %s still there", id)
				}
				if id == b && err != nil {
					t.Errorf("lock file of the live run removed: %v", err)
				}
			}
			if !dir.Alive(b) {
				t.Error("live run no longer alive after Clean")
			}
		})
	}
}

// TestCleanKeepsLockOnError: a run whose sweep failed keeps its lock file,
// so that it still reads as crashed and the next sweep tries again.
func TestCleanKeepsLockOnError(t *testing.T) {
	t.Setenv(state.EnvLockDir, t.TempDir())
	dir := state.Dir{Root: t.TempDir()}
	id := ids(1)[0]
	if err := os.WriteFile(filepath.Join(dir.LockDir(), string(id)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var log []string
	broken := &fakeSweeper{kind: "containers", runs: []runid.ID{id}, removeErr: errors.New("docker down"), log: &log}
	rep := Clean(context.Background(), dir, []Sweeper{broken}, Options{})
	if len(rep.Errors) != 1 || len(rep.Runs) != 1 || len(rep.Runs[0].Errors) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if dir.Liveness(id) != state.Dead {
		t.Errorf("after a failed sweep the run reads %v, want dead", dir.Liveness(id))
	}
}

func TestCleanErrors(t *testing.T) {
	t.Setenv(state.EnvLockDir, t.TempDir())
	dir := state.Dir{Root: t.TempDir()}
	r := ids(2)
	for _, id := range r { // both crashed
		if err := os.WriteFile(filepath.Join(dir.LockDir(), string(id)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var log []string
	broken := &fakeSweeper{kind: "containers", runsErr: errors.New("docker down"), removeErr: errors.New("docker down"), log: &log}
	ok := &fakeSweeper{kind: "dirs", runs: r, log: &log}
	rep := Clean(context.Background(), dir, []Sweeper{broken, ok}, Options{})
	// The listing error is reported; the other sweeper's runs are still
	// cleaned, and by every sweeper (the broken one fails again).
	if want := []string{"containers " + string(r[0]), "dirs " + string(r[0]), "containers " + string(r[1]), "dirs " + string(r[1])}; !reflect.DeepEqual(log, want) {
		t.Errorf("removals %q, want %q", log, want)
	}
	if len(rep.Errors) != 3 {
		t.Fatalf("Errors %v, want 3", rep.Errors)
	}
	if !strings.Contains(rep.Errors[0].Error(), "listing containers: docker down") {
		t.Errorf("first error %q", rep.Errors[0])
	}
	if !strings.Contains(rep.Errors[1].Error(), "removing containers of run "+string(r[0])) {
		t.Errorf("second error %q", rep.Errors[1])
	}
	if len(rep.Removed) != 2 {
		t.Errorf("Removed %q", rep.Removed)
	}
}

func TestCleanNothing(t *testing.T) {
	rep := Clean(context.Background(), state.Dir{Root: t.TempDir()}, nil, Options{})
	if len(rep.Removed)+len(rep.Alive)+len(rep.Errors) != 0 {
		t.Errorf("empty clean reported %+v", rep)
	}
}

func TestTempDirsSweeper(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := ids(2)
	a, b := r[0], r[1]
	var aDirs []string
	for _, purpose := range []string{"redis", "pg"} {
		d, err := state.TempDir(a, purpose)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		aDirs = append(aDirs, d)
	}
	bDir, err := state.TempDir(b, "redis")
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(tmp, "nn-not-a-run")
	if err := os.Mkdir(junk, 0o755); err != nil {
		t.Fatal(err)
	}

	var s TempDirs
	runs, err := s.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
	if !reflect.DeepEqual(runs, []runid.ID{a, b}) {
		t.Errorf("Runs = %v, want %v", runs, []runid.ID{a, b})
	}

	removed, err := s.Remove(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("Remove(a) reported %q, want 2 dirs", removed)
	}
	for _, d := range aDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
		if !slices.Contains(removed, "temp dir "+d) {
			t.Errorf("Remove did not report %s: %q", d, removed)
		}
	}
	for _, d := range []string{bDir, junk} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed with run a: %v", d, err)
		}
	}
	removed, err = s.Remove(context.Background(), a)
	if err != nil || len(removed) != 0 {
		t.Errorf("second Remove(a) = %q, %v; want nothing, no error", removed, err)
	}
}

// startSleep starts `sleep 60` in its own process group with the given run in
// its environment; it is killed when the test ends. The returned channel
// yields its Wait error once.
func startSleep(t *testing.T, run runid.ID) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(run))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case err := <-done:
			done <- err
		case <-time.After(5 * time.Second):
			t.Errorf("sleep %d not reaped", cmd.Process.Pid)
		}
	})
	// Wait until sleep has exec'd, so /proc shows its own environment.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "comm"))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, done
}

func waitExit(t *testing.T, done chan error, within time.Duration) (error, bool) {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err, true
	case <-time.After(within):
		return nil, false
	}
}

func TestProcessesSweeperEnv(t *testing.T) {
	dir := state.Dir{Root: t.TempDir()}
	r := ids(2)
	run, other := r[0], r[1]
	cmd, done := startSleep(t, run)
	_, otherDone := startSleep(t, other)
	pid := cmd.Process.Pid

	p := Processes{Dir: dir}
	runs, err := p.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(runs, run) || !slices.Contains(runs, other) {
		t.Errorf("Runs = %v, want it to contain %s and %s", runs, run, other)
	}

	removed, err := p.Remove(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	want := "process " + strconv.Itoa(pid) + " (sleep, run " + string(run) + ")"
	if !reflect.DeepEqual(removed, []string{want}) {
		t.Errorf("Remove reported %q, want [%q]", removed, want)
	}
	err, exited := waitExit(t, done, 3*time.Second)
	if !exited {
		t.Fatal("sleep still running after Remove")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sleep ended with %v, want SIGKILL", err)
	}
	if _, exited := waitExit(t, otherDone, 100*time.Millisecond); exited {
		t.Error("the other run's process was killed too")
	}
}

func TestProcessesSweeperStateFiles(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := state.Dir{Root: t.TempDir()}
	r := ids(2)
	run, other := r[0], r[1]
	// The process carries another run's ID, so only its state file of run
	// ties it to run.
	cmd, done := startSleep(t, other)
	pid := cmd.Process.Pid
	tick, err := native.StartTick(pid)
	if err != nil {
		t.Fatal(err)
	}
	pdir := native.ProcDir(dir, run)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, st native.ProcState) string {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(pdir, name+".json")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	serverDir, err := state.TempDir(run, "redis")
	if err != nil {
		t.Fatal(err)
	}
	// A record naming a directory that is not the run's: the directory
	// stays, whatever the file says.
	notOurs := t.TempDir()
	write("forged", native.ProcState{Run: run, Name: "redis", PID: 1, StartTick: 1, Dir: notOurs})
	if _, err := (Processes{Dir: dir}).Remove(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(notOurs); err != nil {
		t.Fatalf("a directory a state file named, not the run's, was removed: %v", err)
	}
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}

	// First a stale record: same PID, another start time (PID reused). The
	// process must survive.
	stale := write("stale", native.ProcState{Run: run, Name: "redis", PID: pid, StartTick: tick + 1})
	p := Processes{Dir: dir}
	runs, _ := p.Runs(context.Background())
	if !slices.Contains(runs, run) {
		t.Errorf("Runs = %v lacks %s, which has a state file", runs, run)
	}
	removed, err := p.Remove(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 0 {
		t.Errorf("stale record: Remove reported %q", removed)
	}
	if _, exited := waitExit(t, done, 100*time.Millisecond); exited {
		t.Fatal("a process whose PID matched a stale record was killed")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale state file kept: %v", err)
	}

	// Then the real record: the group is killed and its dir removed.
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := write("redis", native.ProcState{Run: run, Name: "redis", PID: pid, StartTick: tick, Dir: serverDir})
	removed, err = p.Remove(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	want := "process group " + strconv.Itoa(pid) + " (redis, run " + string(run) + ")"
	if !reflect.DeepEqual(removed, []string{want}) {
		t.Errorf("Remove reported %q, want [%q]", removed, want)
	}
	if _, exited := waitExit(t, done, 3*time.Second); !exited {
		t.Fatal("recorded process still running after Remove")
	}
	for _, f := range []string{rec, pdir, serverDir} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", f, err)
		}
	}
}
