package vmagent

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// As PID 1 the agent inherits every orphan (dockerd's shims, daemons that
// double-fork). It reaps those, but never a child that an exec.Cmd waits
// for: children are started and registered under childMu, which the reaper
// holds while it looks.
var (
	childMu sync.Mutex
	tracked = map[int]bool{}
)

// startTracked starts cmd and registers its pid; call untrack after Wait.
func startTracked(cmd *exec.Cmd) error {
	childMu.Lock()
	defer childMu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	tracked[cmd.Process.Pid] = true
	return nil
}

func untrack(pid int) {
	childMu.Lock()
	delete(tracked, pid)
	childMu.Unlock()
}

// reapOrphans reaps zombie children of PID 1 that no exec.Cmd waits for,
// on every SIGCHLD and every few seconds.
func reapOrphans() {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, unix.SIGCHLD)
	tick := time.NewTicker(5 * time.Second)
	for {
		select {
		case <-sig:
		case <-tick.C:
		}
		childMu.Lock()
		for _, pid := range orphanZombies("/proc") {
			if !tracked[pid] {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
		}
		childMu.Unlock()
	}
}

// orphanZombies lists zombie processes whose parent is PID 1.
func orphanZombies(procRoot string) []int {
	stats, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*", "stat"))
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] != "Z" || f[1] != "1" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
