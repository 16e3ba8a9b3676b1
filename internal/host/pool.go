package host

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/nearnative/nearnative/internal/runid"
)

// Hosts hands out the client hosts of one run: one network namespace for
// every platform that uses it (made on first use), the loopback host for
// the others. Close removes what it made.
type Hosts struct {
	run runid.ID
	set Setting

	mu    sync.Mutex
	ns    *NS
	nsErr error
}

// NewHosts returns the client hosts of run as s asks.
func NewHosts(run runid.ID, s Setting) *Hosts {
	return &Hosts{run: run, set: s}
}

// Setting is what the run asks of its client hosts.
func (p *Hosts) Setting() Setting { return p.set }

// netns makes the run's namespace on first use.
func (p *Hosts) netns(ctx context.Context) (*NS, error) {
	if p.ns == nil && p.nsErr == nil {
		p.ns, p.nsErr = NewNS(ctx, p.run, p.set)
	}
	return p.ns, p.nsErr
}

// For returns the client host of a platform that needs need: nil for None
// (its clients run inside it).
func (p *Hosts) For(ctx context.Context, need Need) (Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case need == None:
		return nil, nil
	case need == LoopbackOnly:
		return LoopbackHost(), nil
	case p.set.Kind() == Netns:
		ns, err := p.netns(ctx)
		if err != nil {
			return nil, err
		}
		return ns, nil
	case need == LinkAddress:
		ns, err := p.netns(ctx)
		if err != nil {
			return nil, err
		}
		return ns.OnHost(), nil
	}
	return LoopbackHost(), nil
}

// Use is one client host and the platforms that use it.
type Use struct {
	Where     string   // the host's Describe
	Platforms []string // sorted
}

// Inside is where the load of a platform without a client host ran: its
// clients run in containers of the platform's own (the inter-container
// techniques).
const Inside = "in the platform's own containers"

// Uses groups the platforms of a run (name -> client host; nil: Inside) by
// where their client ran, the most used first.
func Uses(clients map[string]Host) []Use {
	by := map[string][]string{}
	for name, h := range clients {
		where := Inside
		if h != nil {
			where = h.Describe()
		}
		by[where] = append(by[where], name)
	}
	var out []Use
	for where, names := range by {
		sort.Strings(names)
		out = append(out, Use{Where: where, Platforms: names})
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].Platforms) != len(out[j].Platforms) {
			return len(out[i].Platforms) > len(out[j].Platforms)
		}
		return out[i].Where < out[j].Where
	})
	return out
}

// String renders uses as one line: "netns veth MTU 1500 (native,
// docker-nat); host loopback (docker-proxy)".
func (u Use) String() string { return u.Where + " (" + strings.Join(u.Platforms, ", ") + ")" }

// Close removes the namespace, if one was made.
func (p *Hosts) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ns == nil {
		return nil
	}
	return p.ns.Close(ctx)
}
