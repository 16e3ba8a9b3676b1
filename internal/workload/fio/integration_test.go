package fio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// newInstance resolves quick defaults with a small file and overrides.
func newInstance(t *testing.T, over map[string]string) workload.Instance {
	t.Helper()
	o := map[string]string{"size": "32m", "ramp": "1s"}
	for k, v := range over {
		o[k] = v
	}
	v, err := workload.Resolve(Workload{}.Params(), o, true)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// checkClean fails when the run left temp dirs behind.
func checkClean(t *testing.T, run runid.ID) {
	t.Helper()
	left, err := state.TempDirs(run)
	if err != nil || len(left) > 0 {
		t.Errorf("temp dirs left by run %s: %v %v", run, left, err)
	}
}

func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fio natively and in Docker; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	platforms := testenv.Platforms(t, run, root, platform.Native, platform.DockerHost)
	tests := []struct {
		name, plat, storage, mode string
		where                     string
	}{
		{"native-volume-randrw70", platform.Native, StorageVolume, "randrw70", "on the host"},
		{"docker-host-volume-randread", platform.DockerHost, StorageVolume, "randread", "bind-mounted at /fio-data"},
		{"docker-host-container-randwrite", platform.DockerHost, StorageContainer, "randwrite", "own file system at /nearnative/fio.dat (overlay"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := platforms[tc.plat]
			in := newInstance(t, map[string]string{"mode": tc.mode, "storage": tc.storage})
			raw := filepath.Join(root, "raw")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: tc.name, Platform: p, Duration: 2 * time.Second, RawDir: raw, Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range in.Metrics() {
				v, ok := res.Values[m.Name]
				if !ok {
					t.Errorf("metric %s missing", m.Name)
				}
				if strings.HasSuffix(m.Name, "iops") && !(v >= 10 && v <= 1e7) {
					t.Errorf("%s = %v, not plausible", m.Name, v)
				}
				if strings.HasSuffix(m.Name, "_us") && !(v > 0 && v < 1e7) {
					t.Errorf("%s = %v us, not plausible", m.Name, v)
				}
			}
			t.Logf("values %v", res.Values)
			t.Logf("where %q", res.Where)
			t.Logf("notes %q", res.Notes)
			t.Logf("commands %q", res.Commands)
			if !strings.Contains(strings.Join(res.Where, "\n"), tc.where) {
				t.Errorf("Where %q lacks %q", res.Where, tc.where)
			}
			if !strings.Contains(strings.Join(res.Notes, "\n"), "fio-3") {
				t.Errorf("Notes %q lack the fio version", res.Notes)
			}
			if len(res.Commands) != 1 || !strings.Contains(res.Commands[0], "--runtime=2s") {
				t.Errorf("Commands %q", res.Commands)
			}
			if _, err := os.Stat(filepath.Join(raw, tc.name+"-fio.json")); err != nil {
				t.Errorf("raw output not saved: %v", err)
			}
			if err := in.(io.Closer).Close(); err != nil {
				t.Error(err)
			}
			checkClean(t, run)
		})
	}
}

// TestIntegrationShared runs a native and a volume trial of one run: the
// second reuses the host file the first laid out, and Close removes it.
func TestIntegrationShared(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fio natively and in Docker; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	platforms := testenv.Platforms(t, run, root, platform.Native, platform.DockerNAT)
	read := newInstance(t, map[string]string{"mode": "randread"})
	write := newInstance(t, map[string]string{"mode": "randwrite"})
	var notes []string
	for i, step := range []struct {
		in   workload.Instance
		plat string
	}{{read, platform.Native}, {write, platform.DockerNAT}, {read, platform.DockerNAT}} {
		res, err := step.in.Run(context.Background(), workload.Trial{Run: run, Name: "s" + string(rune('0'+i)), Platform: platforms[step.plat], Duration: time.Second, RawDir: root})
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, strings.Join(res.Notes, "\n"))
	}
	if !strings.Contains(notes[0], "kept for the run's later") || !strings.Contains(notes[1], "reused") || !strings.Contains(notes[2], "reused") {
		t.Errorf("notes:\n%s", strings.Join(notes, "\n---\n"))
	}
	left, _ := state.TempDirs(run)
	if len(left) != 1 {
		t.Errorf("during the run: %v, want the one shared data directory", left)
	}
	for _, in := range []workload.Instance{read, write} {
		if err := in.(io.Closer).Close(); err != nil {
			t.Error(err)
		}
	}
	checkClean(t, run)
}

func TestIntegrationCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fio natively; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	nat, err := native.New(platform.Native, platform.Env{Run: run, LogDir: root}, state.Dir{Root: root}, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nat.Close() })
	in := newInstance(t, map[string]string{"numjobs": "1", "iodepth": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = in.Run(ctx, workload.Trial{Run: run, Name: "cancel", Platform: nat, Duration: time.Minute, RawDir: root})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	in.(io.Closer).Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled trial took %v", d)
	}
	checkClean(t, run)
}

// TestIntegrationFailure runs fio natively on a file it cannot use (a
// directory where the file should be) and expects an error pointing to the
// saved raw output.
func TestIntegrationFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fio natively; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	nat, err := native.New(platform.Native, platform.Env{Run: run, LogDir: root}, state.Dir{Root: root}, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nat.Close() })
	in := newInstance(t, map[string]string{"size": "32m"}).(*Instance)
	in.cfg.BS = 3 << 30 // a block larger than the file: fio refuses to run
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = in.Run(ctx, workload.Trial{Run: run, Name: "fail", Platform: nat, Duration: time.Second, RawDir: root})
	in.Close()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "fail-fio.json")) {
		t.Fatalf("err = %v, want it to point to the raw output", err)
	}
	t.Logf("error: %v", err)
	checkClean(t, run)
}
