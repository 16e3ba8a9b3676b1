package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/ready"
)

// LogDir holds the components' logs; it outlives the cluster (Down keeps
// it) so that a failed bring-up can be read afterwards.
func (c Config) LogDir() string { return filepath.Join(c.Dir(), "logs") }

// LogPath is the log file of a component.
func (c Config) LogPath(name string) string { return filepath.Join(c.LogDir(), name+".log") }

func (c Config) pidPath(name string) string { return c.path("pids", name+".pid") }

// proc is a started component.
type proc struct {
	name string
	pid  int
	// exited is closed when the process ends (only for processes this
	// nearnative started).
	exited chan struct{}
	err    error
}

// start launches argv as a daemon in a session of its own, with the
// cluster's mark in its environment, its output in its log file, and its pid
// (and start time, against pid reuse) in a pid file.
func (c Config) start(name string, argv []string) (*proc, error) {
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	logf, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), EnvCluster+"="+c.RunDir())
	cmd.Dir = c.RunDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: starting %s: %w", name, err)
	}
	p := &proc{name: name, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	tick, _ := startTick(p.pid)
	if err := os.WriteFile(c.pidPath(name), []byte(fmt.Sprintf("%d %d\n", p.pid, tick)), 0o644); err != nil {
		return p, fmt.Errorf("cluster: %w", err)
	}
	return p, nil
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// running returns the pid of a component whose pid file names a live
// process (the same one: its start time matches), else 0.
func (c Config) running(name string) int {
	b, err := os.ReadFile(c.pidPath(name))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	want, _ := strconv.ParseUint(f[1], 10, 64)
	if pid <= 0 {
		return 0
	}
	if got, err := startTick(pid); err != nil || got != want {
		return 0
	}
	return pid
}

// stopPid sends SIGTERM, waits up to grace, then SIGKILL.
func stopPid(pid int, grace time.Duration) bool {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return false
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !pidAlive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 40 && pidAlive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// pidAlive is true while pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func startTick(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// markedPids lists the processes whose environment carries this cluster's
// mark (components, and containerd's shims, which inherit it).
func (c Config) markedPids() []int {
	mark := []byte(EnvCluster + "=" + c.RunDir() + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append(env, 0), mark) && pidAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// logTail is the end of a component's log, for errors.
func (c Config) logTail(name string, n int) string {
	b, err := os.ReadFile(c.LogPath(name))
	if err != nil {
		return ""
	}
	return lastLines(string(b), n)
}

// failure describes a component that failed, with its log's last lines.
func (c Config) failure(name string, err error) error {
	msg := fmt.Sprintf("cluster: %s: %v", name, err)
	if t := c.logTail(name, 12); t != "" {
		msg += "\n  last lines of " + c.LogPath(name) + ":\n    " + strings.ReplaceAll(t, "\n", "\n    ")
	}
	return errors.New(msg)
}

// waitFor polls check until it returns nil, p exits, or timeout passes.
func waitFor(ctx context.Context, p *proc, timeout time.Duration, check func(context.Context) error) error {
	err := ready.Loop{Timeout: timeout, Every: 200 * time.Millisecond}.Wait(ctx, func(ctx context.Context) error {
		err := check(ctx)
		if err != nil && p != nil && !p.alive() {
			return ready.Final(fmt.Errorf("exited (%v) before it was ready", p.err))
		}
		return err
	})
	var te *ready.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("not ready within %v: %w", timeout, te.Last)
	}
	return err
}
