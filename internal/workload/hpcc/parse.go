package hpcc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Errors a trial can be matched against with errors.Is.
var (
	// ErrResidual: HPL's scaled residual check failed, so its GFLOPS
	// belong to a wrong answer.
	ErrResidual = errors.New("HPL residual check FAILED")
	// ErrValidation: STREAM's arrays did not hold the expected values
	// after the kernels.
	ErrValidation = errors.New("STREAM validation failed")
	// ErrIncomplete: the output ends before the part that was asked for
	// (hpcc killed, crashed, or output truncated).
	ErrIncomplete = errors.New("hpcc output incomplete")
)

// Info is what the job script printed about the run.
type Info struct {
	Procs       int
	Grid        string   // "1x2"
	HPCCVersion string   // dpkg version of hpcc on the platform
	MPIVersion  string   // first line of mpirun --version
	BLAS        []string // the libblas.so.3 files hpcc loads, links resolved
	Command     string   // the mpirun command line as run
	Exit        int      // mpirun's exit code as the script saw it
	Stopped     string   // "after the StarSTREAM section (...)" when stopped early
}

// Split separates the job's stdout into the script's Info and the copy of
// hpccoutf.txt after Marker.
func Split(stdout []byte) (Info, []byte, error) {
	var info Info
	head, out, found := bytes.Cut(stdout, []byte(Marker+"\n"))
	if !found {
		head = stdout
	}
	sc := bufio.NewScanner(bytes.NewReader(head))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok || !strings.HasPrefix(k, "nearnative-") {
			continue
		}
		switch strings.TrimPrefix(k, "nearnative-") {
		case "np":
			info.Procs, _ = strconv.Atoi(v)
		case "grid":
			info.Grid = v
		case "hpcc-version":
			info.HPCCVersion = v
		case "mpirun-version":
			info.MPIVersion = v
		case "blas":
			info.BLAS = append(info.BLAS, v)
		case "command":
			info.Command = v
		case "exit":
			info.Exit, _ = strconv.Atoi(v)
		case "stopped":
			info.Stopped = v
		}
	}
	if !found {
		return info, nil, ErrNoOutput
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return info, nil, fmt.Errorf("%w: %s is empty", ErrNoOutput, OutputFile)
	}
	return info, out, nil
}

// Banner returns hpcc's version line ("This is the DARPA/DOE HPC Challenge
// Benchmark version 1.5.0 October 2012"), or "".
func Banner(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "This is the DARPA/DOE HPC Chall") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// Section returns the lines between "Begin of NAME section." and "End of
// NAME section." (without them).
func Section(out []byte, name string) ([]string, error) {
	begin, end := "Begin of "+name+" section.", "End of "+name+" section."
	var lines []string
	in := false
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case !in && l == begin:
			in = true
		case in && l == end:
			return lines, nil
		case in:
			lines = append(lines, l)
		}
	}
	if in {
		return nil, fmt.Errorf("%w: the %s section has no end", ErrIncomplete, name)
	}
	return nil, fmt.Errorf("%w: no %s section", ErrIncomplete, name)
}

// Summary is the key=value section hpcc writes at the very end.
type Summary map[string]string

// ParseSummary reads the Summary section.
func ParseSummary(out []byte) (Summary, error) {
	lines, err := Section(out, "Summary")
	if err != nil {
		return nil, fmt.Errorf("%w (hpcc writes it after its last test)", err)
	}
	s := Summary{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
			s[k] = strings.TrimSpace(v)
		}
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: the Summary section has no key=value lines", ErrIncomplete)
	}
	return s, nil
}

// Float returns a numeric value of the summary.
func (s Summary) Float(key string) (float64, error) {
	v, ok := s[key]
	if !ok {
		return 0, fmt.Errorf("summary: %s missing", key)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("summary: %s=%q is not a number", key, v)
	}
	return f, nil
}

