package hpcc

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// golden returns the hpccoutf.txt part of a captured job output.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	_, out, err := Split(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// replace returns b with old replaced by repl once, failing when old is absent.
func replace(t *testing.T, b []byte, old, repl string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("golden output lacks %q", old)
	}
	return bytes.Replace(b, []byte(old), []byte(repl), 1)
}

func TestSplit(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream.txt"))
	if err != nil {
		t.Fatal(err)
	}
	info, out, err := Split(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Procs: 2, Grid: "1x2", HPCCVersion: "1.5.0-3", MPIVersion: "mpirun (Open MPI) 4.1.4",
		Command: "mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np 2 hpcc"}
	if info.Procs != want.Procs || info.Grid != want.Grid || info.HPCCVersion != want.HPCCVersion ||
		info.MPIVersion != want.MPIVersion || info.Command != want.Command {
		t.Errorf("info = %+v, want %+v", info, want)
	}
	if len(info.BLAS) != 1 || !strings.Contains(info.BLAS[0], "libblas.so.3") {
		t.Errorf("BLAS = %q", info.BLAS)
	}
	if !strings.HasPrefix(info.Stopped, "after the StarSTREAM section") {
		t.Errorf("Stopped = %q", info.Stopped)
	}
	if !bytes.HasPrefix(out, []byte("####")) {
		t.Errorf("output starts %q", out[:20])
	}
	if b := Banner(out); b != "This is the DARPA/DOE HPC Challenge Benchmark version 1.5.0 October 2012" {
		t.Errorf("Banner = %q", b)
	}

	for name, stdout := range map[string]string{
		"no marker":    "nearnative-np: 2\nsomething else\n",
		"empty output": "nearnative-np: 2\n" + Marker + "\n\n",
		"nothing":      "",
	} {
		if _, _, err := Split([]byte(stdout)); !errors.Is(err, ErrNoOutput) {
			t.Errorf("%s: err = %v, want ErrNoOutput", name, err)
		}
	}
}

func TestParseSummary(t *testing.T) {
	s, err := ParseSummary(golden(t, "hpl-passed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Int("CommWorldProcs"); err != nil || n != 2 {
		t.Errorf("CommWorldProcs = %d, %v", n, err)
	}
	if v, err := s.Float("StarSTREAM_Triad"); err != nil || !(v > 0) {
		t.Errorf("StarSTREAM_Triad = %v, %v", v, err)
	}
	if _, err := s.Float("NoSuchKey"); err == nil {
		t.Error("missing key: no error")
	}
	if _, err := s.Float("LANG"); err == nil {
		t.Error("LANG=C read as a number")
	}
}

func TestParseHPL(t *testing.T) {
	passed := golden(t, "hpl-passed.txt")
	failed := golden(t, "hpl-failed.txt")
	tests := []struct {
		name    string
		out     []byte
		wantErr error // nil: success; errAny: some error
	}{
		{"passed", passed, nil},
		{"failed residual", failed, ErrResidual},
		{"truncated in HPL", passed[:bytes.Index(passed, []byte("T/V                N"))], ErrIncomplete},
		{"truncated in summary", passed[:bytes.Index(passed, []byte("HPL_Tflops="))], errAny},
		{"no summary end", passed[:bytes.Index(passed, []byte("End of Summary section."))], ErrIncomplete},
		{"garbage", []byte("Segmentation fault\n\x00\x01 nonsense\n"), ErrIncomplete},
		{"empty", nil, ErrIncomplete},
		{"HPL did not run", replace(t, passed, "HPL_Tflops=0.000609525", "HPL_Tflops=-1"), errAny},
		{"Tflops not a number", replace(t, passed, "HPL_Tflops=0.000609525", "HPL_Tflops=nan"), errAny},
		{"residual over threshold", replace(t, passed, "0.0072510 ...... PASSED", "17.0 ...... PASSED"), ErrResidual},
		{"no residual line", replace(t, passed, "0.0072510 ...... PASSED", "(lost)"), ErrIncomplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHPL(tc.out)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr == errAny && err == nil, tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				t.Logf("error: %v", err)
				return
			}
			want := HPL{GFLOPS: 0.609525, Seconds: 1.09621, N: 1000, NB: 80, P: 1, Q: 2, Residual: 0.007251, Threshold: 16, Success: true}
			if math.Abs(h.GFLOPS-want.GFLOPS) > 1e-9 || h.Seconds != want.Seconds || h.N != want.N || h.NB != want.NB ||
				h.P != want.P || h.Q != want.Q || h.Residual != want.Residual || h.Threshold != want.Threshold || h.Success != want.Success {
				t.Errorf("HPL = %+v, want %+v", h, want)
			}
		})
	}
	// The failed check still reports what HPL measured.
	h, _ := ParseHPL(failed)
	if !(h.GFLOPS > 0) || h.Residual != 0.007251 || h.Success {
		t.Errorf("failed run: %+v", h)
	}
}

