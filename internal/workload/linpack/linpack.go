// Package linpack is the LINPACK micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere" (its Figure 2): HPL's dense
// Ax = b solve, GFLOPS, run entirely inside the platform as a one-shot job.
//
// The program is nearnative's nn-linpack (csrc/linpack, built by package
// benchbin into the workload image and onto the host): it generates HPL's
// random problem, factors and solves it with LAPACK's dgetrf and dgetrs from
// OpenBLAS (one process, one BLAS thread per CPU of the platform), rates the
// solve with HPL's operation count 2/3 N^3 + 3/2 N^2 and enforces HPL's
// scaled-residual check (below 16). It is not netlib HPL: Debian packages
// HPL only inside hpcc, which always runs the whole HPC Challenge suite
// (minutes before HPL starts) and whose MPI ranks add nothing on one
// machine. The seed used Intel's MKL LINPACK binary, itself an optimised
// LU solve rather than netlib HPL.
//
// Each trial also times one DGEMM with the same threads (the machine's
// practical ceiling for the solve) and reports both rates against the flags
// peak, cores x nominal MHz x DP FLOPs per cycle (see Peak).
//
// N comes from two limits: a share of the host's RAM (the seed solved 45K
// and 65K on 512 GB, 3% and 6.6%) and the trial length (the N whose solve
// would take the trial length at the flags peak, so about 1.7 times it at
// 60% of the peak); the smaller wins. A given n larger than the memory
// allows is refused before the study starts.
package linpack

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names.
const (
	MetricGFLOPS   = "gflops"
	MetricPeakPct  = "peak_pct"
	MetricDGEMM    = "dgemm_gflops"
	MetricResidual = "residual"
)

// Limits of the sizes.
const (
	// MaxFraction bounds the matrix's share of RAM: the system needs the
	// rest, and a matrix of most of the RAM swaps or is killed.
	MaxFraction = 0.8
	// MinN is the smallest automatic N: below it the solve takes
	// milliseconds and measures start-up costs.
	MinN = 1000
	// estimateEfficiency is the share of the flags peak the solve is
	// assumed to reach when its time is estimated (natively on the Zen 4
	// development machine: 84.6% in micro --quick while others ran, run
	// 20261123-125808-b623; 117% in the full micro study, run
	// 20261123-154913-0266, boosting above the nominal clock).
	estimateEfficiency = 0.8
)

// Workload is the linpack workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "linpack" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "HPL's dense LU solve (nn-linpack: OpenBLAS dgetrf/dgetrs, HPL's operation count and residual check) inside the platform: GFLOPS and % of the flags peak"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "n", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "problem size N (the matrix takes N*N*8 bytes); 0 = the smaller of the mem_fraction and the trial-length sizes"},
		{Name: "mem_fraction", Type: workload.Float, Default: "0.066", Min: 0, HasMin: true,
			Help: "largest share of the host's RAM the matrix may take when n is 0; the default is the seed's larger problem (65K, 33.8 GB of 512 GB); its 45K was 0.03"},
		{Name: "threads", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "BLAS threads in the one process; 0 = one per CPU the platform offers; more than the platform's CPUs (oversubscription) is refused"},
		{Name: "dgemm", Type: workload.Int, Default: "3000", Quick: "2000", Min: 0, HasMin: true,
			Help: "size M of the DGEMM timed before the solve as the machine's practical ceiling; 0 = none"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return nil, err
	}
	cfg := Config{N: v.Int("n"), MemFraction: v.Float("mem_fraction"), Threads: v.Int("threads"), DGEMM: v.Int("dgemm"),
		MemBytes: mem, HostCPUs: sysinfo.CPUCount()}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cpu, err := ReadCPU()
	if err != nil {
		return nil, fmt.Errorf("linpack: %w", err)
	}
	return &Instance{cfg: cfg, cpu: cpu}, nil
}

// Config is a linpack workload's settings and the host facts they are
// checked against.
type Config struct {
	N           int
	MemFraction float64
	Threads     int
	DGEMM       int
	// MemBytes is the host's RAM and HostCPUs the CPUs nearnative may use.
	MemBytes int64
	HostCPUs int
}

