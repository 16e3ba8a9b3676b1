// Package docker runs servers in Docker containers with one of five network
// paths (published port via the client host's link and iptables DNAT,
// published port via 127.0.0.1 and the userland proxy, the container's bridge
// address, the host network, and a user-defined bridge network of the run's
// own for the icc study's docker-network), under runc or another OCI runtime registered
// with dockerd (gVisor's runsc, crun: the docker-runsc-* and docker-crun-*
// platforms), and cleans up every container and network a run created, found
// by its nearnative.run label. A Flavor drives an engine that speaks Docker's
// API but is not dockerd (Podman's service, package platforms/podman) with the
// same code.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Labels nearnative puts on containers besides runid.Label and runid.LabelRole.
const (
	// LabelTrial names the trial a container belongs to.
	LabelTrial = "nearnative.trial"
	// LabelPlatform names the study platform (e.g. "docker-nat-pinned").
	LabelPlatform = "nearnative.platform"
)

// pingTimeout bounds how long Connect waits for the daemon to answer.
const pingTimeout = 5 * time.Second

// teardownTimeout bounds cleanup that runs detached from the caller's context.
const teardownTimeout = 30 * time.Second

// Daemon is a connection to the Docker daemon shared by all Docker platforms
// of a run. The caller that made it closes it.
type Daemon struct {
	cli    *client.Client
	flavor Flavor
	// remote names the host of an engine on another machine (ConnectVia).
	remote string
}

// DaemonError says the Docker daemon did not answer. It matches
// platform.ErrUnavailable with errors.Is, and its text is one line that says how
// to start the daemon.
type DaemonError struct {
	Host  string // daemon address, e.g. unix:///var/run/docker.sock
	Cause error
}

func (e *DaemonError) Error() string {
	return fmt.Sprintf("cannot reach the Docker daemon (%s): %s: start it with `make setup` or `dockerd &`",
		e.Host, oneLine(e.Cause.Error()))
}

// Unwrap returns the cause and platform.ErrUnavailable.
func (e *DaemonError) Unwrap() []error { return []error{e.Cause, platform.ErrUnavailable} }

// Connect connects to the daemon named by the environment (DOCKER_HOST, else
// the default socket), negotiates the API version and pings it.
func Connect(ctx context.Context) (*Daemon, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("configuring the Docker client: %w", err)
	}
	e := &Daemon{cli: cli}
	if err := e.ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return e, nil
}

// ConnectFlavor connects to an engine that speaks Docker's API at host (a
// unix:// address) but is not dockerd, described by f: Podman's service
// (package platforms/podman).
func ConnectFlavor(ctx context.Context, host string, f Flavor) (*Daemon, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("configuring the client of %s: %w", f.Name, err)
	}
	e := &Daemon{cli: cli, flavor: f}
	if err := e.ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return e, nil
}

// ping checks that the daemon answers and negotiates the API version.
func (e *Daemon) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	p, err := e.cli.Ping(pctx)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pinging the Docker daemon: %w", ctx.Err())
		}
		if e.remote != "" && e.flavor.Name != "" {
			return platform.Unavailablef("%s (%s, through the SSH connection of host %s) does not answer: %s", e.flavor.Name, e.cli.DaemonHost(), e.remote, oneLine(err.Error()))
		}
		if e.remote != "" {
			return platform.Unavailablef("the Docker engine of host %s (%s, through its SSH connection) does not answer: %s: start dockerd there, or name its socket with docker_socket: in the hosts file", e.remote, e.cli.DaemonHost(), oneLine(err.Error()))
		}
		if e.flavor.Name != "" {
			return platform.Unavailablef("%s at %s does not answer: %v", e.flavor.Name, e.cli.DaemonHost(), dialCause(e.cli.DaemonHost(), err))
		}
		return &DaemonError{Host: e.cli.DaemonHost(), Cause: dialCause(e.cli.DaemonHost(), err)}
	}
	e.cli.NegotiateAPIVersionPing(p)
	return nil
}

