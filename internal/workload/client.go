package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// ClientRun is the outcome of one load-generator process.
type ClientRun struct {
	Argv    []string
	Output  []byte // stdout
	RawPath string // where stdout+stderr were saved; "" when saving failed
	// RawNote, when not empty, says that the raw output could not be saved
	// and why; put it in the trial's Notes (the measurement stands).
	RawNote  string
	Wall     time.Duration
	CPU      time.Duration // user+system time of the client and its children
	ExitCode int
}

// SaveRaw writes a tool's raw output to dir/name and returns its path. A
// failure to save does not spoil a measurement: SaveRaw then returns "" and
// a note for the trial's Notes saying what was not kept and why.
func SaveRaw(dir, name string, data []byte) (path, note string) {
	path = filepath.Join(dir, name)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		return "", fmt.Sprintf("raw output %s not saved (the measurement is kept): %v", name, err)
	}
	return path, ""
}

// SeeRaw is the ": see PATH" suffix of an error about a tool's output, or ""
// when the output could not be saved.
func SeeRaw(path string) string {
	if path == "" {
		return " (raw output not saved)"
	}
	return ": see " + path
}

// CPUShare is the client's CPU time over its wall time (1.0 = one full CPU).
func (c ClientRun) CPUShare() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return c.CPU.Seconds() / c.Wall.Seconds()
}

// RunClient runs a load generator on the trial's client host (t.Client: a
// network namespace of the run, or this machine): in its own process group
// with the run ID in its environment, killed with its group when ctx ends
// and by the kernel when nearnative dies (deathsig); its stdout and stderr
// are saved to t.RawDir/name. A non-zero exit is an error that points to
// the saved output.
func RunClient(ctx context.Context, t Trial, name string, argv []string) (ClientRun, error) {
	return RunClientOn(ctx, t.Client, t.Run, t.RawDir, name, argv, nil)
}

// RunClientLines is RunClient that also hands each line of the client's
// stdout to onLine as it is printed (nil: none), for workloads that read
// counters at the moments a tool's output marks (sockperf idles before its
// timed run).
func RunClientLines(ctx context.Context, t Trial, name string, argv []string, onLine func(string)) (ClientRun, error) {
	return RunClientOn(ctx, t.Client, t.Run, t.RawDir, name, argv, onLine)
}

// RunClientOn runs a load generator on client host h (nil: this machine)
// for run, saving its output to rawDir/name: RunClientLines without a
// trial, for benchmarks and tests. The tool is exec'd in place on the
// client host (host.Host.Wrap), so its pid, process group and rusage are
// its own; ClientRun.Argv is the tool's own argv.
func RunClientOn(ctx context.Context, h host.Host, run runid.ID, rawDir, name string, argv []string, onLine func(string)) (ClientRun, error) {
	res := ClientRun{Argv: argv}
	if r, ok := h.(host.Remote); ok {
		return runRemoteClient(ctx, r, rawDir, name, argv, onLine)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return res, fmt.Errorf("%s not found: install it with `make setup`: %w", argv[0], err)
	}
	h = host.Or(h)
	var stdout, stderr bytes.Buffer
	full := h.Wrap(argv)
	cmd := exec.Command(full[0], full[1:]...)
	lines := &lineWriter{fn: onLine}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, lines), &stderr
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(run))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Descendants that left the process group may hold the output pipes
	// open; Wait gives up on them after WaitDelay instead of hanging.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	started, err := deathsig.Run(ctx, cmd) // dies with nearnative, its group killed when ctx ends
	if !started {
		return res, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	res.Wall = time.Since(start)
	lines.flush()
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		res.ExitCode = ps.ExitCode()
	}
	res.Output = stdout.Bytes()
	raw := fmt.Sprintf("# %s\n# client: %s\n# exit %d, wall %v, cpu %v\n%s", strings.Join(full, " "), h.Describe(), res.ExitCode, res.Wall.Round(time.Millisecond), res.CPU.Round(time.Millisecond), stdout.String())
	if stderr.Len() > 0 {
		raw += "# stderr:\n" + stderr.String()
	}
	res.RawPath, res.RawNote = SaveRaw(rawDir, name, []byte(raw))
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil {
		return res, fmt.Errorf("%s failed: %w%s", argv[0], err, SeeRaw(res.RawPath))
	}
	return res, nil
}

// lineWriter calls fn with each complete line written to it.
type lineWriter struct {
	fn      func(string)
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if w.fn == nil {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.fn(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
}

// flush hands over a last line that ended without a newline.
func (w *lineWriter) flush() {
	if w.fn != nil && len(w.partial) > 0 {
		w.fn(string(w.partial))
		w.partial = nil
	}
}

// StartServer starts spec on the trial's platform and records its command
// and placement in res. Defer the returned stop with the Run's named error:
// a server that cannot be stopped and removed spoils the trial, so stop
// joins that failure into *err.
func StartServer(ctx context.Context, t Trial, spec platform.Spec, res *Result) (platform.Server, func(err *error), error) {
	srv, err := t.Platform.Start(ctx, t.Name, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the %s server: %w", spec.Name, err)
	}
	res.Commands = append(res.Commands, "server: "+strings.Join(srv.Command(), " "))
	res.Where = append(res.Where, srv.Describe())
	stop := func(err *error) {
		if serr := srv.Stop(context.WithoutCancel(ctx)); serr != nil {
			*err = errors.Join(*err, fmt.Errorf("stopping the %s server: %w", spec.Name, serr))
		}
	}
	return srv, stop, nil
}

// runRemoteClient runs a load generator on the first driver host of r
// through its agent: an external tool's output (redis-benchmark's
// percentiles) cannot be merged exactly across hosts, so it runs on one;
// nearnative's own driver spreads over all of them (package driver). A
// dropped connection fails the run with the host's name.
func runRemoteClient(ctx context.Context, r host.Remote, rawDir, name string, argv []string, onLine func(string)) (ClientRun, error) {
	res := ClientRun{Argv: argv}
	d := r.Drivers()[0]
	job, err := d.RunJob(ctx, argv, nil)
	if err != nil {
		return res, err
	}
	res.Wall, res.CPU, res.ExitCode, res.Output = job.Wall, job.CPU, job.ExitCode, job.Stdout
	if onLine != nil {
		for _, l := range strings.Split(strings.TrimRight(string(job.Stdout), "\n"), "\n") {
			onLine(l)
		}
	}
	raw := fmt.Sprintf("# %s\n# client: %s\n# exit %d, wall %v, cpu %v\n%s", strings.Join(argv, " "), r.Describe(), res.ExitCode, res.Wall.Round(time.Millisecond), res.CPU.Round(time.Millisecond), job.Stdout)
	if len(job.Stderr) > 0 {
		raw += "# stderr:\n" + string(job.Stderr)
	}
	res.RawPath, res.RawNote = SaveRaw(rawDir, name, []byte(raw))
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if job.ExitCode != 0 {
		return res, fmt.Errorf("%s on driver host %s failed: exit status %d%s", argv[0], d.Name(), job.ExitCode, SeeRaw(res.RawPath))
	}
	return res, nil
}
