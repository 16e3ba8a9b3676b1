package k8s

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/tailbuf"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// driverBinary is where the nearnative binary goes in a driver pod (as on a
// remote host, sshhost.RemoteBinary); a variable for tests.
var driverBinary = "/var/tmp/nearnative/nearnative"

// driverPodName is the driver pod's name in the platform's namespace.
const driverPodName = "driver"

// agentStartTimeout bounds the driver pod's agent handshake.
const agentStartTimeout = 30 * time.Second

// driverPod is the client host of a platform whose driver is placed on a
// node (place: {driver: NODE}): a pod of the workload image on that node,
// in the platform's namespace, running nearnative's agent (the API VM
// guests and remote hosts serve), which the run reaches through a
// port-forward of the API server, never through a port open to a network.
// The load generators run there as jobs of the agent; connections the run
// opens from the client (readiness probes, preloads) go through the
// agent's /dial. It implements host.Remote and host.Runner, and the
// remote platforms' Agent, so that roles beside the driver run in it.
type driverPod struct {
	p    *platformImpl
	node string
	pd   *pod
	ip   netip.Addr

	agent  *vmagent.Client
	offset vmagent.Offset
	cpus   []int

	stdin    io.WriteCloser
	cancel   context.CancelFunc
	execDone chan struct{}
	execErr  error
	stderr   *tailbuf.Buffer
	fwd      *forward

	closeOnce sync.Once
}

// MakeClient implements platform.ClientMaker: with the driver placed on a
// node, the run's load comes from a driver pod there, made now (before
// the first trial, so that a node that cannot run it is refused then);
// without, nil (the run's client host).
func (p *platformImpl) MakeClient(ctx context.Context) (host.Host, error) {
	if p.driverNode == "" {
		return nil, nil
	}
	if p.driver != nil {
		return p.driver, nil
	}
	if p.conn.streams == nil {
		return nil, platform.Unavailablef("%s: this cluster connection cannot exec into pods", p.name)
	}
	d, err := p.startDriver(ctx)
	if err != nil {
		return nil, err
	}
	p.driver = d
	p.env.Client = d
	return d, nil
}

// startDriver creates the driver pod, copies this binary into it, starts
// the agent and measures its clock. On failure it removes what it made.
func (p *platformImpl) startDriver(ctx context.Context) (_ *driverPod, err error) {
	ns, err := p.namespace(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.conn.ensureImage(ctx, p.env.Image, p.env.Logf); err != nil {
		return nil, err
	}
	m := member{spec: platform.Spec{Name: driverPodName}, role: platform.Driver, instance: -1}
	pd := &pod{p: p, ns: ns, name: driverPodName, trial: "run", members: []member{m}, node: p.driverNode, services: map[string]*corev1.Service{}}
	d := &driverPod{p: p, node: p.driverNode, pd: pd, stderr: &tailbuf.Buffer{Max: 4096}}
	defer func() {
		if err != nil {
			d.Close(context.WithoutCancel(ctx))
			pd.delete(context.WithoutCancel(ctx))
		}
	}()
	if _, err := p.conn.cs.CoreV1().Pods(ns).Create(ctx, p.driverPodSpec(ns), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("%s: creating the driver pod %s/%s: %w", p.name, ns, driverPodName, err)
	}
	if err := pd.waitRunning(ctx); err != nil {
		return nil, err
	}
	if d.ip, err = netip.ParseAddr(pd.ip); err != nil {
		return nil, fmt.Errorf("%s: the driver pod has no IP address (%q)", p.name, pd.ip)
	}
	start := time.Now()
	if err := d.push(ctx); err != nil {
		return nil, d.errorf("copying nearnative into it: %w", err)
	}
	p.env.Logf("copied nearnative into the driver pod on node %s in %v", d.node, time.Since(start).Round(100*time.Millisecond))
	if err := d.startAgent(ctx); err != nil {
		return nil, err
	}
	if d.offset, err = d.agent.ClockOffset(ctx, 8); err != nil {
		return nil, d.errorf("reading its clock: %w", err)
	}
	job, err := d.RunJob(ctx, []string{"cat", "/sys/devices/system/cpu/online"}, nil)
	if err == nil {
		d.cpus, err = sysinfo.ParseIDList(strings.TrimSpace(string(job.Stdout)))
	}
	if err != nil || len(d.cpus) == 0 {
		if err == nil {
			err = fmt.Errorf("none in %q", job.Stdout)
		}
		return nil, d.errorf("reading its online CPUs: %w", err)
	}
	return d, nil
}

// driverPodSpec is the driver pod: the workload image (which holds the
// load generators) idling until the agent is started in it, on the
// placed node, with no resource requests (the servers' exclusive CPUs,
// on k8s-guaranteed, stay theirs).
func (p *platformImpl) driverPodSpec(ns string) *corev1.Pod {
	grace := int64(stopGrace)
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: driverPodName, Namespace: ns, Labels: map[string]string{
			LabelRun: string(p.env.Run), LabelPod: driverPodName, LabelGroup: platform.Driver, LabelPlatform: dnsLabel(p.name)}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			EnableServiceLinks:            &no,
			AutomountServiceAccountToken:  &no,
			DNSPolicy:                     corev1.DNSDefault,
			Affinity:                      nodeAffinity(p.driverNode),
			Containers: []corev1.Container{{
				Name: driverPodName, Image: p.env.Image, ImagePullPolicy: p.conn.pullPolicy(),
				Command: []string{"sleep", "infinity"},
			}},
		},
	}
}

