package store

import (
	"context"
	"fmt"
)

// SeriesPoint is one second of one operation in a trial's per-second series
// (throughput and latency, for charts). Step numbers the driver run within
// the trial: a find-max trial has one series per search step.
type SeriesPoint struct {
	Step     int
	Sec      int // from the start of the driver run's ramp-up
	Phase    string
	Op       string
	Count    int64
	Failures int64
	MeanUs   float64
	P50Us    float64
	P90Us    float64
	P99Us    float64
	MaxUs    float64
}

// SeriesStore is implemented by stores that keep per-second series; the
// engine finds it by type assertion.
type SeriesStore interface {
	// PutSeries stores the series of one driver run (step) of the trial
	// key, replacing any stored for that step (a trial run again after an
	// interrupt).
	PutSeries(ctx context.Context, key TrialKey, step int, points []SeriesPoint) error
	// Series returns the trial's series ordered by step, second and
	// operation.
	Series(ctx context.Context, key TrialKey) ([]SeriesPoint, error)
}

// PutSeries implements SeriesStore.
func (s *sqlStore) PutSeries(ctx context.Context, key TrialKey, step int, points []SeriesPoint) error {
	return s.write(ctx, fmt.Sprintf("storing the series of %s", key), func(ctx context.Context, _ bool) error {
		return s.putSeries(ctx, key, step, points)
	})
}

func (s *sqlStore) putSeries(ctx context.Context, key TrialKey, step int, points []SeriesPoint) (err error) {
	if err := s.ensureExtra(ctx); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storing the series of %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, s.q(`DELETE FROM trial_series
		WHERE run_id = ? AND round = ? AND workload = ? AND platform = ? AND step = ?`),
		string(key.Run), key.Round, key.Workload, key.Platform, step); err != nil {
		return fmt.Errorf("storing the series of %s: %w", key, err)
	}
	ins, err := tx.PrepareContext(ctx, s.q(`INSERT INTO trial_series
		(run_id, round, workload, platform, step, sec, op, phase, count, failures, mean_us, p50_us, p90_us, p99_us, max_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`))
	if err != nil {
		return fmt.Errorf("storing the series of %s: %w", key, err)
	}
	defer ins.Close()
	for _, p := range points {
		if _, err = ins.ExecContext(ctx, string(key.Run), key.Round, key.Workload, key.Platform, step,
			p.Sec, p.Op, p.Phase, p.Count, p.Failures, p.MeanUs, p.P50Us, p.P90Us, p.P99Us, p.MaxUs); err != nil {
			if s.d.classify(err) == foreignKeyViolation {
				return fmt.Errorf("cannot store series: %w", noRunError(string(key.Run)))
			}
			return fmt.Errorf("storing second %d of %s of %s: %w", p.Sec, p.Op, key, err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("committing the series of %s: %w", key, err)
	}
	return nil
}

// Series implements SeriesStore.
func (s *sqlStore) Series(ctx context.Context, key TrialKey) ([]SeriesPoint, error) {
	if err := s.ensureExtra(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT step, sec, op, phase, count, failures, mean_us, p50_us, p90_us, p99_us, max_us
		FROM trial_series WHERE run_id = ? AND round = ? AND workload = ? AND platform = ?
		ORDER BY step, sec, op`), string(key.Run), key.Round, key.Workload, key.Platform)
	if err != nil {
		return nil, fmt.Errorf("reading the series of %s: %w", key, err)
	}
	defer rows.Close()
	var out []SeriesPoint
	for rows.Next() {
		var p SeriesPoint
		if err := rows.Scan(&p.Step, &p.Sec, &p.Op, &p.Phase, &p.Count, &p.Failures,
			&p.MeanUs, &p.P50Us, &p.P90Us, &p.P99Us, &p.MaxUs); err != nil {
			return nil, fmt.Errorf("reading the series of %s: %w", key, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the series of %s: %w", key, err)
	}
	return out, nil
}
