package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/podman"
	"github.com/nearnative/nearnative/internal/ready"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// EngineSource gives a Docker platform on a sut host the engine it drives
// there, holding the workload image, and the image's reference in it:
// Engines (the host's dockerd) or PodmanServices (a Podman service started
// there for the run).
type EngineSource interface {
	Engine(ctx context.Context, h DockerHost, image string) (*docker.Daemon, string, error)
}

// Engine implements EngineSource: the host's dockerd, given image.
func (e *Engines) Engine(ctx context.Context, h DockerHost, image string) (*docker.Daemon, string, error) {
	eng, err := e.For(ctx, h, image)
	return eng, image, err
}

// PodmanServices are the run's rootful Podman services on the sut hosts,
// one per host, started on first use by the host's agent (`podman system
// service` on a socket in a temp dir of the run there, reached through the
// host's SSH connection as dockerd's is) and driven with the Docker SDK,
// as Podman here is (package podman); the workload image is copied from
// this machine's Docker engine into Podman's storage there.
//
// The service and what it forks carry the run's label in their
// environment and its containers the run's label, so `cleanup --hosts`
// finds them after a crash; the agent stops the service when the run's
// SSH connection goes.
type PodmanServices struct {
	Run runid.ID
	// Local is this machine's Docker engine, which holds the image.
	Local func(ctx context.Context) (*docker.Daemon, error)
	// Log gets a line when an image is copied (nil: none).
	Log io.Writer

	mu     sync.Mutex
	byHost map[string]*podmanService
}

type podmanService struct {
	h     DockerHost
	dir   string
	pid   int
	eng   *docker.Daemon
	image string // the workload image's ID in Podman's storage
}

// serviceTimeout bounds how long a host's service takes to answer.
const serviceTimeout = 30 * time.Second

// Engine implements EngineSource: the host's Podman service, started (and
// given the image) on first use.
func (s *PodmanServices) Engine(ctx context.Context, h DockerHost, image string) (*docker.Daemon, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if svc := s.byHost[h.Name()]; svc != nil {
		return svc.eng, svc.image, nil
	}
	svc, err := s.start(ctx, h)
	if err != nil {
		return nil, "", err
	}
	if s.byHost == nil {
		s.byHost = map[string]*podmanService{}
	}
	s.byHost[h.Name()] = svc
	local, err := s.Local(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("the image for Podman on host %s comes from this machine's Docker engine: %w", h.Name(), err)
	}
	if svc.image, err = podman.LoadImage(ctx, local, svc.eng, image, s.Log); err != nil {
		return nil, "", fmt.Errorf("host %s: %w", h.Name(), err)
	}
	return svc.eng, svc.image, nil
}

// hostOutput runs argv on h through its agent, labelled with the run.
func (s *PodmanServices) hostOutput(ctx context.Context, h DockerHost, argv ...string) ([]byte, error) {
	out, err := h.Agent().Output(ctx, vmagent.Proc{Name: "podman", Argv: argv, Dir: "/", Env: s.env()})
	if err != nil {
		return out, fmt.Errorf("sut host %s: %w", h.Name(), err)
	}
	return out, nil
}

