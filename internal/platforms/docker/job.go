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
	if err := p.putVolumes(ctx, spec.Volumes); err != nil {
		return res, err
	}
	cfg, hc := p.containerConfig(trial, spec, pl, res.Command, p.opt.CPUSet)
	name := ContainerName(p.env.Run, trial, spec.Name)
	cli := p.eng.cli
	created, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return res, fmt.Errorf("%s: creating container %s from %s: %w", p.name, name, p.env.Image, err)
	}
	s := &server{eng: p.eng, id: created.ID, name: name, argv: res.Command, logPath: LogPath(p.env.LogDir, trial, spec.Name)}
	defer func() {
		if serr := s.Stop(context.WithoutCancel(ctx)); serr != nil {
			err = errors.Join(err, fmt.Errorf("removing job container %s: %w", name, serr))
		}
	}()
	if p.eng.flavor.MapOwner != nil {
		// A user namespace's root must own the volumes to write them.
		if err := p.ownVolumes(ctx, spec.Volumes, owner{}); err != nil {
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
	if res.ExitCode, err = p.runJob(ctx, s, spec.Name); err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	if res.Stdout, res.Stderr, err = p.jobOutput(ctx, s, spec.Name); err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%s: job %s exited with code %d", p.name, spec.Name, res.ExitCode)
	}
	return res, nil
}

// runJob starts a job's container and waits for it to exit.
func (p *dockerPlatform) runJob(ctx context.Context, s *server, job string) (exitCode int, err error) {
	cli := p.eng.cli
	waitC, errC := cli.ContainerWait(ctx, s.id, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, s.id, container.StartOptions{}); err != nil {
		return 0, fmt.Errorf("%s: starting job container %s: %w", p.name, s.name, err)
	}
	select {
	case w := <-waitC:
		if w.Error != nil {
			return int(w.StatusCode), fmt.Errorf("%s: job %s: %s", p.name, job, w.Error.Message)
		}
		return int(w.StatusCode), nil
	case err := <-errC:
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("%s: waiting for job %s: %w", p.name, job, err)
	}
}

// jobOutput reads a finished job's stdout and stderr.
func (p *dockerPlatform) jobOutput(ctx context.Context, s *server, job string) (stdout, stderr []byte, err error) {
	logs, err := p.eng.cli.ContainerLogs(ctx, s.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading the output of job %s: %w", p.name, job, err)
	}
	defer logs.Close()
	var o, e bytes.Buffer
	if _, err := stdcopy.StdCopy(&o, &e, logs); err != nil {
		return nil, nil, fmt.Errorf("%s: reading the output of job %s: %w", p.name, job, err)
	}
	return o.Bytes(), e.Bytes(), nil
}
