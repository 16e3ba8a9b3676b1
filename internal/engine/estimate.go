package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// startup is a rough per-trial cost of each platform kind on top of the
// workload's own time: a process start natively, creating, starting and
// removing a container, booting a guest.
func startup(base string) time.Duration {
	switch base {
	case platform.Native:
		return 300 * time.Millisecond
	case platform.VM, platform.VMDocker, platform.VMDockerHost:
		return 30 * time.Second
	case platform.LXC:
		return 500 * time.Millisecond
	}
	switch platform.Family(base) {
	case platform.FamilyGVisor, platform.FamilyKubernetes:
		// gVisor: a sandbox (its sentry and gofer) to start and tear down,
		// about 0.5 s a trial more than runc (runtimes --quick, run
		// 20261127-031342-764b); a pod: not re-measured, as before.
		return 1500 * time.Millisecond
	}
	// A container created, started and removed: quiet --quick runs on the
	// 2-core development machine took 0.4-0.8 s longer a trial in a Docker
	// container than natively (micro 20261127-083535-5c62, redis).
	return 900 * time.Millisecond
}

// Estimate is the expected wall time of rounds full rounds of the study's
// units: each trial's workload.Estimator figure (the trial length for
// workloads without one) plus its platform's start-up.
func Estimate(st *study.Study, instances map[string]workload.Instance, rounds int) time.Duration {
	return estimate(st, instances, rounds, nil)
}

// estimate is Estimate knowing the opened platforms (nil: only their
// kinds), so that a cell refused for how its platform was set up counts
// no trials either.
func estimate(st *study.Study, instances map[string]workload.Instance, rounds int, plats map[string]platform.Platform) time.Duration {
	var round time.Duration
	for _, u := range st.Units() {
		if workload.Refusal(instances[u.Workload.Name], u.Platform.Base, plats[u.Platform.Name]) != nil {
			continue // no trials
		}
		d := st.Trial
		if e, ok := instances[u.Workload.Name].(workload.Estimator); ok {
			d = e.Estimate(st.Trial)
		}
		round += d + startup(u.Platform.Base)
	}
	return time.Duration(rounds) * round
}

// estimateLine says how long the run is expected to take, for the log.
func estimateLine(st *study.Study, instances map[string]workload.Instance, plats map[string]platform.Platform, doneTrials int) string {
	rounds := st.Warmup + st.Rounds
	d := estimate(st, instances, rounds, plats)
	units := 0
	for _, u := range st.Units() {
		if workload.Refusal(instances[u.Workload.Name], u.Platform.Base, plats[u.Platform.Name]) == nil {
			units++
		}
	}
	if doneTrials > 0 && units > 0 {
		d -= time.Duration(float64(d) * float64(doneTrials) / float64(rounds*units))
	}
	s := fmt.Sprintf("expected duration: about %v (%d rounds x %d trials, trial %v; an estimate from each workload's sizes and typical start-up costs)",
		d.Round(time.Minute/6), rounds, units, st.Trial)
	if st.UntilCI > 0 {
		s += fmt.Sprintf("; --until-ci may add rounds, up to %d or %v", st.MaxRounds, st.MaxTime)
	}
	return s
}

// closeInstances closes the instances that hold resources across trials
// (io.Closer: fio's shared data file), when the run ends however it ends.
func closeInstances(instances map[string]workload.Instance, p Progress) {
	for name, in := range instances {
		if c, ok := in.(io.Closer); ok {
			if err := c.Close(); err != nil && p != nil {
				p.Logf("closing workload %s: %v", name, err)
			}
		}
	}
}

// Expected is the estimate a run of st (already Applied) prints before its
// first trial: every round, warm-up included, of its workloads' instances
// made from reg. An instance that refuses this machine's settings is the
// error.
func Expected(st *study.Study, reg *workload.Registry) (time.Duration, error) {
	instances := map[string]workload.Instance{}
	defer closeInstances(instances, nil)
	for _, w := range st.Workloads {
		kind, ok := reg.Get(w.Kind)
		if !ok {
			return 0, fmt.Errorf("workload %s: unknown kind %q", w.Name, w.Kind)
		}
		in, err := kind.New(w.Values)
		if err != nil {
			return 0, fmt.Errorf("workload %s: %w", w.Name, err)
		}
		instances[w.Name] = in
	}
	return Estimate(st, instances, st.Warmup+st.Rounds), nil
}

// Load is how busy the machine is as a run starts, before its first trial:
// the 1-minute load average and the share of the CPUs' time busy over a
// short sample of /proc/stat (the load average lags: it still counts the
// build that just ended; the sample says what runs now).
type Load struct {
	CPUs     int
	LoadAvg1 float64
	Busy     float64 // share of all CPUs' time busy over Sample
	Sample   time.Duration
}

// LoadProbe measures the machine's load (MeasureLoad); tests give none.
type LoadProbe func(ctx context.Context) (Load, error)

// loadSample is how long MeasureLoad watches /proc/stat.
const loadSample = time.Second

// MeasureLoad reads /proc/loadavg and samples /proc/stat for a second.
func MeasureLoad(ctx context.Context) (Load, error) {
	l := Load{CPUs: sysinfo.CPUCount(), Sample: loadSample}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, fmt.Errorf("reading the load average: %w", err)
	}
	if l.LoadAvg1, err = parseLoadAvg(string(b)); err != nil {
		return l, err
	}
	a, err := sysinfo.ReadCPU()
	if err != nil {
		return l, err
	}
	t := time.NewTimer(loadSample)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return l, ctx.Err()
	case <-t.C:
	}
	z, err := sysinfo.ReadCPU()
	if err != nil {
		return l, err
	}
	l.Busy = a.Delta(z).Utilisation
	return l, nil
}

// parseLoadAvg returns the 1-minute load average of /proc/loadavg's text.
func parseLoadAvg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("parsing the load average %q: empty", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parsing the load average %q: %w", s, err)
	}
	return v, nil
}

// busyShare is the share of the CPUs' time busy before the first trial
// above which a run is said to start on a busy machine: an idle machine's
// own daemons use a few percent; a quarter of the CPUs taken by other work
// leaves the run's servers, driver and start-ups less than they assume.
const busyShare = 0.25

// busyLine says, when the machine is busy as the run starts, that the run
// will take longer than its estimate and why; "" on a quiet machine. The
// estimate assumes the run has the machine to itself: the start-ups, data
// copies and searches it adds up are CPU-bound, so work of others stretches
// them (on the 2-core development machine runs took up to twice their
// estimate at load averages of 6 to 15) and the results are noisier.
func busyLine(l Load) string {
	cpus := max(l.CPUs, 1)
	// The sample says how busy the machine is now; the 1-minute load
	// average, which decays slowly, only when it says more than one
	// runnable task per CPU (work that comes and goes, a build that just
	// paused): its tail after work that ended (0.92 on 2 idle CPUs, a
	// minute after make test) is no reason to call a quiet machine busy.
	if l.Busy < busyShare && l.LoadAvg1 < float64(cpus) {
		return ""
	}
	return fmt.Sprintf("the machine is busy as the run starts: %.0f%% of its %d CPUs' time busy over %v before the first trial, load average %.2f: expect the run to take longer than the estimate (it assumes the machine to itself) and its results to be noisier; a quiet machine gives both the estimate and steadier figures",
		l.Busy*100, cpus, l.Sample, l.LoadAvg1)
}