// env is the service's environment: the run's label (cleanup's process
// sweeper finds the service and everything it forks by it: conmon,
// netavark) and root's HOME.
func (s *PodmanServices) env() map[string]string {
	return map[string]string{runid.EnvVar: string(s.Run), "HOME": "/root",
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// start checks what Podman needs on h, starts its service there and
// connects to it; s.mu is held.
func (s *PodmanServices) start(ctx context.Context, h DockerHost) (_ *podmanService, err error) {
	if _, err := s.hostOutput(ctx, h, "sh", "-c", "command -v podman"); err != nil {
		return nil, platform.Unavailablef("podman is not installed on sut host %s: apt-get install podman there (make setup does)", h.Name())
	}
	if err := docker.CrunCgroupLayoutVia(ctx, func(ctx context.Context, argv ...string) ([]byte, error) {
		return s.hostOutput(ctx, h, argv...)
	}); err != nil {
		return nil, fmt.Errorf("sut host %s: Podman runs its containers with crun: %w", h.Name(), err)
	}
	// A fresh 0700 directory (mktemp), named as a local run's temp dir.
	out, err := s.hostOutput(ctx, h, "mktemp", "-d", "/tmp/"+runid.Prefix+string(s.Run)+"-podman-XXXXXX")
	if err != nil {
		return nil, fmt.Errorf("the Podman service's directory: %w", err)
	}
	svc := &podmanService{h: h, dir: strings.TrimSpace(string(out))}
	defer func() {
		if err != nil {
			err = errors.Join(err, svc.close(context.WithoutCancel(ctx), s.Run))
		}
	}()
	sock := svc.dir + "/podman.sock"
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	svc.pid, err = h.Agent().Start(sctx, vmagent.Proc{Name: "podman-service", Argv: []string{"podman", "system", "service", "--time=0", "unix://" + sock}, Dir: svc.dir, Env: s.env()})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("sut host %s: starting podman system service: %w", h.Name(), err)
	}
	dial := func(ctx context.Context) (net.Conn, error) { return h.DialUnix(ctx, sock) }
	err = platform.WaitReady(ctx, serviceTimeout, 50*time.Millisecond, func(ctx context.Context) error {
		if st, err := h.Agent().Status(ctx, svc.pid); err == nil && !st.Running {
			return ready.Final(fmt.Errorf("the service exited (%s): %s", st.Exit, strings.TrimSpace(st.Tail)))
		}
		c, err := dial(ctx)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("sut host %s: podman system service did not answer on %s: %w", h.Name(), sock, err)
	}
	name := "Podman"
	if v, err := s.hostOutput(ctx, h, "podman", "version", "--format", "{{.Client.Version}}"); err == nil {
		name += " " + strings.TrimSpace(string(v))
	}
	backend, _ := s.hostOutput(ctx, h, "podman", "--url", "unix://"+sock, "info", "--format", "{{.Host.NetworkBackend}}")
	svc.eng, err = docker.ConnectViaFlavor(ctx, h.Name(), sock, dial, podman.RootfulFlavor(name, strings.TrimSpace(string(backend))))
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// close removes the run's containers from the service's engine, stops the
// service and removes its directory.
func (svc *podmanService) close(ctx context.Context, run runid.ID) error {
	var errs []error
	if svc.eng != nil {
		if _, err := svc.eng.RemoveRun(ctx, run); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, svc.eng.Close())
	}
	if svc.pid > 0 {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := svc.h.Agent().Stop(sctx, svc.pid, 10*time.Second)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("sut host %s: stopping the Podman service: %w", svc.h.Name(), err))
		}
	}
	if svc.dir != "" {
		if _, err := svc.h.Agent().Output(ctx, vmagent.Proc{Name: "rm", Argv: []string{"rm", "-rf", svc.dir}, Dir: "/"}); err != nil {
			errs = append(errs, fmt.Errorf("sut host %s: removing %s: %w", svc.h.Name(), svc.dir, err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every host's service, its containers removed first.
func (s *PodmanServices) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, svc := range s.byHost {
		errs = append(errs, svc.close(ctx, s.Run))
	}
	s.byHost = nil
	return errors.Join(errs...)
}

// NewPodman returns rootful Podman named name on the sut hosts: each
// server in a container of the Podman service of the host its role is
// placed on, its port published on the host's address (netavark's DNAT
// there), as docker-nat's is by dockerd. The platform closes services.
func NewPodman(name string, place func(role string) DockerHost, suts []DockerHost, env platform.Env, opt platform.Options, services *PodmanServices, clientFor func(h DockerHost) host.Host) (*Docker, error) {
	d, err := NewDocker(platform.DockerNAT, name, place, suts, env, opt, nil, clientFor)
	if err != nil {
		return nil, err
	}
	d.source, d.own = services, services
	return d, nil
}
