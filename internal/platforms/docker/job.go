package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/nearnative/nearnative/internal/platform"
)

// RunJob implements platform.JobRunner: the command runs to completion in a
// container of the workload image with the platform's network mode, CPU set
// and limits; its stdout and stderr are collected and the container removed.
func (p *dockerPlatform) RunJob(ctx context.Context, trial string, spec platform.Spec) (res platform.JobResult, err error) {
	if err := spec.Validate(); err != nil {
		return res, err
	}
	spec.Ports = nil
	pl := plan{listen: platform.Listen{Host: "0.0.0.0", Ports: map[string]int{}, Dir: platform.ContainerDir}}
	if p.kind == platform.DockerHost {
		pl.listen.Host = "127.0.0.1"
	}
	res.Command = spec.Command(pl.listen)
	if len(res.Command) == 0 {
		return res, fmt.Errorf("%s: job %s: empty command", p.name, spec.Name)
	}
	if err := p.ensureNetwork(ctx); err != nil {
		return res, err
	}
	cfg, hc := p.containerConfig(trial, spec, pl, res.Command, p.opt.CPUSet)
	name := ContainerName(p.env.Run, trial, spec.Name)
	cli := p.eng.cli
	created, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return res, fmt.Errorf("%s: creating container %s from %s: %w", p.name, name, p.env.Image, err)
	}
	s := &server{eng: p.eng, id: created.ID, name: name, argv: res.Command, logPath: logPath(p.env.LogDir, trial, spec.Name)}
	defer func() {
		if serr := s.Stop(context.WithoutCancel(ctx)); serr != nil {
			err = errors.Join(err, fmt.Errorf("removing job container %s: %w", name, serr))
		}
	}()
	if p.eng.flavor.MapOwner != nil {
		// A user namespace's root must own the volumes to write them.
		if err := p.ownVolumes(spec.Volumes, owner{}); err != nil {
			return res, fmt.Errorf("%s: job %s: %w", p.name, spec.Name, err)
		}
	}
	if files := spec.FilesFor(pl.listen); len(files) > 0 {
		tarball, err := filesTar(files, owner{})
		if err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
		if err := cli.CopyToContainer(ctx, created.ID, "/", bytes.NewReader(tarball), container.CopyToContainerOptions{}); err != nil {
			return res, fmt.Errorf("%s: copying the files of job %s: %w", p.name, spec.Name, err)
		}
	}
	res.Where = fmt.Sprintf("container %.12s %s", created.ID, name)
	if o := p.opt.String(); o != "" {
		res.Where += " (" + o + ")"
	}
	start := time.Now()
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return res, fmt.Errorf("%s: starting job container %s: %w", p.name, name, err)
	}
	select {
	case w := <-waitC:
		res.ExitCode = int(w.StatusCode)
		if w.Error != nil {
			return res, fmt.Errorf("%s: job %s: %s", p.name, spec.Name, w.Error.Message)
		}
	case err := <-errC:
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%s: waiting for job %s: %w", p.name, spec.Name, err)
	}
	res.Wall = time.Since(start)
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return res, fmt.Errorf("%s: reading the output of job %s: %w", p.name, spec.Name, err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		return res, fmt.Errorf("%s: reading the output of job %s: %w", p.name, spec.Name, err)
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%s: job %s exited with code %d", p.name, spec.Name, res.ExitCode)
	}
	return res, nil
}
