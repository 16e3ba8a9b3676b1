package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// WritePolicy bounds how long a write waits for a database that does not
// answer or fails for a while (a PostgreSQL server restarting, a full disk
// being freed): each attempt has a deadline, and attempts that fail for a
// reason that may pass are repeated, with a pause that doubles, until the
// total time is spent. Cancelling the write's context ends it at once.
type WritePolicy struct {
	// Attempt is the deadline of one attempt.
	Attempt time.Duration
	// Total is how long attempts go on after the first one started.
	Total time.Duration
	// Backoff is the first pause between attempts; it doubles up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultWritePolicy is every store's policy until SetWritePolicy: 15 s per
// attempt, retried for up to 2 minutes, pausing 0.5 s, 1 s, 2 s ... 10 s.
var DefaultWritePolicy = WritePolicy{Attempt: 15 * time.Second, Total: 2 * time.Minute, Backoff: 500 * time.Millisecond, MaxBackoff: 10 * time.Second}

// String says the policy in words, for help texts and messages.
func (p WritePolicy) String() string {
	return fmt.Sprintf("each attempt at most %v, retried for up to %v", p.Attempt, p.Total)
}

// WriteRetrier is implemented by stores whose writes follow a WritePolicy.
type WriteRetrier interface {
	SetWritePolicy(WritePolicy)
}

// WriteError is a write that still failed when its policy's time was
// spent: Err is the last attempt's error.
type WriteError struct {
	What     string
	Attempts int
	Spent    time.Duration
	Err      error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%s: %v (%d attempts over %v)", e.What, e.Err, e.Attempts, e.Spent.Round(100*time.Millisecond))
}

func (e *WriteError) Unwrap() error { return e.Err }

// SetWritePolicy implements WriteRetrier; zero fields keep the default's.
func (s *sqlStore) SetWritePolicy(p WritePolicy) {
	d := DefaultWritePolicy
	if p.Attempt <= 0 {
		p.Attempt = d.Attempt
	}
	if p.Total < 0 {
		p.Total = 0
	}
	if p.Backoff <= 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	s.policy = &p
}

func (s *sqlStore) writePolicy() WritePolicy {
	if s.policy == nil {
		return DefaultWritePolicy
	}
	return *s.policy
}

// write runs fn under the store's WritePolicy. fn gets each attempt's
// context and whether an earlier attempt failed, so that a write that may
// have committed before its answer was lost can count "already stored" as
// done.
func (s *sqlStore) write(ctx context.Context, what string, fn func(ctx context.Context, retry bool) error) error {
	p := s.writePolicy()
	start := time.Now()
	pause := p.Backoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, p.Attempt)
		err := fn(actx, attempt > 1)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: interrupted: %w", what, errors.Join(ctx.Err(), err))
		}
		if !s.transient(err) {
			return err
		}
		if time.Since(start)+pause > p.Total {
			return &WriteError{What: what, Attempts: attempt, Spent: time.Since(start), Err: err}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: interrupted while retrying: %w", what, errors.Join(ctx.Err(), err))
		case <-time.After(pause):
		}
		pause = min(2*pause, p.MaxBackoff)
	}
}

// transient reports whether err may pass if the write is tried again: an
// attempt that ran out of time, a connection that broke or was refused,
// or what the database says is temporary (a full disk, a server shutting
// down, a lock held too long). Anything else (a constraint, bad input) is
// final.
func (s *sqlStore) transient(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EIO),
		errors.As(err, &ne):
		return true
	}
	return s.d.transient != nil && s.d.transient(err)
}
