package benchbin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

// Job is one run of a program inside a platform (a platform.JobRunner).
type Job struct {
	// Result is what the platform reported.
	Result platform.JobResult
	// Output is the program's parsed stdout.
	Output Output
	// RawPath is where the command, stdout and stderr were saved.
	RawPath string
}

// Commands returns the job's command line for workload.Result.Commands.
func (j Job) Commands() []string {
	if len(j.Result.Command) == 0 {
		return nil
	}
	return []string{"job: " + strings.Join(j.Result.Command, " ")}
}

// RunJob runs p with args as a one-shot job on plat (which must be a
// platform.JobRunner), saves the command, stdout and stderr to
// rawDir/<trial>-<p.Name>.txt and checks that the platform ran this
// nearnative's build of p. A failed job's error quotes the program's last
// line of stderr and points to the raw file.
func RunJob(ctx context.Context, plat platform.Platform, trial, rawDir string, p Program, args []string) (Job, error) {
	var j Job
	jr, ok := plat.(platform.JobRunner)
	if !ok {
		return j, fmt.Errorf("platform %s cannot run a job inside itself, which %s needs", plat.Name(), p.Name)
	}
	spec := platform.Spec{
		Name:    strings.TrimPrefix(p.Name, "nn-"),
		Command: func(platform.Listen) []string { return append([]string{p.Path()}, args...) },
	}
	res, jerr := jr.RunJob(ctx, trial, spec)
	j.Result = res
	if ctx.Err() != nil {
		return j, ctx.Err()
	}
	raw, err := saveRaw(rawDir, trial+"-"+p.Name+".txt", res)
	if err != nil {
		return j, err
	}
	j.RawPath = raw
	j.Output = Parse(res.Stdout)
	if jerr != nil {
		msg := lastLine(res.Stderr)
		if msg == "" {
			msg = lastLine(res.Stdout)
		}
		if msg != "" {
			msg = ": " + msg
		}
		if len(res.Stdout) == 0 && len(res.Stderr) == 0 && res.ExitCode == 0 {
			// the program never ran (not found, platform failure)
			return j, fmt.Errorf("%s on %s: %w (is it in the image? run `nearnative image build`): see %s", p.Name, plat.Name(), jerr, raw)
		}
		return j, fmt.Errorf("%s on %s: %w%s: see %s", p.Name, plat.Name(), jerr, msg, raw)
	}
	if err := p.CheckBuild(j.Output, plat.Name()); err != nil {
		return j, fmt.Errorf("%w: see %s", err, raw)
	}
	return j, nil
}

// saveRaw writes the job's command, exit, stdout and stderr to dir/name.
func saveRaw(dir, name string, res platform.JobResult) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating raw output dir: %w", err)
	}
	p := filepath.Join(dir, name)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# job: %s\n# where: %s\n# exit %d, wall %v\n", strings.Join(res.Command, " "), res.Where, res.ExitCode, res.Wall.Round(time.Millisecond))
	fmt.Fprintf(&b, "# ---- stdout ----\n%s", res.Stdout)
	if len(res.Stderr) > 0 {
		fmt.Fprintf(&b, "# ---- stderr ----\n%s", res.Stderr)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("saving %s: %w", name, err)
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