// Validate refuses sizes that cannot run here, saying the limit and the
// parameter to change.
func (c Config) Validate() error {
	switch {
	case c.N == 0 && !(c.MemFraction > 0 && c.MemFraction <= MaxFraction):
		return fmt.Errorf("linpack: mem_fraction %g must be above 0 and at most %g (or set n)", c.MemFraction, MaxFraction)
	case c.N < 0 || c.N > 2000000:
		return fmt.Errorf("linpack: n %d is outside 1..2000000", c.N)
	case c.N > 0 && MatrixBytes(c.N) > int64(MaxFraction*float64(c.MemBytes)):
		return fmt.Errorf("linpack: n=%d needs a %s matrix, more than %.0f%% of this host's %s RAM: lower n to at most %d",
			c.N, gib(MatrixBytes(c.N)), MaxFraction*100, gib(c.MemBytes), NFromMemory(MaxFraction*float64(c.MemBytes)))
	case c.Threads > c.HostCPUs:
		return fmt.Errorf("linpack: threads=%d oversubscribes this host's %d CPUs: set threads to at most %d (0 = one per CPU)", c.Threads, c.HostCPUs, c.HostCPUs)
	case c.DGEMM < 0 || c.DGEMM > 20000:
		return fmt.Errorf("linpack: dgemm %d is outside 0..20000", c.DGEMM)
	case c.DGEMM > 0 && 3*MatrixBytes(c.DGEMM) > int64(MaxFraction*float64(c.MemBytes)):
		return fmt.Errorf("linpack: dgemm=%d needs 3 matrices of %s, more than %.0f%% of this host's RAM: lower dgemm", c.DGEMM, gib(MatrixBytes(c.DGEMM)), MaxFraction*100)
	}
	return nil
}

// MatrixBytes is the size of an N x N matrix of doubles.
func MatrixBytes(n int) int64 { return int64(n) * int64(n) * 8 }

// NFromMemory is the largest N, a multiple of 100, whose matrix fits in
// bytes.
func NFromMemory(bytes float64) int {
	n := int(math.Sqrt(bytes / 8))
	return n - n%100
}

// NFromTime is the N, a multiple of 100, whose solve takes about d at rate
// gflops (2/3 N^3 operations).
func NFromTime(d time.Duration, gflops float64) int {
	n := int(math.Cbrt(d.Seconds() * gflops * 1e9 * 1.5))
	return n - n%100
}

// Size is a chosen problem size and why.
type Size struct {
	N   int
	Why string
}

// Size returns N for trials of length trial, peak being the flags peak of
// the threads a platform with all the host's CPUs runs.
func (c Config) Size(trial time.Duration, peak Peak) Size {
	if c.N > 0 {
		return Size{N: c.N, Why: fmt.Sprintf("N=%d given: the matrix takes %s, %.2f%% of the host's %s RAM", c.N, gib(MatrixBytes(c.N)), pct(MatrixBytes(c.N), c.MemBytes), gib(c.MemBytes))}
	}
	byMem := NFromMemory(c.MemFraction * float64(c.MemBytes))
	byTime := NFromTime(trial, peak.GFLOPS)
	n, limit := byMem, fmt.Sprintf("mem_fraction=%g of the host's %s RAM", c.MemFraction, gib(c.MemBytes))
	if byTime < n {
		n, limit = byTime, fmt.Sprintf("the trial length %v at the %.1f GFLOPS flags peak", trial, peak.GFLOPS)
	}
	n = max(n, MinN)
	why := fmt.Sprintf("N=%d from %s (memory allows %d, the trial length %d; set n to choose): the matrix takes %s, %.2f%% of RAM",
		n, limit, byMem, byTime, gib(MatrixBytes(n)), pct(MatrixBytes(n), c.MemBytes))
	if n == MinN && byTime < MinN {
		why += fmt.Sprintf("; raised to the minimum %d", MinN)
	}
	return Size{N: n, Why: why}
}

// Instance is a configured linpack workload.
type Instance struct {
	cfg Config
	cpu CPU
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricGFLOPS, Unit: "GFLOPS", HigherIsBetter: true, Help: "HPL's rate: (2/3 N^3 + 3/2 N^2) operations over the wall time of the LU factorisation and solve (dgetrf + dgetrs)"},
		{Name: MetricPeakPct, Unit: "%", HigherIsBetter: true, Diagnostic: true,
			Help: "gflops as a share of the flags peak of the threads used (cores x nominal MHz x DP FLOPs/cycle from the CPU flags, 16 on AMD Zen 4; the trial's notes say how it was derived)"},
		{Name: MetricDGEMM, Unit: "GFLOPS", HigherIsBetter: true, Diagnostic: true,
			Help: "one M x M DGEMM with the same threads, timed before the solve: the machine's practical ceiling"},
		{Name: MetricResidual, Unit: "", HigherIsBetter: false, Diagnostic: true,
			Help: "HPL's scaled residual ||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N), eps = 2^-53; the check passes below 16, and a trial that fails it fails"},
	}
}

