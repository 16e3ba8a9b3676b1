package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// RunJob implements platform.JobRunner: the command runs as a host process
// in its own process group, under the platform's cgroup limits, in a private
// directory holding the spec's files; cancelling ctx kills the group.
func (p *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	var res platform.JobResult
	if err := spec.Validate(); err != nil {
		return res, err
	}
	if spec.User != "" {
		return res, fmt.Errorf("job %s: jobs run as the invoking user; User is not supported", spec.Name)
	}
	dir, err := state.TempDir(p.env.Run, trial+"-"+spec.Name)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	listen := platform.Listen{Host: "127.0.0.1", Ports: map[string]int{}, Dir: dir}
	if err := writeFiles(dir, spec.FilesFor(listen)); err != nil {
		return res, err
	}
	res.Command = spec.Command(listen)
	if len(res.Command) == 0 {
		return res, fmt.Errorf("job %s: empty command", spec.Name)
	}
	bin, err := exec.LookPath(res.Command[0])
	if err != nil {
		return res, fmt.Errorf("job %s: %s not found: install it with `make setup`: %w", spec.Name, res.Command[0], err)
	}
	argv := append([]string{bin}, res.Command[1:]...)
	lim := cgroup.Limits{CPUSet: p.opt.CPUSet, CPUs: p.opt.CPUs, MemoryBytes: p.opt.MemoryBytes()}
	res.Where = "host process"
	if !lim.Empty() || os.Geteuid() == 0 {
		// A group even without limits: cancelling kills every descendant,
		// also those that started their own session (fio's jobs do).
		g, err := cgroup.New(p.env.Run, trial+"-"+spec.Name, lim)
		if err != nil {
			return res, err
		}
		defer g.Remove()
		argv = g.Wrap(argv)
		if !lim.Empty() {
			res.Where += " (" + p.opt.String() + " via cgroup)"
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Descendants that left the process group may hold the output pipes
	// open; Wait gives up on them after WaitDelay instead of hanging.
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(p.env.Run))
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var started bool
	res.Wall, started, err = runToEnd(ctx, cmd)
	if !started {
		return res, fmt.Errorf("starting job %s: %w", spec.Name, err)
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, fmt.Errorf("job %s exited with code %d", spec.Name, res.ExitCode)
	}
	if err != nil {
		return res, fmt.Errorf("job %s: %w", spec.Name, err)
	}
	return res, nil
}

// runToEnd starts cmd (it dies with nearnative) and waits for it, killing
// its process group when ctx ends, and the group's stragglers either way.
// It returns how long the job ran, whether it started, and its error.
func runToEnd(ctx context.Context, cmd *exec.Cmd) (time.Duration, bool, error) {
	start := time.Now()
	started, err := deathsig.Run(ctx, cmd)
	if started {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers of the group
	}
	return time.Since(start), started, err
}
