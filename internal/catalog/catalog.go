// Package catalog holds the built-in platforms by name and opens the
// platforms a study names: it builds each one from its base kind and
// options, checks that it can run on this machine, and releases what they
// hold when the run ends.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/k8s"
	"github.com/nearnative/nearnative/internal/platforms/lxc"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/platforms/netns"
	"github.com/nearnative/nearnative/internal/platforms/podman"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sshhost"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload"
)

// Docker connects to the Docker engine on first use and remembers the
// outcome, so that a study without Docker platforms never needs a daemon.
// Get and API may be called at once (guests preparing on several sut hosts).
type Docker struct {
	mu  sync.Mutex
	eng *docker.Daemon
	err error
	try bool

	kube    *k8s.Conn
	kubeErr error
	kubeTry bool
}

// Kube connects to the Kubernetes cluster on first use: the kubeconfig of
// KUBECONFIG (or --kubeconfig), else the local cluster of dir's. On the local
// cluster the workload image is imported from Docker when a pod first needs
// it.
func (e *Docker) Kube(ctx context.Context, dir state.Dir) (*k8s.Conn, error) {
	if !e.kubeTry {
		e.kubeTry = true
		local := cluster.DefaultConfig(dir)
		save := func(ctx context.Context, ref string) (io.ReadCloser, error) {
			eng, err := e.Get(ctx)
			if err != nil {
				return nil, err
			}
			return eng.API().ImageSave(ctx, []string{ref})
		}
		e.kube, e.kubeErr = k8s.Connect(k8s.KubeconfigPath("", local), local, save)
	}
	return e.kube, e.kubeErr
}

// Get returns the connected engine, connecting on the first call. A
// DOCKER_HOST that names another machine is refused: the load generators
// run here and reach servers at addresses of this machine.
func (e *Docker) Get(ctx context.Context) (*docker.Daemon, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.try {
		e.try = true
		if e.err = CheckDockerHost(os.Getenv("DOCKER_HOST")); e.err == nil {
			e.eng, e.err = docker.Connect(ctx)
		}
	}
	return e.eng, e.err
}

// API is the connected engine's API (vm.APIFunc), connecting on the first
// call.
func (e *Docker) API(ctx context.Context) (client.APIClient, error) {
	eng, err := e.Get(ctx)
	if err != nil {
		return nil, err
	}
	return eng.API(), nil
}

// CheckDockerHost returns an unavailable-platform error when host (the value
// of DOCKER_HOST) names an engine on another machine: every client and
// measurement of nearnative assumes the servers run on this one. A unix
// socket, or TCP to a loopback address, is this machine.
func CheckDockerHost(host string) error {
	if host == "" || strings.HasPrefix(host, "unix://") {
		return nil
	}
	if u, err := url.Parse(host); err == nil && u.Scheme == "tcp" {
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return platform.Unavailablef("DOCKER_HOST=%s names a Docker engine that may be on another machine; nearnative drives and measures servers on this machine only: unset DOCKER_HOST (or point it at unix:///var/run/docker.sock)", host)
}

// Close closes the connection if one was made.
func (e *Docker) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.eng == nil {
		return nil
	}
	return e.eng.Close()
}

// Opener opens platforms; it connects to Docker only when a Docker platform
// is asked for.
type Opener struct {
	Dir state.Dir
	// SkipUnavailable drops platforms that cannot run here instead of
	// failing; Skipped then maps each to the reason.
	SkipUnavailable bool
	Skipped         map[string]string
	// NoImage, when set, is why the workload image cannot be used: every
	// platform that runs it (containers and VMs) is then unavailable.
	NoImage error
	// Client is what the run asks of its client hosts (the study's
	// client, client_mtu and client_subnet).
	Client host.Setting
	// Clients maps each opened platform to its client host (nil: the
	// platform's clients run inside it), filled by Open.
	Clients map[string]host.Host
	// Hosts, when set, are the machines of a hosts file, connected: the
	// servers run on its sut hosts, the load on its driver hosts.
	Hosts *sshhost.Set

	// Log gets progress lines of slow preparations (nil: none).
	Log io.Writer
	// engines are the sut hosts' Docker engines, connected on first use.
	engines *remote.Engines
}

