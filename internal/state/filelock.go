package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// fileLockPoll is how often LockFile tries again while another process
// holds the lock.
const fileLockPoll = 200 * time.Millisecond

// LockFile takes an exclusive flock on path (creating it and its
// directory), so that processes building the same cached thing (a data
// template, a guest disk, the image) build it once. While another process
// holds the lock it tries again every 200 ms until ctx ends, calling
// waiting (when not nil) once, the first time it finds the lock held. The
// kernel drops the lock when its holder dies. unlock releases it.
func LockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	for first := true; ; first = false {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if first && waiting != nil {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s, held by another process: %w", path, ctx.Err())
		case <-time.After(fileLockPoll):
		}
	}
}
