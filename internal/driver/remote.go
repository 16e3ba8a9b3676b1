package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/host"
)

// runRemoteChildren spreads the load over driver hosts: c.Drivers child
// processes (at least one per host, also when c.Drivers is 0), child k on
// host k mod len(hosts), each run by the host's agent with its plan on
// stdin. The plans share one start time, moved into each host's clock by
// its measured offset; the children's results, histograms included, merge
// exactly as local children's do.
func runRemoteChildren(ctx context.Context, c Config, hosts []host.Runner, t0 time.Time) (*Result, error) {
	n := max(c.Drivers, len(hosts))
	c.Drivers = n // the plans and the result count the processes that ran
	results := make([]*Result, n)
	errs := make([]error, n)
	cmds := make([]string, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		h := hosts[k%len(hosts)]
		argv := []string{h.Self(), ChildArg}
		if len(c.CPUSets) > 0 {
			set := c.CPUSets[0]
			if len(c.CPUSets) == n {
				set = c.CPUSets[k]
			}
			argv = append([]string{"taskset", "-c", set}, argv...)
		}
		cmds[k] = h.Name() + ": " + strings.Join(argv, " ")
		plan, err := json.Marshal(childPlan{Config: c, Index: k, Of: n, T0: t0.Add(h.ClockOffset())})
		if err != nil {
			return nil, fmt.Errorf("encoding a driver plan: %w", err)
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			results[k], errs[k] = runRemoteChild(ctx, h, argv, plan)
			if errs[k] != nil {
				errs[k] = fmt.Errorf("driver process %d of %d on host %s: %w", k+1, n, h.Name(), errs[k])
			}
		}(k)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := mergeResults(results, errs)
	if err != nil {
		return nil, err
	}
	r.CPUs = n * max(c.Threads, 1)
	r.Commands = cmds
	c.describe(r)
	return r, nil
}

// mergeResults merges the children's results, or returns the first error.
func mergeResults(results []*Result, errs []error) (*Result, error) {
	r := newResult()
	for k := range results {
		if errs[k] != nil {
			return nil, errs[k]
		}
		r.merge(results[k])
	}
	return r, nil
}

func runRemoteChild(ctx context.Context, h host.Runner, argv []string, plan []byte) (*Result, error) {
	job, err := h.RunJob(ctx, argv, plan)
	if err != nil {
		return nil, err
	}
	if job.ExitCode != 0 {
		return nil, fmt.Errorf("exit status %d: %s", job.ExitCode, strings.TrimSpace(string(job.Stderr)))
	}
	var r Result
	if err := json.Unmarshal(job.Stdout, &r); err != nil {
		return nil, fmt.Errorf("reading its result: %w: %s", err, strings.TrimSpace(string(job.Stderr)))
	}
	r.ProcessCPU = job.CPU
	return &r, nil
}
