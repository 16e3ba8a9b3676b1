// Package platform defines where a server runs and how a client reaches it:
// the Platform interface, its optional abilities (JobRunner, Checker, CPUReporter, ...),
// the Spec a workload describes a server with once, and the names of the
// built-in platforms. The implementations live in one tree beside it,
// internal/platforms/:
// native processes, Docker (several network paths and OCI runtimes),
// Podman, LXC, QEMU VMs (with Docker inside them), the inter-container
// networks of the icc study (netns) and Kubernetes pods (k8s). Every
// platform starts a Spec and returns the address its client host
// (Env.Client) should use; the multi-server contract (deploy.Backend,
// deploy.Site) is in internal/platforms/deploy, which needs the topology
// types (topology imports platform, so it cannot live in this package),
// and internal/catalog opens the built-in platforms by name.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/ready"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Names of the built-in platforms.
const (
	Native       = "native"
	DockerNAT    = "docker-nat"
	DockerProxy  = "docker-proxy"
	DockerBridge = "docker-bridge"
	DockerHost   = "docker-host"
	VM           = "vm"
	VMDocker     = "vm-docker"
	VMDockerHost = "vm-docker-host"
)

// Docker's containers under other OCI runtimes (package platforms/docker):
// the same containers and network paths as docker-nat, docker-proxy,
// docker-bridge and docker-host, run by gVisor's runsc or by crun instead
// of runc.
const (
	DockerRunscNAT    = "docker-runsc-nat"
	DockerRunscProxy  = "docker-runsc-proxy"
	DockerRunscBridge = "docker-runsc-bridge"
	DockerRunscHost   = "docker-runsc-host"
	DockerCrunBridge  = "docker-crun-bridge"
	DockerCrunHost    = "docker-crun-host"
)

// Podman (package platforms/podman) and LXC (package platforms/lxc).
const (
	Podman         = "podman"
	PodmanRootless = "podman-rootless"
	LXC            = "lxc"
)

// Inter-container networking techniques (the icc study): each is a platform
// kind whose servers and jobs run in containers joined by that technique.
const (
	DockerNetwork = "docker-network"
	Veth          = "veth"
	OVS           = "ovs"
	Routed        = "routed"
	Macvlan       = "macvlan"
)

// Kubernetes platforms (package platforms/k8s): servers in pods of a cluster,
// reached through the path each names.
const (
	K8sPod        = "k8s-pod"
	K8sService    = "k8s-service"
	K8sNodePort   = "k8s-nodeport"
	K8sHostNet    = "k8s-hostnet"
	K8sGuaranteed = "k8s-guaranteed"
)

// Listen tells a workload where its server must listen on a platform.
type Listen struct {
	// Host is the address the server binds (127.0.0.1 natively and on the
	// host network, 0.0.0.0 inside a container's own network namespace).
	Host string
	// Ports maps each port name of the Spec to the port number to bind.
	Ports map[string]int
	// Dir is a directory private to this server, as the server sees it: the
	// Spec's Files are written there and the server may keep data in it.
	// Natively it is a temp dir labelled with the run; in a container it is
	// ContainerDir.
	Dir string
	// From are the subnets connections to the server come from on this
	// platform: its client host's (and this machine's probes), loopback,
	// and the network its peers and the platform's own proxies sit on
	// (docker0, the guests' bridge). A server's access rules name them
	// (pg_hba); empty when the platform cannot tell (see AllowedFrom).
	From []netip.Prefix
}

// privateNets are the ranges AllowedFrom falls back to: loopback and the
// private ranges, never an address that routes off a private network.
var privateNets = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
}

// AllowedFrom is where a server may accept connections from: l.From, or,
// when the platform cannot tell (a Kubernetes cluster's pod and service
// ranges), loopback and the private ranges.
func (l Listen) AllowedFrom() []netip.Prefix {
	if len(l.From) > 0 {
		return l.From
	}
	return privateNets
}