// openRemote builds platform sp on the sut hosts of o.Hosts, its load
// coming from the driver hosts; kinds not built for remote hosts yet are
// refused as unavailable.
func (o *Opener) openRemote(sp study.Platform, env platform.Env, eng *Docker) (platform.Platform, host.Host, error) {
	sut := o.Hosts.SUT("")
	client := o.Hosts.Client(sut)
	if err := remote.Refusal(sp.Base, sut.Host.Name); err != nil {
		return nil, client, err
	}
	env.Client = client
	if remote.IsDocker(sp.Base) {
		if o.NoImage != nil {
			return nil, client, platform.Unavailablef("%v", o.NoImage)
		}
		if o.engines == nil {
			o.engines = &remote.Engines{Local: eng.Get, Log: o.Log}
		}
		p, err := remote.NewDocker(sp.Base, sp.Name, func(role string) remote.DockerHost { return o.Hosts.SUT(role) }, usedAs[remote.DockerHost](o), env, sp.Options, o.engines,
			func(h remote.DockerHost) host.Host { return o.Hosts.Client(o.Hosts.Conn(h.Name())) })
		return p, client, err
	}
	if sp.Base == platform.Podman {
		if o.NoImage != nil {
			return nil, client, platform.Unavailablef("%v", o.NoImage)
		}
		services := &remote.PodmanServices{Run: env.Run, Local: eng.Get, Log: o.Log}
		p, err := remote.NewPodman(sp.Name, func(role string) remote.DockerHost { return o.Hosts.SUT(role) }, usedAs[remote.DockerHost](o), env, sp.Options,
			services, func(h remote.DockerHost) host.Host { return o.Hosts.Client(o.Hosts.Conn(h.Name())) })
		return p, client, err
	}
	if sp.Base == platform.VM || sp.Base == platform.VMDocker || sp.Base == platform.VMDockerHost {
		if o.NoImage != nil {
			return nil, client, platform.Unavailablef("%v", o.NoImage)
		}
		// A role's guests boot on the sut host it is placed on (the first
		// without place:); their disk is built here from the local image.
		p, err := vm.NewOn(sp.Base, sp.Name, env, o.Dir, sp.Options, eng.API, usedAs[vm.Host](o), func(role string) string { return o.Hosts.SUT(role).Name() })
		return p, client, err
	}
	var suts []remote.Agent
	for _, h := range o.Hosts.File.With(hostfile.RoleSUT) {
		suts = append(suts, o.Hosts.Conn(h.Name))
	}
	p, err := remote.New(sp.Name, func(role string) remote.Agent { return o.Hosts.SUT(role) }, suts, env, sp.Options)
	return p, client, err
}

// usedSUTs are the sut hosts servers may run on: the first (where a role
// without place: goes), then those the hosts file places server roles on,
// in file order. Only they are checked (a second sut host's default
// bridge, say, which docker-bridge would route, matters only when a role
// runs there).
func (o *Opener) usedSUTs() []*sshhost.Conn {
	placed := map[string]bool{}
	for role, h := range o.Hosts.File.Place {
		if role != hostfile.Driver {
			placed[h] = true
		}
	}
	first := o.Hosts.SUT("")
	out := []*sshhost.Conn{first}
	for _, h := range o.Hosts.File.With(hostfile.RoleSUT) {
		if placed[h.Name] && h.Name != first.Name() {
			out = append(out, o.Hosts.Conn(h.Name))
		}
	}
	return out
}

// usedAs is o.usedSUTs as the interface H a platform takes them as
// (remote.DockerHost, vm.Host: a connection is both, checked below).
func usedAs[H any](o *Opener) []H {
	var out []H
	for _, h := range o.usedSUTs() {
		out = append(out, any(h).(H))
	}
	return out
}

