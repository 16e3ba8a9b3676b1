package vmagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Process is a server process that an agent runs: a guest's agent (the vm
// platform) or a container's supervisor (docker and vm-docker groups of
// several servers). It answers what the platforms' servers answer through
// the agent: the command, CPU time and migrations of the process tree, the
// tail of its output, whether it exited, and Stop, which keeps the output.
type Process struct {
	Agent *Client
	PID   int
	Argv  []string
	// LogPath is where Stop writes the process's output; "" keeps none.
	LogPath string
	// Grace is how long the agent waits after SIGTERM before SIGKILL;
	// Bound bounds the whole Stop call.
	Grace, Bound time.Duration

	once sync.Once
	err  error
}

// Command is the process's argv.
func (p *Process) Command() []string { return append([]string(nil), p.Argv...) }

// CPUTime implements platform.CPUReporter: the CPU time of the process
// tree (its living workers and what they have reaped), as the kernel it
// runs on counts it.
func (p *Process) CPUTime(ctx context.Context) (time.Duration, error) {
	return p.Agent.CPUTime(ctx, p.PID)
}

// Migrations implements deploy.Scheduler: the CPU migrations of the
// process tree's threads, as the kernel it runs on counts them.
func (p *Process) Migrations(ctx context.Context) (int64, error) {
	return p.Agent.Migrations(ctx, p.PID)
}

// LogTail implements deploy.LogTailer: the last lines of the output.
func (p *Process) LogTail(ctx context.Context, lines int) string {
	st, err := p.Agent.Status(ctx, p.PID)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	ls := strings.Split(strings.TrimRight(st.Tail, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Exited implements deploy.Exiter: an error saying how the process ended,
// nil while it runs.
func (p *Process) Exited(ctx context.Context) error {
	st, err := p.Agent.Status(ctx, p.PID)
	if err != nil {
		return err
	}
	if !st.Running {
		return errors.New(st.Exit)
	}
	return nil
}

// Stop stops the process through the agent, once, and writes its output to
// LogPath.
func (p *Process) Stop(ctx context.Context) error {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Bound)
		defer cancel()
		out, err := p.Agent.Stop(ctx, p.PID, p.Grace)
		if p.LogPath != "" && len(out) > 0 {
			os.MkdirAll(filepath.Dir(p.LogPath), 0o755)
			if werr := os.WriteFile(p.LogPath, out, 0o644); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		p.err = err
	})
	return p.err
}