// Nets returns the distinct valid prefixes of ps, masked, in order: a
// platform's Listen.From.
func Nets(ps ...netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Loopback is 127.0.0.0/8, for Listen.From.
var Loopback = netip.MustParsePrefix("127.0.0.0/8")

// ContainerDir is Listen.Dir inside containers and guests.
const ContainerDir = "/nearnative"

// Port returns the number of the named port; it panics on a name the Spec did
// not declare, which is a programming error in the workload.
func (l Listen) Port(name string) int {
	p, ok := l.Ports[name]
	if !ok {
		panic(fmt.Sprintf("platform: port %q not declared in the spec", name))
	}
	return p
}

// File is a file the server needs, written into its file system before start.
type File struct {
	Path    string // relative to Listen.Dir
	Content []byte
	Mode    uint32 // permission bits; 0 means 0644
}

// Volume is a host directory mounted into the server's file system. On the
// native platform the server sees the host path itself.
//
// In a VM the directory's contents are copied into the guest's disk at Path
// before the server starts (the guest's virtual disk is its storage path);
// its writes stay in the guest.
type Volume struct {
	HostPath string
	Path     string // where the server sees it; ignored natively
	// Own gives the tree to the spec's User as that user exists where the
	// server runs (a system user's uid in the image may differ from the
	// host's), so a database can use a data directory prepared on the host.
	Own bool
	// ReadOnly mounts the tree read-only in containers (a cache every trial
	// shares, such as a loaded template's file store). Natively the server
	// sees the host tree as it is; a guest gets its own copy.
	ReadOnly bool
}

// Spec describes one server process.
type Spec struct {
	// Name is short and unique within a trial ("redis", "pg"); it appears in
	// container names, log file names and reports.
	Name string
	// Ports are the names of the TCP ports the server listens on.
	Ports []string
	// Command builds the argv once the platform has chosen where to listen.
	Command func(Listen) []string
	Env     map[string]string
	Files   []File
	// Render, when set, returns more files once the platform has chosen
	// where the server listens: configuration files that name the server's
	// own address, ports or directory (an HAProxy bind line, an nginx
	// listen directive).
	Render  func(Listen) []File
	Volumes []Volume
	// User to run as (name or uid); empty means root in a container and the
	// current user natively.
	User string
}

// FilesFor returns the spec's files for a server listening as l: Files,
// then what Render gives.
func (s Spec) FilesFor(l Listen) []File {
	if s.Render == nil {
		return s.Files
	}
	return append(append([]File(nil), s.Files...), s.Render(l)...)
}

// Validate reports a malformed Spec.
func (s Spec) Validate() error {
	if s.Name == "" || strings.ContainsAny(s.Name, " /:") {
		return fmt.Errorf("server spec: name %q must be non-empty without spaces, '/' or ':'", s.Name)
	}
	if s.Command == nil {
		return fmt.Errorf("server spec %s: no command", s.Name)
	}
	seen := map[string]bool{}
	for _, p := range s.Ports {
		if seen[p] {
			return fmt.Errorf("server spec %s: port %q declared twice", s.Name, p)
		}
		seen[p] = true
	}
	for _, f := range s.Files {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") {
			return fmt.Errorf("server spec %s: file path %q must be relative to the server's directory", s.Name, f.Path)
		}
	}
	return nil
}

// Server is a started server.
type Server interface {
	// Addr is host:port the platform's client host (Env.Client) uses to
	// reach the named port.
	Addr(port string) string
	// Command is the argv as run, for the record.
	Command() []string
	// Describe says where the server runs, for the record ("container abc123
	// on bridge 172.17.0.2, published 192.0.2.2:40001").
	Describe() string
	// Stop stops the server and removes what was made for it. Stopping a
	// server that is already gone is not an error.
	Stop(ctx context.Context) error
}

// JobResult is what a one-shot job printed and how it ended.
type JobResult struct {
	Stdout, Stderr []byte
	ExitCode       int
	Wall           time.Duration
	// Command is the argv as run; Where says where it ran.
	Command []string
	Where   string
}

// JobRunner is implemented by platforms that can run a one-shot command
// inside the platform and wait for it: the compute and storage benchmarks
// run entirely inside the platform, with its CPU set and limits. The spec's
// Ports are ignored. A job that exits non-zero returns its JobResult (for the
// raw output) and an error that says so.
type JobRunner interface {
	RunJob(ctx context.Context, trial string, spec Spec) (JobResult, error)
}

