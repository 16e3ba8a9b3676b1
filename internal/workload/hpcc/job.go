package hpcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

// MPIArgs is how the job starts hpcc, with NP standing for the number of
// processes. --oversubscribe lets a CPU-limited platform still start them;
// the vader transport's single-copy mechanism (CMA, process_vm_readv) is off
// on every platform because Docker's default seccomp profile refuses it
// (hpcc then floods stderr with "Read -1, expected ..., errno = 1" and runs
// several times slower), and one transport everywhere keeps platforms
// comparable.
var MPIArgs = []string{"mpirun", "--allow-run-as-root", "--oversubscribe",
	"--mca", "btl_vader_single_copy_mechanism", "none", "-np", "NP", "hpcc"}

// Marker precedes the copy of hpccoutf.txt in the job's stdout.
const Marker = "==> " + OutputFile + " <=="

// Job is one hpcc run inside a platform.
type Job struct {
	Input Input
	// Procs is the number of MPI processes; 0 means one per CPU the
	// platform offers (nproc inside it, which honours a CPU set).
	Procs int
	// StopAfter, when set, names a section of hpccoutf.txt ("StarSTREAM"):
	// the job stops hpcc once that section is complete instead of running
	// the rest of the suite, and succeeds.
	StopAfter string
}

// Validate reports a job that cannot run.
func (j Job) Validate() error {
	if err := j.Input.Validate(); err != nil {
		return err
	}
	if j.Procs < 0 {
		return fmt.Errorf("hpcc job: %d processes", j.Procs)
	}
	if strings.ContainsAny(j.StopAfter, "'\"\\$` \n") {
		return fmt.Errorf("hpcc job: bad section name %q", j.StopAfter)
	}
	return nil
}

// Spec is the platform job: the script and the input template in the job's
// directory.
func (j Job) Spec() platform.Spec {
	return platform.Spec{
		Name: "hpcc",
		Command: func(l platform.Listen) []string {
			return []string{"sh", path.Join(l.Dir, ScriptFile)}
		},
		Files: []platform.File{
			{Path: TemplateFile, Content: j.Input.Template()},
			{Path: ScriptFile, Content: []byte(j.Script()), Mode: 0o755},
		},
	}
}

// Script is the job's sh script. It runs in the job's directory: checks that
// mpirun and hpcc exist, picks the process count and grid (see Grid), allows
// one thread per MPI process (no OpenMP or BLAS threads on top), writes
// hpccinf.txt, prints what it runs as "nearnative-KEY: value" lines, runs
// hpcc and prints hpccoutf.txt after Marker, since the job's directory goes
// away with the job. With StopAfter it polls the output file once a second
// and stops mpirun (SIGTERM) once that section has ended.
func (j Job) Script() string {
	// nproc counts the CPUs of the job's affinity (a CPU set), but obeys
	// OMP_NUM_THREADS and OMP_THREAD_LIMIT when they are set.
	np := "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
	if j.Procs > 0 {
		np = strconv.Itoa(j.Procs)
	}
	mpi := strings.Join(MPIArgs, " ")
	mpi = strings.Replace(mpi, " NP ", ` "$np" `, 1)
	var b strings.Builder
	fmt.Fprintf(&b, `#!/bin/sh
# nearnative: run hpcc and print its output file.
cd "$(dirname "$0")" || exit 1
for tool in mpirun hpcc; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "nearnative: $tool not found on this platform (Debian packages openmpi-bin and hpcc)" >&2
		exit 127
	fi
done
np=%s
p=1
i=1
while [ $((i * i)) -le "$np" ]; do
	if [ $((np %% i)) -eq 0 ]; then p=$i; fi
	i=$((i + 1))
done
q=$((np / p))
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
sed -e "s/@P@/$p/" -e "s/@Q@/$q/" %s >%s || exit 1
echo "nearnative-np: $np"
echo "nearnative-grid: ${p}x$q"
echo "nearnative-hpcc-version: $(dpkg-query -W -f='${Version}' hpcc 2>/dev/null || echo unknown)"
echo "nearnative-mpirun-version: $(mpirun --version 2>/dev/null | head -n 1)"
for lib in /usr/lib/*/libblas.so.3; do
	[ -e "$lib" ] && echo "nearnative-blas: $(readlink -f "$lib")"
done
rm -f %s
set -- %s
echo "nearnative-command: $*"
`, np, TemplateFile, InputFile, OutputFile, mpi)
	if j.StopAfter == "" {
		b.WriteString(`"$@"
rc=$?
`)
	} else {
		fmt.Fprintf(&b, `"$@" &
pid=$!
stopped=
while kill -0 "$pid" 2>/dev/null; do
	if grep -q '^End of %s section' %s 2>/dev/null; then
		stopped=1
		kill -TERM "$pid"
		break
	fi
	sleep 1
done
wait "$pid"
rc=$?
if [ -n "$stopped" ]; then
	echo "nearnative-stopped: after the %s section (mpirun exit $rc)"
	rc=0
fi
`, j.StopAfter, OutputFile, j.StopAfter)
	}
	fmt.Fprintf(&b, `echo "nearnative-exit: $rc"
echo '%s'
cat %s
exit $rc
`, Marker, OutputFile)
	return b.String()
}

