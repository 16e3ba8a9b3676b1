package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
)

// DockerEngine returns the run's Docker engine, which holds the workload
// image.
type DockerEngine func(ctx context.Context) (*docker.Daemon, error)

// Platform runs servers in Podman containers, rootful or rootless. Its
// service starts when the platform is first checked or used; the workload
// image is copied into Podman's storage before the first server starts.
type Platform struct {
	kind   string // platform.Podman or platform.PodmanRootless
	name   string
	env    platform.Env
	opt    platform.Options
	docker DockerEngine

	mu     sync.Mutex
	svc    *Service
	inner  platform.Platform // the Docker platform over the service
	closed bool
}

// New returns the Podman platform of kind (platform.Podman or
// platform.PodmanRootless) named name, running env.Image (copied from the
// Docker engine dockerEng returns) with the options opt.
func New(kind, name string, env platform.Env, opt platform.Options, dockerEng DockerEngine) (*Platform, error) {
	if kind != platform.Podman && kind != platform.PodmanRootless {
		return nil, fmt.Errorf("podman platform %q: unknown kind %q (want %s or %s)", name, kind, platform.Podman, platform.PodmanRootless)
	}
	if name == "" {
		name = kind
	}
	if env.Image == "" {
		return nil, fmt.Errorf("podman platform %s: no workload image", name)
	}
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("podman platform %s: %w", name, err)
	}
	if opt.Pin != "" {
		return nil, fmt.Errorf("podman platform %s: option pin is for native and Docker platforms (topologies)", name)
	}
	return &Platform{kind: kind, name: name, env: env, opt: opt, docker: dockerEng}, nil
}

// Name implements platform.Platform.
func (p *Platform) Name() string { return p.name }

func (p *Platform) rootless() bool { return p.kind == platform.PodmanRootless }

// Network says how the service's containers are networked and their ports
// published, as the service reports it; "" before Check or a server
// started the service.
func (p *Platform) Network() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.svc == nil {
		return ""
	}
	f := p.svc.flavor()
	if p.rootless() {
		return f.NetworkMode + " network, ports published by " + f.PublishVia
	}
	backend := p.svc.backend
	if backend == "" {
		backend = "Podman's"
	}
	return backend + " bridge, ports published by " + f.PublishVia
}

// Check implements platform.Checker: Podman is installed, its OCI runtime
// can start here, the rootless user is set up (for podman-rootless), the
// workload image is in Docker, and the service answers.
func (p *Platform) Check(ctx context.Context) error {
	if err := Prerequisites(p.rootless()); err != nil {
		return err // the caller names the platform
	}
	eng, err := p.docker(ctx)
	if err != nil {
		return err
	}
	if err := eng.CheckImage(ctx, p.name, p.env.Image); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.service(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Podman is installed and set up, yet its service does not come
		// up here: the platform cannot run, and says why.
		return platform.Unavailablef("%s: %w", p.name, err)
	}
	return nil
}

// Prerequisites says whether this machine has what Podman needs, rootful
// or rootless, before a service starts: nil, or an error matching
// platform.ErrUnavailable that names the fix.
func Prerequisites(rootless bool) error {
	if _, err := exec.LookPath("podman"); err != nil {
		return platform.Unavailablef("podman is not installed: apt-get install podman (make setup does)")
	}
	if err := docker.CrunCgroupLayout(); err != nil {
		return fmt.Errorf("Podman runs its containers with crun: %w", err)
	}
	if !rootless {
		return nil
	}
	if _, _, _, err := rootlessUser(); err != nil {
		return err
	}
	for _, tool := range []string{"newuidmap", "newgidmap", "slirp4netns"} {
		if _, err := exec.LookPath(tool); err != nil {
			pkg := map[string]string{"newuidmap": "uidmap", "newgidmap": "uidmap", "slirp4netns": "slirp4netns"}[tool]
			return platform.Unavailablef("rootless Podman needs %s: apt-get install %s (make setup does)", tool, pkg)
		}
	}
	if fi, err := os.Stat("/dev/net/tun"); err != nil || fi.Mode().Perm()&0o006 != 0o006 {
		return platform.Unavailablef("rootless Podman's slirp4netns opens /dev/net/tun, which the rootless user may not (%v): chmod 0666 /dev/net/tun, the mode udev gives it (make setup does)", tunMode(fi, err))
	}
	return nil
}