// errAny stands for "some error" in test tables.
var errAny = errors.New("any error")

func TestParseStarSTREAM(t *testing.T) {
	stream := golden(t, "stream.txt")
	tests := []struct {
		name    string
		out     []byte
		wantErr error
	}{
		{"stopped run", stream, nil},
		{"full run", golden(t, "hpl-passed.txt"), nil},
		{"failed validation", replace(t, stream, "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
			"Failed Validation on array a[], AvgRelAbsErr > epsilon (1.000000e-13)"), ErrValidation},
		{"no validation line", replace(t, stream, "Solution Validates", "Something else"), ErrValidation},
		{"truncated", stream[:bytes.Index(stream, []byte("Average Add GB/s"))], ErrIncomplete},
		{"rate missing", replace(t, stream, "Average Triad GB/s 73.294565", ""), ErrIncomplete},
		{"rate not a number", replace(t, stream, "Average Triad GB/s 73.294565", "Average Triad GB/s -nan"), errAny},
		{"rate zero", replace(t, stream, "Average Triad GB/s 73.294565", "Average Triad GB/s 0"), errAny},
		{"process in error", replace(t, stream, "Solution Validates: avg error less than 1.000000e-13 on all three arrays\n-------------------------------------------------------------\nNode(s) with error 0",
			"Solution Validates: avg error less than 1.000000e-13 on all three arrays\n-------------------------------------------------------------\nNode(s) with error 1"), errAny},
		{"garbage", []byte("\x7fELF garbage\nBegin of nothing\n"), ErrIncomplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseStarSTREAM(tc.out)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr == errAny && err == nil, tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				t.Logf("error: %v", err)
				return
			}
			if s.VectorSize <= 0 || !(s.Copy > 0 && s.Scale > 0 && s.Add > 0 && s.Triad > 0) {
				t.Errorf("stream = %+v", s)
			}
		})
	}
	s, err := ParseStarSTREAM(stream)
	if err != nil {
		t.Fatal(err)
	}
	want := Stream{VectorSize: 240000, Copy: 90.623746, Scale: 58.280719, Add: 75.33942, Triad: 73.294565}
	if s != want {
		t.Errorf("stream = %+v, want %+v", s, want)
	}
	if v := StreamVectorSize(1200, 2); v != s.VectorSize {
		t.Errorf("StreamVectorSize(1200, 2) = %d, hpcc used %d", v, s.VectorSize)
	}
}

func TestSection(t *testing.T) {
	out := []byte("Begin of A section.\na1\na2\nEnd of A section.\nBegin of B section.\nb1\n")
	if l, err := Section(out, "A"); err != nil || strings.Join(l, ",") != "a1,a2" {
		t.Errorf("A = %q, %v", l, err)
	}
	if _, err := Section(out, "B"); !errors.Is(err, ErrIncomplete) {
		t.Errorf("B (no end): err = %v", err)
	}
	if _, err := Section(out, "C"); !errors.Is(err, ErrIncomplete) {
		t.Errorf("C (absent): err = %v", err)
	}
}
