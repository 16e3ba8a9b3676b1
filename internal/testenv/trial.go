package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/runid"
)

// This file helps integration tests watch a trial and break it on purpose:
// a series sink that can act after a step, and a way to kill a run's
// servers as a crash would.

// Series is a workload.SeriesSink that notes which steps stored a series
// and, when AtStep is set, calls it after each.
type Series struct {
	AtStep func(step int)

	mu    sync.Mutex
	steps map[int]bool
}

// PutSeries implements workload.SeriesSink.
func (s *Series) PutSeries(_ context.Context, step int, _ []driver.Point) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.steps == nil {
		s.steps = map[int]bool{}
	}
	s.steps[step] = true
	if s.AtStep != nil {
		s.AtStep(step)
	}
	return nil
}

// Steps is the number of steps that stored a series.
func (s *Series) Steps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// KillProcs SIGKILLs the processes of run named comm, found by the run's
// cgroup (servers such as nginx clear their environment, run ID included),
// and fails the test when there is none.
func KillProcs(t *testing.T, run runid.ID, comm string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.Contains(string(cg), "nearnative/"+string(run)) && strings.TrimSpace(string(c)) == comm {
			syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	if n == 0 {
		t.Errorf("no %s process of run %s to kill", comm, run)
	}
}
