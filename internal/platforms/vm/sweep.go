package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// Sweeper finds what vm platforms of crashed runs left behind: QEMU
// processes (by the run ID in their environment), bridges and taps (by
// their alias) and guest overlays (in the run's vm temp dirs). It implements
// cleanup.Sweeper. The iptables rule letting a run's guests reach each
// other carries the run in its comment, so cleanup.IPTables sweeps it with
// every other such rule.
type Sweeper struct{}

// Kind implements cleanup.Sweeper.
func (Sweeper) Kind() string { return "VM guests, bridges, taps and overlays" }

// Runs implements cleanup.Sweeper.
func (Sweeper) Runs(ctx context.Context) ([]runid.ID, error) {
	set := map[runid.ID]bool{}
	links, err := RunLinks("")
	for _, id := range links {
		set[id] = true
	}
	for _, q := range QEMUProcesses("") {
		set[q.Run] = true
	}
	dirs, _ := state.TempDirs("")
	for _, d := range dirs {
		if id, ok := state.RunOfTempDir(d); ok && isVMDir(d, id) {
			set[id] = true
		}
	}
	var ids []runid.ID
	for id := range set {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, err
}

func isVMDir(d string, id runid.ID) bool {
	return strings.HasPrefix(filepath.Base(d), runid.Prefix+string(id)+"-vm-")
}

// Remove implements cleanup.Sweeper.
func (Sweeper) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	var removed []string
	var errs []error
	for _, q := range QEMUProcesses(run) {
		if syscall.Kill(q.PID, syscall.SIGKILL) == nil {
			removed = append(removed, fmt.Sprintf("qemu process %d (run %s)", q.PID, run))
		}
	}
	// Taps are busy until their qemu is gone.
	for i := 0; i < 50 && len(QEMUProcesses(run)) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	links, err := RunLinks(run)
	if err != nil {
		errs = append(errs, err)
	}
	var names []string
	for n := range links {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] > names[j] }) // taps (nnt) before bridges (nnb)
	for _, n := range names {
		if err := delLink(n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, fmt.Sprintf("link %s (run %s)", n, run))
	}
	dirs, _ := state.TempDirs(run)
	for _, d := range dirs {
		if !isVMDir(d, run) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "guest overlay dir "+d)
	}
	return removed, errors.Join(errs...)
}

// QEMUProcess is a QEMU process started by a run.
type QEMUProcess struct {
	PID int
	Run runid.ID
}

// QEMUProcesses lists QEMU processes whose environment names run (any run
// when run is empty).
func QEMUProcesses(run runid.ID) []QEMUProcess {
	ents, _ := os.ReadDir("/proc")
	key := []byte(runid.EnvVar + "=")
	var out []QEMUProcess
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if !strings.HasPrefix(string(comm), "qemu-system") {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if !bytes.HasPrefix(kv, key) {
				continue
			}
			id, err := runid.Parse(string(kv[len(key):]))
			if err == nil && (run == "" || id == run) {
				out = append(out, QEMUProcess{PID: pid, Run: id})
			}
			break
		}
	}
	return out
}
