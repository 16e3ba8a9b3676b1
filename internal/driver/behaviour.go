package driver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Factory makes the simulated users of one driver process.
type Factory interface {
	// Ops lists the operations its users may perform, for checking QoS rules
	// before anything starts.
	Ops() []string
	// NewUser returns user (or open-loop connection) number id, unique over
	// all driver processes of a run; rng is the user's own.
	NewUser(ctx context.Context, id int, rng *rand.Rand) (User, error)
	// Close releases what the factory shares between its users.
	Close() error
}

// Behaviour builds a Factory from its parameters, without connecting to
// anything yet; its users open every connection with dial (never nil), which
// opens it on the run's client host. Behaviours are registered by name, so
// that a child driver process (the nearnative binary re-executed, inside the
// client host) can build the same users from a plan that names them.
type Behaviour func(params map[string]string, dial DialFunc) (Factory, error)

// DialFunc opens a connection as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DialWithin returns dial bounded to timeout per connection attempt, as
// net.Dialer.Timeout bounds its own; a nil dial is a net.Dialer from this
// process's network namespace with that timeout and keep-alive probes every
// 30 s. HTTP clients of the behaviours open their connections with it.
func DialWithin(dial DialFunc, timeout time.Duration) DialFunc {
	if dial == nil {
		d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(ctx, network, addr)
	}
}

// DefaultDial opens connections from this process's own network namespace
// (net.Dialer), as child driver processes do inside the client host.
func DefaultDial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

var (
	regMu     sync.RWMutex
	behaviour = map[string]Behaviour{}
)

// Register makes b known by name; it panics when the name is taken, which is
// a programming error. Call it from an init function of the package that
// defines the behaviour.
func Register(name string, b Behaviour) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := behaviour[name]; dup {
		panic("driver: behaviour " + name + " registered twice")
	}
	behaviour[name] = b
}

// Lookup builds the registered behaviour name with params, its users
// dialing with DefaultDial.
func Lookup(name string, params map[string]string) (Factory, error) {
	return LookupDial(name, params, nil)
}

// LookupDial builds the registered behaviour name with params, its users
// dialing with dial (nil: DefaultDial).
func LookupDial(name string, params map[string]string, dial DialFunc) (Factory, error) {
	if dial == nil {
		dial = DefaultDial
	}
	regMu.RLock()
	b, ok := behaviour[name]
	var names []string
	for n := range behaviour {
		names = append(names, n)
	}
	regMu.RUnlock()
	if !ok {
		sort.Strings(names)
		return nil, fmt.Errorf("no driver behaviour named %q (registered: %s)", name, strings.Join(names, ", "))
	}
	f, err := b(params, dial)
	if err != nil {
		return nil, fmt.Errorf("behaviour %s: %w", name, err)
	}
	return f, nil
}
