package sysinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcStat holds the fields of /proc/PID/stat that nearnative uses. Times are
// in clock ticks (see ClockTicks).
type ProcStat struct {
	PID   int    `json:"pid"`
	Comm  string `json:"comm"`
	State string `json:"state"`
	PPID  int    `json:"ppid"`
	// UTime and STime are the user and system time of the whole process:
	// the kernel adds every thread, including threads that have exited.
	UTime uint64 `json:"utime"`
	STime uint64 `json:"stime"`
	// CUTime and CSTime are the times of children the process has waited for.
	CUTime uint64 `json:"cutime"`
	CSTime uint64 `json:"cstime"`
	// NumThreads is the current thread count.
	NumThreads int64 `json:"num_threads"`
	// StartTime is when the process started, in ticks after boot.
	StartTime uint64 `json:"start_time"`
	// Processor is the CPU the process last ran on (-1 if not reported).
	Processor int `json:"processor"`
}

// ReadProcStat reads /proc/PID/stat.
func ReadProcStat(pid int) (ProcStat, error) { return ReadProcStatAt("/proc", pid) }

// ParseProcStat parses the text of /proc/PID/stat (or /proc/PID/task/TID/stat).
// The command name may contain spaces and parentheses: it runs from the first
// '(' to the last ')'.
func ParseProcStat(b []byte) (ProcStat, error) {
	b = bytes.TrimSpace(b)
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return ProcStat{}, errors.New("no (comm) field")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return ProcStat{}, fmt.Errorf("pid: %w", err)
	}
	// rest[0] is field 3 (state) in proc(5) numbering.
	rest := strings.Fields(string(b[closing+1:]))
	const need = 13 // up to stime, field 15
	if len(rest) < need {
		return ProcStat{}, fmt.Errorf("%d fields after comm, want at least %d", len(rest), need)
	}
	s := ProcStat{PID: pid, Comm: string(b[open+1 : closing]), State: rest[0], Processor: -1}
	var errs []error
	num := func(field int) uint64 {
		i := field - 3
		if i >= len(rest) {
			return 0
		}
		v, err := strconv.ParseUint(rest[i], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %d: %w", field, err))
		}
		return v
	}
	signed := func(field int) int64 {
		i := field - 3
		if i >= len(rest) {
			return 0
		}
		v, err := strconv.ParseInt(rest[i], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %d: %w", field, err))
		}
		return v
	}
	s.PPID = int(signed(4))
	s.UTime = num(14)
	s.STime = num(15)
	s.CUTime = uint64(max(signed(16), 0))
	s.CSTime = uint64(max(signed(17), 0))
	s.NumThreads = signed(20)
	s.StartTime = num(22)
	if len(rest) > 39-3 {
		s.Processor = int(signed(39))
	}
	if len(errs) > 0 {
		return ProcStat{}, errors.Join(errs...)
	}
	return s, nil
}

// ProcCPU returns the user and system CPU time process pid has used, all its
// threads included (the kernel sums them in /proc/PID/stat, exited threads
// too, so no per-thread walk is needed). Children are not included.
func ProcCPU(pid int) (user, sys time.Duration, err error) {
	s, err := ReadProcStat(pid)
	if err != nil {
		return 0, 0, err
	}
	return ticksToDuration(s.UTime), ticksToDuration(s.STime), nil
}

// SchedStats holds scheduler counters from /proc/PID/sched.
type SchedStats struct {
	// Migrations is se.nr_migrations: moves between CPUs.
	Migrations int64 `json:"migrations"`
	// Switches is nr_switches; VoluntarySwitches and InvoluntarySwitches
	// split it into blocking and preemption.
	Switches            int64 `json:"switches"`
	VoluntarySwitches   int64 `json:"voluntary_switches"`
	InvoluntarySwitches int64 `json:"involuntary_switches"`
	// Threads is how many threads were summed (1 for a parsed file).
	Threads int `json:"threads"`
}

// ParseSched parses the text of /proc/PID/sched (present on kernels built
// with CONFIG_SCHED_DEBUG). It fails if se.nr_migrations is missing.
func ParseSched(r io.Reader) (SchedStats, error) {
	s := SchedStats{Threads: 1}
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch strings.TrimSpace(key) {
		case "se.nr_migrations":
			dst, found = &s.Migrations, true
		case "nr_switches":
			dst = &s.Switches
		case "nr_voluntary_switches":
			dst = &s.VoluntarySwitches
		case "nr_involuntary_switches":
			dst = &s.InvoluntarySwitches
		default:
			continue
		}
		v, err := parseSchedNumber(strings.TrimSpace(val))
		if err != nil {
			return SchedStats{}, fmt.Errorf("%s: %w", strings.TrimSpace(key), err)
		}
		*dst = v
	}
	if err := sc.Err(); err != nil {
		return SchedStats{}, fmt.Errorf("reading: %w", err)
	}
	if !found {
		return SchedStats{}, errors.New("no se.nr_migrations line")
	}
	return s, nil
}

// parseSchedNumber accepts integers and, as some kernels print counters
// with a fraction, decimals (truncated).
func parseSchedNumber(s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number: %q: %w", s, err)
	}
	return int64(f), nil
}