// CPUReporter is implemented by servers that can tell the CPU time their
// processes have used so far (user + system, all threads and children). A
// workload reads it before and after its load to report the server's own
// CPU share and cost per operation.
type CPUReporter interface {
	CPUTime(ctx context.Context) (time.Duration, error)
}

// CPUDescriber is implemented by CPUReporters that say what their CPU time
// counts, for the record: "cgroup v1 cpuacct nearnative/RUN/NAME", "the
// whole guest: the qemu process on the host".
type CPUDescriber interface {
	CPUSource() string
}

// MachineReporter is implemented by servers on another machine than this
// one (a host of a hosts file). The CPU account's whole-machine figures
// (CPU per operation, steal, the outside-CPU check) are then those of the
// machines the system under test runs on, not of this one.
type MachineReporter interface {
	// Machine names the reading MachineCPU makes without making it: the
	// same for servers whose readings are the same (the servers of one
	// host, in one role), so that one is read for all of them.
	Machine() string
	// MachineCPU reads the server's machine's CPU counters.
	MachineCPU(ctx context.Context) (MachineSample, error)
}

// ProbeDialer is implemented by servers on another machine than this one
// (a host of a hosts file): a readiness probe reaches the server's
// addresses through ProbeDial, from the server's own host, where its
// access rules admit it and its container addresses are routed; from here
// neither may hold.
type ProbeDialer interface {
	ProbeDial(ctx context.Context, network, addr string) (net.Conn, error)
}

// MachineSample is one reading of a machine's CPU counters.
type MachineSample struct {
	// Name is the machine's name for the record (a host of the hosts file).
	Name string
	// BootID names the running kernel: hosts that share one are one
	// machine (the test bed's), read once.
	BootID string
	// SUT is false for a server that runs beside the load driver on a
	// driver host: its machine is not the system under test's.
	SUT    bool
	Sample sysinfo.CPUSample
}

// OverheadReporter is implemented by servers whose platform runs helper
// processes on the host on their behalf (Docker's userland proxy for a
// published port): OverheadCPUTime is those processes' CPU time so far, which
// belongs to the run's own CPU rather than to the rest of the machine.
type OverheadReporter interface {
	OverheadCPUTime(ctx context.Context) (time.Duration, error)
}

// Degrader is implemented by platforms that can run in a degraded or
// fallback mode (a VM emulated without KVM, on a user-mode network; native
// servers without a cgroup). Degradations lists the modes in effect so far,
// each one sentence; the run stores them and every report shows them.
type Degrader interface {
	Degradations() []string
}

// Sandbox is a kernel of its own between a platform's servers and the
// host's (gVisor's sentry): what it is and how its network is made.
type Sandbox struct {
	Name     string // "gVisor"
	Platform string // how system calls reach it: "ptrace", "kvm", "systrap"
	// Network is its network stack: "sandbox" (its own), "host" (the
	// host kernel's sockets, in the container's namespace), "none".
	Network string
}

// Sandboxed is implemented by platforms that may run their servers in a
// sandbox: Sandbox says which, once the platform has been checked; ok is
// false when its servers talk to the host's kernel directly. A workload
// that needs what a sandbox lacks refuses the platform
// (workload.PlatformRefuser).
type Sandboxed interface {
	Sandbox() (s Sandbox, ok bool)
}

// Options are the resource settings a platform variant applies to its servers.
type Options struct {
	CPUSet string  `yaml:"cpuset" json:"cpuset,omitempty"` // CPUs the server may run on, as "0", "0-1", "0,2"
	CPUs   float64 `yaml:"cpus" json:"cpus,omitempty"`     // CPU quota in CPUs (0.8 = 80 ms per 100 ms)
	Memory string  `yaml:"memory" json:"memory,omitempty"` // memory limit: 512m, 2g, or bytes
	// VCPUs and VMMemory size the guest of the vm platforms (defaults 2 and
	// 2g); other platforms ignore them.
	VCPUs    int    `yaml:"vcpus" json:"vcpus,omitempty"`
	VMMemory string `yaml:"vm_memory" json:"vm_memory,omitempty"`
	// Pin "spread" pins each server of a topology the platform deploys to
	// a core of its own (as a topology's placement pin: spread does, for
	// the servers the workload pins), so that a study can compare a
	// platform with its pinned variant: {name: native-pinned, base:
	// native, options: {pin: spread}}. Native and Docker platforms only.
	Pin string `yaml:"pin" json:"pin,omitempty"`
	// Place puts each role's pods on a Kubernetes node, as
	// "role=node,role=node" sorted by role (FormatPlace; a study file
	// writes it as a mapping, place: {db: node-a, web: node-b}), so that a
	// study can compare layouts of one cluster as platforms. Kubernetes
	// platforms only; hosts of a hosts file have their own place:.
	Place string `yaml:"place" json:"place,omitempty"`
}

