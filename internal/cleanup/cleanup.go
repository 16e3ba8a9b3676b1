// Package cleanup removes what runs left behind. Each kind of resource has a
// Sweeper that lists the runs owning such resources and removes a run's ones;
// runs whose liveness lock is still held are left alone unless forced.
// "Already gone" counts as success throughout.
package cleanup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Sweeper finds and removes one kind of resource.
type Sweeper interface {
	// Kind names the resources ("processes", "containers and networks").
	Kind() string
	// Runs lists the runs that own such resources now.
	Runs(ctx context.Context) ([]runid.ID, error)
	// Remove removes run's resources and describes each one removed.
	Remove(ctx context.Context, run runid.ID) ([]string, error)
}

// Report says what a cleanup did.
type Report struct {
	Removed []string
	// Runs says, for each run swept, what was removed and what failed.
	Runs []RunReport
	// Alive lists runs skipped because a live nearnative process holds them.
	Alive []runid.ID
	// Unknown lists runs skipped because nothing on this machine shows
	// whether their process lives: no lock file in this lock directory and
	// no owner record in this state directory (a run of another lock
	// directory, resources a test made, or a state directory's runs from
	// before a reboot). Naming such a run removes it.
	Unknown []runid.ID
	// Invalid describes labels and names that claim to be a run but are no
	// run ID: they were not made by nearnative and are left alone.
	Invalid []string
	Errors  []error
}

// RunReport is what a sweep of one run did.
type RunReport struct {
	Run     runid.ID
	Removed []string
	Errors  []error
}

// Options select what to clean.
type Options struct {
	Run runid.ID // "" = every run known to have crashed
	// Force also cleans runs that look alive (and, without Run, every run
	// whose liveness is unknown).
	Force bool
	// Orphans also cleans, without Run, the runs whose liveness is unknown.
	Orphans bool
}

// Clean runs every sweeper for the selected runs. Every run ID a sweeper
// lists is checked to be a run ID before it names anything; one that is not
// is reported in Report.Invalid and left alone. Without Options.Run only
// runs known to be dead are swept (state.Liveness): the sweep takes each
// one's liveness lock while it works (state.Claim), so that a resume or
// another sweep waits, and removes the lock file only when every sweeper
// succeeded, so that a run left half-swept is found again.
func Clean(ctx context.Context, dir state.Dir, sweepers []Sweeper, o Options) Report {
	var rep Report
	runs := map[runid.ID]bool{}
	if o.Run != "" {
		if !o.Run.Valid() {
			rep.Errors = append(rep.Errors, fmt.Errorf("cleanup: %q is not a run ID", o.Run))
			return rep
		}
		runs[o.Run] = true
	} else {
		invalid := map[string]bool{}
		for _, s := range sweepers {
			ids, err := s.Runs(ctx)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("listing %s: %w", s.Kind(), err))
			}
			for _, id := range ids {
				if !id.Valid() {
					invalid[fmt.Sprintf("%s labelled or named with run %q, which is not a run ID (not made by nearnative): left alone", s.Kind(), id)] = true
					continue
				}
				runs[id] = true
			}
		}
		for msg := range invalid {
			rep.Invalid = append(rep.Invalid, msg)
		}
		sort.Strings(rep.Invalid)
	}
	var ids []runid.ID
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		live := dir.Liveness(id)
		switch {
		case live == state.Alive && !o.Force:
			rep.Alive = append(rep.Alive, id)
			continue
		case live == state.Unknown && o.Run == "" && !o.Force && !o.Orphans:
			rep.Unknown = append(rep.Unknown, id)
			continue
		}
		var claim *state.Lock
		if live != state.Alive {
			c, err := dir.Claim(id)
			if err != nil {
				// It came alive (a resume) or another sweep has it.
				rep.Alive = append(rep.Alive, id)
				continue
			}
			claim = c
		}
		rr := RunReport{Run: id}
		// Processes first: they hold cgroups, ports and temp dirs.
		for _, s := range sweepers {
			removed, err := s.Remove(ctx, id)
			rr.Removed = append(rr.Removed, removed...)
			if err != nil {
				rr.Errors = append(rr.Errors, fmt.Errorf("removing %s of run %s: %w", s.Kind(), id, err))
			}
		}
		// A forced cleanup of a live run leaves its lock: the run still
		// holds it and must go on looking alive to other cleanups.
		if len(rr.Errors) == 0 {
			claim.Release()
		} else {
			claim.Unlock()
		}
		rep.Runs = append(rep.Runs, rr)
		rep.Removed = append(rep.Removed, rr.Removed...)
		rep.Errors = append(rep.Errors, rr.Errors...)
	}
	return rep
}

