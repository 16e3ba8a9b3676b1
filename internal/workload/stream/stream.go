// Package stream is the STREAM micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere" (Copy, Scale, Add, Triad; one
// thread per core; arrays far larger than the last-level cache): hpcc's MPI
// STREAM (StarSTREAM, Debian's hpcc package; Debian packages no standalone
// STREAM), run entirely inside the platform as a one-shot job, one MPI
// process per CPU of the platform by default. Every process runs the four
// kernels on its own three arrays at the same time, between barriers; the
// machine's bandwidth is the per-process rate times the processes.
//
// # Array size
//
// hpcc has no STREAM size of its own: it gives every MPI process
// HPLMaxProcMem = N*N*8/(P*Q) bytes, from HPL's problem size N in
// hpccinf.txt and the process grid P x Q (P*Q = np processes), and STREAM
// takes a third of that for each of its arrays of 8-byte doubles:
//
//	elements per process = N*N*8/np / 8 / 3 = N*N/(3*np)
//	one array, all processes = np * that * 8 bytes ≈ N*N*8/3
//
// which does not depend on np. To make each array (over all processes, which
// share the cache) at least llc_multiple times the last-level cache, N is
// the smallest multiple of 80 with N*N*8/3 >= llc_multiple * LLC (see
// hpcc.NForArrays); STREAM's rule asks for 4 times, the default. The trial
// checks the size hpcc reports ("Array size = ...") against the target.
//
// # What else runs
//
// hpcc cannot run STREAM alone: RandomAccess, PTRANS and DGEMM come first,
// sized from the same N, and take far longer than STREAM (minutes with the
// reference BLAS on a 32 MB cache). The job stops hpcc as soon as the
// StarSTREAM section is complete, so the FFT, latency/bandwidth and HPL tests
// (the longest) never run; the result therefore comes from the StarSTREAM
// section of hpccoutf.txt, not from its Summary section, which hpcc writes
// only at the end.
package stream

import (
	"context"
	"fmt"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/hpcc"
)

// Metric names: bandwidth of the whole machine in MB/s (10^6 bytes/s).
const (
	MetricCopy  = "copy_mbps"
	MetricScale = "scale_mbps"
	MetricAdd   = "add_mbps"
	MetricTriad = "triad_mbps"
)

// RuleMultiple is STREAM's rule: each array at least 4 times the cache.
const RuleMultiple = 4.0

// section is the hpcc section the job stops after and the trial reads.
const section = "StarSTREAM"

// Workload is the stream workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "stream" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "STREAM Copy, Scale, Add, Triad (hpcc's MPI STREAM, one process per CPU) inside the platform, arrays 4x the last-level cache: MB/s"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "llc_multiple", Type: workload.Float, Default: "4", Quick: "1", Min: 0.01, HasMin: true,
			Help: "each array, summed over the processes, is this many times the last-level cache; STREAM's rule is at least 4 (below it a note says the result includes cache hits)"},
		{Name: "llc", Type: workload.String, Default: "", Help: "last-level cache to size against, e.g. 32m; empty = the host's, from /sys/devices/system/cpu (all instances summed)"},
		{Name: "procs", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "MPI processes (STREAM threads); 0 = one per CPU the platform offers (nproc inside it)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{multiple: v.Float("llc_multiple"), procs: v.Int("procs"), cpuDir: CPUDir}
	if s := v.String("llc"); s != "" {
		b, err := platform.ParseBytes(s)
		if err != nil {
			return nil, fmt.Errorf("parameter llc: %w", err)
		}
		in.llc = &LLC{Level: 0, Size: b, Instances: 1, Total: b}
	}
	return in, nil
}