// dialCause returns the most specific reason the daemon at host is
// unreachable. The SDK replaces socket errors by a generic "Cannot connect"
// text, so for a unix socket it dials once itself to learn the real cause
// ("connect: no such file or directory", "connection refused").
func dialCause(host string, pingErr error) error {
	if path, ok := strings.CutPrefix(host, "unix://"); ok {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	return pingErr
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// API returns the underlying client for operations this package does not wrap.
func (e *Daemon) API() client.APIClient { return e.cli }

// Host is the daemon address the engine talks to.
func (e *Daemon) Host() string {
	if e.remote != "" {
		return e.cli.DaemonHost() + " on host " + e.remote
	}
	return e.cli.DaemonHost()
}

// Close releases the client's connections.
func (e *Daemon) Close() error {
	if e == nil || e.cli == nil {
		return nil
	}
	if err := e.cli.Close(); err != nil {
		return fmt.Errorf("closing the Docker client: %w", err)
	}
	return nil
}

// Ping checks that the daemon still answers.
func (e *Daemon) Ping(ctx context.Context) error { return e.ping(ctx) }

// DaemonInfo describes the daemon for the environment record.
type DaemonInfo struct {
	Version       string // daemon version, e.g. 20.10.24+dfsg1
	APIVersion    string // negotiated API version, e.g. 1.41
	StorageDriver string // overlay2, ...
	CgroupDriver  string // cgroupfs or systemd
	CgroupVersion string // "1" or "2"
	// UserlandProxy is "on" or "off" when it could be read from a local
	// dockerd's command line and daemon.json, "" when unknown.
	UserlandProxy string
	// Error is the text of the error that left fields empty, if any.
	Error string
}

// Info asks the daemon about itself. On error the returned EngineInfo holds
// what is known and the error text in Error.
func (e *Daemon) Info(ctx context.Context) (DaemonInfo, error) {
	ei := DaemonInfo{APIVersion: e.cli.ClientVersion()}
	if e.local() {
		ei.UserlandProxy = userlandProxy("/proc")
	}
	info, err := e.cli.Info(ctx)
	if err != nil {
		err = fmt.Errorf("asking the Docker daemon for its info: %w", err)
		ei.Error = err.Error()
		return ei, err
	}
	ei.Version = info.ServerVersion
	ei.StorageDriver = info.Driver
	ei.CgroupDriver = info.CgroupDriver
	ei.CgroupVersion = info.CgroupVersion
	ei.APIVersion = e.cli.ClientVersion()
	return ei, nil
}

// local reports whether dockerd is reached through a unix socket, so that
// it runs on this machine and /proc describes it.
func (e *Daemon) local() bool {
	return e.flavor.Name == "" && e.remote == "" && strings.HasPrefix(e.cli.DaemonHost(), "unix://")
}

// userlandProxy reads whether a dockerd found under procRoot runs with the
// userland proxy: "off" when its command line or daemon.json disables it, "on"
// when a dockerd was found without that, "" when none was found.
func userlandProxy(procRoot string) string {
	for _, p := range sysinfo.Procs(procRoot, "dockerd") {
		return userlandProxyFromArgs(p.Args, os.ReadFile)
	}
	return ""
}

// userlandProxyFromArgs decides "on" or "off" from dockerd's argv and its
// configuration file (read with readFile).
func userlandProxyFromArgs(args []string, readFile func(string) ([]byte, error)) string {
	config := "/etc/docker/daemon.json"
	for i, a := range args {
		switch {
		case a == "--userland-proxy=false":
			return "off"
		case a == "--userland-proxy=true", a == "--userland-proxy":
			return "on"
		case strings.HasPrefix(a, "--config-file="):
			config = strings.TrimPrefix(a, "--config-file=")
		case a == "--config-file" && i+1 < len(args):
			config = args[i+1]
		}
	}
	if b, err := readFile(config); err == nil {
		var c struct {
			UserlandProxy *bool `json:"userland-proxy"`
		}
		if json.Unmarshal(b, &c) == nil && c.UserlandProxy != nil && !*c.UserlandProxy {
			return "off"
		}
	}
	return "on"
}

// imageExists reports whether the daemon has the image ref.
func (e *Daemon) imageExists(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
}

// CheckImage is a platform's check (platform.Checker) that the daemon holds
// the workload image ref: nil; an error matching platform.ErrUnavailable
// that names the fix when it lacks the image; or the daemon's error,
// prefixed with the checking platform's name.
func (e *Daemon) CheckImage(ctx context.Context, name, ref string) error {
	ok, err := e.imageExists(ctx, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !ok {
		return platform.Unavailablef("image %s missing: run `nearnative image build`", ref)
	}
	return nil
}

// runFilter selects resources of run id, or of any run when id is empty.
func runFilter(id runid.ID) filters.Args {
	if id == "" {
		return filters.NewArgs(filters.Arg("label", runid.Label))
	}
	return filters.NewArgs(filters.Arg("label", runid.Label+"="+string(id)))
}

// gone reports whether a removal error means the object is already gone or
// on its way out, which teardown counts as success.
func gone(err error) bool {
	if err == nil || errdefs.IsNotFound(err) {
		return true
	}
	return errdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// RemoveRun removes every container (forcibly, with its anonymous volumes) and
// network labelled with run id, or with any run when id is empty. It returns a
// description of each thing it removed; things that vanished meanwhile are not
// errors. It keeps going after a failure and returns all failures joined.
func (e *Daemon) RemoveRun(ctx context.Context, id runid.ID) ([]string, error) {
	if id != "" && !id.Valid() {
		return nil, fmt.Errorf("removing the containers of run %q: not a run ID", id)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	var removed []string
	var errs []error
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: runFilter(id)})
	if err != nil {
		return nil, fmt.Errorf("listing containers of run %q: %w", id, err)
	}
	for _, c := range cs {
		name := containerName(c)
		run := c.Labels[runid.Label]
		err := e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed = append(removed, fmt.Sprintf("container %s (run %s)", name, run))
		case !gone(err):
			errs = append(errs, fmt.Errorf("removing container %s (run %s): %w", name, run, err))
		}
	}
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: runFilter(id)})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing networks of run %q: %w", id, err))
	}
	for _, n := range ns {
		run := n.Labels[runid.Label]
		err := e.cli.NetworkRemove(ctx, n.ID)
		switch {
		case err == nil:
			removed = append(removed, fmt.Sprintf("network %s (run %s)", n.Name, run))
		case !gone(err):
			errs = append(errs, fmt.Errorf("removing network %s (run %s): %w", n.Name, run, err))
		}
	}
	return removed, errors.Join(errs...)
}

// containerName is a container's name without the leading slash, or its
// short ID when it has none.
func containerName(c container.Summary) string {
	for _, n := range c.Names {
		return strings.TrimPrefix(n, "/")
	}
	return shortID(c.ID)
}

// shortID is the 12-character form of a Docker ID.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Runs lists, sorted, the run labels of containers and networks. They are
// read from the engine, where anything may carry the label: a caller checks
// each one (runid.ID.Valid) before it names anything with it, as
// cleanup.Clean does.
func (e *Daemon) Runs(ctx context.Context) ([]runid.ID, error) {
	seen := map[runid.ID]bool{}
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: runFilter("")})
	if err != nil {
		return nil, fmt.Errorf("listing nearnative containers: %w", err)
	}
	for _, c := range cs {
		seen[runid.ID(c.Labels[runid.Label])] = true
	}
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: runFilter("")})
	if err != nil {
		return nil, fmt.Errorf("listing nearnative networks: %w", err)
	}
	for _, n := range ns {
		seen[runid.ID(n.Labels[runid.Label])] = true
	}
	ids := make([]runid.ID, 0, len(seen))
	for id := range seen {
		if id != "" {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}
