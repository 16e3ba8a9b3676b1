package stream

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// checkClean fails when the run left temp dirs or processes behind.
func checkClean(t *testing.T, root string, run runid.ID) {
	t.Helper()
	if left, err := state.TempDirs(run); err != nil || len(left) > 0 {
		t.Errorf("temp dirs left by run %s: %v %v", run, left, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := cleanup.Processes{Dir: state.Dir{Root: root}}.Runs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(runs, run) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of run %s still running", run)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// small returns an instance with the quick defaults: arrays of 4x the
// last-level cache, reps repetitions at least.
func small(t *testing.T) workload.Instance {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIntegration runs the real nn-stream briefly natively and in a
// container.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nn-stream natively and in Docker; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	platforms := testenv.Platforms(t, run, root, platform.Native, platform.DockerHost)
	for _, name := range []string{platform.Native, platform.DockerHost} {
		t.Run(name, func(t *testing.T) {
			p := platforms[name]
			in := small(t)
			raw := filepath.Join(root, "raw")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: name, Platform: p, Duration: 500 * time.Millisecond, RawDir: raw, Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			t.Logf("%s: %v in %v", name, res.Values, took.Round(time.Millisecond))
			t.Logf("notes %q", res.Notes)
			// Between 1 GB/s and 10 TB/s.
			for _, m := range in.Metrics() {
				if v := res.Values[m.Name]; !(v >= 1000 && v <= 1e7) {
					t.Errorf("%s = %v MB/s, not plausible", m.Name, v)
				}
			}
			if len(res.Where) != 1 || res.Where[0] == "" {
				t.Errorf("Where = %q", res.Where)
			}
			notes := strings.Join(res.Notes, "\n")
			for _, w := range []string{"4.0x the host's last-level cache", "validation a 0 b 0 c 0", "repetitions"} {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q", w)
				}
			}
			if _, err := os.Stat(filepath.Join(raw, name+"-nn-stream.txt")); err != nil {
				t.Errorf("raw output not saved: %v", err)
			}
			if took > 30*time.Second {
				t.Errorf("a STREAM trial took %v, more than 30 s", took)
			}
			checkClean(t, root, run)
		})
	}
}