// ProcSched returns scheduler counters for process pid summed over its
// current threads (/proc/PID/task/*/sched; /proc/PID/sched alone covers only
// the main thread). Threads that have already exited are not counted, so for
// processes that churn threads the sum can fall between two readings. Threads
// that exit while being read are skipped.
func ProcSched(pid int) (SchedStats, error) {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	tids, err := os.ReadDir(filepath.Join(base, "task"))
	if err != nil {
		return readSchedFile(filepath.Join(base, "sched"), pid)
	}
	var sum SchedStats
	for _, t := range tids {
		s, err := readSchedFile(filepath.Join(base, "task", t.Name(), "sched"), pid)
		if err != nil {
			if gone(err) {
				continue
			}
			return SchedStats{}, err
		}
		sum.Migrations += s.Migrations
		sum.Switches += s.Switches
		sum.VoluntarySwitches += s.VoluntarySwitches
		sum.InvoluntarySwitches += s.InvoluntarySwitches
		sum.Threads++
	}
	if sum.Threads == 0 {
		return readSchedFile(filepath.Join(base, "sched"), pid)
	}
	return sum, nil
}

// ProcMigrations returns how many times the threads of process pid have moved
// between CPUs (se.nr_migrations summed over current threads; see ProcSched).
func ProcMigrations(pid int) (int64, error) {
	s, err := ProcSched(pid)
	if err != nil {
		return 0, err
	}
	return s.Migrations, nil
}

func readSchedFile(path string, pid int) (SchedStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return SchedStats{}, fmt.Errorf("reading scheduler counters of process %d: %w", pid, err)
	}
	defer f.Close()
	s, err := ParseSched(f)
	if err != nil {
		return SchedStats{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	return s, nil
}

// gone reports whether err means the task vanished while being read.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// CPU returns the process's own user and system time, all threads (the
// kernel sums them, exited threads too).
func (s ProcStat) CPU() time.Duration { return ticksToDuration(s.UTime + s.STime) }

// CPUWithChildren is CPU plus the time of the children the process has
// waited for.
func (s ProcStat) CPUWithChildren() time.Duration {
	return ticksToDuration(s.UTime + s.STime + s.CUTime + s.CSTime)
}

// ReadProcStatAt reads procRoot/PID/stat (procRoot "/proc" on this machine,
// another path for a test's fixture).
func ReadProcStatAt(procRoot string, pid int) (ProcStat, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("reading stat of process %d: %w", pid, err)
	}
	s, err := ParseProcStat(b)
	if err != nil {
		return ProcStat{}, fmt.Errorf("parsing stat of process %d: %w", pid, err)
	}
	return s, nil
}

// Proc is a process found by Procs.
type Proc struct {
	PID  int
	Comm string
	Args []string // argv from cmdline; nil for a kernel thread
}

// Procs lists the processes under procRoot whose comm is one of names (every
// process when names is empty). Processes that exit while being read are
// left out.
func Procs(procRoot string, names ...string) []Proc {
	dirs, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*"))
	var out []Proc
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		p := Proc{PID: pid, Comm: strings.TrimSpace(string(comm))}
		if len(names) > 0 && !slices.Contains(names, p.Comm) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		if s := strings.TrimRight(string(raw), "\x00"); s != "" {
			p.Args = strings.Split(s, "\x00")
		}
		out = append(out, p)
	}
	return out
}

// ProcTree returns the stat of pid and of every living descendant under
// procRoot, pid first, then breadth first. A process that exits while the
// tree is read is left out; one that left the tree (a daemon's double fork)
// is not in it.
func ProcTree(procRoot string, pid int) ([]ProcStat, error) {
	st, err := ReadProcStatAt(procRoot, pid)
	if err != nil {
		return nil, err
	}
	children := map[int][]ProcStat{}
	paths, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*", "stat"))
	for _, p := range paths {
		n, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || n == pid {
			continue
		}
		s, err := ReadProcStatAt(procRoot, n)
		if err != nil {
			continue // gone meanwhile
		}
		children[s.PPID] = append(children[s.PPID], s)
	}
	tree := []ProcStat{st}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(tree); i++ {
		for _, c := range children[tree[i].PID] {
			if !seen[c.PID] {
				seen[c.PID] = true
				tree = append(tree, c)
			}
		}
	}
	return tree, nil
}

// TreeCPU is the CPU time of pid and of every living descendant under
// procRoot (ProcTree): each process's utime+stime+cutime+cstime. A server
// that forks long-lived workers (PostgreSQL's backends, Apache's prefork
// children) spends most of its time in them, and a child's time reaches its
// parent's cutime only once it has been reaped; summing the tree counts the
// living ones too, and each reaped one once (in its reaper).
func TreeCPU(procRoot string, pid int) (time.Duration, error) {
	tree, err := ProcTree(procRoot, pid)
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	var total time.Duration
	for _, s := range tree {
		total += s.CPUWithChildren()
	}
	return total, nil
}

// TreeSched sums the scheduler counters (ProcSched) of pid and of every
// living descendant: a prefork server's migrations and context switches are
// its workers'.
func TreeSched(pid int) (SchedStats, error) {
	tree, err := ProcTree("/proc", pid)
	if err != nil {
		return SchedStats{}, err
	}
	var sum SchedStats
	for i, p := range tree {
		s, err := ProcSched(p.PID)
		if err != nil {
			if i > 0 {
				continue // a worker that exited meanwhile
			}
			return SchedStats{}, err
		}
		sum.Migrations += s.Migrations
		sum.Switches += s.Switches
		sum.VoluntarySwitches += s.VoluntarySwitches
		sum.InvoluntarySwitches += s.InvoluntarySwitches
		sum.Threads += s.Threads
	}
	return sum, nil
}
