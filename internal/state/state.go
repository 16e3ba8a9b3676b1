// Package state knows where nearnative keeps things on disk: the result
// database, per-run logs and raw tool output, image build caches, and the lock
// files that tell cleanup which runs are still alive.
package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/runid"
)

// EnvHome overrides the state directory.
const EnvHome = "NEARNATIVE_HOME"

// DefaultHome is the state directory when NEARNATIVE_HOME is not set.
const DefaultHome = "/var/lib/nearnative"

// Dir is a state directory.
type Dir struct{ Root string }

// Home returns the state directory from the environment or the default.
func Home() Dir {
	if h := os.Getenv(EnvHome); h != "" {
		return Dir{Root: h}
	}
	return Dir{Root: DefaultHome}
}

// DB is the default SQLite result database.
func (d Dir) DB() string { return filepath.Join(d.Root, "results.db") }

// RunDir holds a run's logs and raw tool output; it is kept after the run.
func (d Dir) RunDir(id runid.ID) string { return filepath.Join(d.Root, "runs", string(id)) }

// ImageDir holds image build caches (root file systems, disk images).
func (d Dir) ImageDir() string { return filepath.Join(d.Root, "images") }

// EnvLockDir overrides the lock directory (for unprivileged development).
const EnvLockDir = "NEARNATIVE_LOCK_DIR"

// DefaultLockDir holds one lock file per live run.
const DefaultLockDir = "/run/nearnative/locks"

// RouteDir holds, on a driver host, the routes a run added there (to a sut
// host's container bridge, platform docker-bridge): a file RUN.NETNS (the
// run, and the inode of the network namespace the routes are in: the
// hosts of a test bed share one /run), a line "DST via GW" per route, so
// that `nearnative cleanup` there removes them after a crash. Routes are
// not labelled otherwise.
const RouteDir = "/run/nearnative/routes"

// LockDir holds one lock file per live run. It is the same for every state
// directory: containers and processes are machine-wide, so a cleanup started
// with another NEARNATIVE_HOME must still see that a run is alive.
func (d Dir) LockDir() string {
	if v := os.Getenv(EnvLockDir); v != "" {
		return v
	}
	return DefaultLockDir
}

// TempDir creates a temporary directory labelled with the run; cleanup removes
// such directories when their run is no longer alive.
func TempDir(id runid.ID, purpose string) (string, error) {
	dir, err := os.MkdirTemp("", runid.Prefix+string(id)+"-"+purpose+"-")
	if err != nil {
		return "", fmt.Errorf("creating temp dir for %s: %w", purpose, err)
	}
	return dir, nil
}

// TempDirs lists temp dirs left by runs (all runs when id is empty).
func TempDirs(id runid.ID) ([]string, error) {
	if id != "" && !id.Valid() {
		return nil, fmt.Errorf("listing temp dirs of run %q: not a run ID", id)
	}
	pattern := filepath.Join(os.TempDir(), runid.Prefix+"*")
	if id != "" {
		pattern = filepath.Join(os.TempDir(), runid.Prefix+string(id)+"-*")
	}
	return filepath.Glob(pattern)
}

// RunOfTempDir extracts the run ID from a temp dir made by TempDir.
func RunOfTempDir(path string) (runid.ID, bool) {
	base := strings.TrimPrefix(filepath.Base(path), runid.Prefix)
	if len(base) < 20 {
		return "", false
	}
	id, err := runid.Parse(base[:20])
	return id, err == nil
}

// Lock marks a run as alive for as long as the returned file stays open (an
// flock on locks/<id>). The kernel drops the lock when the process dies, so a
// crashed run is recognisable by its unlocked file.
type Lock struct {
	f     *os.File
	path  string
	owner string // the run's owner record in the state directory
}

// AcquireLock takes the liveness lock of run id and records this process as
// the run's owner (Liveness reads both). The lock file appears already
// locked: it is made under a temporary name, locked, then linked into place,
// so that no sweep can see it unlocked and take the run for a crashed one.
func (d Dir) AcquireLock(id runid.ID) (*Lock, error) { return d.lock(id, true) }

// Claim takes the liveness lock of run id for a sweep of what it left: while
// the sweep holds it, the run cannot be resumed, and another sweep sees it
// alive and leaves it. Unlike AcquireLock it records no owner.
func (d Dir) Claim(id runid.ID) (*Lock, error) { return d.lock(id, false) }

func (d Dir) lock(id runid.ID, record bool) (*Lock, error) {
	if !id.Valid() {
		return nil, fmt.Errorf("cannot lock run %q: not a run ID", id)
	}
	if err := ensurePrivateDir(d.LockDir()); err != nil {
		return nil, err
	}
	path := filepath.Join(d.LockDir(), string(id))
	me := currentOwner()
	f, err := lockedFileAt(path, me)
	if err != nil {
		return nil, fmt.Errorf("locking run %s: %w", id, err)
	}
	if f == nil {
		// The file was there already: a crashed run's (or one of ours
		// that a resume takes again), or a live run's.
		if f, err = os.OpenFile(path, os.O_RDWR, 0o600); err != nil {
			return nil, fmt.Errorf("opening run lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("run %s is already running in another nearnative process", id)
			}
			return nil, fmt.Errorf("locking run %s: %w", id, err)
		}
		f.Chmod(0o600)
		writeOwner(f, me)
	}
	l := &Lock{f: f, path: path}
	if !record {
		return l, nil
	}
	// The owner record beside the run's files outlives a reboot (the lock
	// directory is on /run) and a change of lock directory.
	owner := filepath.Join(d.RunDir(id), ownerFile)
	if err := os.MkdirAll(filepath.Dir(owner), 0o755); err == nil {
		if err := writeFileAtomic(owner, me.encode(), 0o600); err == nil {
			l.owner = owner
		}
	}
	return l, nil
}

// lockedFileAt creates path holding owner and already locked; it returns a
// nil file when path exists.
func lockedFileAt(path string, owner Owner) (*os.File, error) {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	writeOwner(f, owner)
	if err := os.Link(tmp, path); err != nil {
		f.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// Release drops the lock and removes its file and the owner record: the
// run ended in order.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	os.Remove(l.path)
	if l.owner != "" {
		os.Remove(l.owner)
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Unlock drops the lock but keeps its file, so that the run still reads as
// crashed: a sweep that could not remove everything leaves it for the next.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Alive reports whether a live process holds run id (Liveness is Alive).
func (d Dir) Alive(id runid.ID) bool { return d.Liveness(id) == Alive }
