// Package linpack is the LINPACK micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere": HPL, the dense Ax=b solve by LU
// factorisation, as Debian's hpcc package builds it, run entirely inside the
// platform as a one-shot job (mpirun, one process per CPU of the platform by
// default). The seed solved N=45K and 65K on a 512 GB host, a matrix of 3%
// and 6.6% of its RAM; here N comes from a fraction of the host's RAM (or is
// given). The metric is HPL's GFLOPS; a failed residual check fails the trial.
//
// hpcc cannot run HPL alone: it runs its whole suite first (RandomAccess,
// PTRANS, DGEMM, STREAM, FFT, latency/bandwidth), all sized from the same N,
// and HPL last. A trial therefore takes two to three times as long as HPL
// itself; only HPL is reported. Debian's hpcc links whatever libblas.so.3 the
// platform has: the reference BLAS (libblas3) is far slower than an optimised
// one such as OpenBLAS, and the BLAS of the host and of the image must match
// for a fair comparison (each trial's notes name the one it used).
package linpack

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/hpcc"
)

// Metric names.
const (
	MetricGFLOPS   = "gflops"
	MetricResidual = "residual"
)

// maxFraction bounds mem_fraction: the rest of the suite and the system need
// memory too, and a matrix of most of the RAM swaps or is killed.
const maxFraction = 0.8

// Workload is the linpack workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "linpack" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "HPL (dense LU solve) from Debian's hpcc inside the platform, N sized from a fraction of RAM: GFLOPS, residual check enforced"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "mem_fraction", Type: workload.Float, Default: "0.03", Quick: "0.0002", Min: 0, HasMin: true,
			Help: "share of the host's RAM (MemTotal) the N x N matrix of doubles takes; the default is the seed's (45K on 512 GB; 65K was 0.066): tens of minutes per trial on a small machine with the reference BLAS, so --quick uses 0.0002; ignored when n is set"},
		{Name: "n", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "HPL problem size N; 0 = from mem_fraction"},
		{Name: "nb", Type: workload.Int, Default: strconv.Itoa(hpcc.DefaultNB), Min: 1, HasMin: true, Help: "HPL blocking factor NB (hpcc's default 80)"},
		{Name: "procs", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "MPI processes; 0 = one per CPU the platform offers (nproc inside it)"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	in := &Instance{fraction: v.Float("mem_fraction"), n: v.Int("n"), nb: v.Int("nb"), procs: v.Int("procs")}
	if in.n == 0 && !(in.fraction > 0 && in.fraction <= maxFraction) {
		return nil, fmt.Errorf("parameter mem_fraction: %v must be above 0 and at most %v (or set n)", in.fraction, maxFraction)
	}
	if in.n > 0 && in.n < in.nb {
		return nil, fmt.Errorf("parameter n: %d is smaller than the blocking factor nb=%d", in.n, in.nb)
	}
	if in.n > 0 {
		if err := (hpcc.Input{N: in.n, NB: in.nb}).Validate(); err != nil {
			return nil, fmt.Errorf("parameter n: %w", err)
		}
	}
	return in, nil
}

// Instance is a configured linpack workload.
type Instance struct {
	fraction     float64
	n, nb, procs int
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	return []workload.Metric{
		{Name: MetricGFLOPS, Unit: "GFLOPS", HigherIsBetter: true, Help: "HPL's rate for solving the N x N system (2/3 N^3 + 3/2 N^2 operations over the solve's wall time), all processes together"},
		{Name: MetricResidual, Unit: "", HigherIsBetter: false, Diagnostic: true,
			Help: "HPL's scaled residual ||Ax-b||/(eps (||A|| ||x|| + ||b||) N); the check passes below 16, and a trial that fails it fails"},
	}
}

// size returns N and what it is made of, for the notes.
func (in *Instance) size() (int, string, error) {
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return 0, "", err
	}
	n := in.n
	if n == 0 {
		n = hpcc.NFromMemory(int64(in.fraction*float64(mem)), in.nb)
	}
	matrix := int64(n) * int64(n) * 8
	if float64(matrix) > maxFraction*float64(mem) {
		return 0, "", fmt.Errorf("linpack: N=%d needs a %s matrix, more than %.0f%% of the host's %s RAM", n, mib(matrix), maxFraction*100, mib(mem))
	}
	how := "given"
	if in.n == 0 {
		how = fmt.Sprintf("from mem_fraction=%g", in.fraction)
	}
	return n, fmt.Sprintf("HPL N=%d (%s), NB=%d: the matrix takes %s, %.3g%% of the host's %s RAM (a memory limit on the platform is not taken into account)",
		n, how, in.nb, mib(matrix), float64(matrix)/float64(mem)*100, mib(mem)), nil
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (workload.Result, error) {
	var res workload.Result
	n, sizing, err := in.size()
	if err != nil {
		return res, err
	}
	run, err := hpcc.Execute(ctx, t, hpcc.Job{Input: hpcc.Input{N: n, NB: in.nb}, Procs: in.procs})
	res.Commands = run.Commands()
	if run.Job.Where != "" {
		res.Where = append(res.Where, run.Job.Where)
	}
	if err != nil {
		return res, fmt.Errorf("linpack: %w", err)
	}
	h, err := hpcc.ParseHPL(run.Output)
	if err != nil {
		return res, fmt.Errorf("linpack on %s: %w: see %s", t.Platform.Name(), err, run.RawPath)
	}
	res.Values = map[string]float64{MetricGFLOPS: h.GFLOPS, MetricResidual: h.Residual}
	res.Notes = append(res.Notes, run.Notes()...)
	res.Notes = append(res.Notes, sizing,
		fmt.Sprintf("HPL solved N=%d on a %dx%d grid in %.3g s; scaled residual %.3g (threshold %g) PASSED", h.N, h.P, h.Q, h.Seconds, h.Residual, h.Threshold),
		"hpcc ran its whole suite (RandomAccess, PTRANS, DGEMM, STREAM, FFT, latency/bandwidth, all sized from N) before HPL; only HPL is reported")
	if !h.Success {
		res.Notes = append(res.Notes, "hpcc reported Success=0: a test of its suite other than HPL failed its check; see "+run.RawPath)
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
