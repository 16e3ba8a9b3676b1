package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// Kinds of the Docker-in-a-VM platforms.
const (
	// KindDockerNAT: container on the guest dockerd's default bridge, port
	// published on the guest's address (DNAT inside the guest).
	KindDockerNAT = platform.VMDocker
	// KindDockerHost: container on the guest's host network.
	KindDockerHost = platform.VMDockerHost
)

// DockerdTimeout bounds how long the guest's dockerd may take to answer.
var DockerdTimeout = 3 * time.Minute

// guestDocker runs docker commands in a guest through its agent.
type guestDocker struct {
	g       *guest
	dockerd int
}

// startDockerd starts the guest's Docker engine and waits until it answers.
func startDockerd(ctx context.Context, g *guest) (*guestDocker, error) {
	pid, err := g.agent.Start(ctx, vmagent.Proc{Name: "dockerd", Argv: []string{"dockerd", "--log-level", "warn"}, Dir: "/"})
	if err != nil {
		return nil, fmt.Errorf("starting dockerd in the guest: %w", err)
	}
	d := &guestDocker{g: g, dockerd: pid}
	deadline := time.Now().Add(DockerdTimeout)
	for {
		r, err := d.docker(ctx, "version", "--format", "{{.Server.Version}}")
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the guest's dockerd did not answer within %v: %w (%s)", DockerdTimeout, err, strings.TrimSpace(string(r.Stderr)))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// docker runs the guest's docker CLI and fails on a non-zero exit.
func (d *guestDocker) docker(ctx context.Context, args ...string) (vmagent.JobResult, error) {
	r, err := d.g.agent.Run(ctx, vmagent.Proc{Argv: append([]string{"docker"}, args...), Dir: "/"})
	if err != nil {
		return r, err
	}
	if r.ExitCode != 0 || r.Error != "" {
		return r, fmt.Errorf("docker %s in the guest exited %d: %s%s", strings.Join(args, " "), r.ExitCode, strings.TrimSpace(string(r.Stderr)), r.Error)
	}
	return r, nil
}

// stop stops dockerd and keeps its log beside the guest's console log.
func (d *guestDocker) stop(ctx context.Context) error {
	out, err := d.g.agent.Stop(ctx, d.dockerd, 30*time.Second)
	if len(out) > 0 {
		os.WriteFile(strings.TrimSuffix(d.g.cfg.Console, "-console.log")+"-dockerd.log", out, 0o644)
	}
	return err
}

// seedDockerDisk boots a guest on disk itself, loads the saved workload
// image into its dockerd and powers it off. The guest boots on this
// machine, also when the disk is for a sut host's guests.
func (p *Platform) seedDockerDisk(ctx context.Context, disk string) error {
	accel := p.probe.Accel
	if p.on != nil {
		// Guests of a sut host boot a disk seeded here: the seeding guest
		// runs on this machine, with this machine's acceleration (checkOn
		// probed it; Probe answers once per process).
		r, err := Probe(ctx)
		if err != nil {
			return err
		}
		accel = r.Accel
	}
	p.next++
	g, err := bootGuest(ctx, guestConfig{
		Run: p.env.Run, Name: "vm-docker-seed", Accel: accel, VCPUs: p.vcpus, MemMiB: p.memMiB,
		Kernel: p.kernel.Image, Initrd: p.initrd, Disk: disk, Direct: true, Bridge: p.br, Index: p.next,
		Console: filepath.Join(p.env.LogDir, "vm-docker-seed-console.log"),
	})
	if err != nil {
		return err
	}
	defer g.shutdown(context.WithoutCancel(ctx))
	d, err := startDockerd(ctx, g)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := d.docker(ctx, "load", "-q", "-i", seedTar); err != nil {
		return err
	}
	p.env.Logf("vm-docker: image loaded in the guest in %v", time.Since(start).Round(time.Second))
	if r, err := g.agent.Run(ctx, vmagent.Proc{Argv: []string{"rm", "-rf", filepath.Dir(seedTar)}, Dir: "/"}); err != nil || r.ExitCode != 0 {
		return fmt.Errorf("removing the seed tar: %v %s", err, r.Stderr)
	}
	if err := d.stop(ctx); err != nil {
		return err
	}
	return g.shutdown(ctx)
}

// dockerRunArgs builds `docker run` arguments for spec in the guest.
func (p *Platform) dockerRunArgs(cname string, spec platform.Spec, l platform.Listen, hostDir, publishOn string) []string {
	args := []string{"--name", cname, "-v", hostDir + ":" + platform.ContainerDir, "-w", platform.ContainerDir}
	if p.kind == KindDockerHost {
		args = append(args, "--network", "host")
	} else {
		for _, port := range l.Ports {
			ps := strconv.Itoa(port)
			args = append(args, "-p", publishOn+":"+ps+":"+ps)
		}
	}
	for k, v := range spec.Env {
		args = append(args, "-e", k+"="+v)
	}
	if spec.User != "" {
		args = append(args, "--user", spec.User)
	}
	return append(append(args, p.env.Image), spec.Command(l)...)
}

// startDocker starts spec in a container in a fresh guest.
func (p *Platform) startDocker(ctx context.Context, trial string, spec platform.Spec, ports map[string]int) (platform.Server, error) {
	g, err := p.boot(ctx, trial+"-"+spec.Name, portList(ports))
	if err != nil {
		return nil, err
	}
	s := &dockerServer{p: p, g: g, name: trial + "-" + spec.Name, cname: "nn-" + spec.Name, ports: ports}
	if err := s.start(ctx, spec); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return p.onHost(s), nil
}

type dockerServer struct {
	p     *Platform
	g     *guest
	d     *guestDocker
	name  string
	cname string
	ports map[string]int
	argv  []string
	pid   int
	once  sync.Once
	err   error
}

func (s *dockerServer) start(ctx context.Context, spec platform.Spec) error {
	var err error
	if s.d, err = startDockerd(ctx, s.g); err != nil {
		return err
	}
	hostDir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: "0.0.0.0", Ports: s.ports, Dir: platform.ContainerDir, From: s.p.from(s.g)}
	if s.p.kind == KindDockerHost {
		l.Host = s.g.ip
	}
	// Write the files into the guest directory the container mounts.
	if r, err := s.g.agent.Run(ctx, vmagent.Proc{Argv: []string{"true"}, Dir: hostDir, Files: agentFiles(spec.FilesFor(l))}); err != nil || r.ExitCode != 0 {
		return fmt.Errorf("writing the files of %s in the guest: %v %s", spec.Name, err, r.Stderr)
	}
	s.argv = spec.Command(l)
	args := append([]string{"run", "-d"}, s.p.dockerRunArgs(s.cname, spec, l, hostDir, s.g.ip)...)
	if _, err := s.d.docker(ctx, args...); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	r, err := s.d.docker(ctx, "inspect", "-f", "{{.State.Running}} {{.State.Pid}}", s.cname)
	if err != nil {
		return err
	}
	f := strings.Fields(string(r.Stdout))
	if len(f) != 2 || f[0] != "true" {
		logs, _ := s.d.docker(ctx, "logs", "--tail", "10", s.cname)
		return fmt.Errorf("container %s in the guest exited at once: %s%s", s.cname, logs.Stdout, logs.Stderr)
	}
	s.pid, _ = strconv.Atoi(f[1])
	return nil
}

func (s *dockerServer) Addr(port string) string {
	p, ok := s.ports[port]
	if !ok {
		panic(fmt.Sprintf("vm-docker: port %q not declared", port))
	}
	return net.JoinHostPort(s.g.reach, strconv.Itoa(p))
}

func (s *dockerServer) Command() []string { return s.argv }

func (s *dockerServer) Describe() string {
	how := "port published on the guest's address (DNAT in the guest)"
	if s.p.kind == KindDockerHost {
		how = "on the guest's host network"
	}
	return fmt.Sprintf("container %s (pid %d) in the Docker engine of a %s, %s", s.cname, s.pid, s.p.where(s.g), how)
}

func (s *dockerServer) Stop(ctx context.Context) error {
	// Teardown must work after Ctrl-C cancelled the run's context.
	ctx = context.WithoutCancel(ctx)
	s.once.Do(func() {
		var errs []error
		if s.d != nil {
			sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			if r, err := s.d.docker(sctx, "logs", s.cname); err == nil {
				os.WriteFile(filepath.Join(s.p.env.LogDir, s.name+".log"), append(r.Stdout, r.Stderr...), 0o644)
			}
			if _, err := s.d.docker(sctx, "rm", "-f", s.cname); err != nil && s.pid > 0 {
				errs = append(errs, err)
			}
			s.d.stop(sctx)
			cancel()
		}
		if err := s.g.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// runDockerJob runs spec to completion in a container in a fresh guest.
func (p *Platform) runDockerJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	var res platform.JobResult
	g, err := p.boot(ctx, trial+"-"+spec.Name, nil)
	if err != nil {
		return res, err
	}
	defer g.shutdown(context.WithoutCancel(ctx))
	d, err := startDockerd(ctx, g)
	if err != nil {
		return res, err
	}
	defer d.stop(context.WithoutCancel(ctx))
	hostDir := platform.ContainerDir + "/" + spec.Name
	l := platform.Listen{Host: "0.0.0.0", Ports: map[string]int{}, Dir: platform.ContainerDir}
	if r, err := g.agent.Run(ctx, vmagent.Proc{Argv: []string{"true"}, Dir: hostDir, Files: agentFiles(spec.FilesFor(l))}); err != nil || r.ExitCode != 0 {
		return res, fmt.Errorf("writing the files of %s in the guest: %v %s", spec.Name, err, r.Stderr)
	}
	res.Command = spec.Command(l)
	res.Where = "container in the Docker engine of a " + p.where(g)
	args := append([]string{"docker", "run", "--rm"}, p.dockerRunArgs("nn-"+spec.Name, spec, l, hostDir, g.ip)...)
	r, err := g.agent.Run(ctx, vmagent.Proc{Argv: args, Dir: "/"})
	if err != nil {
		return res, fmt.Errorf("job %s in the guest: %w", spec.Name, err)
	}
	res.Stdout, res.Stderr, res.ExitCode, res.Wall = r.Stdout, r.Stderr, r.ExitCode, r.Wall
	if r.Error != "" {
		return res, fmt.Errorf("job %s: %s", spec.Name, r.Error)
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("job %s exited with code %d", spec.Name, res.ExitCode)
	}
	return res, nil
}
