package state

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLockFile: a second taker waits (told once) until the first unlocks,
// and gives up with ctx's error when ctx ends first.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	unlock, err := LockFile(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	waits := 0
	if _, err := LockFile(ctx, path, func() { waits++ }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second taker while held: %v, want the deadline", err)
	}
	if waits != 1 {
		t.Errorf("waiting called %d times, want 1", waits)
	}

	got := make(chan error, 1)
	go func() {
		u, err := LockFile(context.Background(), path, nil)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second taker got the lock while it was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("second taker still waiting after unlock")
	}
}
