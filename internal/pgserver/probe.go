package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/internal/ready"
)

// DSN is the connection string for database db of the server at addr
// (host:port), as Superuser without TLS.
func DSN(addr, db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Host: addr, Path: "/" + db}
	u.RawQuery = url.Values{"sslmode": {"disable"}, "connect_timeout": {"5"}}.Encode()
	return u.String()
}

// Ready waits until the PostgreSQL server at addr accepts a connection to
// database db and answers SELECT 1, retrying until ctx ends. The error names
// the server and says what the last attempt saw; the caller adds the tail of
// the server's log.
func Ready(ctx context.Context, name, addr, db string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s: address %q: %w", name, addr, err)
	}
	err := ready.Loop{}.Wait(ctx, func(ctx context.Context) error { return ping(ctx, addr, db) })
	var te *ready.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: PostgreSQL at %s did not answer SELECT 1 on database %s within %v: %w", name, addr, db, te.Waited, te.Last)
	}
	return err
}

func ping(ctx context.Context, addr, db string) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, DSN(addr, db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(cctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 returned %d", one)
	}
	return nil
}

// Querier is what ReadDBStats needs of a connection (*pgx.Conn, a pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DBStats is one reading of pg_stat_database for one database.
type DBStats struct {
	At         time.Time
	Commits    int64 // xact_commit
	Rollbacks  int64 // xact_rollback
	BlocksRead int64 // blks_read: blocks not found in shared_buffers
	BlocksHit  int64 // blks_hit
	Deadlocks  int64
}

// ReadDBStats reads pg_stat_database for database db. PostgreSQL 15 flushes
// a backend's counters at most once a second, so a difference of two readings
// is exact only to about a second's worth of transactions at each end.
func ReadDBStats(ctx context.Context, q Querier, db string) (DBStats, error) {
	s := DBStats{At: time.Now()}
	err := q.QueryRow(ctx, `SELECT xact_commit, xact_rollback, blks_read, blks_hit, deadlocks
		FROM pg_stat_database WHERE datname = $1`, db).Scan(&s.Commits, &s.Rollbacks, &s.BlocksRead, &s.BlocksHit, &s.Deadlocks)
	if err != nil {
		return s, fmt.Errorf("reading pg_stat_database for %s: %w", db, err)
	}
	return s, nil
}

// Rates are the pg_stat_database figures of an interval.
type Rates struct {
	Seconds         float64
	CommitsPerSec   float64
	RollbacksPerSec float64
	// HitRatio is blks_hit / (blks_hit + blks_read) over the interval; 1
	// when no block was read at all.
	HitRatio  float64
	Deadlocks int64
}

// Rates returns the figures from reading s to the later reading b.
func (s DBStats) Rates(b DBStats) (Rates, error) {
	r := Rates{Seconds: b.At.Sub(s.At).Seconds(), Deadlocks: b.Deadlocks - s.Deadlocks}
	if r.Seconds <= 0 {
		return r, fmt.Errorf("pg_stat_database readings %v apart: the second must be later", b.At.Sub(s.At))
	}
	dc, dr, dh, dread := b.Commits-s.Commits, b.Rollbacks-s.Rollbacks, b.BlocksHit-s.BlocksHit, b.BlocksRead-s.BlocksRead
	if dc < 0 || dr < 0 || dh < 0 || dread < 0 || r.Deadlocks < 0 {
		return r, fmt.Errorf("pg_stat_database counters went backwards (reset during the interval?)")
	}
	r.CommitsPerSec = float64(dc) / r.Seconds
	r.RollbacksPerSec = float64(dr) / r.Seconds
	r.HitRatio = 1
	if dh+dread > 0 {
		r.HitRatio = float64(dh) / float64(dh+dread)
	}
	return r, nil
}
