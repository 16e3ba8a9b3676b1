package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSchemaTooNew means the database was written by a newer nearnative whose
// schema this one does not know.
var ErrSchemaTooNew = errors.New("schema too new")

// violation is the kind of constraint a failed statement broke.
type violation int

const (
	noViolation violation = iota
	uniqueViolation
	foreignKeyViolation
)

// dialect is what differs between the SQL databases the store supports.
// Queries are written once with ? placeholders and the tokens below.
type dialect struct {
	name string
	// dollar placeholders ($1, $2, ...) instead of ?.
	dollar bool
	// types replaces the type tokens of the schema: {{id}} is an
	// auto-numbered primary key, {{blob}} a byte string.
	types *strings.Replacer
	// lock, when not empty, runs first in the migration transaction so that
	// two processes opening a fresh database do not both create the schema.
	lock string
	// classify tells which constraint, if any, err reports as broken.
	classify func(err error) violation
	// transient tells whether the database reports err as a condition that
	// may pass (a full disk, a server shutting down, a busy lock).
	transient func(err error) bool
}

// rebind rewrites the ? placeholders of query for the dialect. Queries in this
// package contain no ? other than placeholders.
func (d *dialect) rebind(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// migrations[i] takes the schema from version i to version i+1. Append to
// this list; never edit an entry that has been released.
//
// Times are UTC text in RFC 3339 with nine fraction digits, which sorts
// correctly as text; durations are int64 nanoseconds; string lists are JSON
// arrays; a metric value NULL is NaN.
var migrations = [][]string{
	{ // 1: initial schema
		`CREATE TABLE runs (
			id TEXT PRIMARY KEY,
			study TEXT NOT NULL,
			spec {{blob}},
			seed BIGINT NOT NULL,
			baseline TEXT NOT NULL,
			status TEXT NOT NULL,
			stop_reason TEXT NOT NULL,
			started TEXT NOT NULL,
			finished TEXT,
			env TEXT,
			version TEXT NOT NULL
		)`,
		`CREATE INDEX runs_started ON runs (started)`,
		`CREATE TABLE trials (
			id {{id}},
			run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
			round INTEGER NOT NULL,
			idx INTEGER NOT NULL,
			warmup BOOLEAN NOT NULL,
			workload TEXT NOT NULL,
			platform TEXT NOT NULL,
			started TEXT,
			duration_ns BIGINT NOT NULL,
			error TEXT NOT NULL,
			commands_json TEXT NOT NULL,
			where_json TEXT NOT NULL,
			notes_json TEXT NOT NULL,
			raw_dir TEXT NOT NULL,
			UNIQUE (run_id, round, workload, platform)
		)`,
		`CREATE TABLE metrics (
			trial_id BIGINT NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
			seq INTEGER NOT NULL,
			name TEXT NOT NULL,
			unit TEXT NOT NULL,
			higher_is_better BOOLEAN NOT NULL,
			value DOUBLE PRECISION,
			PRIMARY KEY (trial_id, seq),
			UNIQUE (trial_id, name)
		)`,
		`CREATE INDEX metrics_name ON metrics (name)`,
	},
	{ // 2: what a metric is (diagnostic, a percentile and the samples behind
		// it), and the run's notes: degraded modes and skipped platforms.
		`ALTER TABLE metrics ADD COLUMN diagnostic BOOLEAN NOT NULL DEFAULT FALSE`,
		`ALTER TABLE metrics ADD COLUMN quantile DOUBLE PRECISION NOT NULL DEFAULT 0`,
		`ALTER TABLE metrics ADD COLUMN samples BIGINT NOT NULL DEFAULT 0`,
		`CREATE TABLE run_notes (
			run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
			seq INTEGER NOT NULL,
			kind TEXT NOT NULL,
			subject TEXT NOT NULL,
			text TEXT NOT NULL,
			PRIMARY KEY (run_id, seq),
			UNIQUE (run_id, kind, subject, text)
		)`,
	},
}

// schemaVersion is the schema version this package writes.
var schemaVersion = len(migrations)

// migrate brings the schema of db up to schemaVersion in one transaction.
func migrate(ctx context.Context, db *sql.DB, d *dialect) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting schema transaction: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if d.lock != "" {
		if _, err := tx.ExecContext(ctx, d.lock); err != nil {
			return fmt.Errorf("locking schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_version: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if have > schemaVersion {
		return fmt.Errorf("it has schema version %d, newer than this nearnative knows (%d): upgrade nearnative (%w)",
			have, schemaVersion, ErrSchemaTooNew)
	}
	if have == schemaVersion {
		return tx.Commit()
	}
	for v := have; v < schemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, d.types.Replace(stmt)); err != nil {
				return fmt.Errorf("migrating schema to version %d: %w", v+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("updating schema version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_version (version) VALUES (?)`), schemaVersion); err != nil {
		return fmt.Errorf("updating schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing schema: %w", err)
	}
	return nil
}
