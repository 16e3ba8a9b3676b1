package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/nearnative/nearnative/internal/cgroup"
)

// server is a started container.
type server struct {
	eng      *Daemon
	id       string
	name     string
	argv     []string
	addrs    map[string]string // port name -> host:port for the client
	bridgeIP string
	desc     string
	logPath  string // "" when the run keeps no logs
	warnings []string
	tracker  Tracker // the engine's CPU account when it gives no cgroup (Flavor.Track)
	// undo removes what was made for the server beside its container
	// (docker-proxy's rules on a sut host), after it stops.
	undo undos
	// proxyPIDs are its docker-proxy processes on a sut host.
	proxyPIDs []int

	mu      sync.Mutex
	stopped bool
}

// LogPath is where the output of server spec in trial goes under the run's
// log directory dir (platform.Env.LogDir), "" without one.
func LogPath(dir, trial, spec string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, unsafeName.ReplaceAllString(trial+"-"+spec, "_")+".log")
}

// Addr is the host:port a client on the host uses for the named port.
func (s *server) Addr(port string) string {
	a, ok := s.addrs[port]
	if !ok {
		panic(fmt.Sprintf("docker: port %q not declared in the spec of %s", port, s.name))
	}
	return a
}

// Command is the argv the container runs.
func (s *server) Command() []string { return append([]string(nil), s.argv...) }

// Describe says where the container runs and how the client reaches it.
func (s *server) Describe() string { return s.desc }

// ID is the container's full ID.
func (s *server) ID() string { return s.id }

// Warnings are what the daemon said when creating the container (e.g. a
// memory-swap limit it could not apply).
func (s *server) Warnings() []string { return append([]string(nil), s.warnings...) }

// Stop stops the container (SIGTERM, then SIGKILL after two seconds), saves
// its output to the log file and removes it with its anonymous volumes. It
// works after the caller's context is cancelled, a container that is already
// gone is not an error, and a second call does nothing.
func (s *server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	cli := s.eng.cli
	var errs []error
	timeout := stopTimeout
	if err := cli.ContainerStop(ctx, s.id, container.StopOptions{Timeout: &timeout}); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("stopping container %s: %w", s.name, err))
	}
	if err := s.saveLogs(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := cli.ContainerRemove(ctx, s.id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("removing container %s: %w", s.name, err))
	}
	if s.tracker != nil {
		if err := s.tracker.Release(); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", s.name, err))
		}
	}
	if err := s.undo.run(ctx); err != nil {
		errs = append(errs, fmt.Errorf("container %s: %w", s.name, err))
	}
	return errors.Join(errs...)
}

// saveLogs writes the container's stdout and stderr to its log file.
func (s *server) saveLogs(ctx context.Context) error {
	if s.logPath == "" {
		return nil
	}
	return s.eng.SaveLogs(ctx, s.id, s.name, s.logPath)
}

// SaveLogs writes the stdout and stderr of container id (called name in
// errors) to path; a container already gone has no logs and is no error.
func (e *Daemon) SaveLogs(ctx context.Context, id, name, path string) error {
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		if gone(err) {
			return nil
		}
		return fmt.Errorf("reading the logs of container %s: %w", name, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("saving the logs of container %s: %w", name, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("saving the logs of container %s: %w", name, err)
	}
	_, cerr := stdcopy.StdCopy(f, f, rc)
	if err := f.Close(); err != nil && cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return fmt.Errorf("saving the logs of container %s to %s: %w", name, path, cerr)
	}
	return nil
}

// logTail returns the last n lines of the container's output, or a note
// saying why they could not be read.
func (s *server) logTail(ctx context.Context, n int) string {
	rc, err := s.eng.cli.ContainerLogs(ctx, s.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)})
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	return strings.TrimRight(demux(raw), "\n")
}

// CPUTime implements platform.CPUReporter from the container's cgroup CPU
// accounting (Engine.CPUTime).
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	if s.tracker != nil {
		return s.tracker.CPUTime(ctx)
	}
	return s.eng.CPUTime(ctx, s.id, s.name)
}

// CPUTime is the CPU time container id (called name in errors) has used so
// far, from its cgroup accounting: read from the cgroup file system when the
// engine runs on this kernel, else as the engine's stats API reports it
// (about a second per call, which a topology of several containers pays
// for each of them before and after every load).
func (e *Daemon) CPUTime(ctx context.Context, id, name string) (time.Duration, error) {
	if e.remote != "" {
		return e.statsCPU(ctx, id, name)
	}
	if e.flavor.CgroupDirs != nil {
		for _, dir := range e.flavor.CgroupDirs(id) {
			if d, found, err := cgroup.UsageAt(cgroup.Root, dir); found && err == nil {
				return d, nil
			}
		}
	}
	if d, ok := cgroupCPU(cgroup.Root, id); ok {
		return d, nil
	}
	return e.statsCPU(ctx, id, name)
}

// statsCPU is the CPU time of container id as the engine's stats API
// reports it.
func (e *Daemon) statsCPU(ctx context.Context, id, name string) (time.Duration, error) {
	resp, err := e.cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("container stats of %s: %w", name, err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("container stats of %s: %w", name, err)
	}
	return time.Duration(st.CPUStats.CPUUsage.TotalUsage), nil
}
