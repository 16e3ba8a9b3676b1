package linpack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
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

// quick returns an instance with the quick defaults and overrides.
func quick(t *testing.T, over map[string]string) workload.Instance {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), over, true)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIntegration runs the real nn-linpack briefly natively and in a
// container: the same build, OpenBLAS loaded on both, HPL's check passed.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nn-linpack natively and in Docker; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	platforms := testenv.Platforms(t, run, root, platform.Native, platform.DockerHost)
	libs := map[string]string{}
	for _, name := range []string{platform.Native, platform.DockerHost} {
		t.Run(name, func(t *testing.T) {
			p := platforms[name]
			in := quick(t, map[string]string{"n": "2000", "dgemm": "1000"})
			raw := filepath.Join(root, "raw")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: name, Platform: p, Duration: time.Second, RawDir: raw, Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v in %v", name, res.Values, time.Since(start).Round(time.Millisecond))
			t.Logf("notes %q", res.Notes)
			if g := res.Values[MetricGFLOPS]; !(g >= 0.1 && g <= 100000) {
				t.Errorf("gflops = %v, not plausible", g)
			}
			if r := res.Values[MetricResidual]; !(r > 0 && r < 16) {
				t.Errorf("residual = %v", r)
			}
			if pct := res.Values[MetricPeakPct]; !(pct > 0 && pct < 200) {
				t.Errorf("peak_pct = %v", pct)
			}
			notes := strings.Join(res.Notes, "\n")
			for _, w := range []string{"N=2000 given", "libopenblas", "PASSED", "flags peak"} {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q", w)
				}
			}
			for _, n := range res.Notes {
				if strings.HasPrefix(n, "BLAS as loaded") {
					libs[name], _, _ = strings.Cut(n, ";")
				}
			}
			if _, err := os.Stat(filepath.Join(raw, name+"-nn-linpack.txt")); err != nil {
				t.Errorf("raw output not saved: %v", err)
			}
			checkClean(t, root, run)
		})
	}
	// Host and image load the same OpenBLAS build.
	if libs[platform.Native] == "" || libs[platform.Native] != libs[platform.DockerHost] {
		t.Errorf("BLAS natively %q, in the container %q", libs[platform.Native], libs[platform.DockerHost])
	}
}

func TestIntegrationCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nn-linpack natively; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	nat, err := native.New(platform.Native, platform.Env{Run: run, LogDir: root}, state.Dir{Root: root}, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = quick(t, map[string]string{"n": "20000"}).Run(ctx, workload.Trial{Run: run, Name: "cancel", Platform: nat, RawDir: root})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled trial took %v", d)
	}
	checkClean(t, root, run)
}