func tunMode(fi os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return "mode " + fi.Mode().Perm().String()
}

// service starts the run's Podman service on first use; p.mu is held.
func (p *Platform) service(ctx context.Context) (*Service, error) {
	if p.closed {
		return nil, fmt.Errorf("platform %s is closed", p.name)
	}
	if p.svc == nil {
		svc, err := StartService(ctx, p.env.Run, p.rootless())
		if err != nil {
			return nil, err
		}
		p.svc = svc
	}
	return p.svc, nil
}

// ready returns the Docker platform over the service once the workload
// image is in Podman's storage.
func (p *Platform) ready(ctx context.Context) (platform.Platform, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inner != nil {
		return p.inner, nil
	}
	svc, err := p.service(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	eng, err := p.docker(ctx)
	if err != nil {
		return nil, err
	}
	id, err := LoadImage(ctx, eng, svc.Engine(), p.env.Image, p.env.Log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	env := p.env
	env.Image = id
	// Published on the client link's host-side address, as docker-nat:
	// netavark's DNAT rootful, rootlessport rootless.
	inner, err := docker.New(platform.DockerNAT, p.name, env, svc.Engine(), p.opt)
	if err != nil {
		return nil, err
	}
	p.inner = inner
	return inner, nil
}

// Start implements platform.Platform.
func (p *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	inner, err := p.ready(ctx)
	if err != nil {
		return nil, err
	}
	return inner.Start(ctx, trial, spec)
}

// RunJob implements platform.JobRunner.
func (p *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (platform.JobResult, error) {
	inner, err := p.ready(ctx)
	if err != nil {
		return platform.JobResult{}, err
	}
	return inner.(platform.JobRunner).RunJob(ctx, trial, spec)
}

// Close implements platform.Closer: the run's containers go (found by its
// label), then the service.
func (p *Platform) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.svc == nil {
		return nil
	}
	var errs []error
	if c, ok := p.inner.(platform.Closer); ok {
		errs = append(errs, c.Close())
	}
	if _, err := p.svc.Engine().RemoveRun(context.Background(), p.env.Run); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.svc.Close())
	p.svc = nil
	return errors.Join(errs...)
}

// imageLabel marks the workload image (image.Build labels it so).
const imageLabel = "nearnative.image=workload"

// LoadImage makes sure Podman's storage (of the engine podman) holds the
// Docker image ref and returns its ID, which is the same in both engines
// (the ID of the image's configuration). The image is copied (docker save,
// Podman's compatible load) only when Podman lacks that ID; older workload
// images in Podman's storage are removed then.
func LoadImage(ctx context.Context, dockerEng, podman *docker.Daemon, ref string, log io.Writer) (string, error) {
	insp, err := dockerEng.API().ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspecting workload image %s: %w", ref, err)
	}
	id := insp.ID
	if _, err := podman.API().ImageInspect(ctx, id); err == nil {
		return id, nil
	}
	start := time.Now()
	if log != nil {
		fmt.Fprintf(log, "podman: copying workload image %s (%.19s) from Docker into Podman's storage (once per image)\n", ref, id)
	}
	out, err := dockerEng.SaveInto(ctx, podman, ref)
	if err != nil {
		return "", fmt.Errorf("copying the workload image from Docker into Podman: %w", err)
	}
	if _, err := podman.API().ImageInspect(ctx, id); err != nil {
		return "", fmt.Errorf("Podman loaded workload image %s but has no image %s: %w (it said: %s)", ref, id, err, strings.TrimSpace(out))
	}
	if log != nil {
		fmt.Fprintf(log, "podman: workload image copied in %v\n", time.Since(start).Round(time.Second))
	}
	removeStale(ctx, podman, id)
	return id, nil
}

// removeStale removes the workload images other than keep from Podman's
// storage (images still used by a container stay).
func removeStale(ctx context.Context, podman *docker.Daemon, keep string) {
	imgs, err := podman.API().ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", imageLabel))})
	if err != nil {
		return
	}
	for _, im := range imgs {
		if im.ID != keep {
			podman.API().ImageRemove(ctx, im.ID, image.RemoveOptions{})
		}
	}
}
