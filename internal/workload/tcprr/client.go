package tcprr

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/workload"
)

// runClient runs a load generator on the host as workload.RunClient does (in
// its own process group with the run ID in its environment, killed with its
// group when ctx ends, stdout and stderr saved to rawDir/name, a non-zero
// exit an error pointing to them) and also hands each line of its stdout to
// onLine as it is printed. sockperf idles about two seconds before its timed
// run; the caller reads its CPU counters at the lines that bound that run
// rather than around the whole process.
func runClient(ctx context.Context, run runid.ID, rawDir, name string, argv []string, onLine func(string)) (workload.ClientRun, error) {
	res := workload.ClientRun{Argv: argv, RawPath: filepath.Join(rawDir, name)}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return res, fmt.Errorf("%s not found: install it with `make setup`: %w", argv[0], err)
	}
	if err := os.MkdirAll(rawDir, 0o755); err != nil {
		return res, fmt.Errorf("creating raw output dir: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return res, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(run))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	stop := context.AfterFunc(ctx, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		stdout.Write(sc.Bytes())
		stdout.WriteByte('\n')
		onLine(sc.Text())
	}
	scanErr := sc.Err()
	if scanErr != nil {
		// A line too long to scan: stop the client, which would otherwise
		// block on a full pipe while Wait waits for it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	err = cmd.Wait()
	stop()
	res.Wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		res.ExitCode = ps.ExitCode()
	}
	res.Output = stdout.Bytes()
	raw := fmt.Sprintf("# %s\n# exit %d, wall %v, cpu %v\n%s", strings.Join(argv, " "), res.ExitCode, res.Wall.Round(time.Millisecond), res.CPU.Round(time.Millisecond), stdout.String())
	if stderr.Len() > 0 {
		raw += "# stderr:\n" + stderr.String()
	}
	if werr := os.WriteFile(res.RawPath, []byte(raw), 0o644); werr != nil {
		return res, fmt.Errorf("saving %s output: %w", argv[0], werr)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if scanErr != nil {
		return res, fmt.Errorf("reading %s output: %w: see %s", argv[0], scanErr, res.RawPath)
	}
	if err != nil {
		return res, fmt.Errorf("%s failed (%v): see %s", argv[0], err, res.RawPath)
	}
	return res, nil
}
