package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/nearnative/nearnative/internal/runid"
)

// TrialKey names one trial of a run: the store keeps at most one trial per
// key, and the records of a trial in progress (search steps, series) are
// filed under it before the trial itself is stored.
type TrialKey struct {
	Run      runid.ID
	Round    int
	Workload string
	Platform string
}

func (k TrialKey) String() string {
	return fmt.Sprintf("%s round %d %s on %s", k.Run, k.Round, k.Workload, k.Platform)
}

// extraTables are the tables of the optional abilities (StepStore,
// SeriesStore). They are created on first use with CREATE TABLE IF NOT
// EXISTS rather than by a schema migration, so that they add nothing to the
// core schema's version; a later migration may adopt them as they are.
var extraTables = []string{
	`CREATE TABLE IF NOT EXISTS search_steps (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		round INTEGER NOT NULL,
		workload TEXT NOT NULL,
		platform TEXT NOT NULL,
		seq INTEGER NOT NULL,
		phase TEXT NOT NULL,
		value DOUBLE PRECISION NOT NULL,
		pass BOOLEAN NOT NULL,
		started TEXT,
		duration_ns BIGINT NOT NULL,
		summary TEXT NOT NULL,
		detail TEXT NOT NULL,
		PRIMARY KEY (run_id, round, workload, platform, seq)
	)`,
	`CREATE TABLE IF NOT EXISTS trial_series (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		round INTEGER NOT NULL,
		workload TEXT NOT NULL,
		platform TEXT NOT NULL,
		step INTEGER NOT NULL,
		sec INTEGER NOT NULL,
		op TEXT NOT NULL,
		phase TEXT NOT NULL,
		count BIGINT NOT NULL,
		failures BIGINT NOT NULL,
		mean_us DOUBLE PRECISION NOT NULL,
		p50_us DOUBLE PRECISION NOT NULL,
		p90_us DOUBLE PRECISION NOT NULL,
		p99_us DOUBLE PRECISION NOT NULL,
		max_us DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (run_id, round, workload, platform, step, sec, op)
	)`,
}

// extraReady remembers, per database handle, that the extra tables exist.
var extraReady sync.Map // *sql.DB -> struct{}

// ensureExtra creates the extra tables once per database handle, under the
// same lock as migrations so that two processes do not race.
func (s *sqlStore) ensureExtra(ctx context.Context) (err error) {
	if _, ok := extraReady.Load(s.db); ok {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("creating the search, series and layout tables: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if s.d.lock != "" {
		if _, err = tx.ExecContext(ctx, s.d.lock); err != nil {
			return fmt.Errorf("locking schema: %w", err)
		}
	}
	for _, stmt := range extraTables {
		if _, err = tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the search, series and layout tables: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("creating the search, series and layout tables: %w", err)
	}
	extraReady.Store(s.db, struct{}{})
	return nil
}
