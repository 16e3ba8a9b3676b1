package host

import (
	"context"
	"net/netip"
	"time"
)

// SSH is the kind of a client host on other machines, reached over SSH
// and run by nearnative's agent there (package sshhost).
const SSH Kind = "ssh"

// Pod is the kind of a client host that is a pod of a Kubernetes
// cluster (a driver placed on a node), run by nearnative's agent there.
const Pod Kind = "pod"

// Job is how a process run on a remote host ended.
type Job struct {
	Stdout, Stderr []byte
	ExitCode       int
	Wall, CPU      time.Duration
}

// Runner runs processes on one remote machine through nearnative's agent
// there: a driver host of a hosts file.
type Runner interface {
	// Name is the host's name in the hosts file.
	Name() string
	// Self is the path of the nearnative binary on that machine (for child
	// driver processes).
	Self() string
	// ClockOffset is how far the machine's clock is ahead of this one's, as
	// measured when the run connected: a start time handed to it is moved
	// by it.
	ClockOffset() time.Duration
	// RunJob runs argv there with stdin to completion. An error names the
	// host; a non-zero exit is not an error (Job.ExitCode says it).
	RunJob(ctx context.Context, argv []string, stdin []byte) (Job, error)
}

// Remote is implemented by client hosts on other machines: external tools
// and child driver processes cannot be exec'd here through Wrap, they run
// on the driver hosts through their Runners; DialContext opens connections
// from the first of them.
type Remote interface {
	Host
	// Drivers are the driver hosts the load is spread over (at least one).
	Drivers() []Runner
}

// Sourcer is implemented by client hosts whose connections come from
// several addresses (the driver hosts of a hosts file): Subnet is only
// the first's.
type Sourcer interface {
	// Sources are the prefixes every connection of the client comes from.
	Sources() []netip.Prefix
}

// Sources is where h's connections come from, for a server's access rules:
// h.Sources() when h has several driver hosts, else h.Subnet().
func Sources(h Host) []netip.Prefix {
	if s, ok := h.(Sourcer); ok {
		return s.Sources()
	}
	return []netip.Prefix{h.Subnet()}
}
