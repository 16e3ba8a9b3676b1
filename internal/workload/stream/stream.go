// Package stream is the STREAM micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere" (its Figure 3): Copy, Scale,
// Add and Triad memory bandwidth, run entirely inside the platform as a
// one-shot job.
//
// The program is nearnative's nn-stream (csrc/stream, built by package
// benchbin into the workload image and onto the host): McCalpin's four
// kernels with OpenMP, one thread per CPU of the platform, arrays first
// touched by the threads that use them, every kernel repeated many times
// (at least reps, then until the trial length is used up) and its best
// time reported, the results validated as stream.c does. A trial that fails
// validation fails.
//
// # Array size
//
// McCalpin's rule: each array at least 4 times the last-level cache (all of
// its instances together). The seed used arrays of 2 billion elements, about
// 45 GB of a 512 GB host, 8.8% of its RAM: by default each array is the
// larger of 4x the cache and mem_fraction of the host's RAM split over the
// three arrays. A given size below 4x the cache is refused before the study
// starts, as is one that does not fit in memory.
package stream

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names: bandwidth of the whole platform in MB/s (10^6 bytes/s).
const (
	MetricCopy  = "copy_mbps"
	MetricScale = "scale_mbps"
	MetricAdd   = "add_mbps"
	MetricTriad = "triad_mbps"
)

// RuleMultiple is STREAM's rule: each array at least 4 times the cache.
const RuleMultiple = 4

// MaxFraction bounds the three arrays' share of RAM.
const MaxFraction = 0.8

// MaxBudget bounds the time a trial spends repeating the kernels.
const MaxBudget = 25 * time.Second

// Workload is the stream workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "stream" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "STREAM Copy, Scale, Add, Triad (nn-stream: McCalpin's kernels, OpenMP, best of many repetitions, validated) inside the platform: MB/s"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "elements", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "elements (8-byte doubles) per array; 0 = the larger of 4x the last-level cache and mem_fraction of RAM; below 4x the cache is refused"},
		{Name: "mem_fraction", Type: workload.Float, Default: "0.088", Quick: "0", Min: 0, HasMin: true,
			Help: "share of the host's RAM the three arrays take together when elements is 0; the default is the seed's (2 billion elements, 45 GB of 512 GB); 0 = 4x the cache only (--quick)"},
		{Name: "llc", Type: workload.String, Default: "", Help: "last-level cache to size against, e.g. 32m; empty = the host's, from /sys/devices/system/cpu (all instances summed)"},
		{Name: "threads", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "OpenMP threads; 0 = one per CPU the platform offers; more than the platform's CPUs is refused"},
		{Name: "reps", Type: workload.Int, Default: "10", Min: 2, HasMin: true,
			Help: "least repetitions of the four kernels (stream.c's NTIMES is 10); more run until the trial length (at most 25 s) is used"},
	}
}

// Config is a stream workload's settings and the host facts they are
// checked against.
type Config struct {
	Elements    int64
	MemFraction float64
	LLC         LLC
	LLCGiven    bool
	Threads     int
	Reps        int
	MemBytes    int64
	HostCPUs    int
}

// MinElements is the smallest array McCalpin's rule allows for the cache.
func (c Config) MinElements() int64 {
	return (RuleMultiple*c.LLC.Total + 7) / 8
}

// Validate refuses sizes that break STREAM's rule or do not fit, saying
// the limit and the parameter to change.
func (c Config) Validate() error {
	minEl := c.MinElements()
	maxEl := int64(MaxFraction * float64(c.MemBytes) / 24)
	switch {
	case c.MemFraction < 0 || c.MemFraction > MaxFraction:
		return fmt.Errorf("stream: mem_fraction %g must be between 0 and %g", c.MemFraction, MaxFraction)
	case c.Elements > 0 && c.Elements < minEl:
		return fmt.Errorf("stream: elements=%d makes each array %s, below %dx the last-level cache (%s = %s): set elements to at least %d (or llc, if the cache is misread)",
			c.Elements, mib(c.Elements*8), RuleMultiple, c.LLC, mib(RuleMultiple*c.LLC.Total), minEl)
	case c.Elements > maxEl:
		return fmt.Errorf("stream: elements=%d needs 3 arrays of %s, more than %.0f%% of this host's %s RAM: set elements to at most %d",
			c.Elements, mib(c.Elements*8), MaxFraction*100, mib(c.MemBytes), maxEl)
	case c.Elements == 0 && minEl > maxEl:
		return fmt.Errorf("stream: 4x the last-level cache (%s) does not fit 3 times in %.0f%% of this host's %s RAM", c.LLC, MaxFraction*100, mib(c.MemBytes))
	case c.Threads > c.HostCPUs:
		return fmt.Errorf("stream: threads=%d oversubscribes this host's %d CPUs: set threads to at most %d (0 = one per CPU)", c.Threads, c.HostCPUs, c.HostCPUs)
	}
	return nil
}

