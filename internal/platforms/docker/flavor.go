package docker

import (
	"context"
	"net/netip"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// Flavor adapts the Docker platforms to an engine that speaks Docker's API
// but is not dockerd: Podman's service, rootful or rootless (package
// platforms/podman). The zero Flavor is dockerd. The platforms drive such
// an engine through the same Go SDK calls, so that a container is made,
// given its files, started, stopped, logged and removed the same way on
// every engine; a Flavor only says where the engines differ.
type Flavor struct {
	// Name names the engine in descriptions and errors ("Podman 4.3.1").
	Name string
	// Network is the name the engine's inspect output gives its default
	// bridge network ("podman"); "" is dockerd's "bridge".
	Network string
	// NetworkMode, when set, is the network mode of every container not on
	// the host network ("slirp4netns" for rootless Podman).
	NetworkMode string
	// Bridge is the host interface of the default network when the
	// engine's network inspect does not name it ("podman0").
	Bridge string
	// PublishVia says what forwards a published port, for descriptions
	// ("netavark's iptables DNAT", "rootlessport"); "" is dockerd's.
	PublishVia string
	// From are further subnets a server's connections come from on this
	// engine (slirp4netns's own 10.0.2.0/24).
	From []netip.Prefix
	// Ulimits are set on every container: Podman asks for resource limits
	// above the caller's hard limits otherwise, which root without
	// CAP_SYS_RESOURCE cannot grant.
	Ulimits []*container.Ulimit
	// CgroupDirs are the cgroups of container id relative to each
	// hierarchy, tried before dockerd's (libpod_parent/libpod-ID).
	CgroupDirs func(id string) []string
	// Track, when set, is called once a container runs and returns what
	// accounts for its CPU (rootless Podman's containers have no cgroup
	// of their own on cgroup v1: the tracker makes one and moves the
	// container's processes into it). nil: the container's own cgroup.
	Track func(ctx context.Context, c Container) (Tracker, error)
	// LimitsByTrack leaves the platform's CPU set, CPU quota and memory
	// limit out of the create request and hands them to Track, which
	// applies them (rootless Podman cannot on cgroup v1).
	LimitsByTrack bool
	// MapOwner maps a user of the container to the host's ids that own
	// its files on the host (a rootless user namespace shifts them); nil
	// is the identity. With MapOwner set, every volume is given to the
	// container's user (root unless the volume is Own), so that the
	// container can write it.
	MapOwner func(uid, gid int) (int, int)
}

// Container is a running container as a Flavor's Track sees it.
type Container struct {
	ID, Name string
	// PID is the host PID of the container's first process.
	PID int
	// SandboxKey is the path of its network namespace.
	SandboxKey string
	// The platform's limits, for a Flavor with LimitsByTrack.
	CPUSet string
	CPUs   float64
	Memory int64
}

// Tracker accounts for one container's CPU when the engine gives it no
// cgroup of its own.
type Tracker interface {
	// CPUTime is the CPU time the container's processes have used.
	CPUTime(ctx context.Context) (time.Duration, error)
	// CPUSource says what CPUTime counts.
	CPUSource() string
	// OverheadCPUTime is the CPU time of the helper processes that carry
	// the container's traffic (slirp4netns, rootlessport).
	OverheadCPUTime(ctx context.Context) (time.Duration, error)
	// Release removes what the tracker made, once the container is gone.
	Release() error
}

// networkName is the name inspect output gives the default bridge network.
func (f Flavor) networkName() string {
	if f.Network != "" {
		return f.Network
	}
	return network.NetworkBridge
}
