package hpcc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

// fakeMPI is an mpirun that records its arguments and writes an output file
// as the FAKE_MODE environment variable says, without running hpcc.
const fakeMPI = `#!/bin/sh
if [ "$1" = --version ]; then echo 'mpirun (Open MPI) fake'; exit 0; fi
echo "$*" >args
echo "$OMP_NUM_THREADS/$OPENBLAS_NUM_THREADS" >threads
case "$FAKE_MODE" in
full)
	{ echo 'Begin of Grid section.'; sed -n '11,12p' hpccinf.txt; echo 'End of Grid section.'; } >>hpccoutf.txt ;;
fail)
	echo 'Begin of HPL section.' >>hpccoutf.txt
	echo 'mpirun: hpcc died' >&2
	exit 3 ;;
hang)
	{ echo 'Begin of StarSTREAM section.'; echo 'End of StarSTREAM section.'; } >>hpccoutf.txt
	exec sleep 30 ;;
esac
`

// runScript runs j's script in a fresh directory with PATH set to path
// (fake tools first) and returns its stdout, stderr, exit code and dir.
func runScript(t *testing.T, j Job, path, mode string) (string, string, int, string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range j.Spec().Files {
		if err := os.WriteFile(filepath.Join(dir, f.Path), f.Content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", filepath.Join(dir, ScriptFile))
	// OMP_NUM_THREADS must not limit the count of CPUs (GNU nproc obeys it).
	cmd.Env = []string{"PATH=" + path, "FAKE_MODE=" + mode, "OMP_NUM_THREADS=1", "OMP_THREAD_LIMIT=1"}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code, dir
}

// fakeTools returns a PATH with a fake mpirun and hpcc before the system's.
func fakeTools(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mpirun"), []byte(fakeMPI), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "hpcc"), []byte("#!/bin/sh\nexit 99\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + ":/usr/bin:/bin"
}

func TestScript(t *testing.T) {
	path := fakeTools(t)
	cmd := exec.Command("nproc")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	nproc, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var np int
	fmt.Sscan(string(nproc), &np)
	p, q := Grid(np)
	tests := []struct {
		name     string
		job      Job
		mode     string
		wantCode int
		want     []string // in stdout
		wantArgs string
	}{
		{"six processes", Job{Input: Input{N: 1000}, Procs: 6}, "full", 0,
			[]string{"nearnative-np: 6", "nearnative-grid: 2x3", "nearnative-exit: 0", Marker + "\nBegin of Grid section.\n2 ", "\n3 "},
			"--allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np 6 hpcc"},
		{"all CPUs", Job{Input: Input{N: 1000}}, "full", 0,
			[]string{fmt.Sprintf("nearnative-np: %d\n", np), fmt.Sprintf("nearnative-grid: %dx%d", p, q), "nearnative-command: mpirun "},
			fmt.Sprintf("-np %d hpcc", np)},
		{"hpcc fails", Job{Input: Input{N: 1000}, Procs: 2}, "fail", 3,
			[]string{"nearnative-exit: 3", Marker + "\nBegin of HPL section."}, "-np 2 hpcc"},
		{"stopped after a section", Job{Input: Input{N: 1000}, Procs: 2, StopAfter: "StarSTREAM"}, "hang", 0,
			[]string{"nearnative-stopped: after the StarSTREAM section", "End of StarSTREAM section."}, "-np 2 hpcc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			stdout, stderr, code, dir := runScript(t, tc.job, path, tc.mode)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.wantCode, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			args, err := os.ReadFile(filepath.Join(dir, "args"))
			if err != nil || !strings.HasSuffix(strings.TrimSpace(string(args)), tc.wantArgs) {
				t.Errorf("mpirun args %q (%v), want suffix %q", args, err, tc.wantArgs)
			}
			if th, err := os.ReadFile(filepath.Join(dir, "threads")); err != nil || string(th) != "1/1\n" {
				t.Errorf("OMP/OpenBLAS threads for hpcc %q (%v), want 1/1", th, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("script took %v", d)
			}
		})
	}
}

func TestScriptToolMissing(t *testing.T) {
	// A PATH with the utilities the script needs but no mpirun or hpcc.
	bin := t.TempDir()
	for _, tool := range []string{"dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skip(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code, _ := runScript(t, Job{Input: Input{N: 1000}}, bin, "full")
	if code != 127 || !strings.Contains(stderr, "mpirun not found") {
		t.Errorf("exit %d, stderr %q, stdout %q; want 127 and mpirun not found", code, stderr, stdout)
	}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		job Job
		ok  bool
	}{
		{Job{Input: Input{N: 1000}}, true},
		{Job{Input: Input{N: 1000}, Procs: 4, StopAfter: "StarSTREAM"}, true},
		{Job{Input: Input{N: 0}}, false},
		{Job{Input: Input{N: 1000}, Procs: -1}, false},
		{Job{Input: Input{N: 1000}, StopAfter: "a'b"}, false},
	}
	for _, tc := range tests {
		if err := tc.job.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err = %v, want ok %v", tc.job, err, tc.ok)
		}
	}
}

// fakePlatform runs no job; it returns a canned result.
type fakePlatform struct {
	res  platform.JobResult
	err  error
	spec platform.Spec
}

func (f *fakePlatform) Name() string { return "fake" }
func (f *fakePlatform) Start(context.Context, string, platform.Spec) (platform.Server, error) {
	return nil, errors.New("no servers")
}
func (f *fakePlatform) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	f.spec = spec
	r := f.res
	r.Command = spec.Command(platform.Listen{Dir: platform.ContainerDir})
	r.Where = "fake place"
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, f.err
}

