package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/tailbuf"
)

// ChildArg is the hidden nearnative command that runs a child driver
// process.
const ChildArg = "driver-child"

// ChildCommand returns the command line that starts a child driver process:
// the running nearnative binary with ChildArg. Tests replace it.
var ChildCommand = func() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the nearnative binary to start driver processes: %w", err)
	}
	return []string{exe, ChildArg}, nil
}

// childStartDelay is how long after the plans are written the load starts:
// time for the children to start and build their users.
const childStartDelay = 750 * time.Millisecond

// childPlan is what the parent writes to a child's stdin.
type childPlan struct {
	Config Config    `json:"config"`
	Index  int       `json:"index"`
	Of     int       `json:"of"`
	T0     time.Time `json:"t0"` // wall clock; the same for every child
}

// stderrTail bounds the child output kept for error messages.
const stderrTail = 4096

// runChildren runs the load in c.Drivers child processes and merges their
// results.
func runChildren(ctx context.Context, c Config) (*Result, error) {
	argv0, err := ChildCommand()
	if err != nil {
		return nil, err
	}
	t0 := time.Now().Add(childStartDelay)
	n := c.Drivers
	results := make([]*Result, n)
	errs := make([]error, n)
	cmds := make([]string, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		argv := argv0
		if len(c.CPUSets) > 0 {
			set := c.CPUSets[0]
			if len(c.CPUSets) == n {
				set = c.CPUSets[k]
			}
			argv = append([]string{"taskset", "-c", set}, argv0...)
		}
		if c.Client != nil {
			// nsenter execs: the child keeps its pid, its death signal
			// and its rusage.
			argv = c.Client.Wrap(argv)
		}
		cmds[k] = strings.Join(argv, " ")
		plan, err := json.Marshal(childPlan{Config: c, Index: k, Of: n, T0: t0})
		if err != nil {
			return nil, fmt.Errorf("encoding a driver plan: %w", err)
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			results[k], errs[k] = runChild(ctx, c.Run, argv, plan, c.Threads)
			if errs[k] != nil {
				errs[k] = fmt.Errorf("driver process %d of %d (%s): %w", k+1, n, cmds[k], errs[k])
			}
		}(k)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := newResult()
	for k := 0; k < n; k++ {
		if errs[k] != nil {
			return nil, errs[k]
		}
		r.merge(results[k])
	}
	r.CPUs = childCPUs(c)
	if c.Threads > 0 {
		// Each child runs Go code on at most Threads CPUs at once.
		r.CPUs = min(r.CPUs, n*c.Threads)
	}
	r.Commands = cmds
	c.describe(r)
	return r, nil
}

// childCPUs is how many distinct CPUs the children may run on together.
func childCPUs(c Config) int {
	if len(c.CPUSets) == 0 {
		return allowedCPUs()
	}
	set := map[int]bool{}
	for _, s := range c.CPUSets {
		cpus, _ := platform.ParseCPUSet(s) // validated
		for _, cpu := range cpus {
			set[cpu] = true
		}
	}
	return len(set)
}

// runChild starts one child, hands it its plan and reads its result. The
// child dies with this process (deathsig) and carries the run ID in its
// environment, so that `nearnative cleanup` finds it after a crash; when
// ctx ends its process group is killed.
func runChild(ctx context.Context, run runid.ID, argv []string, plan []byte, threads int) (*Result, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	if run != "" {
		cmd.Env = append(cmd.Env, runid.EnvVar+"="+string(run))
	}
	if threads > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(threads))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout bytes.Buffer
	stderr := &tailbuf.Buffer{Max: stderrTail}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(plan), &stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	started, err := deathsig.Run(ctx, cmd)
	if !started {
		return nil, fmt.Errorf("starting: %w", err)
	}
	if err != nil && err == ctx.Err() {
		return nil, err // ended by ctx: its error, not the child's
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("reading its result: %w: %s", err, stderr.String())
	}
	if ps := cmd.ProcessState; ps != nil {
		r.ProcessCPU = ps.UserTime() + ps.SystemTime()
	}
	return &r, nil
}

// ChildMain is a child driver process: it reads its plan from stdin, runs
// its share of the load and writes its result to stdout as JSON.
func ChildMain(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var p childPlan
	if err := json.NewDecoder(stdin).Decode(&p); err != nil {
		return fmt.Errorf("reading the driver plan from stdin: %w", err)
	}
	if p.Of < 1 || p.Index < 0 || p.Index >= p.Of {
		return fmt.Errorf("driver plan: process %d of %d", p.Index, p.Of)
	}
	c := p.Config.withDefaults()
	sh := share{index: p.Index, of: p.Of, t0: time.Now().Add(time.Until(p.T0))}
	r, err := runLocal(ctx, c, sh)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		return fmt.Errorf("writing the driver result: %w", err)
	}
	return nil
}
