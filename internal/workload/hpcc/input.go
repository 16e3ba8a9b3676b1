// Package hpcc runs Debian's hpcc (the HPC Challenge suite, HPL and STREAM
// among its tests) as a one-shot job inside a platform and reads its output.
// The linpack and stream workloads share it.
//
// hpcc takes no command-line arguments: it reads hpccinf.txt from its working
// directory (an HPL.dat with four extra lines) and appends every test's report
// to hpccoutf.txt there, ending with a "Begin of Summary section" of
// key=value lines. Debian's build (1.5.0) always runs the whole suite, in this
// order: RandomAccess (MPI, Star, Single, and their LCG variants), PTRANS,
// DGEMM (Star, Single), STREAM (Star, Single), FFT (MPI, Star, Single),
// latency/bandwidth, HPL. Every test sizes its data from the one memory
// figure hpcc derives from the largest HPL problem size N:
//
//	HPLMaxProcMem = N*N*8 / (P*Q)   bytes per MPI process
//
// so nothing but HPL's N sets how much memory (and time) the other tests
// take; see StreamVectorSize for what that gives STREAM.
package hpcc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// File names in the job's directory.
const (
	// InputFile is what hpcc reads.
	InputFile = "hpccinf.txt"
	// TemplateFile is InputFile with the process grid left open (@P@ and
	// @Q@): the job script fills it in once it knows how many processes
	// the platform runs.
	TemplateFile = "hpccinf.in"
	// OutputFile is what hpcc writes (appends to).
	OutputFile = "hpccoutf.txt"
	// ScriptFile is the job's shell script.
	ScriptFile = "run-hpcc.sh"
)

// Defaults of the HPL input.
const (
	// DefaultNB is HPL's blocking factor, hpcc's own default.
	DefaultNB = 80
	// DefaultThreshold is the scaled residual HPL's check must stay under,
	// HPL's and hpcc's standard value.
	DefaultThreshold = 16.0
)

// maxVector is the largest per-process vector hpcc's HPCC_LocalVectorSize
// returns (2^30 elements: it must fit a C int).
const maxVector = 1 << 30

// Input is what goes into hpccinf.txt: one HPL problem on one process grid.
// The process grid (P x Q = the number of MPI processes) is filled in by the
// job script inside the platform, so that "all cores" means the cores the
// platform offers.
type Input struct {
	// N is the order of HPL's matrix, which takes N*N*8 bytes over all
	// processes; every other test in the suite is sized from it.
	N int
	// NB is HPL's blocking factor (DefaultNB when 0).
	NB int
	// Threshold is the largest scaled residual HPL accepts
	// (DefaultThreshold when 0).
	Threshold float64
}

// withDefaults fills the zero fields.
func (in Input) withDefaults() Input {
	if in.NB == 0 {
		in.NB = DefaultNB
	}
	if in.Threshold == 0 {
		in.Threshold = DefaultThreshold
	}
	return in
}

// Validate reports an input hpcc cannot run.
func (in Input) Validate() error {
	in = in.withDefaults()
	switch {
	case in.N < 1:
		return fmt.Errorf("hpcc input: N %d must be positive", in.N)
	case in.NB < 1 || in.NB > in.N:
		return fmt.Errorf("hpcc input: NB %d must be between 1 and N (%d)", in.NB, in.N)
	case !(in.Threshold > 0) || math.IsInf(in.Threshold, 0):
		return fmt.Errorf("hpcc input: threshold %v must be positive", in.Threshold)
	case in.N > math.MaxInt32:
		return fmt.Errorf("hpcc input: N %d does not fit hpcc's int", in.N)
	}
	return nil
}

// Render returns hpccinf.txt for the grid p x q.
func (in Input) Render(p, q int) []byte {
	return in.render(strconv.Itoa(p), strconv.Itoa(q))
}

// Template returns hpccinf.txt with the grid as @P@ and @Q@ placeholders,
// the TemplateFile the job script completes.
func (in Input) Template() []byte { return in.render("@P@", "@Q@") }