// Crashed lists, sorted, the runs the sweepers find resources of whose
// nearnative process is known to be gone (state.Dead): what Clean without a
// run would sweep.
func Crashed(ctx context.Context, dir state.Dir, sweepers []Sweeper) []runid.ID {
	set := map[runid.ID]bool{}
	for _, s := range sweepers {
		ids, _ := s.Runs(ctx)
		for _, id := range ids {
			if id.Valid() && dir.Liveness(id) == state.Dead {
				set[id] = true
			}
		}
	}
	out := keys(set)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Processes sweeps native server processes: those recorded in state files and
// any process whose environment carries the run ID.
type Processes struct{ Dir state.Dir }

// Kind implements Sweeper.
func (Processes) Kind() string { return "processes" }

// Runs implements Sweeper.
func (p Processes) Runs(ctx context.Context) ([]runid.ID, error) {
	set := map[runid.ID]bool{}
	dirs, _ := filepath.Glob(filepath.Join(p.Dir.Root, "runs", "*", "procs"))
	for _, d := range dirs {
		if files, _ := filepath.Glob(filepath.Join(d, "*.json")); len(files) > 0 {
			if id, err := runid.Parse(filepath.Base(filepath.Dir(d))); err == nil {
				set[id] = true
			}
		}
	}
	for _, pr := range scanEnv("") {
		set[pr.run] = true
	}
	return keys(set), nil
}

// Remove implements Sweeper.
func (p Processes) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	if !run.Valid() {
		return nil, fmt.Errorf("%q is not a run ID", run)
	}
	var removed []string
	var errs []error
	dir := native.ProcDir(p.Dir, run)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		var st native.ProcState
		b, err := os.ReadFile(f)
		if err == nil && json.Unmarshal(b, &st) == nil && st.PID > 0 {
			// A zombie (killed with nearnative, not yet reaped by init)
			// is gone already.
			if ps, err := sysinfo.ReadProcStat(st.PID); err == nil && ps.StartTime == st.StartTick && ps.State != "Z" {
				killGroup(st.PID)
				removed = append(removed, fmt.Sprintf("process group %d (%s, run %s)", st.PID, st.Name, run))
			}
			// Only a temp dir of the run is removed, whatever the file says.
			if ownTempDir(st.Dir, run) {
				if err := os.RemoveAll(st.Dir); err != nil {
					errs = append(errs, err)
				}
			}
		}
		os.Remove(f)
	}
	os.Remove(dir)
	for _, pr := range scanEnv(run) {
		switch err := syscall.Kill(pr.pid, syscall.SIGKILL); {
		case err == nil:
			removed = append(removed, fmt.Sprintf("process %d (%s, run %s)", pr.pid, pr.comm, run))
		case !errors.Is(err, syscall.ESRCH): // already gone is success
			errs = append(errs, fmt.Errorf("killing process %d (%s): %w", pr.pid, pr.comm, err))
		}
	}
	return removed, errors.Join(errs...)
}

// ownTempDir reports whether dir is one of run's temp dirs (state.TempDir).
func ownTempDir(dir string, run runid.ID) bool {
	id, ok := state.RunOfTempDir(dir)
	return ok && id == run && filepath.Dir(dir) == filepath.Clean(os.TempDir())
}

func killGroup(pgid int) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

type proc struct {
	pid  int
	comm string
	run  runid.ID
}

// scanEnv finds processes whose environment names a run (any run when run is
// empty), other than this process.
func scanEnv(run runid.ID) []proc {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	key := []byte(runid.EnvVar + "=")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if !bytes.HasPrefix(kv, key) {
				continue
			}
			id, err := runid.Parse(string(kv[len(key):]))
			if err != nil || (run != "" && id != run) {
				break
			}
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			out = append(out, proc{pid: pid, comm: string(bytes.TrimSpace(comm)), run: id})
			break
		}
	}
	return out
}

// Cgroups sweeps the nearnative/<run> cgroup directories.
type Cgroups struct{}

// Kind implements Sweeper.
func (Cgroups) Kind() string { return "cgroups" }

// Runs implements Sweeper.
func (Cgroups) Runs(ctx context.Context) ([]runid.ID, error) {
	set := map[runid.ID]bool{}
	for _, l := range cgroup.Leftovers("") {
		set[l.Run] = true
	}
	return keys(set), nil
}

// Remove implements Sweeper.
func (Cgroups) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	var removed []string
	var errs []error
	for _, l := range cgroup.Leftovers(run) {
		if err := cgroup.RemoveTree(l.Dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "cgroup "+l.Dir)
	}
	return removed, errors.Join(errs...)
}

// TempDirs sweeps the temp dirs made with state.TempDir.
type TempDirs struct{}

// Kind implements Sweeper.
func (TempDirs) Kind() string { return "temp dirs" }

// Runs implements Sweeper.
func (TempDirs) Runs(ctx context.Context) ([]runid.ID, error) {
	dirs, err := state.TempDirs("")
	if err != nil {
		return nil, err
	}
	set := map[runid.ID]bool{}
	for _, d := range dirs {
		if id, ok := state.RunOfTempDir(d); ok {
			set[id] = true
		}
	}
	return keys(set), nil
}

// Remove implements Sweeper.
func (TempDirs) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	dirs, err := state.TempDirs(run)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "temp dir "+d)
	}
	return removed, errors.Join(errs...)
}

func keys(m map[runid.ID]bool) []runid.ID {
	var out []runid.ID
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ContainerAPI is the part of a container engine cleanup uses.
type ContainerAPI interface {
	Runs(ctx context.Context) ([]runid.ID, error)
	RemoveRun(ctx context.Context, run runid.ID) ([]string, error)
}

// Containers sweeps containers and networks labelled with a run.
type Containers struct{ Engine ContainerAPI }

// Kind implements Sweeper.
func (Containers) Kind() string { return "containers and networks" }

// Runs implements Sweeper.
func (c Containers) Runs(ctx context.Context) ([]runid.ID, error) { return c.Engine.Runs(ctx) }

// Remove implements Sweeper.
func (c Containers) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	if !run.Valid() {
		return nil, fmt.Errorf("%q is not a run ID", run)
	}
	return c.Engine.RemoveRun(ctx, run)
}