// Size returns the elements per array and why.
func (c Config) Size() (int64, string) {
	minEl := c.MinElements()
	cache := "the host's last-level cache " + c.LLC.String()
	if c.LLCGiven {
		cache = "the given cache llc=" + mib(c.LLC.Total)
	}
	if c.Elements > 0 {
		return c.Elements, fmt.Sprintf("each array %d elements = %s (given), %.1fx %s", c.Elements, mib(c.Elements*8), float64(c.Elements*8)/float64(c.LLC.Total), cache)
	}
	byMem := int64(c.MemFraction * float64(c.MemBytes) / 24)
	if byMem > minEl {
		return byMem, fmt.Sprintf("each array %d elements = %s from mem_fraction=%g of the host's %s RAM over 3 arrays: %.1fx %s (set elements to choose)",
			byMem, mib(byMem*8), c.MemFraction, mib(c.MemBytes), float64(byMem*8)/float64(c.LLC.Total), cache)
	}
	return minEl, fmt.Sprintf("each array %d elements = %s: %.1fx %s, McCalpin's minimum (mem_fraction=%g gives less; set elements to choose)",
		minEl, mib(minEl*8), float64(minEl*8)/float64(c.LLC.Total), cache, c.MemFraction)
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return nil, err
	}
	c := Config{Elements: int64(v.Int("elements")), MemFraction: v.Float("mem_fraction"), Threads: v.Int("threads"),
		Reps: v.Int("reps"), MemBytes: mem, HostCPUs: sysinfo.CPUCount()}
	if s := v.String("llc"); s != "" {
		b, err := platform.ParseBytes(s)
		if err != nil {
			return nil, fmt.Errorf("parameter llc: %w", err)
		}
		c.LLC, c.LLCGiven = LLC{Level: 0, Size: b, Instances: 1, Total: b}, true
	} else if c.LLC, err = ReadLLC(CPUDir); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Instance{cfg: c}, nil
}

// Instance is a configured stream workload.
type Instance struct {
	cfg Config
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	help := "bytes the kernel moves over its best time of all repetitions (the first left out), all threads together"
	return []workload.Metric{
		{Name: MetricCopy, Unit: "MB/s", HigherIsBetter: true, Help: "Copy c=a (16 bytes per element): " + help},
		{Name: MetricScale, Unit: "MB/s", HigherIsBetter: true, Help: "Scale b=s*c (16 bytes per element): " + help},
		{Name: MetricAdd, Unit: "MB/s", HigherIsBetter: true, Help: "Add c=a+b (24 bytes per element): " + help},
		{Name: MetricTriad, Unit: "MB/s", HigherIsBetter: true, Help: "Triad a=b+s*c (24 bytes per element): " + help},
	}
}

// budget is how long a trial repeats the kernels.
func budget(trial time.Duration) time.Duration { return min(trial, MaxBudget) }

// Estimate implements workload.Estimator: the repetitions take the trial
// length (at most 25 s), allocation and the first touch a little more.
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	n, _ := in.cfg.Size()
	touch := time.Duration(float64(n*24) / 2e9 * float64(time.Second)) // ~2 GB/s of page faults
	return budget(trial) + touch + 500*time.Millisecond
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	var res workload.Result
	n, why := in.cfg.Size()
	secs := budget(t.Duration).Seconds()
	args := []string{"-n", strconv.FormatInt(n, 10), "-t", strconv.Itoa(in.cfg.Threads), "-k", strconv.Itoa(in.cfg.Reps),
		"-T", strconv.FormatFloat(secs, 'f', -1, 64)}
	if t.Log != nil {
		fmt.Fprintf(t.Log, "stream on %s: %s\n", t.Platform.Name(), why)
	}
	job, err := benchbin.RunJob(ctx, t.Platform, t.Name, t.RawDir, benchbin.Stream, args)
	res.Commands = job.Commands()
	if job.Result.Where != "" {
		res.Where = append(res.Where, job.Result.Where)
	}
	if err != nil {
		return res, fmt.Errorf("stream: %w", err)
	}
	o := job.Output
	if o.Get("check") != "PASSED" {
		return res, fmt.Errorf("stream on %s: validation did not pass (%s): see %s", t.Platform.Name(), o.Get("validation-error"), job.RawPath)
	}
	res.Values = map[string]float64{}
	for key, metric := range map[string]string{"copy-mbps": MetricCopy, "scale-mbps": MetricScale, "add-mbps": MetricAdd, "triad-mbps": MetricTriad} {
		v, err := o.Float(key)
		if err != nil || !(v > 0) {
			return res, fmt.Errorf("stream output on %s: %s %v: see %s", t.Platform.Name(), key, err, job.RawPath)
		}
		res.Values[metric] = v
	}
	res.Notes = append(res.Notes, workload.SizeNote+why,
		fmt.Sprintf("%s threads on %s CPUs, %s repetitions in %s s (best time of each kernel reported, the first repetition left out); validation %s",
			o.Get("threads"), o.Get("cpus"), o.Get("repetitions"), o.Get("seconds"), o.Get("validation-error")),
		fmt.Sprintf("nn-stream (McCalpin's kernels re-implemented, %s, -O3 -fopenmp -march=x86-64)", o.Get("compiler")))
	if w := o.Get("warning"); w != "" {
		res.Notes = append(res.Notes, "nn-stream: "+w)
	}
	return res, nil
}

// mib formats a byte count.
func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