// push copies this process's binary into the pod at driverBinary,
// gzip-compressed on the way.
func (d *driverPod) push(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.Open(self)
	if err != nil {
		return err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		_, err := io.Copy(zw, f)
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	dir := driverBinary[:strings.LastIndex(driverBinary, "/")]
	script := "mkdir -p " + dir + " && gzip -dc > " + driverBinary + ".new && chmod 755 " + driverBinary + ".new && mv " + driverBinary + ".new " + driverBinary
	var stderr strings.Builder
	if err := d.p.conn.streams.Exec(ctx, d.pd.ns, d.pd.name, driverPodName, []string{"sh", "-c", script}, pr, io.Discard, &stderr); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("%w %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// startAgent execs the agent in the pod (its stdin, held open, is its
// lifeline), hands it its token and forwards a local port to the address
// it serves on.
func (d *driverPod) startAgent(ctx context.Context) error {
	inR, inW := io.Pipe()
	errR, errW := io.Pipe()
	actx, cancel := context.WithCancel(context.Background())
	d.stdin, d.cancel, d.execDone = inW, cancel, make(chan struct{})
	go func() {
		defer close(d.execDone)
		d.execErr = d.p.conn.streams.Exec(actx, d.pd.ns, d.pd.name, driverPodName, []string{driverBinary, vmagent.StdioArg}, inR, io.Discard, errW)
		err := d.execErr
		if err == nil {
			err = io.EOF
		}
		errW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	addr, token, err := vmagent.Handshake(ctx, inW, errR, d.stderr, agentStartTimeout)
	if err != nil {
		select { // the exec's own reason, when it ended
		case <-d.execDone:
			err = fmt.Errorf("%w; %v", err, d.Dropped())
		case <-time.After(time.Second):
			err = fmt.Errorf("%w: %s", err, d.stderr.String())
		}
		return d.errorf("starting its agent: %w", err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return d.errorf("its agent serves on %q: %w", addr, err)
	}
	d.fwd = &forward{streams: d.p.conn.streams, ns: d.pd.ns, pod: d.pd.name, port: int(ap.Port())}
	if err := d.fwd.open(ctx); err != nil {
		return d.errorf("forwarding a port to its agent: %w", err)
	}
	d.agent = vmagent.NewClientDial(addr, token, d.fwd.dial)
	if err := d.agent.Ping(ctx); err != nil {
		return d.errorf("its agent does not answer through the port-forward: %w", err)
	}
	return nil
}

// errorf names the pod and its node in an error.
func (d *driverPod) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: driver pod %s/%s on node %s: %w", d.p.name, d.pd.ns, d.pd.name, d.node, fmt.Errorf(format, args...))
}

// Kind implements host.Host.
func (d *driverPod) Kind() host.Kind { return host.Pod }

// Describe implements host.Host: "driver pod on node n1".
func (d *driverPod) Describe() string { return "driver pod on node " + d.node }

// Detail implements host.Host.
func (d *driverPod) Detail() string {
	return fmt.Sprintf("pod %s/%s at %s on node %s (workload image, no resource requests), clock offset %v ± %v",
		d.pd.ns, d.pd.name, d.ip, d.node, d.offset.Offset.Round(time.Microsecond), (d.offset.RTT / 2).Round(time.Microsecond))
}

// ServerAddr implements host.Host: the pod's address, where the roles
// beside the driver listen (the platform's own servers listen in their
// pods).
func (d *driverPod) ServerAddr() string { return d.ip.String() }

// ClientAddr implements host.Host: the pod's address.
func (d *driverPod) ClientAddr() string { return d.ip.String() }

// Subnet implements host.Host: the pod's address alone.
func (d *driverPod) Subnet() netip.Prefix { return netip.PrefixFrom(d.ip, d.ip.BitLen()) }

// Wrap implements host.Host: the pod's tools are not exec'd here (they
// run through Drivers); one that still wraps gets a command that fails
// saying so.
func (d *driverPod) Wrap([]string) []string {
	return []string{"sh", "-c", `echo "nearnative: this client cannot run in a driver pod yet (it is exec'd on this machine); drop driver from place" >&2; exit 3`}
}

// DialContext implements host.Host: the connection opens from the pod,
// through its agent.
func (d *driverPod) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" {
		return nil, fmt.Errorf("driver pod: cannot dial %s", network)
	}
	c, err := d.agent.Dial(ctx, addr)
	if err != nil {
		return nil, d.errorf("connecting to %s from there: %w", addr, err)
	}
	return c, nil
}

// Route implements host.Host: the pod reaches pods, Services and nodes
// through the cluster's network; nothing is routed.
func (d *driverPod) Route(context.Context, netip.Prefix) error { return nil }

// CanRoute implements host.Host.
func (d *driverPod) CanRoute() error { return nil }

// Close implements host.Host: the agent's stdin ends (it stops what it
// started), then the stream and the port-forward go. The pod goes with the
// platform's namespace.
func (d *driverPod) Close(context.Context) error {
	d.closeOnce.Do(func() {
		if d.stdin != nil {
			d.stdin.Close()
			select {
			case <-d.execDone:
			case <-time.After(5 * time.Second):
			}
			d.cancel()
		}
		if d.fwd != nil {
			d.fwd.close()
		}
	})
	return nil
}

// Drivers implements host.Remote: the pod alone.
func (d *driverPod) Drivers() []host.Runner { return []host.Runner{d} }

// Name implements host.Runner: "pod NS/driver".
func (d *driverPod) Name() string { return "pod " + d.pd.ns + "/" + d.pd.name }

// Self implements host.Runner: the copied binary.
func (d *driverPod) Self() string { return driverBinary }

// ClockOffset implements host.Runner (the pod's clock is its node's).
func (d *driverPod) ClockOffset() time.Duration { return d.offset.Offset }

// RunJob implements host.Runner: argv runs in the pod through its agent.
func (d *driverPod) RunJob(ctx context.Context, argv []string, stdin []byte) (host.Job, error) {
	if stdin == nil {
		stdin = []byte{}
	}
	r, err := d.agent.Run(ctx, vmagent.Proc{Name: "job", Argv: argv, Dir: "/", Stdin: stdin})
	if err != nil {
		if ctx.Err() != nil {
			return host.Job{}, ctx.Err()
		}
		if derr := d.Dropped(); derr != nil {
			err = fmt.Errorf("%w (%v)", err, derr)
		}
		return host.Job{}, d.errorf("running %s: %w", argv[0], err)
	}
	if r.Error != "" && r.ExitCode == 0 {
		return host.Job{}, d.errorf("running %s: %s", argv[0], r.Error)
	}
	return host.Job{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, Wall: r.Wall, CPU: r.CPU}, nil
}

// Addr implements remote.Agent: the pod's address.
func (d *driverPod) Addr() netip.Addr { return d.ip }

// Agent implements remote.Agent.
func (d *driverPod) Agent() *vmagent.Client { return d.agent }

// CPUs implements remote.Agent: the pod's online CPUs (its node's).
func (d *driverPod) CPUs() []int { return d.cpus }

// Dropped implements remote.Agent: why the agent's stream ended, nil
// while it stands.
func (d *driverPod) Dropped() error {
	select {
	case <-d.execDone:
		err := d.execErr
		if err == nil {
			err = errors.New("it exited")
		}
		return fmt.Errorf("the driver pod's agent ended: %w: %s", err, d.stderr.String())
	default:
		return nil
	}
}

// forward is the driver pod's agent port on this machine's loopback: an
// API-server port-forward, made again when it breaks (the API server or
// the kubelet dropped its stream), so that a lost stream costs a
// reconnect, not the rest of the run.
type forward struct {
	streams podStreams
	ns, pod string
	port    int

	mu     sync.Mutex
	local  int
	done   <-chan struct{}
	stop   func()
	closed bool
}

// open makes the port-forward; mu is held or the forward not yet shared.
func (f *forward) open(ctx context.Context) error {
	local, done, stop, err := f.streams.Forward(ctx, f.ns, f.pod, f.port)
	if err != nil {
		return err
	}
	f.local, f.done, f.stop = local, done, stop
	return nil
}

// dial connects to the agent through the forward, making it again first
// when it has broken. Its address arguments are the agent's in the pod,
// which the forward stands for.
func (f *forward) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("the port-forward to the driver pod's agent is closed")
	}
	select {
	case <-f.done:
		f.stop()
		if err := f.open(ctx); err != nil {
			f.mu.Unlock()
			return nil, fmt.Errorf("the port-forward to the driver pod's agent broke and could not be made again: %w", err)
		}
	default:
	}
	local := f.local
	f.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", local))
}

// close stops the forward; later dials fail.
func (f *forward) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.stop != nil {
		f.stop()
	}
}
