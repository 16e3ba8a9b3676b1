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
	// Alive lists runs skipped because a live nearnative process holds them.
	Alive  []runid.ID
	Errors []error
}

// Options select what to clean.
type Options struct {
	Run   runid.ID // "" = every run that is no longer alive
	Force bool     // also clean runs that look alive
}

// Clean runs every sweeper for the selected runs.
func Clean(ctx context.Context, dir state.Dir, sweepers []Sweeper, o Options) Report {
	var rep Report
	runs := map[runid.ID]bool{}
	if o.Run != "" {
		runs[o.Run] = true
	} else {
		for _, s := range sweepers {
			ids, err := s.Runs(ctx)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("listing %s: %w", s.Kind(), err))
				continue
			}
			for _, id := range ids {
				runs[id] = true
			}
		}
	}
	var ids []runid.ID
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if !o.Force && dir.Alive(id) {
			rep.Alive = append(rep.Alive, id)
			continue
		}
		// Processes first: they hold cgroups, ports and temp dirs.
		for _, s := range sweepers {
			removed, err := s.Remove(ctx, id)
			rep.Removed = append(rep.Removed, removed...)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("removing %s of run %s: %w", s.Kind(), id, err))
			}
		}
		// A forced cleanup of a live run leaves its lock: the run still holds
		// it and must go on looking alive to other cleanups.
		if !dir.Alive(id) {
			os.Remove(filepath.Join(dir.LockDir(), string(id)))
		}
	}
	return rep
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
	var removed []string
	var errs []error
	dir := native.ProcDir(p.Dir, run)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		var st native.ProcState
		b, err := os.ReadFile(f)
		if err == nil && json.Unmarshal(b, &st) == nil && st.PID > 0 {
			if tick, err := native.StartTick(st.PID); err == nil && tick == st.StartTick {
				killGroup(st.PID)
				removed = append(removed, fmt.Sprintf("process group %d (%s, run %s)", st.PID, st.Name, run))
			}
			if st.Dir != "" {
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

// Engine is the part of a container engine cleanup uses.
type Engine interface {
	Runs(ctx context.Context) ([]runid.ID, error)
	RemoveRun(ctx context.Context, run runid.ID) ([]string, error)
}

// Containers sweeps containers and networks labelled with a run.
type Containers struct{ Engine Engine }

// Kind implements Sweeper.
func (Containers) Kind() string { return "containers and networks" }

// Runs implements Sweeper.
func (c Containers) Runs(ctx context.Context) ([]runid.ID, error) { return c.Engine.Runs(ctx) }

// Remove implements Sweeper.
func (c Containers) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	return c.Engine.RemoveRun(ctx, run)
}