// Estimate implements workload.Estimator: generating the matrix, the DGEMM
// and the residual check come on top of the solve, which takes about the
// trial length (less when memory bounds N).
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	peak := in.cpu.Peak(in.threadsFor(in.cfg.HostCPUs))
	s := in.cfg.Size(trial, peak)
	rate := estimateEfficiency * peak.GFLOPS * 1e9
	solve := 2.0 / 3 * math.Pow(float64(s.N), 3) / rate
	gen := 2 * float64(MatrixBytes(s.N)) / 8 * 4e-9 // twice, a few ns per element
	gemm := 0.0
	if in.cfg.DGEMM > 0 {
		gemm = 3 * 2 * math.Pow(float64(in.cfg.DGEMM), 3) / rate
	}
	return time.Duration((solve + gen + gemm + 0.5) * float64(time.Second))
}

// threadsFor is the BLAS threads on a platform with cpus CPUs.
func (in *Instance) threadsFor(cpus int) int {
	if in.cfg.Threads > 0 {
		return in.cfg.Threads
	}
	return cpus
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	var res workload.Result
	p := benchbin.Linpack
	// The size depends only on the host and the trial length, so every
	// platform solves the same problem.
	size := in.cfg.Size(t.Duration, in.cpu.Peak(in.threadsFor(in.cfg.HostCPUs)))
	args := []string{"-n", strconv.Itoa(size.N), "-t", strconv.Itoa(in.cfg.Threads)}
	if in.cfg.DGEMM > 0 {
		args = append(args, "-g", strconv.Itoa(min(in.cfg.DGEMM, size.N)))
	}
	logf(t, "linpack on %s: %s", t.Platform.Name(), size.Why)
	job, err := benchbin.RunJob(ctx, t.Platform, t.Name, t.RawDir, p, args)
	res.Commands = job.Commands()
	if job.Result.Where != "" {
		res.Where = append(res.Where, job.Result.Where)
	}
	if err != nil {
		return res, fmt.Errorf("linpack: %w", err)
	}
	o := job.Output
	vals := map[string]float64{}
	for key, metric := range map[string]string{"gflops": MetricGFLOPS, "residual": MetricResidual, "threads": "", "seconds": ""} {
		v, err := o.Float(key)
		if err != nil {
			return res, fmt.Errorf("linpack output on %s: %w: see %s", t.Platform.Name(), err, job.RawPath)
		}
		vals[key] = v
		if metric != "" {
			if res.Values == nil {
				res.Values = map[string]float64{}
			}
			res.Values[metric] = v
		}
	}
	if o.Get("check") != "PASSED" {
		return res, fmt.Errorf("linpack on %s: the residual check did not pass (residual %g): see %s", t.Platform.Name(), vals["residual"], job.RawPath)
	}
	threads := int(vals["threads"])
	peak := in.cpu.Peak(threads)
	res.Values[MetricPeakPct] = vals["gflops"] / peak.GFLOPS * 100
	dgemmNote := ""
	if in.cfg.DGEMM > 0 {
		g, err := o.Float("dgemm-gflops")
		if err != nil {
			return res, fmt.Errorf("linpack output on %s: %w: see %s", t.Platform.Name(), err, job.RawPath)
		}
		res.Values[MetricDGEMM] = g
		dgemmNote = fmt.Sprintf("; DGEMM M=%s ran at %.1f GFLOPS (%.0f%% of the flags peak), the solve at %.0f%% of that", o.Get("dgemm-m"), g, g/peak.GFLOPS*100, vals["gflops"]/g*100)
	}
	res.Notes = append(res.Notes,
		workload.SizeNote+size.Why,
		fmt.Sprintf("solved N=%s in %.3g s with %d BLAS threads on %s CPUs: %.1f GFLOPS, %.1f%% of the %s%s; scaled residual %.3g < %s PASSED",
			o.Get("n"), vals["seconds"], threads, o.Get("cpus"), vals["gflops"], res.Values[MetricPeakPct], peak.How, dgemmNote, vals["residual"], o.Get("threshold")),
		fmt.Sprintf("BLAS as loaded on the platform: %s; %s (core %s); %s", strings.Join(o.All("library"), ", "), o.Get("openblas-config"), o.Get("openblas-core"), o.Get("compiler")),
		"nn-linpack: HPL's problem, operation count and residual check, solved by OpenBLAS's LAPACK dgetrf/dgetrs in one process (not netlib HPL; see docs/studies/micro.md)",
	)
	return res, nil
}

func logf(t workload.Trial, format string, args ...any) {
	if t.Log != nil {
		fmt.Fprintf(t.Log, format+"\n", args...)
	}
}

func gib(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func pct(a, b int64) float64 { return float64(a) / float64(b) * 100 }
