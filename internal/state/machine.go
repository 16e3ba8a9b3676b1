package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/runid"
)

// MachineLockFile is the file in LockDir on which the measuring lock is
// taken: the one lock every `nearnative run` holds for its whole run, so
// that two runs on one machine measure one after the other instead of
// disturbing each other.
const MachineLockFile = "measuring"

// Holder says who holds the measuring lock; the holder writes it into the
// lock file, and a run that has to wait reads it to say whom it waits for.
type Holder struct {
	Run   runid.ID  `json:"run"`
	Study string    `json:"study"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

// String is "run ID (study S, pid P, since 15:04:05)".
func (h Holder) String() string {
	if h.Run == "" {
		return fmt.Sprintf("another nearnative process (pid %d)", h.PID)
	}
	return fmt.Sprintf("run %s (study %s, pid %d, measuring since %s)", h.Run, h.Study, h.PID, h.Since.Local().Format("15:04:05"))
}

// BusyError is AcquireMachine's error when another run measures and the
// caller would not wait.
type BusyError struct{ Holder Holder }

func (e *BusyError) Error() string {
	return fmt.Sprintf("the machine is being measured by %s; wait for it, or run without --no-wait to queue behind it", e.Holder)
}

// MachineLock is the held measuring lock.
type MachineLock struct{ f *os.File }

// lockPollInterval is how often a waiting run tries the lock again.
var lockPollInterval = 500 * time.Millisecond

// AcquireMachine takes the machine-wide measuring lock for me. When another
// process holds it, AcquireMachine either returns a *BusyError at once
// (wait false) or waits until the lock is free or ctx ends, calling
// waiting with the holder each time the holder changes (to tell the user
// whom they wait for). The kernel drops the lock when the holding process
// dies, so a crashed run never blocks the machine.
func (d Dir) AcquireMachine(ctx context.Context, me Holder, wait bool, waiting func(Holder)) (*MachineLock, error) {
	if err := os.MkdirAll(d.LockDir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating lock dir: %w", err)
	}
	path := filepath.Join(d.LockDir(), MachineLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the measuring lock: %w", err)
	}
	var last Holder
	for first := true; ; first = false {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("taking the measuring lock %s: %w", path, err)
		}
		h := readHolder(f)
		if !wait {
			f.Close()
			return nil, &BusyError{Holder: h}
		}
		if first || h != last {
			last = h
			if waiting != nil {
				waiting(h)
			}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPollInterval):
		}
	}
	b, _ := json.Marshal(me)
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	return &MachineLock{f: f}, nil
}

// readHolder reads the holder the lock file names; a file being rewritten
// or from an older nearnative gives the zero Holder.
func readHolder(f *os.File) Holder {
	var h Holder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err == nil {
		json.Unmarshal(b, &h)
	}
	return h
}

// MachineHolder reports who holds the measuring lock, and false when nobody
// does. It never waits and never takes the lock for long.
func (d Dir) MachineHolder() (Holder, bool) {
	f, err := os.Open(filepath.Join(d.LockDir(), MachineLockFile))
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return Holder{}, false
	}
	return readHolder(f), true
}

// Release drops the measuring lock. The file stays: removing it while
// another process waits on it would let a third take a lock on a new file.
func (l *MachineLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
