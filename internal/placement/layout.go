// Package placement is the record of where a trial's servers ran: the places
// (the host, containers, guests, pods) with the servers each held and the
// CPUs each was confined to, and what was observed while the load ran (how
// busy each host CPU was, how often each server's threads moved between
// CPUs). The seeds explained their scale-out results with exactly these
// figures: per-core spread, migrations, pinning. A layout is stored with each
// trial and drawn in the report.
package placement

import (
	"sort"
	"time"
)

// Place is where a group of servers ran.
type Place struct {
	// Name identifies the place ("host", a container name, "guest 1").
	Name string `json:"name"`
	// Kind is "host", "container", "guest", "container in guest N", "pod".
	Kind string `json:"kind"`
	// Address is how other places reach it ("" natively).
	Address string `json:"address,omitempty"`
	// CPUs is the CPU list the place is confined to ("" for all).
	CPUs string `json:"cpus,omitempty"`
	// Servers are the names of the servers it held.
	Servers []string `json:"servers"`
	// Detail says more (image, vCPUs, network path).
	Detail string `json:"detail,omitempty"`
}

// Server is one server of a trial.
type Server struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Instance int    `json:"instance"`
	// Place is the name of the place it ran in.
	Place string `json:"place"`
	// CPUs is the CPU list it was pinned to ("" for none).
	CPUs string `json:"cpus,omitempty"`
	// OnHost: it ran beside the driver, the same on every platform.
	OnHost bool `json:"on_host,omitempty"`
	// MigrationsPerSec is how often its threads moved between CPUs during
	// the load (-1 when the platform cannot tell).
	MigrationsPerSec float64 `json:"migrations_per_sec"`
}

// CPU is one host CPU's share of busy time during the load.
type CPU struct {
	ID   int     `json:"id"`
	Busy float64 `json:"busy"` // 0..1
}

// Record is where one trial's servers ran: the placement record stored with it.
type Record struct {
	Places  []Place  `json:"places"`
	Servers []Server `json:"servers"`
	// CPUs are the host's CPUs, by number, as busy as they were during the
	// load; Interval is how long the load was observed.
	CPUs     []CPU         `json:"cpus,omitempty"`
	Interval time.Duration `json:"interval_ns,omitempty"`
	// Note says what the figures cannot show here (one NUMA node, ...).
	Note string `json:"note,omitempty"`
}

// Spread returns the lowest and highest CPU busy share.
func (l Record) Spread() (lo, hi float64) {
	for i, c := range l.CPUs {
		if i == 0 || c.Busy < lo {
			lo = c.Busy
		}
		if i == 0 || c.Busy > hi {
			hi = c.Busy
		}
	}
	return lo, hi
}

// Migrations returns the servers' migrations per second, by name, for
// those that could tell, sorted by name.
func (l Record) Migrations() []Server {
	var out []Server
	for _, s := range l.Servers {
		if s.MigrationsPerSec >= 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
