package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	_, err = d.AcquireMachine(ctx, second, true, func(p Place) { told = append(told, p.Holder) })
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
	l, err := Dir{}.AcquireMachine(context.Background(), Holder{Run: runid.New(), PID: os.Getpid()}, true, func(p Place) { waitedFor = p.Holder.Run })
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

// TestMachineLockFairOrder: processes that wait take the lock in the order
// they came, each told its place; a ticket left by a waiter that died does
// not hold up the queue; the files are private.
func TestMachineLockFairOrder(t *testing.T) {
	t.Setenv(EnvLockDir, t.TempDir())
	lockPollInterval = 10 * time.Millisecond
	d := Dir{Root: t.TempDir()}
	holder := Holder{Run: runid.New(), Study: "first", PID: os.Getpid(), Since: time.Now()}
	l, err := d.AcquireMachine(context.Background(), holder, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A dead waiter's ticket: numbered before everyone, locked by nobody.
	dead := filepath.Join(d.LockDir(), QueueDir, ticketName(0))
	if err := os.WriteFile(dead, []byte(`{"command":"dead"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	places := make([]chan Place, 3)
	for i := 0; i < 3; i++ {
		places[i] = make(chan Place, 1)
		go func(i int) {
			me := Holder{Command: fmt.Sprintf("waiter %d", i), PID: os.Getpid(), Since: time.Now()}
			told := false
			m, err := d.AcquireMachine(context.Background(), me, true, func(p Place) {
				if !told {
					told = true
					places[i] <- p
				}
			})
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i
			time.Sleep(30 * time.Millisecond) // hold it a moment
			m.Release()
		}(i)
		// The next one arrives once this one has its ticket.
		select {
		case p := <-places[i]:
			if p.Ahead != i || p.Holder.Run != holder.Run {
				t.Errorf("waiter %d told %+v, want %d ahead and holder %s", i, p, i, holder.Run)
			}
			if want := []string{"next in line", "2nd in line", "3rd in line"}[i]; p.String() != want {
				t.Errorf("waiter %d place %q, want %q", i, p, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d never said its place", i)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead waiter's ticket is still there: %v", err)
	}
	// A run that will not wait is told the holder and the queue.
	_, err = d.AcquireMachine(context.Background(), Holder{Command: "late"}, false, nil)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Waiting != 3 || !strings.Contains(err.Error(), "with 3 more waiting") {
		t.Errorf("no-wait acquire with a queue: %v", err)
	}
	l.Release()
	for want := 0; want < 3; want++ {
		select {
		case i := <-order:
			if i != want {
				t.Fatalf("waiter %d took the lock in turn %d", i, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("turn %d never came", want)
		}
	}
	for _, p := range []string{d.LockDir(), filepath.Join(d.LockDir(), QueueDir)} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want 0700", p, err, st.Mode().Perm())
		}
	}
	files, _ := filepath.Glob(filepath.Join(d.LockDir(), "*"))
	more, _ := filepath.Glob(filepath.Join(d.LockDir(), QueueDir, "*"))
	for _, f := range append(files, more...) {
		if st, err := os.Stat(f); err == nil && !st.IsDir() && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(d.LockDir(), QueueDir, "0*")); len(left) != 0 {
		t.Errorf("tickets left after every waiter's turn: %v", left)
	}
}

func TestPlaceString(t *testing.T) {
	for ahead, want := range map[int]string{0: "next in line", 1: "2nd in line", 2: "3rd in line", 3: "4th in line", 10: "11th in line", 11: "12th in line", 20: "21st in line"} {
		if got := (Place{Ahead: ahead}).String(); got != want {
			t.Errorf("Place{%d} = %q, want %q", ahead, got, want)
		}
	}
	h := Holder{Command: "doctor", PID: 7, Since: time.Now()}
	if !strings.HasPrefix(h.String(), "nearnative doctor (pid 7, since ") {
		t.Errorf("Holder = %q", h)
	}
}