// Int returns an integer value of the summary.
func (s Summary) Int(key string) (int, error) {
	v, ok := s[key]
	if !ok {
		return 0, fmt.Errorf("summary: %s missing", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("summary: %s=%q is not an integer", key, v)
	}
	return n, nil
}

// HPL is the result of HPL's single problem.
type HPL struct {
	GFLOPS    float64
	Seconds   float64
	N, NB     int
	P, Q      int
	Residual  float64 // ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)
	Threshold float64 // the residual must stay below it
	// Success is hpcc's own verdict over all its tests (Summary Success=1).
	Success bool
}

var (
	residualLine  = regexp.MustCompile(`^\|\|Ax-b\|\|_oo/\(eps\*\(\|\|A\|\|_oo\*\|\|x\|\|_oo\+\|\|b\|\|_oo\)\*N\)=\s*(\S+)\s+\.+\s+(PASSED|FAILED)\s*$`)
	thresholdLine = regexp.MustCompile(`Computational tests pass if scaled residuals are less than\s+(\S+)`)
	failedCount   = regexp.MustCompile(`^\s*(\d+) tests completed and failed residual checks`)
)

// ParseHPL reads HPL's result from the Summary section and its residual
// check from the HPL section. A failed check returns the result with an
// error matching ErrResidual.
func ParseHPL(out []byte) (HPL, error) {
	var h HPL
	s, err := ParseSummary(out)
	if err != nil {
		return h, err
	}
	lines, err := Section(out, "HPL")
	if err != nil {
		return h, err
	}
	tflops, err := s.Float("HPL_Tflops")
	if err != nil {
		return h, err
	}
	if h.Seconds, err = s.Float("HPL_time"); err != nil {
		return h, err
	}
	for key, dst := range map[string]*int{"HPL_N": &h.N, "HPL_NB": &h.NB, "HPL_nprow": &h.P, "HPL_npcol": &h.Q} {
		if *dst, err = s.Int(key); err != nil {
			return h, err
		}
	}
	h.Success = s["Success"] == "1"
	h.GFLOPS = tflops * 1000
	if !(h.GFLOPS > 0) {
		return h, fmt.Errorf("HPL did not run: HPL_Tflops=%s (see the HPL section for illegal input or memory allocation failure)", s["HPL_Tflops"])
	}
	var checks, failed int
	for _, l := range lines {
		if m := thresholdLine.FindStringSubmatch(l); m != nil {
			h.Threshold, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := failedCount.FindStringSubmatch(l); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > 0 {
				failed += n
			}
		}
		m := residualLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		checks++
		r, perr := strconv.ParseFloat(m[1], 64)
		if perr != nil || math.IsInf(r, 0) {
			r = math.NaN()
		}
		h.Residual = r
		if m[2] == "FAILED" || math.IsNaN(r) {
			failed++
		}
	}
	if checks == 0 {
		return h, fmt.Errorf("%w: the HPL section has no residual check line", ErrIncomplete)
	}
	if failed > 0 {
		return h, fmt.Errorf("%w: scaled residual %g, threshold %g", ErrResidual, h.Residual, h.Threshold)
	}
	if h.Threshold > 0 && !(h.Residual < h.Threshold) {
		return h, fmt.Errorf("%w: scaled residual %g is not below the threshold %g", ErrResidual, h.Residual, h.Threshold)
	}
	return h, nil
}

// Stream is StarSTREAM's result: every process ran the kernels on its own
// arrays at the same time, between barriers.
type Stream struct {
	// VectorSize is the number of elements in each array of one process.
	VectorSize int64
	// Copy, Scale, Add, Triad are the bandwidths of one process in GB/s
	// (10^9 bytes), the average over the processes of the best of 10
	// iterations (the first excluded); the machine's bandwidth is that
	// times the number of processes.
	Copy, Scale, Add, Triad float64
}

var (
	arraySize   = regexp.MustCompile(`^Array size = (\d+)`)
	averageRate = regexp.MustCompile(`^Average (Copy|Scale|Add|Triad) GB/s (\S+)$`)
	nodesError  = regexp.MustCompile(`^Node\(s\) with error (\d+)$`)
)

// ParseStarSTREAM reads the StarSTREAM section. The section must be
// complete, validate, have no process in error and report all four kernels
// with positive rates.
func ParseStarSTREAM(out []byte) (Stream, error) {
	var s Stream
	lines, err := Section(out, "StarSTREAM")
	if err != nil {
		return s, err
	}
	validated := false
	rates := map[string]*float64{"Copy": &s.Copy, "Scale": &s.Scale, "Add": &s.Add, "Triad": &s.Triad}
	seen := map[string]bool{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Solution Validates"):
			validated = true
		case strings.HasPrefix(l, "Failed Validation"):
			return s, fmt.Errorf("%w: %s", ErrValidation, l)
		case strings.HasPrefix(l, "Failed to allocate memory"):
			return s, fmt.Errorf("StarSTREAM: %s", l)
		}
		if m := arraySize.FindStringSubmatch(l); m != nil {
			s.VectorSize, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := nodesError.FindStringSubmatch(l); m != nil && m[1] != "0" {
			return s, fmt.Errorf("StarSTREAM: %s processes failed", m[1])
		}
		if m := averageRate.FindStringSubmatch(l); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return s, fmt.Errorf("StarSTREAM: %s rate %q is not a number", m[1], m[2])
			}
			*rates[m[1]] = v
			seen[m[1]] = true
		}
	}
	if !validated {
		return s, fmt.Errorf("%w: no \"Solution Validates\" line", ErrValidation)
	}
	for _, k := range []string{"Copy", "Scale", "Add", "Triad"} {
		if !seen[k] {
			return s, fmt.Errorf("%w: StarSTREAM has no average %s rate", ErrIncomplete, k)
		}
		if !(*rates[k] > 0) {
			return s, fmt.Errorf("StarSTREAM: %s rate %v is not positive", k, *rates[k])
		}
	}
	if s.VectorSize <= 0 {
		return s, fmt.Errorf("%w: StarSTREAM has no array size", ErrIncomplete)
	}
	return s, nil
}
