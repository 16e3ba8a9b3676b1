package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
)

// endpoint is one container joined to the technique.
type endpoint struct {
	p     *Platform
	id    string // container ID
	cname string // container name
	ns    string // namespace name under /run/netns
	host  string // host-side link ("" for macvlan)
	inner string // link inside the namespace
	num   int    // host number (last octet)
	ip    netip.Addr

	// graceful stops the main process with SIGTERM (servers) before the
	// container is removed; a job's idle main process is killed at once.
	graceful bool

	mu      sync.Mutex
	removed bool
}

// allocate reserves an endpoint number and a host address, round robin so
// that an address is not reused while a dying namespace may still hold it.
func (p *Platform) allocate() (n, host int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n = p.next
	p.next = (p.next + 1) % (36 * 36 * 36)
	for i := 0; i < 253; i++ {
		h := 2 + (p.lastIP+i)%253 // 2..254; .1 is left for a gateway
		if !p.inUse[h] {
			p.inUse[h] = true
			p.lastIP = h - 1
			return n, h, nil
		}
	}
	return 0, 0, fmt.Errorf("%s: all 253 addresses of the subnet are in use", p.name)
}

func (p *Platform) release(host int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, host)
}

// base36 renders n in three base-36 digits.
func base36(n int) string {
	s := strconv.FormatInt(int64(n), 36)
	return strings.Repeat("0", max(0, 3-len(s))) + s
}

// newEndpoint creates and starts a container running argv with no network,
// names its namespace and joins it to the technique. On failure it removes
// what it made.
func (p *Platform) newEndpoint(ctx context.Context, trial, role string, spec platform.Spec, argv []string) (_ *endpoint, err error) {
	f, err := p.ensureFabric(ctx)
	if err != nil {
		return nil, err
	}
	n, hostNum, err := p.allocate()
	if err != nil {
		return nil, err
	}
	a := f.subnet.Addr().As4()
	a[3] = byte(hostNum)
	suffix := base36(n)
	e := &endpoint{p: p, num: hostNum, ip: netip.AddrFrom4(a),
		cname: docker.ContainerName(p.env.Run, trial, role),
		ns:    NamespacePrefix + p.env.Run.Short() + "-" + p.prefix[6:] + suffix,
		inner: p.prefix + "c" + suffix,
	}
	if p.kind != platform.Macvlan {
		e.host = p.prefix + "h" + suffix
	}
	defer func() {
		if err != nil {
			if rerr := e.remove(context.WithoutCancel(ctx), ""); rerr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up after the failed start: %w", rerr))
			}
		}
	}()
	cfg := &container.Config{
		Image:      p.env.Image,
		Entrypoint: strslice.StrSlice{argv[0]},
		Cmd:        strslice.StrSlice(argv[1:]),
		Env:        docker.EnvList(spec.Env),
		User:       spec.User,
		WorkingDir: platform.ContainerDir,
		Labels: map[string]string{
			runid.Label:          string(p.env.Run),
			runid.LabelRole:      spec.Name,
			docker.LabelTrial:    trial,
			docker.LabelPlatform: p.name,
		},
	}
	// docker-init as PID 1 forwards signals, as on the Docker platforms.
	useInit := true
	hc := &container.HostConfig{
		Init:        &useInit,
		NetworkMode: network.NetworkNone,
		Resources:   container.Resources{CpusetCpus: p.opt.CPUSet, NanoCPUs: int64(math.Round(p.opt.CPUs * 1e9))},
	}
	if m := p.opt.MemoryBytes(); m > 0 {
		hc.Resources.Memory, hc.Resources.MemorySwap = m, m
	}
	for _, v := range spec.Volumes {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: v.HostPath, Target: v.Path})
	}
	created, err := p.api.ContainerCreate(ctx, cfg, hc, nil, nil, e.cname)
	if err != nil {
		return e, fmt.Errorf("%s: creating container %s: %w", p.name, e.cname, err)
	}
	e.id = created.ID
	if err := p.api.ContainerStart(ctx, e.id, container.StartOptions{}); err != nil {
		return e, fmt.Errorf("%s: starting container %s: %w", p.name, e.cname, err)
	}
	insp, err := p.api.ContainerInspect(ctx, e.id)
	if err != nil {
		return e, fmt.Errorf("%s: inspecting container %s: %w", p.name, e.cname, err)
	}
	if insp.State == nil || !insp.State.Running || insp.State.Pid == 0 {
		return e, fmt.Errorf("%s: container %s exited at once", p.name, e.cname)
	}
	if err := p.join(ctx, f, e, insp.State.Pid); err != nil {
		return e, fmt.Errorf("%s: joining container %s: %w", p.name, e.cname, err)
	}
	return e, nil
}

