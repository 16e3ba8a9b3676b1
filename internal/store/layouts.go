package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/runid"
)

func init() {
	extraTables = append(extraTables, `CREATE TABLE IF NOT EXISTS trial_layouts (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		round INTEGER NOT NULL,
		workload TEXT NOT NULL,
		platform TEXT NOT NULL,
		layout TEXT NOT NULL,
		PRIMARY KEY (run_id, round, workload, platform)
	)`)
}

// LayoutStore is implemented by stores that keep where each trial's servers
// ran (package placement); the engine and the reports find it by type
// assertion.
type LayoutStore interface {
	// PutLayout stores the layout of the trial key, replacing any stored.
	PutLayout(ctx context.Context, key TrialKey, l placement.Record) error
	// Layouts returns every stored layout of a run.
	Layouts(ctx context.Context, run runid.ID) (map[TrialKey]placement.Record, error)
}

// PutLayout implements LayoutStore.
func (s *sqlStore) PutLayout(ctx context.Context, key TrialKey, l placement.Record) error {
	return s.write(ctx, fmt.Sprintf("storing the layout of %s", key), func(ctx context.Context, _ bool) error {
		return s.putLayout(ctx, key, l)
	})
}

func (s *sqlStore) putLayout(ctx context.Context, key TrialKey, l placement.Record) error {
	if err := s.ensureExtra(ctx); err != nil {
		return err
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("storing the layout of %s: %w", key, err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM trial_layouts
		WHERE run_id = ? AND round = ? AND workload = ? AND platform = ?`),
		string(key.Run), key.Round, key.Workload, key.Platform); err != nil {
		return fmt.Errorf("storing the layout of %s: %w", key, err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO trial_layouts (run_id, round, workload, platform, layout)
		VALUES (?, ?, ?, ?, ?)`), string(key.Run), key.Round, key.Workload, key.Platform, string(b)); err != nil {
		if s.d.classify(err) == foreignKeyViolation {
			return fmt.Errorf("cannot store a layout: %w", noRunError(string(key.Run)))
		}
		return fmt.Errorf("storing the layout of %s: %w", key, err)
	}
	return nil
}

// Layouts implements LayoutStore.
func (s *sqlStore) Layouts(ctx context.Context, run runid.ID) (map[TrialKey]placement.Record, error) {
	if err := s.ensureExtra(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT round, workload, platform, layout FROM trial_layouts
		WHERE run_id = ? ORDER BY round, workload, platform`), string(run))
	if err != nil {
		return nil, fmt.Errorf("reading the layouts of run %s: %w", run, err)
	}
	defer rows.Close()
	out := map[TrialKey]placement.Record{}
	for rows.Next() {
		k := TrialKey{Run: run}
		var text string
		if err := rows.Scan(&k.Round, &k.Workload, &k.Platform, &text); err != nil {
			return nil, fmt.Errorf("reading the layouts of run %s: %w", run, err)
		}
		var l placement.Record
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return nil, fmt.Errorf("layout of %s: %w", k, err)
		}
		out[k] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the layouts of run %s: %w", run, err)
	}
	return out, nil
}
