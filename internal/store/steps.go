package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Step is one step of a search within a trial (find-max: one load tried
// and whether it met the QoS), stored the moment it ends so that an
// interrupted trial resumes its search.
type Step struct {
	Seq      int
	Phase    string
	Value    float64
	Pass     bool
	Started  time.Time
	Duration time.Duration
	Summary  string
	Detail   []byte // JSON
}

// StepStore is implemented by stores that keep search steps; the engine
// finds it by type assertion.
type StepStore interface {
	// AddStep stores step s of the trial key. Steps are numbered from 0 in
	// order; storing a Seq twice fails with ErrDuplicate, for an unknown run
	// with ErrNoRun.
	AddStep(ctx context.Context, key TrialKey, s Step) error
	// Steps returns the trial's steps in order.
	Steps(ctx context.Context, key TrialKey) ([]Step, error)
}

// AddStep implements StepStore.
func (s *sqlStore) AddStep(ctx context.Context, key TrialKey, st Step) error {
	return s.write(ctx, fmt.Sprintf("storing step %d of %s", st.Seq, key), func(ctx context.Context, retry bool) error {
		err := s.addStep(ctx, key, st)
		if retry && errors.Is(err, ErrDuplicate) {
			return nil // the attempt whose answer was lost stored it
		}
		return err
	})
}

func (s *sqlStore) addStep(ctx context.Context, key TrialKey, st Step) error {
	if err := s.ensureExtra(ctx); err != nil {
		return err
	}
	detail := string(st.Detail)
	if detail == "" {
		detail = "{}"
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO search_steps
		(run_id, round, workload, platform, seq, phase, value, pass, started, duration_ns, summary, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		string(key.Run), key.Round, key.Workload, key.Platform, st.Seq, st.Phase, st.Value, st.Pass,
		nullTime(st.Started), int64(st.Duration), st.Summary, detail)
	if err != nil {
		switch s.d.classify(err) {
		case uniqueViolation:
			return fmt.Errorf("cannot store step %d of %s: already stored (%w)", st.Seq, key, ErrDuplicate)
		case foreignKeyViolation:
			return fmt.Errorf("cannot store step: %w", noRunError(string(key.Run)))
		}
		return fmt.Errorf("storing step %d of %s: %w", st.Seq, key, err)
	}
	return nil
}

// Steps implements StepStore.
func (s *sqlStore) Steps(ctx context.Context, key TrialKey) ([]Step, error) {
	if err := s.ensureExtra(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq, phase, value, pass, started, duration_ns, summary, detail
		FROM search_steps WHERE run_id = ? AND round = ? AND workload = ? AND platform = ? ORDER BY seq`),
		string(key.Run), key.Round, key.Workload, key.Platform)
	if err != nil {
		return nil, fmt.Errorf("reading steps of %s: %w", key, err)
	}
	defer rows.Close()
	var out []Step
	for rows.Next() {
		var (
			st       Step
			started  sql.NullString
			duration int64
			detail   string
		)
		if err := rows.Scan(&st.Seq, &st.Phase, &st.Value, &st.Pass, &started, &duration, &st.Summary, &detail); err != nil {
			return nil, fmt.Errorf("reading steps of %s: %w", key, err)
		}
		if started.Valid {
			if st.Started, err = parseTime(started.String); err != nil {
				return nil, fmt.Errorf("reading steps of %s: %w", key, err)
			}
		}
		st.Duration, st.Detail = time.Duration(duration), []byte(detail)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading steps of %s: %w", key, err)
	}
	return out, nil
}