// Driver is the role name of the load driver in a placement.
const Driver = "driver"

var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// FormatPlace is the canonical form of a placement (role -> node) in
// Options.Place: "role=node" pairs sorted by role, joined by commas.
func FormatPlace(m map[string]string) string {
	roles := make([]string, 0, len(m))
	for r := range m {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = r + "=" + m[r]
	}
	return strings.Join(parts, ",")
}

// ParsePlace reads Options.Place back into role -> node, checking each
// pair: a role name and a node name (a DNS subdomain, as Kubernetes names
// nodes). The role Driver places the load driver: it then runs in a pod
// on that node instead of on the run's client host.
func ParsePlace(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	for _, pair := range strings.Split(s, ",") {
		role, node, ok := strings.Cut(pair, "=")
		switch {
		case !ok || role == "":
			return nil, fmt.Errorf("place %q: want role=node pairs", s)
		case !nodeName.MatchString(node):
			return nil, fmt.Errorf("place: %s on %q: not a Kubernetes node name (lower-case letters, digits, '-' and '.')", role, node)
		}
		if _, dup := m[role]; dup {
			return nil, fmt.Errorf("place: role %s placed twice", role)
		}
		m[role] = node
	}
	return m, nil
}

// PinSpread is the Pin option that pins each server to a core of its own.
const PinSpread = "spread"

// Validate checks the options' syntax.
func (o Options) Validate() error {
	if o.CPUSet != "" {
		if _, err := ParseCPUSet(o.CPUSet); err != nil {
			return err
		}
	}
	if o.CPUs < 0 || math.IsNaN(o.CPUs) || math.IsInf(o.CPUs, 0) {
		return fmt.Errorf("cpus %v: must be positive", o.CPUs)
	}
	if o.CPUs > 0 && o.CPUs < 0.01 {
		return fmt.Errorf("cpus %v: must be at least 0.01", o.CPUs)
	}
	if o.Memory != "" {
		if _, err := ParseBytes(o.Memory); err != nil {
			return err
		}
	}
	if o.VCPUs < 0 || o.VCPUs > 255 {
		return fmt.Errorf("vcpus %d: want 1 to 255", o.VCPUs)
	}
	if o.Pin != "" && o.Pin != PinSpread {
		return fmt.Errorf("pin %q: want %q (each server of a topology on a core of its own) or nothing", o.Pin, PinSpread)
	}
	if _, err := ParsePlace(o.Place); err != nil {
		return err
	}
	if o.VMMemory != "" {
		if n, err := ParseBytes(o.VMMemory); err != nil {
			return fmt.Errorf("vm_memory: %w", err)
		} else if n < 128<<20 {
			return fmt.Errorf("vm_memory %s: a guest needs at least 128m", o.VMMemory)
		}
	}
	return nil
}

// MemoryBytes returns the memory limit in bytes, 0 when unset.
func (o Options) MemoryBytes() int64 {
	n, _ := ParseBytes(o.Memory)
	return n
}

