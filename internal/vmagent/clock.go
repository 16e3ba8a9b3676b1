package vmagent

import (
	"context"
	"net/http"
	"time"
)

// Clock is the answer to /time: the agent's wall clock when it answered.
type Clock struct {
	Now time.Time `json:"now"`
}

func clock(*http.Request) (any, error) { return Clock{Now: time.Now()}, nil }

// Offset is one NTP-style reading of an agent's clock against this one.
type Offset struct {
	// Offset is how far the agent's clock is ahead of this machine's
	// (negative: behind), taking the answer to have been made halfway
	// through the round trip.
	Offset time.Duration
	// RTT is the round trip of the best reading; the offset is known to
	// within half of it.
	RTT time.Duration
}

// Bound is the most the agent's clock may be off this machine's: the
// offset's size and the half round trip within which it is known.
func (o Offset) Bound() time.Duration { return max(o.Offset, -o.Offset) + o.RTT/2 }

// ClockOffset reads the agent's clock n times (at least once) and returns
// the reading with the shortest round trip, whose midpoint assumption errs
// least (as NTP's clock filter does).
func (c *Client) ClockOffset(ctx context.Context, n int) (Offset, error) {
	best := Offset{RTT: -1}
	for i := 0; i < max(n, 1); i++ {
		var r Clock
		t0 := time.Now()
		if err := c.call(ctx, "/time", nil, &r); err != nil {
			return Offset{}, err
		}
		t1 := time.Now()
		rtt := t1.Sub(t0)
		if best.RTT < 0 || rtt < best.RTT {
			mid := t0.Add(rtt / 2)
			best = Offset{Offset: r.Now.Sub(mid), RTT: rtt}
		}
	}
	return best, nil
}