var (
	_ remote.DockerHost = (*sshhost.Conn)(nil)
	_ vm.Host           = (*sshhost.Conn)(nil)
)

// ClientNeed says which client host a platform of kind base needs:
// docker-proxy measures the userland proxy on 127.0.0.1 and keeps its
// client on this machine; docker-nat's DNAT path serves no loopback
// address, so it needs an address of a link nearnative made even under
// client: host; the inter-container techniques run their clients in
// containers; every other platform takes the study's setting.
func ClientNeed(base string) host.Need {
	switch base {
	case platform.DockerProxy, platform.DockerRunscProxy:
		return host.LoopbackOnly
	case platform.DockerNAT, platform.DockerRunscNAT, platform.Podman, platform.PodmanRootless:
		return host.LinkAddress
	case platform.Veth, platform.OVS, platform.Routed, platform.Macvlan:
		return host.None
	}
	return host.Any
}

// Check builds the platform sp as a run with the client setting client
// would, for a check made without a run (`nearnative platforms`, `studies`,
// `doctor`): its client host is planned, described but not made (see
// host.PlannedFor). It asks the platform whether it can run here
// (platform.Checker) and, when it can, hands it to use (nil for none) for
// further questions before releasing it (a k8s platform's Check may have
// made its namespace).
func Check(ctx context.Context, sp study.Platform, client host.Setting, image string, dir state.Dir, engine *Docker, use func(platform.Platform)) error {
	env := platform.Env{Run: runid.New(), LogDir: os.TempDir(), Image: image,
		Client: host.PlannedFor(client, ClientNeed(sp.Base))}
	p, err := Build(ctx, sp, env, dir, engine)
	if err != nil {
		return err
	}
	if c, ok := p.(platform.Closer); ok {
		defer c.Close()
	}
	if ch, ok := p.(platform.Checker); ok {
		if err := ch.Check(ctx); err != nil {
			return err
		}
	}
	if use != nil {
		use(p)
	}
	return nil
}

// Unavailable is the error when platforms cannot run here.
type Unavailable struct{ Reasons []string }

// Unwrap lets errors.Is(err, platform.ErrUnavailable) see it.
func (u *Unavailable) Unwrap() error { return platform.ErrUnavailable }

func (u *Unavailable) Error() string {
	return "platform unavailable: " + strings.Join(u.Reasons, "; ") + " (or pass --skip-unavailable to run the others)"
}

// Open builds and checks the platforms.
func (o *Opener) Open(ctx context.Context, env platform.Env, ps []study.Platform) (map[string]platform.Platform, func() error, error) {
	out := map[string]platform.Platform{}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	// The client hosts go last: platforms remove their servers first.
	hosts := host.NewHosts(env.Run, o.Client)
	closers = append(closers, func() error { return hosts.Close(context.Background()) })
	eng := &Docker{}
	closers = append(closers, eng.Close)
	closers = append(closers, func() error {
		if o.engines == nil {
			return nil
		}
		return o.engines.Close()
	})
	var unavailable []string
	skipped := map[string]string{}
	clients := map[string]host.Host{}
	for _, sp := range ps {
		var p platform.Platform
		var err error
		penv := env
		if o.Hosts != nil {
			p, penv.Client, err = o.openRemote(sp, penv, eng)
		} else {
			penv.Client, err = hosts.For(ctx, ClientNeed(sp.Base))
		}
		switch {
		case o.Hosts != nil:
			// Built (or refused) on the hosts over SSH above.
		case errors.Is(err, host.ErrSetting):
			closeAll()
			return nil, nil, err
		case errors.Is(err, host.ErrUnavailable):
			err = platform.Unavailablef("%w", err)
		case err != nil:
			closeAll()
			return nil, nil, fmt.Errorf("platform %s: %w", sp.Name, err)
		case o.NoImage != nil && sp.Base != platform.Native:
			err = platform.Unavailablef("%v", o.NoImage)
		default:
			p, err = Build(ctx, sp, penv, o.Dir, eng)
		}
		if err == nil {
			if c, ok := p.(platform.Checker); ok {
				err = c.Check(ctx)
			}
		}
		if err == nil {
			if m, ok := p.(platform.ClientMaker); ok {
				var own host.Host
				if own, err = m.MakeClient(ctx); own != nil {
					penv.Client = own // a driver pod: the platform removes it
				}
			}
		}
		if err != nil {
			if c, ok := p.(platform.Closer); ok {
				if cerr := c.Close(); cerr != nil { // what Check or MakeClient made (a namespace)
					err = fmt.Errorf("%w (and removing what it made: %v)", err, cerr)
				}
			}
			if !errors.Is(err, platform.ErrUnavailable) {
				// A mistake, not a missing piece: never skipped.
				closeAll()
				return nil, nil, fmt.Errorf("platform %s: %w", sp.Name, err)
			}
			unavailable = append(unavailable, fmt.Sprintf("%s: %v", sp.Name, err))
			skipped[sp.Name] = err.Error()
			continue
		}
		if c, ok := p.(platform.Closer); ok {
			closers = append(closers, c.Close)
		}
		out[sp.Name] = p
		clients[sp.Name] = penv.Client
	}
	if len(unavailable) > 0 {
		if !o.SkipUnavailable {
			closeAll()
			return nil, nil, &Unavailable{Reasons: unavailable}
		}
		o.Skipped = skipped
	}
	o.Clients = clients
	return out, closeAll, nil
}

