package remote

import (
	"context"
	"fmt"
	"strings"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// RunJob implements platform.JobRunner: the command runs through the agent
// of the host the job's name is placed on, in a private directory holding
// the spec's files (named as a server's, so that cleanup --hosts finds it),
// confined to the platform's cpuset and limits; cancelling ctx ends it.
func (pl *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	var res platform.JobResult
	if err := spec.Validate(); err != nil {
		return res, err
	}
	if spec.User != "" {
		return res, fmt.Errorf("job %s: jobs run as the invoking user; User is not supported", spec.Name)
	}
	p := on{pl, pl.place(spec.Name)}
	dir := "/tmp/" + runid.Prefix + string(p.env.Run) + "-" + trial + "-" + spec.Name + "-remote"
	defer p.removeDir(context.WithoutCancel(ctx), dir)
	l := platform.Listen{Host: "127.0.0.1", Ports: map[string]int{}, Dir: dir}
	res.Command = spec.Command(l)
	if len(res.Command) == 0 {
		return res, fmt.Errorf("job %s: empty command", spec.Name)
	}
	proc := vmagent.Proc{Name: trial + "-" + spec.Name, Argv: res.Command, Dir: dir, CPUSet: pl.opt.CPUSet,
		CPUs: pl.opt.CPUs, MemoryBytes: pl.opt.MemoryBytes(),
		Env: map[string]string{runid.EnvVar: string(p.env.Run)}}
	for k, v := range spec.Env {
		proc.Env[k] = v
	}
	for _, f := range spec.FilesFor(l) {
		proc.Files = append(proc.Files, vmagent.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	res.Where = "process on " + p.kind + " " + p.host.Name()
	r, err := p.host.Agent().Run(ctx, proc)
	if err != nil {
		return res, p.hostErr("running job "+spec.Name, err)
	}
	res.Stdout, res.Stderr, res.ExitCode, res.Wall = r.Stdout, r.Stderr, r.ExitCode, r.Wall
	switch {
	case r.Error != "":
		return res, p.hostErr("running job "+spec.Name, fmt.Errorf("%s", r.Error))
	case r.ExitCode != 0:
		return res, fmt.Errorf("job %s on host %s exited %d: %s", spec.Name, p.host.Name(), r.ExitCode, strings.TrimSpace(lastLine(r.Stderr)))
	}
	return res, nil
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