// join names the container's namespace and connects it to the technique.
func (p *Platform) join(ctx context.Context, f *fabric, e *endpoint, pid int) error {
	id := string(p.env.Run)
	if _, err := run(ctx, "ip", "netns", "attach", e.ns, strconv.Itoa(pid)); err != nil {
		return err
	}
	// The namespace's own loopback carries the run, for cleanup.
	if _, err := run(ctx, "ip", "-n", e.ns, "link", "set", "dev", "lo", "alias", Alias+id, "up"); err != nil {
		return err
	}
	switch p.kind {
	case platform.Macvlan:
		if _, err := run(ctx, "ip", "link", "add", e.inner, "link", f.bridge, "type", "macvlan", "mode", "bridge"); err != nil {
			return err
		}
		if _, err := run(ctx, "ip", "link", "set", "dev", e.inner, "alias", Alias+id, "netns", e.ns); err != nil {
			return err
		}
	default:
		if _, err := run(ctx, "ip", "link", "add", e.host, "type", "veth", "peer", "name", e.inner, "netns", e.ns); err != nil {
			return err
		}
		if err := p.tagLink(ctx, "link", "set", "dev", e.host); err != nil {
			return err
		}
	}
	switch p.kind {
	case platform.Veth:
		if _, err := run(ctx, "ip", "link", "set", "dev", e.host, "master", f.bridge); err != nil {
			return err
		}
	case platform.OVS:
		if _, err := run(ctx, "ovs-vsctl", "--timeout=10", "add-port", f.bridge, e.host, "--", "set", "port", e.host,
			"external_ids:"+OVSExternalID+"="+id); err != nil {
			return err
		}
		if err := ethtoolTxCsumOff(e.ns, e.inner); err != nil {
			return err
		}
	case platform.Routed:
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+e.host+"/proxy_arp", []byte("1"), 0o644); err != nil {
			return fmt.Errorf("proxy ARP on %s: %w", e.host, err)
		}
		// Answer at once, not after the default random delay of up to 0.8 s.
		if err := os.WriteFile("/proc/sys/net/ipv4/neigh/"+e.host+"/proxy_delay", []byte("0"), 0o644); err != nil {
			return fmt.Errorf("proxy ARP delay on %s: %w", e.host, err)
		}
	}
	if e.host != "" {
		if _, err := run(ctx, "ip", "link", "set", "dev", e.host, "up"); err != nil {
			return err
		}
	}
	bits := f.subnet.Bits()
	if p.kind == platform.Routed {
		bits = 32
	}
	if _, err := run(ctx, "ip", "-n", e.ns, "addr", "add", netip.PrefixFrom(e.ip, bits).String(), "dev", e.inner); err != nil {
		return err
	}
	if _, err := run(ctx, "ip", "-n", e.ns, "link", "set", "dev", e.inner, "up"); err != nil {
		return err
	}
	if p.kind == platform.Routed {
		// Everything leaves through the veth; the host answers ARP for the
		// other endpoints (proxy ARP) and routes to each /32.
		if _, err := run(ctx, "ip", "-n", e.ns, "route", "add", "default", "dev", e.inner); err != nil {
			return err
		}
		if _, err := run(ctx, "ip", "route", "add", e.ip.String()+"/32", "dev", e.host); err != nil {
			return err
		}
	}
	return nil
}