// Build constructs one platform from its study entry.
func Build(ctx context.Context, sp study.Platform, env platform.Env, dir state.Dir, engine *Docker) (platform.Platform, error) {
	switch sp.Base {
	case platform.Native:
		return native.New(sp.Name, env, dir, sp.Options)
	case platform.DockerNAT, platform.DockerProxy, platform.DockerBridge, platform.DockerHost, platform.DockerNetwork,
		platform.DockerRunscNAT, platform.DockerRunscProxy, platform.DockerRunscBridge, platform.DockerRunscHost,
		platform.DockerCrunBridge, platform.DockerCrunHost:
		eng, err := engine.Get(ctx)
		if err != nil {
			return nil, err
		}
		return docker.New(sp.Base, sp.Name, env, eng, sp.Options)
	case platform.Podman, platform.PodmanRootless:
		return podman.New(sp.Base, sp.Name, env, sp.Options, engine.Get)
	case platform.LXC:
		return lxc.New(sp.Name, env, dir, sp.Options, engine.Get)
	case platform.VM, platform.VMDocker, platform.VMDockerHost:
		return vm.NewKind(sp.Base, sp.Name, env, dir, sp.Options, engine.API)
	case platform.K8sPod, platform.K8sService, platform.K8sNodePort, platform.K8sHostNet, platform.K8sGuaranteed:
		conn, err := engine.Kube(ctx, dir)
		if err != nil {
			return nil, err
		}
		return k8s.New(sp.Base, sp.Name, env, conn, sp.Options)
	case platform.Veth, platform.OVS, platform.Routed, platform.Macvlan:
		eng, err := engine.Get(ctx)
		if err != nil {
			return nil, err
		}
		p, err := netns.New(sp.Base, sp.Name, env, eng, sp.Options)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("unknown platform kind %q (known: %s)", sp.Base, strings.Join(platform.BuiltinNames(), ", "))
}

// Beside is the platform of the roles that run beside the driver (a
// topology's OnHost roles) when the run has hosts over SSH: native on the
// first driver host, reached by the servers at its address. Its signature
// is engine.Config.Host's.
func (o *Opener) Beside(env platform.Env) (workload.HostPlatform, error) {
	d := o.Hosts.Conn(o.Hosts.File.Drivers()[0].Name)
	var suts []remote.Agent
	for _, h := range o.Hosts.File.With(hostfile.RoleSUT) {
		suts = append(suts, o.Hosts.Conn(h.Name))
	}
	return remote.Beside(d, suts, env)
}
