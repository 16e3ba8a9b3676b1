package hpcc

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var capture = flag.Bool("capture", false, "run hpcc on this host and rewrite the golden files in testdata/")

// TestCaptureGolden rewrites testdata/ from real hpcc runs of the job script
// on this host: a passing HPL run, one whose residual check fails (a
// threshold no solve can meet), and a run stopped after StarSTREAM. Run with
// go test ./internal/workload/hpcc -run TestCaptureGolden -capture.
func TestCaptureGolden(t *testing.T) {
	if !*capture {
		t.Skip("rewrites testdata from real hpcc runs; pass -capture")
	}
	tests := []struct {
		file string
		job  Job
	}{
		{"hpl-passed.txt", Job{Input: Input{N: 1000}, Procs: 2}},
		{"hpl-failed.txt", Job{Input: Input{N: 1000, Threshold: 1e-9}, Procs: 2}},
		{"stream.txt", Job{Input: Input{N: 1200}, Procs: 2, StopAfter: "StarSTREAM"}},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		for _, f := range tc.job.Spec().Files {
			if err := os.WriteFile(filepath.Join(dir, f.Path), f.Content, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sh", filepath.Join(dir, ScriptFile))
		cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if err := os.WriteFile(filepath.Join("testdata", tc.file), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
