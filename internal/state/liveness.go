package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Liveness is what this machine shows of a run's nearnative process.
type Liveness int

const (
	// Unknown: no record of the run's process here. Its resources may be
	// another lock directory's run, a test's, or older than the last boot
	// of a state directory that is not this one; a sweep leaves them unless
	// told the run by name.
	Unknown Liveness = iota
	// Alive: a live process holds the run.
	Alive
	// Dead: the run's process is gone (its lock file is unlocked, or its
	// owner record names a process that no longer exists).
	Dead
)

func (l Liveness) String() string {
	switch l {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// ownerFile is the owner record in a run's directory.
const ownerFile = "owner.json"

// Owner names the process that runs a run: its PID, its start time in
// clock ticks after boot and the boot, which together tell it apart from
// any later process with the same PID.
type Owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_tick"`
	Boot  string `json:"boot_id"`
}

func currentOwner() Owner {
	o := Owner{PID: os.Getpid(), Boot: bootID()}
	if st, err := sysinfo.ReadProcStat(o.PID); err == nil {
		o.Start = st.StartTime
	}
	return o
}

func (o Owner) encode() []byte {
	b, _ := json.Marshal(o)
	return append(b, '\n')
}

// gone reports whether the owner's process no longer exists; false when
// the record is too incomplete to tell.
func (o Owner) gone() bool {
	if o.PID <= 0 || o.Boot == "" {
		return false
	}
	if boot := bootID(); boot != "" && boot != o.Boot {
		return true
	}
	st, err := sysinfo.ReadProcStat(o.PID)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return o.Start != 0 && st.StartTime != o.Start
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// writeOwner replaces the contents of the open lock file f with o.
func writeOwner(f *os.File, o Owner) {
	if err := f.Truncate(0); err == nil {
		f.WriteAt(o.encode(), 0)
	}
}

// Liveness tells whether run id's process is alive, known dead, or
// unknown here. Only positive evidence makes a run dead: its lock file in
// the lock directory exists and nobody holds it (the kernel drops a flock
// when its process dies), or the owner record in its run directory names a
// process that is gone. A run that holds its lock in another lock
// directory, or resources a test made without a lock, are Unknown, never
// Dead: a sweep of dead runs cannot take a live one for a crashed one.
func (d Dir) Liveness(id runid.ID) Liveness {
	if !id.Valid() {
		return Unknown
	}
	if f, err := os.Open(filepath.Join(d.LockDir(), string(id))); err == nil {
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
			return Alive
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return Dead
	}
	b, err := os.ReadFile(filepath.Join(d.RunDir(id), ownerFile))
	if err != nil {
		return Unknown
	}
	var o Owner
	if json.Unmarshal(bytes.TrimSpace(b), &o) != nil || o.PID <= 0 {
		return Unknown
	}
	if o.gone() {
		return Dead
	}
	return Alive
}

// ensurePrivateDir makes dir (and its parents) and gives it mode 0700: the
// lock directory must not let another local user hold or fake a lock.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating lock dir: %w", err)
	}
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("making lock dir %s private (0700): %w", dir, err)
		}
	}
	return nil
}

// writeFileAtomic writes path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
