package state

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

func TestMachineLock(t *testing.T) {
	t.Setenv(EnvLockDir, t.TempDir()) // not the machine-wide lock directory
	d := Dir{Root: t.TempDir()}
	if _, held := d.MachineHolder(); held {
		t.Fatal("held before anyone took it")
	}
	first := Holder{Run: runid.New(), Study: "redis", PID: os.Getpid(), Since: time.Now()}
	l1, err := d.AcquireMachine(context.Background(), first, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, held := d.MachineHolder(); !held || h.Run != first.Run || h.Study != "redis" {
		t.Errorf("MachineHolder = %+v, %v; want %s", h, held, first.Run)
	}

	// A second run that will not wait is told who measures.
	second := Holder{Run: runid.New(), Study: "aa", PID: os.Getpid(), Since: time.Now()}
	_, err = d.AcquireMachine(context.Background(), second, false, nil)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Holder.Run != first.Run || !strings.Contains(err.Error(), string(first.Run)) {
		t.Fatalf("no-wait acquire while held: %v, want a BusyError naming %s", err, first.Run)
	}

	// One that waits says whom it waits for, once, and gives up with its
	// context.
	lockPollInterval = 20 * time.Millisecond
	var told []Holder
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = d.AcquireMachine(ctx, second, true, func(h Holder) { told = append(told, h) })
	if !errors.Is(err, context.DeadlineExceeded) || len(told) != 1 || told[0].Run != first.Run {
		t.Fatalf("waiting acquire: %v, told %+v; want the deadline and one message naming %s", err, told, first.Run)
	}

	// Once the first lets go, the waiter gets the lock.
	done := make(chan error, 1)
	var l2 *MachineLock
	go func() {
		var err error
		l2, err = d.AcquireMachine(context.Background(), second, true, nil)
		done <- err
	}()
	time.Sleep(60 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("acquired while held: %v", err)
	default:
	}
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter did not get the lock after it was released")
	}
	if h, _ := d.MachineHolder(); h.Run != second.Run {
		t.Errorf("holder after hand-over = %+v, want %s", h, second.Run)
	}
	if err := l2.Release(); err != nil || l2.Release() != nil {
		t.Errorf("Release: %v", err)
	}
	if _, held := d.MachineHolder(); held {
		t.Error("held after every release")
	}
}

// TestMachineLockAcrossProcesses: a run in another process holds the lock
// until it exits (or dies); this one waits for it.
func TestMachineLockAcrossProcesses(t *testing.T) {
	if os.Getenv("NEARNATIVE_TEST_LOCK_HOLDER") != "" {
		d := Dir{}
		l, err := d.AcquireMachine(context.Background(), Holder{Run: runid.ID(os.Getenv("NEARNATIVE_TEST_LOCK_HOLDER")), Study: "child", PID: os.Getpid()}, false, nil)
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(700 * time.Millisecond)
		_ = l // the process exits with the lock held: the kernel drops it
		os.Exit(0)
	}
	dir := t.TempDir()
	t.Setenv(EnvLockDir, dir)
	child := runid.New()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMachineLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "NEARNATIVE_TEST_LOCK_HOLDER="+string(child), EnvLockDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	exited := make(chan time.Time, 1)
	go func() { cmd.Wait(); exited <- time.Now() }()
	lockPollInterval = 20 * time.Millisecond
	var waitedFor runid.ID
	l, err := Dir{}.AcquireMachine(context.Background(), Holder{Run: runid.New(), PID: os.Getpid()}, true, func(h Holder) { waitedFor = h.Run })
	got := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	end := <-exited
	if waitedFor != child {
		t.Errorf("waited for %q, want the child's run %s", waitedFor, child)
	}
	if got.Before(end.Add(-50 * time.Millisecond)) {
		t.Errorf("acquired at %v, before the holder exited at %v", got, end)
	}
}