// serversOnly is a platform without JobRunner.
type serversOnly struct{}

func (serversOnly) Name() string { return "servers-only" }
func (serversOnly) Start(context.Context, string, platform.Spec) (platform.Server, error) {
	return nil, errors.New("no servers")
}

func TestExecute(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "hpl-passed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		plat     platform.Platform
		wantErr  []string // substrings; nil = success
		wantRaw  bool
		errMatch error
	}{
		{"ok", context.Background(), &fakePlatform{res: platform.JobResult{Stdout: good}}, nil, true, nil},
		{"tool missing", context.Background(), &fakePlatform{
			res: platform.JobResult{Stderr: []byte("nearnative: mpirun not found on this platform (Debian packages openmpi-bin and hpcc)\n"), ExitCode: 127},
			err: errors.New("job hpcc exited with code 127")},
			[]string{"hpcc on fake: job hpcc exited with code 127: nearnative: mpirun not found", "see "}, true, nil},
		{"non-zero exit", context.Background(), &fakePlatform{
			res: platform.JobResult{Stdout: good[:len(good)/2], Stderr: []byte("mpirun noticed that process rank 0 exited on signal 9\n"), ExitCode: 137},
			err: errors.New("job hpcc exited with code 137")},
			[]string{"exited with code 137", "signal 9", "see "}, true, nil},
		{"no output file", context.Background(), &fakePlatform{res: platform.JobResult{Stdout: []byte("nearnative-np: 2\n")}},
			[]string{"no hpccoutf.txt", "see "}, true, ErrNoOutput},
		{"platform runs no jobs", context.Background(), serversOnly{}, []string{"cannot run a job inside itself"}, false, nil},
		{"cancelled", cancelled, &fakePlatform{}, []string{"context canceled"}, false, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := t.TempDir()
			tr := workload.Trial{Name: "t1", Platform: tc.plat, RawDir: raw}
			r, err := Execute(tc.ctx, tr, Job{Input: Input{N: 1000}, Procs: 2})
			if tc.wantErr == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
			if tc.errMatch != nil && !errors.Is(err, tc.errMatch) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.errMatch)
			}
			rawPath := filepath.Join(raw, "t1-hpcc.txt")
			b, rerr := os.ReadFile(rawPath)
			if tc.wantRaw != (rerr == nil) {
				t.Fatalf("raw file: %v, want it saved %v", rerr, tc.wantRaw)
			}
			if !tc.wantRaw {
				return
			}
			if r.RawPath != rawPath {
				t.Errorf("RawPath = %q, want %q", r.RawPath, rawPath)
			}
			if err != nil && !strings.Contains(err.Error(), rawPath) {
				t.Errorf("error %v does not point to %s", err, rawPath)
			}
			for _, w := range []string{"# job: sh /nearnative/run-hpcc.sh", "# where: fake place", "# ---- hpccinf.in ----\nHPLinpack", "# ---- run-hpcc.sh ----", "# ---- stdout ----"} {
				if !strings.Contains(string(b), w) {
					t.Errorf("raw file lacks %q", w)
				}
			}
			if tc.wantErr == nil {
				if r.Info.Procs != 2 || len(r.Output) == 0 {
					t.Errorf("run info %+v, %d bytes of output", r.Info, len(r.Output))
				}
				cmds, notes := strings.Join(r.Commands(), "\n"), strings.Join(r.Notes(), "\n")
				for _, w := range []string{"job: sh /nearnative/run-hpcc.sh", "in the job: mpirun --allow-run-as-root"} {
					if !strings.Contains(cmds, w) {
						t.Errorf("Commands %q lack %q", cmds, w)
					}
				}
				for _, w := range []string{"hpcc 1.5.0-3 (dpkg), This is the DARPA/DOE HPC Challenge Benchmark version 1.5.0", "Open MPI", "libblas", "2 MPI processes on a 1x2 grid"} {
					if !strings.Contains(notes, w) {
						t.Errorf("Notes %q lack %q", notes, w)
					}
				}
			}
		})
	}
}