// String is a compact description for reports.
func (o Options) String() string {
	var parts []string
	if o.CPUSet != "" {
		parts = append(parts, "cpuset="+o.CPUSet)
	}
	if o.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("cpus=%g", o.CPUs))
	}
	if o.Memory != "" {
		parts = append(parts, "memory="+o.Memory)
	}
	if o.VCPUs > 0 {
		parts = append(parts, fmt.Sprintf("vcpus=%d", o.VCPUs))
	}
	if o.VMMemory != "" {
		parts = append(parts, "vm_memory="+o.VMMemory)
	}
	if o.Pin != "" {
		parts = append(parts, "pin="+o.Pin)
	}
	if o.Place != "" {
		parts = append(parts, "place={"+strings.ReplaceAll(o.Place, ",", " ")+"}")
	}
	return strings.Join(parts, ",")
}

// Env is what every platform needs from the run it belongs to.
type Env struct {
	Run    runid.ID
	LogDir string // server output goes to LogDir/<trial>-<server>.log
	Image  string // workload image reference for container platforms
	// Log receives progress lines of long preparations (a VM disk build);
	// nil discards them.
	Log io.Writer
	// Client is where this platform's load runs (nil: on this machine, over
	// loopback). Servers listen on, or are published on, its ServerAddr and
	// never on a wildcard or the machine's primary address; a platform whose
	// servers sit on a subnet of their own (docker0, the guests' bridge,
	// pods) routes the client there (Client.Route).
	Client host.Host
}

// ClientHost is e.Client, or the loopback host when it is nil.
func (e Env) ClientHost() host.Host { return host.Or(e.Client) }