// render writes the input file. Lines 1-4 are ignored by hpcc (the output
// always goes to hpccoutf.txt); lines 5-31 are HPL.dat with one N, one NB,
// one grid; the rest is hpcc's: no PTRANS sizes beyond HPL's own N/2.
func (in Input) render(p, q string) []byte {
	in = in.withDefaults()
	lines := []struct{ val, what string }{
		{"HPLinpack benchmark input file", ""},
		{"nearnative", ""},
		{"HPL.out", "output file name (ignored by hpcc)"},
		{"8", "device out (ignored by hpcc)"},
		{"1", "# of problems sizes (N)"},
		{strconv.Itoa(in.N), "Ns"},
		{"1", "# of NBs"},
		{strconv.Itoa(in.NB), "NBs"},
		{"0", "PMAP process mapping (0=Row-,1=Column-major)"},
		{"1", "# of process grids (P x Q)"},
		{p, "Ps"},
		{q, "Qs"},
		{strconv.FormatFloat(in.Threshold, 'g', -1, 64), "threshold"},
		{"1", "# of panel fact"},
		{"2", "PFACTs (0=left, 1=Crout, 2=Right)"},
		{"1", "# of recursive stopping criterium"},
		{"4", "NBMINs (>= 1)"},
		{"1", "# of panels in recursion"},
		{"2", "NDIVs"},
		{"1", "# of recursive panel fact."},
		{"1", "RFACTs (0=left, 1=Crout, 2=Right)"},
		{"1", "# of broadcast"},
		{"1", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"},
		{"1", "# of lookahead depth"},
		{"1", "DEPTHs (>=0)"},
		{"2", "SWAP (0=bin-exch,1=long,2=mix)"},
		{"64", "swapping threshold"},
		{"0", "L1 in (0=transposed,1=no-transposed) form"},
		{"0", "U  in (0=transposed,1=no-transposed) form"},
		{"1", "Equilibration (0=no,1=yes)"},
		{"8", "memory alignment in double (> 0)"},
		{"##### This line (no. 32) is ignored (it serves as a separator). ######", ""},
		{"0", "Number of additional problem sizes for PTRANS"},
		{"0", "values of N"},
		{"0", "number of additional blocking sizes for PTRANS"},
		{"0", "values of NB"},
	}
	var b strings.Builder
	for _, l := range lines {
		if l.what == "" {
			b.WriteString(l.val + "\n")
			continue
		}
		fmt.Fprintf(&b, "%-12s %s\n", l.val, l.what)
	}
	return []byte(b.String())
}

// Grid returns the process grid the job script picks for np processes: P is
// the largest divisor of np not above its square root, Q = np/P (1x2 for 2,
// 2x2 for 4, 2x3 for 6, 1x7 for 7), the near-square grid HPL prefers.
func Grid(np int) (p, q int) {
	p = 1
	for i := 1; i*i <= np; i++ {
		if np%i == 0 {
			p = i
		}
	}
	return p, np / p
}

// NFromMemory returns the largest multiple of nb whose matrix (N*N*8 bytes)
// fits in bytes, and at least nb.
func NFromMemory(bytes int64, nb int) int {
	n := int(math.Sqrt(float64(bytes) / 8))
	n -= n % nb
	return max(n, nb)
}

// NForArrays returns the smallest multiple of nb for which each of STREAM's
// three arrays, summed over all processes, holds at least bytes: with
// StreamVectorSize elements per process that sum is about N*N*8/3 bytes
// whatever the number of processes (the rounding per process costs at most
// one element each, which the rounding of N up to nb covers).
func NForArrays(bytes int64, nb int) int {
	n := int(math.Ceil(math.Sqrt(3 * float64(bytes) / 8)))
	if r := n % nb; r != 0 {
		n += nb - r
	}
	return max(n, nb)
}

// StreamVectorSize is the number of elements in each of the three STREAM
// arrays of every process (a, b, c of the kernels Copy c=a, Scale b=s*c,
// Add c=a+b, Triad a=b+s*c), as hpcc computes it: the per-process memory
// HPLMaxProcMem = N*N*8/(P*Q) divided by 3 arrays of 8-byte doubles, capped
// at 2^30. StarSTREAM runs all np processes at once, so each array spans
// np*StreamVectorSize*8 bytes of the machine's memory, about N*N*8/3.
func StreamVectorSize(n, np int) int64 {
	mem := int64(float64(n) * float64(n) * 8 / float64(np))
	v := mem / 8 / 3
	return min(v, maxVector)
}