// Run is a finished hpcc job.
type Run struct {
	// Job is what the platform reported: output, exit code, command, where.
	Job platform.JobResult
	// Info is what the script printed about the run.
	Info Info
	// Output is the content of hpccoutf.txt.
	Output []byte
	// RawPath is where stdout, stderr and the input were saved.
	RawPath string
}

// Commands returns the command lines for Result.Commands: the job as the
// platform ran it and the mpirun line the script ran.
func (r Run) Commands() []string {
	var c []string
	if len(r.Job.Command) > 0 {
		c = append(c, "job: "+strings.Join(r.Job.Command, " "))
	}
	if r.Info.Command != "" {
		c = append(c, "in the job: "+r.Info.Command)
	}
	return c
}

// Notes returns what the run says about the tools, for Result.Notes.
func (r Run) Notes() []string {
	var n []string
	v := "hpcc " + r.Info.HPCCVersion + " (dpkg)"
	if b := Banner(r.Output); b != "" {
		v += ", " + b
	}
	n = append(n, v)
	if r.Info.MPIVersion != "" {
		n = append(n, r.Info.MPIVersion)
	}
	if len(r.Info.BLAS) > 0 {
		n = append(n, "BLAS as hpcc loads it on the platform: "+strings.Join(r.Info.BLAS, ", "))
	}
	n = append(n, fmt.Sprintf("%s on a %s grid", processes(r.Info.Procs), r.Info.Grid))
	if r.Info.Stopped != "" {
		n = append(n, "hpcc stopped "+r.Info.Stopped+"; the tests after it did not run")
	}
	return n
}

// Execute runs j on the trial's platform, saves the raw output as
// <trial>-hpcc.txt under t.RawDir and returns the run. The error of a failed
// job (the platform cannot run jobs, hpcc or mpirun missing, non-zero exit,
// output without hpccoutf.txt) points to the raw file.
func Execute(ctx context.Context, t workload.Trial, j Job) (Run, error) {
	var r Run
	if err := j.Validate(); err != nil {
		return r, err
	}
	jr, ok := t.Platform.(platform.JobRunner)
	if !ok {
		return r, fmt.Errorf("platform %s cannot run a job inside itself, which hpcc needs", t.Platform.Name())
	}
	spec := j.Spec()
	logf(t.Log, "hpcc on %s: N=%d NB=%d, %s", t.Platform.Name(), j.Input.N, j.Input.withDefaults().NB, procsText(j.Procs))
	res, jerr := jr.RunJob(ctx, t.Name, spec)
	r.Job = res
	if ctx.Err() != nil {
		if len(res.Stdout)+len(res.Stderr) > 0 {
			r.RawPath, _ = saveRaw(t.RawDir, t.Name, spec, res)
		}
		return r, ctx.Err()
	}
	raw, werr := saveRaw(t.RawDir, t.Name, spec, res)
	if werr != nil {
		return r, werr
	}
	r.RawPath = raw
	info, out, perr := Split(res.Stdout)
	r.Info, r.Output = info, out
	if jerr != nil {
		if msg := lastLine(res.Stderr); msg != "" {
			return r, fmt.Errorf("hpcc on %s: %w: %s: see %s", t.Platform.Name(), jerr, msg, raw)
		}
		return r, fmt.Errorf("hpcc on %s: %w: see %s", t.Platform.Name(), jerr, raw)
	}
	if perr != nil {
		return r, fmt.Errorf("hpcc on %s: %w: see %s", t.Platform.Name(), perr, raw)
	}
	return r, nil
}

func procsText(n int) string {
	if n == 0 {
		return "one MPI process per CPU of the platform"
	}
	return processes(n)
}

// processes says "1 MPI process", "2 MPI processes".
func processes(n int) string {
	if n == 1 {
		return "1 MPI process"
	}
	return fmt.Sprintf("%d MPI processes", n)
}

// saveRaw writes the job's command, exit, files, stdout and stderr to
// <trial>-hpcc.txt under dir and returns its path.
func saveRaw(dir, trial string, spec platform.Spec, res platform.JobResult) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating raw output dir: %w", err)
	}
	p := filepath.Join(dir, trial+"-hpcc.txt")
	var b bytes.Buffer
	fmt.Fprintf(&b, "# job: %s\n# where: %s\n# exit %d, wall %v\n", strings.Join(res.Command, " "), res.Where, res.ExitCode, res.Wall.Round(time.Millisecond))
	for _, f := range spec.Files {
		fmt.Fprintf(&b, "# ---- %s ----\n%s", f.Path, f.Content)
	}
	fmt.Fprintf(&b, "# ---- stdout ----\n%s", res.Stdout)
	if len(res.Stderr) > 0 {
		fmt.Fprintf(&b, "# ---- stderr ----\n%s", res.Stderr)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("saving hpcc output: %w", err)
	}
	return p, nil
}

// lastLine returns the last non-empty line of b, at most 300 bytes.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	s := strings.TrimSpace(lines[len(lines)-1])
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// ErrNoOutput says the job's stdout holds no copy of hpccoutf.txt.
var ErrNoOutput = errors.New("no " + OutputFile + " in the job's output")
