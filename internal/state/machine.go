package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/runid"
)

// MachineLockFile is the file in LockDir on which the measuring lock is
// taken: the one lock every `nearnative run` holds for its whole run (and
// `doctor`, `image build` and `cluster up/down` while they work), so that
// two of them on one machine go one after the other instead of disturbing
// each other.
const MachineLockFile = "measuring"

// QueueDir is the directory in LockDir holding the tickets of the processes
// waiting for the measuring lock, and the ticket counter.
const QueueDir = "queue"

// Holder says who holds (or waits for) the measuring lock; the holder writes
// it into the lock file, a waiter into its ticket, and a waiting process
// reads them to say whom it waits for.
type Holder struct {
	Run   runid.ID `json:"run"`
	Study string   `json:"study"`
	// Command names a holder that is not a run ("doctor", "image build").
	Command string    `json:"command,omitempty"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
}

// String is "run ID (study S, pid P, measuring since 15:04:05)", or for
// another command "nearnative doctor (pid P, since 15:04:05)".
func (h Holder) String() string {
	switch {
	case h.Run != "":
		return fmt.Sprintf("run %s (study %s, pid %d, measuring since %s)", h.Run, h.Study, h.PID, h.Since.Local().Format("15:04:05"))
	case h.Command != "":
		return fmt.Sprintf("nearnative %s (pid %d, since %s)", h.Command, h.PID, h.Since.Local().Format("15:04:05"))
	}
	return fmt.Sprintf("another nearnative process (pid %d)", h.PID)
}

// BusyError is AcquireMachine's error when another process holds the
// measuring lock (or waits for it ahead of this one) and the caller would
// not wait.
type BusyError struct {
	Holder Holder
	// Waiting is how many processes already wait for the lock.
	Waiting int
}

func (e *BusyError) Error() string {
	queue := ""
	if e.Waiting > 0 {
		queue = fmt.Sprintf(" with %d more waiting", e.Waiting)
	}
	return fmt.Sprintf("the machine is being measured by %s%s; wait for it, or run without --no-wait to queue behind it", e.Holder, queue)
}

// Place is where a waiting process stands: Ahead processes wait before it
// (Place 1 is next) and Holder holds the lock now.
type Place struct {
	Ahead  int
	Holder Holder
}

// String is "next in line" or "3rd in line".
func (p Place) String() string {
	if p.Ahead == 0 {
		return "next in line"
	}
	return ordinal(p.Ahead+1) + " in line"
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// MachineLock is the held measuring lock.
type MachineLock struct{ f *os.File }

// lockPollInterval is how often a waiting process looks at the queue again.
var lockPollInterval = 500 * time.Millisecond

// AcquireMachine takes the machine-wide measuring lock for me. Processes
// wait in the order they arrived: each takes a numbered ticket (a file in
// the queue directory that it keeps locked while it waits) and takes the
// lock only when no live ticket with a smaller number is left, so a run
// that has waited long is not overtaken by one that started later. When
// the lock is held or others wait, AcquireMachine either returns a
// *BusyError at once (wait false) or waits until its turn or until ctx
// ends, calling waiting whenever its place or the holder changes (to tell
// the user where they stand and whom they wait for). The kernel drops every
// lock and ticket of a process that dies, so a crashed run or waiter never
// blocks the machine.
func (d Dir) AcquireMachine(ctx context.Context, me Holder, wait bool, waiting func(Place)) (*MachineLock, error) {
	if err := ensurePrivateDir(d.LockDir()); err != nil {
		return nil, err
	}
	path := filepath.Join(d.LockDir(), MachineLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the measuring lock: %w", err)
	}
	f.Chmod(0o600) // a file an older nearnative made 0644
	q, err := d.takeTicket(me)
	if err != nil {
		f.Close()
		return nil, err
	}
	defer q.drop()
	var last Place
	for first := true; ; first = false {
		ahead := q.ahead()
		if len(ahead) == 0 {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EWOULDBLOCK) {
				f.Close()
				return nil, fmt.Errorf("taking the measuring lock %s: %w", path, err)
			}
		}
		p := Place{Ahead: len(ahead), Holder: readHolder(f)}
		if p.Holder == (Holder{}) && len(ahead) > 0 {
			// Between two holders: the next in line is about to take it.
			p.Holder = ahead[0]
		}
		if !wait {
			f.Close()
			return nil, &BusyError{Holder: p.Holder, Waiting: len(ahead)}
		}
		if first || p != last {
			last = p
			if waiting != nil {
				waiting(p)
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

// ticket is a place in the queue for the measuring lock: a file named by
// its number, locked by the waiting process for as long as it waits.
type ticket struct {
	dir string
	n   uint64
	f   *os.File
}

// ticketName is a ticket's file name: the number, zero-padded so that names
// sort as numbers.
func ticketName(n uint64) string { return fmt.Sprintf("%020d", n) }

// takeTicket draws the next number from the queue's counter (under an
// flock, so two processes never draw the same one) and makes the ticket
// file, locked before it appears under its name.
func (d Dir) takeTicket(me Holder) (*ticket, error) {
	dir := filepath.Join(d.LockDir(), QueueDir)
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}
	counter, err := os.OpenFile(filepath.Join(dir, "next"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the measuring queue: %w", err)
	}
	defer counter.Close()
	if err := unix.Flock(int(counter.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("locking the measuring queue: %w", err)
	}
	b, _ := io.ReadAll(io.NewSectionReader(counter, 0, 64))
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	n++
	if err := counter.Truncate(0); err != nil {
		return nil, fmt.Errorf("writing the measuring queue: %w", err)
	}
	if _, err := counter.WriteAt([]byte(strconv.FormatUint(n, 10)+"\n"), 0); err != nil {
		return nil, fmt.Errorf("writing the measuring queue: %w", err)
	}
	path := filepath.Join(dir, ticketName(n))
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("making a ticket for the measuring lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("locking a ticket for the measuring lock: %w", err)
	}
	hb, _ := json.Marshal(me)
	f.Write(append(hb, '\n'))
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("making a ticket for the measuring lock: %w", err)
	}
	return &ticket{dir: dir, n: n, f: f}, nil
}

// ahead returns the holders of the live tickets numbered below q's, in
// order. A ticket nobody holds locked is a dead waiter's: it is removed.
func (q *ticket) ahead() []Holder {
	ents, _ := os.ReadDir(q.dir)
	var nums []uint64
	for _, e := range ents {
		if len(e.Name()) != 20 {
			continue
		}
		n, err := strconv.ParseUint(e.Name(), 10, 64)
		if err == nil && n < q.n {
			nums = append(nums, n)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	var out []Holder
	for _, n := range nums {
		path := filepath.Join(q.dir, ticketName(n))
		f, err := os.Open(path)
		if err != nil {
			continue // taken its turn meanwhile
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
			// Nobody waits on it: its process died. Remove it under our
			// lock so that no one else reads it as live meanwhile.
			os.Remove(path)
			f.Close()
			continue
		}
		out = append(out, readHolder(f))
		f.Close()
	}
	return out
}

// drop leaves the queue: the ticket's file goes, then its lock.
func (q *ticket) drop() {
	if q == nil || q.f == nil {
		return
	}
	os.Remove(filepath.Join(q.dir, ticketName(q.n)))
	q.f.Close()
	q.f = nil
}

// readHolder reads the holder a lock or ticket file names; a file being
// rewritten or from an older nearnative gives the zero Holder.
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
// The holder record is cleared first, so that a waiter never names a
// holder that has gone.
func (l *MachineLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}
