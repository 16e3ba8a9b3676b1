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
	f    *os.File
	path string
}

// AcquireLock takes the liveness lock of run id.
func (d Dir) AcquireLock(id runid.ID) (*Lock, error) {
	if err := os.MkdirAll(d.LockDir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating lock dir: %w", err)
	}
	path := filepath.Join(d.LockDir(), string(id))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening run lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("run %s is already running in another nearnative process", id)
		}
		return nil, fmt.Errorf("locking run %s: %w", id, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return &Lock{f: f, path: path}, nil
}

// Release drops the lock and removes its file.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	os.Remove(l.path)
	err := l.f.Close()
	l.f = nil
	return err
}

// Alive reports whether some process holds the liveness lock of run id.
func (d Dir) Alive(id runid.ID) bool {
	f, err := os.Open(filepath.Join(d.LockDir(), string(id)))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
