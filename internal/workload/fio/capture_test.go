package fio

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var capture = flag.Bool("capture", false, "run fio on this host and rewrite the golden files in testdata/")

// TestCaptureGolden rewrites testdata/ from real fio runs: one short run per
// mode with the workload's own command line, and one that fails (random
// writes to /dev/full) for the error case. Run with
// go test ./internal/workload/fio -run TestCaptureGolden -capture.
func TestCaptureGolden(t *testing.T) {
	if !*capture {
		t.Skip("rewrites testdata from real fio runs; pass -capture")
	}
	for _, m := range Modes {
		cfg := Config{Mode: m, Size: 32 << 20, BS: 4096, Jobs: m.Jobs, Depth: m.Depth, Runtime: time.Second, Ramp: time.Second}
		argv := cfg.Args(filepath.Join(t.TempDir(), FileName))
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		writeGolden(t, m.Name+".json", out)
	}
	// fio exits 1 and prints its error line before the JSON.
	out, _ := exec.Command("fio", "--name=randwrite", "--filename=/dev/full", "--size=1m", "--bs=4k",
		"--rw=randwrite", "--group_reporting", "--output-format=json").Output()
	writeGolden(t, "error.json", out)
}

func writeGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
