package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// fastPolicy retries quickly, for tests.
func fastPolicy(total time.Duration) WritePolicy {
	return WritePolicy{Attempt: 2 * time.Second, Total: total, Backoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

func aRun(t *testing.T, s Store) Run {
	t.Helper()
	r := Run{ID: runid.New(), Study: "s", Baseline: "native", Started: time.Now()}
	if err := s.CreateRun(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func aTrial(r Run, round int) Trial {
	return Trial{RunID: r.ID, Round: round, Workload: "redis", Platform: "native", Started: time.Now(), Duration: time.Second,
		Metrics: []Metric{{Name: "ops", Unit: "ops/s", HigherIsBetter: true, Value: 1234}}}
}

// TestWriteRetriesPostgres: a trial written while the PostgreSQL server is
// down is stored once it is back; a server that stays down fails the write
// with a *WriteError once the policy's time is spent; a server that stops
// answering (SIGSTOP) costs one attempt's deadline per attempt, and a
// cancelled context ends the write at once.
func TestWriteRetriesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	pg := startPostgres(t)
	s := open(t, pg.newSchema(t, "nn_retry"))
	r := aRun(t, s)
	ctx := context.Background()

	// The test server commits asynchronously (synchronous_commit=off) and
	// stops in immediate mode: a checkpoint keeps what is committed.
	checkpoint := func() {
		t.Helper()
		if _, err := pg.admin.ExecContext(ctx, "CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
	}
	// Down, then back within the policy's time: stored.
	checkpoint()
	pg.stop(t)
	s.(WriteRetrier).SetWritePolicy(fastPolicy(60 * time.Second))
	done := make(chan error, 1)
	go func() { done <- s.AddTrial(ctx, aTrial(r, 0)) }()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the write ended while the server was down: %v", err)
	default:
	}
	pg.restart(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after the server came back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not finish after the server came back")
	}
	if trials, err := s.Trials(ctx, r.ID); err != nil || len(trials) != 1 {
		t.Fatalf("stored %d trials (%v), want 1", len(trials), err)
	}

	// Down for good: a WriteError after the policy's time.
	checkpoint()
	pg.stop(t)
	s.(WriteRetrier).SetWritePolicy(fastPolicy(2 * time.Second))
	start := time.Now()
	err := s.AddTrial(ctx, aTrial(r, 1))
	var we *WriteError
	if !errors.As(err, &we) || we.Attempts < 2 {
		t.Fatalf("write to a stopped server: %v, want a *WriteError after several attempts", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v, want about the policy's 2 s", took)
	}

	// Not answering: a cancelled context ends the write at once.
	pg.restart(t)
	if err := s.AddTrial(ctx, aTrial(r, 1)); err != nil {
		t.Fatal(err)
	}
	pids := append(childPIDs(pg.postmasterPID()), pg.postmasterPID())
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}()
	s.(WriteRetrier).SetWritePolicy(fastPolicy(time.Minute))
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(3*time.Second, cancel)
	start = time.Now()
	err = s.AddTrial(cctx, aTrial(r, 2))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("write to a stopped server, cancelled: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("the cancelled write took %v", took)
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGCONT)
	}
}

// TestWriteRetriesFullDisk: on a full file system a SQLite write fails as
// passing; it is stored once space is freed within the policy's time, and
// fails with a *WriteError when it is not.
func TestWriteRetriesFullDisk(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("mounts a small tmpfs (root)")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	s := open(t, filepath.Join(mnt, "results.db"))
	r := aRun(t, s)
	ctx := context.Background()
	filler := filepath.Join(mnt, "filler")
	fill := func() {
		t.Helper()
		// dd stops at the first write the full file system refuses.
		out, _ := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").CombinedOutput()
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err != nil || st.Bavail != 0 {
			t.Fatalf("the file system is not full: %v, %d blocks free\n%s", err, st.Bavail, out)
		}
	}
	fill()
	s.(WriteRetrier).SetWritePolicy(fastPolicy(time.Second))
	err := s.AddTrial(ctx, aTrial(r, 0))
	var we *WriteError
	if !errors.As(err, &we) {
		t.Fatalf("write to a full disk: %v, want a *WriteError", err)
	}
	t.Logf("full disk: %v", err)

	s.(WriteRetrier).SetWritePolicy(fastPolicy(30 * time.Second))
	time.AfterFunc(time.Second, func() { os.Remove(filler) })
	if err := s.AddTrial(ctx, aTrial(r, 0)); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if trials, err := s.Trials(ctx, r.ID); err != nil || len(trials) != 1 {
		t.Fatalf("stored %d trials (%v), want 1", len(trials), err)
	}
}

// TestWriteFinalErrorsNotRetried: a constraint is final: no retry.
func TestWriteFinalErrorsNotRetried(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "results.db"))
	s.(WriteRetrier).SetWritePolicy(fastPolicy(time.Minute))
	start := time.Now()
	err := s.AddTrial(context.Background(), aTrial(Run{ID: runid.New()}, 0))
	if !errors.Is(err, ErrNoRun) || time.Since(start) > time.Second {
		t.Errorf("trial of an unknown run: %v after %v, want ErrNoRun at once", err, time.Since(start))
	}
	if got := DefaultWritePolicy.String(); got != fmt.Sprintf("each attempt at most %v, retried for up to %v", 15*time.Second, 2*time.Minute) {
		t.Errorf("DefaultWritePolicy = %q", got)
	}
}