// Instance is a configured stream workload.
type Instance struct {
	multiple float64
	procs    int
	llc      *LLC   // given; nil = read from cpuDir
	cpuDir   string // where to read the host's caches
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	help := "bandwidth of all processes together: hpcc's StarSTREAM rate of one process (bytes moved / best of 10 iterations) times the processes"
	return []workload.Metric{
		{Name: MetricCopy, Unit: "MB/s", HigherIsBetter: true, Help: "Copy c=a (16 bytes per element); " + help},
		{Name: MetricScale, Unit: "MB/s", HigherIsBetter: true, Help: "Scale b=s*c (16 bytes per element); " + help},
		{Name: MetricAdd, Unit: "MB/s", HigherIsBetter: true, Help: "Add c=a+b (24 bytes per element); " + help},
		{Name: MetricTriad, Unit: "MB/s", HigherIsBetter: true, Help: "Triad a=b+s*c (24 bytes per element); " + help},
	}
}

// plan sizes the run: the cache, the target bytes per array and N.
func (in *Instance) plan() (LLC, int64, int, error) {
	llc := LLC{}
	if in.llc != nil {
		llc = *in.llc
	} else {
		var err error
		if llc, err = ReadLLC(in.cpuDir); err != nil {
			return llc, 0, 0, err
		}
	}
	target := int64(in.multiple * float64(llc.Total))
	n := hpcc.NForArrays(target, hpcc.DefaultNB)
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return llc, 0, 0, err
	}
	if need := int64(n) * int64(n) * 8; float64(need) > 0.8*float64(mem) {
		return llc, 0, 0, fmt.Errorf("stream: arrays of %s need hpcc's N=%d, whose other tests take %s, more than 80%% of the host's RAM; lower llc_multiple",
			mib(target), n, mib(need))
	}
	return llc, target, n, nil
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	var res workload.Result
	llc, target, n, err := in.plan()
	if err != nil {
		return res, err
	}
	run, err := hpcc.Execute(ctx, t, hpcc.Job{Input: hpcc.Input{N: n}, Procs: in.procs, StopAfter: section})
	res.Commands = run.Commands()
	if run.Job.Where != "" {
		res.Where = append(res.Where, run.Job.Where)
	}
	if err != nil {
		return res, fmt.Errorf("stream: %w", err)
	}
	s, err := hpcc.ParseStarSTREAM(run.Output)
	if err != nil {
		return res, fmt.Errorf("stream on %s: %w: see %s", t.Platform.Name(), err, run.RawPath)
	}
	np := run.Info.Procs
	if np < 1 {
		return res, fmt.Errorf("stream on %s: the job did not say how many processes ran: see %s", t.Platform.Name(), run.RawPath)
	}
	scale := float64(np) * 1000 // GB/s of one process -> MB/s of all
	res.Values = map[string]float64{
		MetricCopy:  s.Copy * scale,
		MetricScale: s.Scale * scale,
		MetricAdd:   s.Add * scale,
		MetricTriad: s.Triad * scale,
	}
	array := s.VectorSize * int64(np) * 8
	cache := "the host's last-level cache " + llc.String()
	if in.llc != nil {
		cache = "the given cache llc=" + mib(llc.Total)
	}
	res.Notes = append(res.Notes, run.Notes()...)
	res.Notes = append(res.Notes,
		fmt.Sprintf("each STREAM array: %d elements x %d processes = %s, %.2fx %s (hpccinf.txt N=%d sets it: N*N*8/3 bytes)",
			s.VectorSize, np, mib(array), float64(array)/float64(llc.Total), cache, n),
		"hpcc ran RandomAccess, PTRANS and DGEMM (sized from the same N) before STREAM; only StarSTREAM is reported")
	if array < target {
		res.Notes = append(res.Notes, fmt.Sprintf("hpcc made each array %s, less than the %s asked for (hpcc caps a process's array at 2^30 elements; raise procs)", mib(array), mib(target)))
	}
	if float64(array) < RuleMultiple*float64(llc.Total) {
		res.Notes = append(res.Notes, fmt.Sprintf("arrays under STREAM's rule of %gx the last-level cache: the bandwidth includes cache hits, not main memory alone", RuleMultiple))
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
