// Package cluster brings up, inspects and tears down a one-node Kubernetes
// cluster on this machine, so that the k8s platforms have a real cluster to
// run on where the user has none: etcd, kube-apiserver, controller-manager,
// scheduler, a private containerd with CRI (its own root, state and socket;
// Docker's containerd is left alone), a bridge CNI with host-local IPAM and
// portmap, kubelet (cgroupfs driver, static CPU manager) and kube-proxy
// (iptables mode).
//
// The binaries are built once from the Go module proxy (the only source
// reachable on the machines this project runs on), cached under the state
// directory keyed by version and checksummed; certificates are made with
// crypto/x509. Every address the cluster listens on is loopback or the node
// address on a bridge the cluster makes for itself. Down stops everything
// and restores what the components changed on the host: processes, mounts,
// the bridge, iptables chains and tables, sysctls, directories.
package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/state"
)

// Pinned versions. kubelet 1.31 to 1.34 run on cgroup v1 as they are; from
// 1.35 kubelet refuses cgroup v1 unless failCgroupV1 is turned off, so stay
// at or below 1.34 on cgroup v1 hosts.
const (
	KubernetesVersion = "v1.31.4"
	// StagingVersion is the version of the k8s.io staging modules that
	// replace k8s.io/kubernetes's ./staging directories, and of client-go.
	StagingVersion = "v0.31.4"
	EtcdVersion    = "v3.5.17"
	// PauseImage is the sandbox image, built locally (no registry here).
	PauseImage = "registry.k8s.io/pause:3.10"
)

// Components are the binaries built from k8s.io/kubernetes.
var Components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// Default network settings: the node's address is the gateway of the pod
// subnet on a bridge the cluster makes, so that every server of the cluster
// listens on loopback or on that bridge.
const (
	DefaultBridge      = "nn-k8s0"
	DefaultPodCIDR     = "10.244.0.0/24"
	DefaultServiceCIDR = "10.96.0.0/24"
	DefaultNodeName    = "nearnative-node"
	// Loopback ports of the control plane (etcd's are not the defaults,
	// so that a system etcd, if any, is left alone).
	EtcdClientPort = 23790
	EtcdPeerPort   = 23800
	APIServerPort  = 6443
	// ClusterLabel marks the host objects of the cluster (iptables rule
	// comments, the environment of its processes).
	ClusterLabel = "nearnative.cluster"
)

// EnvCluster is set in the environment of every cluster process; its value
// is the cluster's directory, so Down finds processes it lost track of.
const EnvCluster = "NEARNATIVE_CLUSTER"

// Config says where and how the cluster runs.
type Config struct {
	// Home is the state directory; the cluster lives in Home/cluster.
	Home state.Dir
	// Bridge, PodCIDR and ServiceCIDR place the node's network.
	Bridge      string
	PodCIDR     string
	ServiceCIDR string
	NodeName    string
	// CPUManager is "static" (the default on machines with at least two
	// CPUs: Guaranteed pods get exclusive cores) or "none".
	CPUManager string
}

// DefaultConfig is the cluster of state directory home.
func DefaultConfig(home state.Dir) Config {
	c := Config{Home: home, Bridge: DefaultBridge, PodCIDR: DefaultPodCIDR, ServiceCIDR: DefaultServiceCIDR,
		NodeName: DefaultNodeName, CPUManager: "static"}
	if n := onlineCPUs(); n < 2 {
		c.CPUManager = "none"
	}
	return c
}

