// Package driver is nearnative's own load generator, the base of every
// application study: closed-loop simulated users whose sessions are Markov
// chains or scripts paced by cycle or think times, and open-loop rate plans
// timed from the intended send (wrk2's rule against coordinated omission).
// Each operation gets a count, failures by cause and an HdrHistogram, merged
// over users, shards and driver processes; only the steady phase counts, and
// a per-second series covers every phase. With Drivers > 0 the load comes
// from child processes (the nearnative binary re-executed), optionally
// pinned. Every run checks whether the driver itself was the bottleneck.
//
// Facts and rules: ../shared/specs/apps.md. Anchors: wrk2 (latency from the
// intended start), fortio and vegeta (Go, histograms, a pacer), Faban
// (closed-loop users, cycle times), Weathervane (per-operation QoS).
package driver

import (
	"fmt"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// Modes of a driver run.
const (
	// Closed is a closed system: Users simulated users, each waiting for its
	// operation to finish, then pacing.
	Closed = "closed"
	// Open is an open system: requests due by a rate plan, whatever happened
	// to the ones before, sent by Connections workers.
	Open = "open"
)

// Defaults.
const (
	DefaultLateAfter = time.Millisecond
	DefaultDrain     = 2 * time.Second
)

// Config is one driver run. Validate checks it before anything starts.
type Config struct {
	// Behaviour names a registered Behaviour; Params are its parameters
	// (addresses, paths), passed as is to child processes.
	Behaviour string            `json:"behaviour"`
	Params    map[string]string `json:"params,omitempty"`

	Mode string `json:"mode"`
	// Closed loop: how many users, and how they pace.
	Users  int    `json:"users,omitempty"`
	Pacing Pacing `json:"pacing"`
	// Open loop: the rate plan and how many concurrent workers send it (each
	// with its own connection, as the behaviour makes it).
	Plan        Plan `json:"plan"`
	Connections int  `json:"connections,omitempty"`
	// LateAfter: an open-loop request sent more than this after it was due
	// counts as late (default 1 ms).
	LateAfter time.Duration `json:"late_after,omitempty"`

	Phases Phases `json:"phases"`
	// Drain is how long operations in flight at the end may still finish
	// before they are cut off (default 2 s); cut-off ones are counted as
	// unfinished, never as failures.
	Drain time.Duration `json:"drain,omitempty"`

	// Drivers is the number of child driver processes; 0 runs the load in
	// this process, except with driver hosts (a host.Remote Client), where
	// the load always runs in child processes there, at least one per host.
	// Result.Drivers says how many ran.
	Drivers int `json:"drivers,omitempty"`
	// CPUSets pins the child processes: one CPU list for all of them, or one
	// per child. Empty: not pinned.
	CPUSets []string `json:"cpusets,omitempty"`
	// Threads limits each child process to this many threads running Go
	// code at once (GOMAXPROCS); 0 leaves Go's default, one per CPU. A
	// single-threaded child is how the seeds' load generators ran (one
	// redis-benchmark per Redis), and it spares the scheduler hand-offs
	// between threads that cost a many-connection driver CPU.
	Threads int `json:"threads,omitempty"`

	// Seed makes users' random choices repeatable.
	Seed int64 `json:"seed"`
	// Limits are the saturation checks' thresholds.
	Limits Limits `json:"limits"`
	// Run is the run ID child processes carry in their environment.
	Run runid.ID `json:"run,omitempty"`
	// Client is where the load runs (nil: this machine): child processes
	// are started inside it (Client.Wrap), users of this process dial
	// through it (Client.DialContext). Child processes, already inside,
	// dial as usual. A host.Remote Client runs every user in child
	// processes on its driver hosts.
	Client host.Host `json:"-"`
}

// dial is how this process's users open connections.
func (c Config) dial() DialFunc {
	if c.Client == nil {
		return DefaultDial
	}
	return c.Client.DialContext
}

// Validate checks the run's settings, and that the behaviour is registered
// and accepts its parameters.
func (c Config) Validate() error {
	if c.Behaviour == "" {
		return fmt.Errorf("driver: no behaviour named")
	}
	switch c.Mode {
	case Closed:
		if c.Users < 1 {
			return fmt.Errorf("driver: %d users: want at least 1", c.Users)
		}
		if err := c.Pacing.Validate(); err != nil {
			return fmt.Errorf("driver: %w", err)
		}
	case Open:
		if err := c.Plan.Validate(); err != nil {
			return fmt.Errorf("driver: %w", err)
		}
		if c.Connections < 1 {
			return fmt.Errorf("driver: %d connections: want at least 1", c.Connections)
		}
		if c.LateAfter < 0 {
			return fmt.Errorf("driver: late_after %v is negative", c.LateAfter)
		}
	default:
		return fmt.Errorf("driver: mode %q: want %s or %s", c.Mode, Closed, Open)
	}
	if err := c.Phases.Validate(); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	if c.Drain < 0 {
		return fmt.Errorf("driver: drain %v is negative", c.Drain)
	}
	if c.Drivers < 0 {
		return fmt.Errorf("driver: %d driver processes: want 0 (in process) or more", c.Drivers)
	}
	if c.Threads < 0 || (c.Threads > 0 && c.Drivers == 0) {
		return fmt.Errorf("driver: threads %d: want 0 (Go's default) or a count for each of drivers > 0 child processes", c.Threads)
	}
	if c.Drivers > 0 {
		if c.Mode == Closed && c.Users < c.Drivers {
			return fmt.Errorf("driver: %d users cannot be shared by %d driver processes", c.Users, c.Drivers)
		}
		if c.Mode == Open && c.Connections < c.Drivers {
			return fmt.Errorf("driver: %d connections cannot be shared by %d driver processes", c.Connections, c.Drivers)
		}
	}
	if len(c.CPUSets) > 0 {
		if c.Drivers == 0 {
			return fmt.Errorf("driver: cpusets pin child driver processes: set drivers to 1 or more")
		}
		if len(c.CPUSets) != 1 && len(c.CPUSets) != c.Drivers {
			return fmt.Errorf("driver: %d cpusets for %d driver processes: give one for all or one each", len(c.CPUSets), c.Drivers)
		}
		for _, s := range c.CPUSets {
			if _, err := platform.ParseCPUSet(s); err != nil {
				return fmt.Errorf("driver: %w", err)
			}
		}
	}
	f, err := Lookup(c.Behaviour, c.Params)
	if err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	ops := f.Ops()
	f.Close()
	for op := range c.Pacing.MinCycle {
		found := false
		for _, o := range ops {
			found = found || o == op
		}
		if !found {
			return fmt.Errorf("driver: pacing min_cycle names operation %q, which behaviour %s does not perform (operations: %s)",
				op, c.Behaviour, strings.Join(ops, ", "))
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.LateAfter == 0 {
		c.LateAfter = DefaultLateAfter
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	return c
}

// Ops returns the operations of the configured behaviour, for checking QoS
// rules before anything starts.
func (c Config) Ops() ([]string, error) {
	f, err := Lookup(c.Behaviour, c.Params)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Ops(), nil
}