// remove stops and removes the container (saving its output to logPath
// unless empty), its namespace and its links. Already gone is success; a
// second call does nothing.
func (e *endpoint) remove(ctx context.Context, logPath string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return nil
	}
	e.removed = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	p := e.p
	var errs []error
	if e.id != "" && e.graceful {
		timeout := 2
		if err := p.api.ContainerStop(ctx, e.id, container.StopOptions{Timeout: &timeout}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stopping container %s: %w", e.cname, err))
		}
		if logPath != "" {
			if err := e.saveLogs(ctx, logPath); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.id != "" {
		if err := p.api.ContainerRemove(ctx, e.id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s: %w", e.cname, err))
		}
	}
	// Delete the inner link first, so that a macvlan does not outlive the
	// namespace while the kernel dismantles it.
	if _, err := run(ctx, "ip", "-n", e.ns, "link", "del", "dev", e.inner); err != nil && !notFound(err) {
		errs = append(errs, err)
	}
	if _, err := run(ctx, "ip", "netns", "del", e.ns); err != nil && !notFound(err) {
		errs = append(errs, err)
	}
	if e.host != "" {
		if p.kind == platform.OVS && p.fab != nil {
			if _, err := run(ctx, "ovs-vsctl", "--timeout=10", "--if-exists", "del-port", e.host); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := run(ctx, "ip", "link", "del", "dev", e.host); err != nil && !notFound(err) {
			errs = append(errs, err)
		}
	}
	p.release(e.num)
	return errors.Join(errs...)
}

func (e *endpoint) saveLogs(ctx context.Context, path string) error {
	return e.p.eng.SaveLogs(ctx, e.id, e.cname, path)
}

// where says where the endpoint is, for the record.
func (e *endpoint) where() string {
	w := fmt.Sprintf("container %.12s %s in namespace %s, %s on %s", e.id, e.cname, e.ns, e.ip, e.inner)
	switch e.p.kind {
	case platform.Veth:
		w += fmt.Sprintf(" (veth %s into Linux bridge %s)", e.host, e.p.fab.bridge)
	case platform.OVS:
		w += fmt.Sprintf(" (veth %s into OVS bridge %s)", e.host, e.p.fab.bridge)
	case platform.Routed:
		w += fmt.Sprintf(" (/32 routed by the host via veth %s, proxy ARP)", e.host)
	case platform.Macvlan:
		w += fmt.Sprintf(" (macvlan bridge mode on %s)", e.p.fab.bridge)
	}
	if o := e.p.opt.String(); o != "" {
		w += "; " + o
	}
	return w
}

// server is a server endpoint.
type server struct {
	e       *endpoint
	argv    []string
	addrs   map[string]string
	logPath string
}

// Start runs spec's command as the main process of a container joined to
// the technique; clients on the same platform reach it at its address in the
// run's subnet (the host does not, except on routed).
func (p *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if len(spec.Files) > 0 || spec.Render != nil {
		return nil, fmt.Errorf("%s: server %s: spec files are not supported on this platform", p.name, spec.Name)
	}
	ports, err := platform.AssignPorts(spec, "127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	argv := spec.Command(platform.Listen{Host: "0.0.0.0", Ports: ports, Dir: platform.ContainerDir})
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: starting %s: empty command", p.name, spec.Name)
	}
	e, err := p.newEndpoint(ctx, trial, spec.Name, spec, argv)
	if err != nil {
		return nil, err
	}
	e.graceful = true
	s := &server{e: e, argv: argv, addrs: map[string]string{}}
	s.logPath = docker.LogPath(p.env.LogDir, trial, spec.Name)
	for name, n := range ports {
		s.addrs[name] = netip.AddrPortFrom(e.ip, uint16(n)).String()
	}
	return s, nil
}

// Addr is the server's address in the technique's subnet.
func (s *server) Addr(port string) string {
	a, ok := s.addrs[port]
	if !ok {
		panic(fmt.Sprintf("netns: port %q not declared in the spec of %s", port, s.e.cname))
	}
	return a
}

// Command is the argv as run.
func (s *server) Command() []string { return append([]string(nil), s.argv...) }

// Describe says where the server runs.
func (s *server) Describe() string { return s.e.where() }

// Stop removes the container, its namespace and links.
func (s *server) Stop(ctx context.Context) error { return s.e.remove(ctx, s.logPath) }

// CPUTime implements platform.CPUReporter from the container's cgroup.
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	return s.e.p.eng.CPUTime(ctx, s.e.id, s.e.cname)
}

// RunJob implements platform.JobRunner: a container joined to the technique
// idles while its network is set up, then runs the command (docker exec)
// and is removed.
func (p *Platform) RunJob(ctx context.Context, trial string, spec platform.Spec) (res platform.JobResult, err error) {
	if err := spec.Validate(); err != nil {
		return res, err
	}
	if len(spec.Files) > 0 || spec.Render != nil {
		return res, fmt.Errorf("%s: job %s: spec files are not supported on this platform", p.name, spec.Name)
	}
	res.Command = spec.Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{}, Dir: platform.ContainerDir})
	if len(res.Command) == 0 {
		return res, fmt.Errorf("%s: job %s: empty command", p.name, spec.Name)
	}
	e, err := p.newEndpoint(ctx, trial, spec.Name, spec, []string{"sleep", "infinity"})
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := e.remove(context.WithoutCancel(ctx), ""); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing job endpoint %s: %w", e.cname, rerr))
		}
	}()
	res.Where = e.where()
	start := time.Now()
	ex, err := p.api.ContainerExecCreate(ctx, e.id, container.ExecOptions{
		Cmd: res.Command, Env: docker.EnvList(spec.Env), User: spec.User, WorkingDir: platform.ContainerDir,
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return res, fmt.Errorf("%s: job %s: %w", p.name, spec.Name, err)
	}
	att, err := p.api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return res, fmt.Errorf("%s: job %s: %w", p.name, spec.Name, err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() { att.Close() })
	defer stop()
	var stdout, stderr bytes.Buffer
	_, cerr := stdcopy.StdCopy(&stdout, &stderr, att.Reader)
	res.Wall = time.Since(start)
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if cerr != nil {
		return res, fmt.Errorf("%s: reading the output of job %s: %w", p.name, spec.Name, cerr)
	}
	insp, err := p.api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return res, fmt.Errorf("%s: job %s: %w", p.name, spec.Name, err)
	}
	res.ExitCode = insp.ExitCode
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%s: job %s exited with code %d", p.name, spec.Name, res.ExitCode)
	}
	return res, nil
}