// Logf writes one progress line to e.Log, if any.
func (e Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Platform starts servers somewhere.
type Platform interface {
	// Name is the platform's name in studies and reports.
	Name() string
	// Start starts one server and returns once its process or container is
	// running; readiness of the service itself is the workload's business.
	// trial names the trial for log files.
	Start(ctx context.Context, trial string, spec Spec) (Server, error)
}

type quickStartKey struct{}

// QuickStart returns a context under which a platform's Start returns as
// soon as the server's process runs, without first watching it for an
// immediate exit (the Docker platforms otherwise give a fresh container
// 150 ms to fail, so that an exit is reported with its log): the
// container-start workload times a start itself, up to the first answer
// of the server's readiness probe.
func QuickStart(ctx context.Context) context.Context {
	return context.WithValue(ctx, quickStartKey{}, true)
}

// IsQuickStart reports whether ctx asks for a QuickStart.
func IsQuickStart(ctx context.Context) bool {
	v, _ := ctx.Value(quickStartKey{}).(bool)
	return v
}

// Checker is implemented by platforms that can say whether they can run here.
type Checker interface {
	// Check returns nil when the platform can run on this machine, else an
	// error whose text says why not and how to fix it.
	Check(ctx context.Context) error
}

// Accelerator is implemented by platforms whose speed depends on the
// virtualisation they get (VMs): Acceleration says which ("KVM", or the
// emulation note and why), for listings.
type Accelerator interface {
	Acceleration(ctx context.Context) string
}

// ClientMaker is implemented by a platform that may make its own client
// host: a Kubernetes platform whose driver is placed on a node runs the
// load in a pod there. The run's Open calls MakeClient after Check and
// uses the host it returns for the platform's trials; nil leaves the
// run's client host. The platform removes the host it made on Close.
type ClientMaker interface {
	MakeClient(ctx context.Context) (host.Host, error)
}

// Closer is implemented by platforms that hold resources across trials (a
// Docker client, a VM); Close releases them.
type Closer interface {
	Close() error
}

// ErrUnavailable is matched (errors.Is) by every error saying that a
// platform cannot run here; build such errors with Unavailablef.
var ErrUnavailable = errors.New("platform unavailable")

type unavailable struct{ err error }

func (u unavailable) Error() string   { return u.err.Error() }
func (u unavailable) Unwrap() []error { return []error{u.err, ErrUnavailable} }

// Unavailablef formats the reason a platform cannot run here (and how to fix
// it); the error matches ErrUnavailable and wraps any %w operands, without
// adding words of its own.
func Unavailablef(format string, args ...any) error {
	return unavailable{fmt.Errorf(format, args...)}
}

// Info describes a platform kind for `nearnative platforms`.
type Info struct {
	Name        string
	Description string
}

// Builtin lists the built-in platform kinds in display order.
func Builtin() []Info {
	return []Info{
		{Native, "host process in its own process group, listening on the client host's link (127.0.0.1 with --client host)"},
		{DockerNAT, "container on the default bridge, port published on the client host's link; client through the iptables DNAT path (PREROUTING from the client's namespace, OUTPUT with --client host)"},
		{DockerProxy, "container on the default bridge, port published on 127.0.0.1; client on this machine through the userland docker-proxy, whatever --client says"},
		{DockerBridge, "container on the default bridge; client connects to the container's bridge address (veth, no NAT; routed from the client's namespace)"},
		{DockerHost, "container on the host network, listening on the client host's link (127.0.0.1 with --client host)"},
		{DockerRunscNAT, "as docker-nat, the container sandboxed by gVisor (runtime runsc; the table's notes name gVisor's platform and network stack)"},
		{DockerRunscProxy, "as docker-proxy, the container sandboxed by gVisor (runtime runsc)"},
		{DockerRunscBridge, "as docker-bridge, the container sandboxed by gVisor (runtime runsc)"},
		{DockerRunscHost, "as docker-host, the container sandboxed by gVisor (runtime runsc)"},
		{DockerCrunBridge, "as docker-bridge, the container run by crun instead of runc"},
		{DockerCrunHost, "as docker-host, the container run by crun instead of runc"},
		{Podman, "rootful Podman container on its netavark bridge, port published on the client host's link (netavark's iptables DNAT)"},
		{PodmanRootless, "rootless Podman container of a dedicated unprivileged user, slirp4netns network, port published on the client host's link by rootlessport"},
		{LXC, "LXC system container booted from the workload image's root file system, its own veth on a bridge made for the run; servers started by nearnative's agent inside"},
		{DockerNetwork, "container on a user-defined Docker bridge network made for the run; clients in containers reach it by name (embedded DNS)"},
		{Veth, "container with --network none joined by a veth pair to a Linux bridge made for the run (the pipework way)"},
		{OVS, "container with --network none joined by a veth pair to an Open vSwitch bridge made for the run (userspace datapath when the kernel has no openvswitch module)"},
		{Routed, "container with --network none and a routable /32 address; the host routes between veth pairs (proxy ARP, iptables FORWARD rules)"},
		{Macvlan, "container with --network none and a macvlan (bridge mode) on a parent link made for the run, never the uplink"},
		{VM, "QEMU guest (KVM when it boots, else \"emulated (TCG), not comparable\") booted from the workload image; client via the guest's address on a private bridge"},
		{VMDocker, "container in the Docker engine of a QEMU guest (as vm), port published on the guest's address (DNAT inside the guest)"},
		{VMDockerHost, "container on the host network of a QEMU guest's Docker engine (as vm); client via the guest's address"},
		{K8sPod, "Kubernetes pod from the workload image; client to the pod IP through the CNI"},
		{K8sService, "Kubernetes pod behind a ClusterIP Service; client to the ClusterIP through kube-proxy"},
		{K8sNodePort, "Kubernetes pod behind a NodePort Service; client to the node's address and node port through kube-proxy"},
		{K8sHostNet, "Kubernetes pod on the node's host network (hostNetwork), listening on the client host's link (127.0.0.1 with --client host)"},
		{K8sGuaranteed, "Kubernetes Guaranteed pod (integer CPUs, requests = limits) on a node with the static CPU manager: exclusive cores; client to the pod IP"},
	}
}

// Families of platforms, in the order reports group them.
const (
	FamilyNative     = "native"
	FamilyDocker     = "Docker (runc)"
	FamilyDockerCrun = "Docker (crun)"
	FamilyGVisor     = "gVisor"
	FamilyPodman     = "Podman"
	FamilyLXC        = "LXC"
	FamilyVM         = "VM"
	FamilyKubernetes = "Kubernetes"
)

// Families lists the families in report order.
var Families = []string{FamilyNative, FamilyDocker, FamilyDockerCrun, FamilyGVisor, FamilyPodman, FamilyLXC, FamilyVM, FamilyKubernetes}

// Family is the family of the platform kind base: what runs the server
// (the host, runc, crun, gVisor, Podman, LXC, a VM, Kubernetes); "" for an
// unknown kind.
func Family(base string) string {
	switch base {
	case Native:
		return FamilyNative
	case DockerNAT, DockerProxy, DockerBridge, DockerHost, DockerNetwork, Veth, OVS, Routed, Macvlan:
		return FamilyDocker
	case DockerCrunBridge, DockerCrunHost:
		return FamilyDockerCrun
	case DockerRunscNAT, DockerRunscProxy, DockerRunscBridge, DockerRunscHost:
		return FamilyGVisor
	case Podman, PodmanRootless:
		return FamilyPodman
	case LXC:
		return FamilyLXC
	case VM, VMDocker, VMDockerHost:
		return FamilyVM
	case K8sPod, K8sService, K8sNodePort, K8sHostNet, K8sGuaranteed:
		return FamilyKubernetes
	}
	return ""
}

// FamilyRank is the position of base's family in Families (len(Families)
// for an unknown kind), for sorting.
func FamilyRank(base string) int {
	f := Family(base)
	for i, x := range Families {
		if x == f {
			return i
		}
	}
	return len(Families)
}

// IsBuiltin reports whether name is a built-in platform kind.
func IsBuiltin(name string) bool {
	for _, i := range Builtin() {
		if i.Name == name {
			return true
		}
	}
	return false
}

// BuiltinNames returns the names of the built-in platform kinds.
func BuiltinNames() []string {
	var n []string
	for _, i := range Builtin() {
		n = append(n, i.Name)
	}
	return n
}

// AssignPorts maps the spec's port names to free ports on host.
func AssignPorts(spec Spec, host string) (map[string]int, error) {
	ports, err := FreePorts(host, len(spec.Ports))
	if err != nil {
		return nil, err
	}
	return PortsFor(spec, ports), nil
}

// PortsFor maps the spec's port names, in order, to ports (one each,
// found free where the server runs).
func PortsFor(spec Spec, ports []int) map[string]int {
	m := make(map[string]int, len(ports))
	for i, name := range spec.Ports {
		m[name] = ports[i]
	}
	return m
}

// WaitTCP dials addr until it accepts a connection or ctx/timeout ends.
func WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	err := WaitReady(ctx, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s did not accept connections: %w", addr, err)
	}
	return nil
}

