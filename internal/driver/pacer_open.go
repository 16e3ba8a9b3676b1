package driver

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ticket is one open-loop request: due at a planned time.
type ticket struct {
	due time.Time
}

// coarseSlack is how much of a wait the open-loop pacer leaves to
// nanosleep: Go's timers wake an idle process up to a millisecond late (the
// network poller waits in whole milliseconds, rounding sub-millisecond waits
// up to one), which would add up to 1 ms to every latency timed from the due
// time. The pacer sleeps on a timer until coarseSlack before the due time,
// then with nanosleep on its own OS thread, which wakes within tens of
// microseconds.
const coarseSlack = 2 * time.Millisecond

// maxNanosleep bounds one nanosleep, so that a cancelled run stops soon.
const maxNanosleep = 20 * time.Millisecond

// pace releases the plan's requests at their due times into out, one at a
// time, to whichever worker is free; it closes out after the last request
// due before end. When every worker is busy the send waits, and the requests
// released later keep their due times: their latency includes the wait.
// Wake-ups behind the plan are recorded as the driver's lag.
func pace(ctx context.Context, col *collector, shard int, t0, end time.Time, plan Plan, out chan<- ticket) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(out)
	total := end.Sub(t0)
	for i := int64(0); ; i++ {
		off := plan.Offset(i)
		if off >= total {
			return
		}
		due := t0.Add(off)
		if wait := time.Until(due); wait > 0 {
			if wait > coarseSlack {
				if sleep(ctx, wait-coarseSlack) != nil {
					return
				}
			}
			for {
				rest := time.Until(due)
				if rest <= 0 {
					break
				}
				if ctx.Err() != nil {
					return
				}
				ts := unix.NsecToTimespec(int64(min(rest, maxNanosleep)))
				_ = unix.Nanosleep(&ts, nil) // EINTR: loop and sleep the rest
			}
			col.lag(shard, due, time.Since(due))
		}
		select {
		case out <- ticket{due: due}:
		case <-ctx.Done():
			return
		}
	}
}
