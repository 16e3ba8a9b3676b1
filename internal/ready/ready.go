// Package ready is the one readiness loop: it repeats a probe (one attempt
// to reach a server the way its clients will) until the probe passes, says
// that waiting will not help (Final), the time is up or the context ends.
// Every server check uses it; what counts as ready is the probe's
// business.
package ready

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Loop says how long and how often to probe.
type Loop struct {
	// Timeout bounds the wait; 0 waits until the context ends.
	Timeout time.Duration
	// Every is the pause between attempts (default 100ms).
	Every time.Duration
	// Attempt bounds one attempt; 0 gives each the wait's context.
	Attempt time.Duration
}

// TimeoutError is the wait's error when the time was up: Waited is the
// loop's Timeout (or the time waited, when the context's deadline ended
// it), Last the last attempt's error.
type TimeoutError struct {
	Waited time.Duration
	Last   error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("not ready within %v: %v", e.Waited, e.Last)
}
func (e *TimeoutError) Unwrap() error { return e.Last }

// Wait runs probe until it returns nil (Wait returns nil), a Final error
// (returned as it is), the time is up (a *TimeoutError) or ctx is
// cancelled (ctx.Err()).
func (l Loop) Wait(ctx context.Context, probe func(context.Context) error) error {
	if l.Every <= 0 {
		l.Every = 100 * time.Millisecond
	}
	parent, start := ctx, time.Now()
	if l.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.Timeout)
		defer cancel()
	}
	var last error
	for {
		err := l.attempt(ctx, probe)
		if err == nil {
			return nil
		}
		if IsFinal(err) {
			return err
		}
		// An attempt cut short by the deadline says less than the failure
		// before it ("connection refused"): keep that one.
		if last == nil || (ctx.Err() == nil && (!isTimeout(err) || isTimeout(last))) {
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(parent.Err(), context.Canceled) {
				return parent.Err()
			}
			waited := l.Timeout
			if waited == 0 || parent.Err() != nil {
				waited = time.Since(start).Round(100 * time.Millisecond)
			}
			return &TimeoutError{Waited: waited, Last: last}
		case <-time.After(l.Every):
		}
	}
}

func (l Loop) attempt(ctx context.Context, probe func(context.Context) error) error {
	if l.Attempt <= 0 {
		return probe(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, l.Attempt)
	defer cancel()
	return probe(actx)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// final is implemented by probe errors that waiting will not change (the
// server answered and refused: a wrong password, a missing table).
type final interface{ Final() bool }

type finalError struct{ error }

func (f finalError) Unwrap() error { return f.error }
func (finalError) Final() bool     { return true }

// Final marks err as an answer that waiting will not change: Wait returns
// it at once.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return finalError{err}
}

// IsFinal reports whether err, or an error it wraps, says that waiting
// will not change it (it has a method Final() bool returning true).
func IsFinal(err error) bool {
	var f final
	return errors.As(err, &f) && f.Final()
}
