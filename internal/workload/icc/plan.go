package icc

import (
	"fmt"
	"math"
)

// Topologies of the seed "Docker network performance".
const (
	// OneToMany is one server endpoint and N client endpoints, one client each.
	OneToMany = "one-to-many"
	// Pairs is N server endpoints and N client endpoints; client i connects
	// to server i mod N.
	Pairs = "pairs"
	// Grouped is one server endpoint and C client endpoints running K
	// clients each at once.
	Grouped = "grouped"
)

// Target is one iperf3 client's server: the server endpoint and the index of
// the iperf3 server (port) on it. iperf3 servers take one client at a time,
// so every client has a server process of its own.
type Target struct{ Server, Port int }

// Plan is a topology with its counts fixed.
type Plan struct {
	Topology string
	// Servers holds the number of iperf3 servers (ports) of each server
	// endpoint.
	Servers []int
	// Clients holds the targets of each client endpoint's iperf3 clients,
	// which run at the same time.
	Clients [][]Target
	// Summary says what runs, with the counts after scaling.
	Summary string
}

// Scaled multiplies n by scale and rounds up, to at least 1.
func Scaled(n int, scale float64) int {
	s := int(math.Ceil(float64(n)*scale - 1e-9))
	return max(1, s)
}

// NewPlan lays out topology with count (one-to-many, pairs) or containers x
// clients (grouped), each multiplied by scale and rounded up.
func NewPlan(topology string, count, containers, clients int, scale float64) (Plan, error) {
	if !(scale > 0) {
		return Plan{}, fmt.Errorf("scale %v: want a positive number", scale)
	}
	if count < 1 || containers < 1 || clients < 1 {
		return Plan{}, fmt.Errorf("counts must be at least 1 (count %d, containers %d, clients %d)", count, containers, clients)
	}
	p := Plan{Topology: topology}
	note := ""
	if scale != 1 {
		note = fmt.Sprintf(", scaled by %g", scale)
	}
	switch topology {
	case OneToMany:
		n := Scaled(count, scale)
		p.Servers = []int{n}
		for i := 0; i < n; i++ {
			p.Clients = append(p.Clients, []Target{{Server: 0, Port: i}})
		}
		p.Summary = fmt.Sprintf("one-to-many N=%d (from %d%s): 1 server endpoint running %d iperf3 servers, %d client endpoints with 1 client each",
			n, count, note, n, n)
	case Pairs:
		n := Scaled(count, scale)
		for i := 0; i < n; i++ {
			p.Servers = append(p.Servers, 1)
		}
		for i := 0; i < n; i++ {
			p.Clients = append(p.Clients, []Target{{Server: i % n, Port: 0}})
		}
		p.Summary = fmt.Sprintf("pairs N=%d (from %d%s): %d server endpoints with 1 iperf3 server each, %d client endpoints, client i to server i mod %d",
			n, count, note, n, n, n)
	case Grouped:
		c, k := Scaled(containers, scale), Scaled(clients, scale)
		p.Servers = []int{c * k}
		for i := 0; i < c; i++ {
			var ts []Target
			for j := 0; j < k; j++ {
				ts = append(ts, Target{Server: 0, Port: i*k + j})
			}
			p.Clients = append(p.Clients, ts)
		}
		p.Summary = fmt.Sprintf("grouped %dx%d (from %dx%d%s): 1 server endpoint running %d iperf3 servers, %d client endpoints with %d clients each",
			c, k, containers, clients, note, c*k, c, k)
	default:
		return Plan{}, fmt.Errorf("topology %q: want %s, %s or %s", topology, OneToMany, Pairs, Grouped)
	}
	return p, nil
}

// Endpoints is the number of containers the plan runs.
func (p Plan) Endpoints() int { return len(p.Servers) + len(p.Clients) }

// Streams is the number of iperf3 clients the plan runs at once.
func (p Plan) Streams() int {
	n := 0
	for _, c := range p.Clients {
		n += len(c)
	}
	return n
}