var linkName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,15}$`)

// Validate checks the settings without touching the machine.
func (c Config) Validate() error {
	if c.Home.Root == "" {
		return errors.New("cluster: no state directory")
	}
	if !linkName.MatchString(c.Bridge) {
		return fmt.Errorf("cluster: bridge name %q: want 1 to 15 letters, digits, '-' or '_'", c.Bridge)
	}
	pod, err := prefix(c.PodCIDR, "pod CIDR")
	if err != nil {
		return err
	}
	svc, err := prefix(c.ServiceCIDR, "service CIDR")
	if err != nil {
		return err
	}
	if pod.Contains(svc.IP) || svc.Contains(pod.IP) {
		return fmt.Errorf("cluster: pod CIDR %s and service CIDR %s overlap", c.PodCIDR, c.ServiceCIDR)
	}
	if ones, _ := pod.Mask.Size(); ones > 28 {
		return fmt.Errorf("cluster: pod CIDR %s is too small: want a /28 or larger", c.PodCIDR)
	}
	if c.NodeName == "" || strings.ToLower(c.NodeName) != c.NodeName || strings.ContainsAny(c.NodeName, " /_") {
		return fmt.Errorf("cluster: node name %q: want a lower-case DNS name", c.NodeName)
	}
	switch c.CPUManager {
	case "static", "none":
	default:
		return fmt.Errorf("cluster: CPU manager policy %q: want static or none", c.CPUManager)
	}
	return nil
}

func prefix(s, what string) (*net.IPNet, error) {
	ip, n, err := net.ParseCIDR(s)
	if err != nil || ip.To4() == nil {
		return nil, fmt.Errorf("cluster: %s %q: want an IPv4 prefix such as 10.244.0.0/24", what, s)
	}
	return n, nil
}

// NodeIP is the node's address: the first address of the pod subnet, the
// gateway on the cluster's bridge.
func (c Config) NodeIP() net.IP { return nthIP(c.PodCIDR, 1) }

// BridgeMAC is the bridge's fixed hardware address: locally administered
// and unicast (02:6e:6e, then the node address's last three bytes). A Linux
// bridge without an address of its own takes the lowest of its ports' and
// changes it as pods' veths come and go (deleting one pod changed it here),
// so a pod's ARP entry for the node address could name a MAC no port has;
// docker0 keeps a fixed address too.
func (c Config) BridgeMAC() net.HardwareAddr {
	ip := c.NodeIP().To4()
	if ip == nil {
		return nil
	}
	return net.HardwareAddr{0x02, 0x6e, 0x6e, ip[1], ip[2], ip[3]}
}

// ServiceIP is the ClusterIP of the kubernetes Service (first of the range).
func (c Config) ServiceIP() net.IP { return nthIP(c.ServiceCIDR, 1) }

func nthIP(cidr string, n byte) net.IP {
	_, p, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil
	}
	ip := make(net.IP, 4)
	copy(ip, p.IP.To4())
	ip[3] += n
	return ip
}

// Dir is the cluster's directory in the state directory.
func (c Config) Dir() string { return filepath.Join(c.Home.Root, "cluster") }

// BinDir holds the built binaries of the pinned versions.
func (c Config) BinDir() string { return filepath.Join(c.Dir(), "bin", KubernetesVersion) }

// BuildDir holds the scratch modules the binaries are built from.
func (c Config) BuildDir() string { return filepath.Join(c.Dir(), "build") }

// RunDir holds a running cluster's data: certificates, etcd, containerd,
// kubelet, logs, pid files. Down removes it.
func (c Config) RunDir() string { return filepath.Join(c.Dir(), "run") }

// EtcdURL is etcd's client URL: TLS on loopback, client certificates
// required.
func (c Config) EtcdURL() string { return "https://127.0.0.1:" + strconv.Itoa(EtcdClientPort) }

// Kubeconfig is the admin kubeconfig of the running cluster; the k8s
// platforms use it when no other is given.
func (c Config) Kubeconfig() string { return filepath.Join(c.RunDir(), "admin.kubeconfig") }

// ContainerdSocket is the private containerd's socket.
func (c Config) ContainerdSocket() string {
	return filepath.Join(c.RunDir(), "containerd", "containerd.sock")
}

func (c Config) path(parts ...string) string {
	return filepath.Join(append([]string{c.RunDir()}, parts...)...)
}

// DefaultKubeconfig is the admin kubeconfig of the cluster of the default
// state directory.
func DefaultKubeconfig() string { return DefaultConfig(state.Home()).Kubeconfig() }

func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 1
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		var lo, hi int
		if _, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err == nil {
			n += hi - lo + 1
		} else {
			n++
		}
	}
	return n
}