// WaitReady calls probe every interval until it succeeds, or until
// timeout passes or ctx ends, and then returns "not ready within TIMEOUT: "
// and probe's last error; a probe error marked ready.Final ends the wait at
// once. It is internal/ready's loop, the one every server check uses. What
// counts as ready is probe's business: a TCP connect (WaitTCP), a Redis
// PING (redisproto.WaitReady), a connection the server keeps open (tcp-rr).
func WaitReady(ctx context.Context, timeout, interval time.Duration, probe func(ctx context.Context) error) error {
	return ready.Loop{Timeout: timeout, Every: interval}.Wait(ctx, probe)
}

// ParseCPUSet parses a Linux CPU list ("0-2,5") into sorted CPU numbers.
func ParseCPUSet(s string) ([]int, error) {
	set := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("cpuset %q: %q is not a CPU number (want e.g. 0, 0-3, 0,2)", s, lo)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpuset %q: bad range %q (want low-high)", s, part)
			}
		}
		for c := a; c <= b; c++ {
			set[c] = true
		}
	}
	var cpus []int
	for c := range set {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	return cpus, nil
}

// maxCPU bounds the CPU numbers ParseCPUSet accepts, far above any Linux
// NR_CPUS, so that a typo such as 0-100000000 is an error rather than a
// hundred million set entries.
const maxCPU = 1<<16 - 1

// cpuNumber parses a CPU number: decimal digits only (no sign), at most maxCPU.
func cpuNumber(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a CPU number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("CPU number out of range")
	}
	return n, nil
}

// ParseBytes parses a size such as 512m, 2g, 1024k or a plain byte count.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	t = strings.TrimSuffix(t, "i")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		case 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// NaN, Inf and sizes beyond int64 would convert to garbage; below one
	// byte would become 0, which means "no limit".
	if n := v * float64(mult); err != nil || !(n >= 1) || n >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional k, m, g or t suffix (e.g. 512m)", s)
	}
	return int64(v * float64(mult)), nil
}
