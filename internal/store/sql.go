package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// timeLayout is RFC 3339 with a fixed nine fraction digits, so that stored
// times sort correctly as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// sqlStore is the Store on a database/sql database; d holds what differs
// between SQLite and PostgreSQL.
type sqlStore struct {
	db     *sql.DB
	d      *dialect
	policy *WritePolicy // nil: DefaultWritePolicy
}

func (s *sqlStore) q(query string) string { return s.d.rebind(query) }

// CreateRun implements Store.
func (s *sqlStore) CreateRun(ctx context.Context, r Run) error {
	return s.write(ctx, "creating run "+string(r.ID), func(ctx context.Context, retry bool) error {
		err := s.createRun(ctx, r)
		if retry && errors.Is(err, ErrDuplicate) {
			return nil // the attempt whose answer was lost stored it
		}
		return err
	})
}

func (s *sqlStore) createRun(ctx context.Context, r Run) error {
	if _, err := runid.Parse(string(r.ID)); err != nil {
		return fmt.Errorf("cannot create run: %w", err)
	}
	if r.Status == "" {
		r.Status = StatusRunning
	}
	if err := checkStatus(r.Status); err != nil {
		return fmt.Errorf("cannot create run %s: %w", r.ID, err)
	}
	if r.Started.IsZero() {
		return fmt.Errorf("cannot create run %s: no start time", r.ID)
	}
	if len(r.Env) > 0 && !json.Valid(r.Env) {
		return fmt.Errorf("cannot create run %s: environment capture is not valid JSON", r.ID)
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO runs
		(id, study, spec, seed, baseline, status, stop_reason, started, finished, env, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		string(r.ID), r.Study, r.Spec, r.Seed, r.Baseline, r.Status, r.StopReason,
		formatTime(r.Started), nullTime(r.Finished), nullJSON(r.Env), r.Version)
	if err != nil {
		if s.d.classify(err) == uniqueViolation {
			return fmt.Errorf("cannot create run %s: a run with this ID is already stored (%w)", r.ID, ErrDuplicate)
		}
		return fmt.Errorf("creating run %s: %w", r.ID, err)
	}
	return nil
}

// FinishRun implements Store.
func (s *sqlStore) FinishRun(ctx context.Context, id runid.ID, status, reason string, finished time.Time) error {
	if status == StatusRunning || !validStatus(status) {
		return fmt.Errorf("cannot finish run %s: invalid final status %q (want %s, %s or %s)",
			id, status, StatusDone, StatusInterrupted, StatusFailed)
	}
	if finished.IsZero() {
		return fmt.Errorf("cannot finish run %s: no finish time", id)
	}
	return s.write(ctx, "finishing run "+string(id), func(ctx context.Context, _ bool) error {
		return s.updateRun(ctx, id, `UPDATE runs SET status = ?, stop_reason = ?, finished = ? WHERE id = ?`,
			status, reason, formatTime(finished), string(id))
	})
}

// SetRunStatus implements Store.
func (s *sqlStore) SetRunStatus(ctx context.Context, id runid.ID, status string) error {
	if err := checkStatus(status); err != nil {
		return fmt.Errorf("cannot set status of run %s: %w", id, err)
	}
	return s.write(ctx, "setting the status of run "+string(id), func(ctx context.Context, _ bool) error {
		if status == StatusRunning {
			return s.updateRun(ctx, id, `UPDATE runs SET status = ?, stop_reason = '', finished = NULL WHERE id = ?`,
				status, string(id))
		}
		return s.updateRun(ctx, id, `UPDATE runs SET status = ? WHERE id = ?`, status, string(id))
	})
}

// updateRun runs an UPDATE of one run and reports ErrNoRun when it changed
// nothing.
func (s *sqlStore) updateRun(ctx context.Context, id runid.ID, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return fmt.Errorf("updating run %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("updating run %s: %w", id, err)
	}
	if n == 0 {
		return noRunError(string(id))
	}
	return nil
}

// AddTrial implements Store.
func (s *sqlStore) AddTrial(ctx context.Context, t Trial) error {
	what := fmt.Sprintf("storing the trial of round %d of %s on %s", t.Round, t.Workload, t.Platform)
	return s.write(ctx, what, func(ctx context.Context, retry bool) error {
		err := s.addTrial(ctx, t)
		if retry && errors.Is(err, ErrDuplicate) {
			return nil // the attempt whose answer was lost stored it
		}
		return err
	})
}

func (s *sqlStore) addTrial(ctx context.Context, t Trial) (err error) {
	if err := checkTrial(t); err != nil {
		return err
	}
	commands, err := json.Marshal(t.Commands)
	if err != nil {
		return fmt.Errorf("encoding trial commands: %w", err)
	}
	where, err := json.Marshal(t.Where)
	if err != nil {
		return fmt.Errorf("encoding trial places: %w", err)
	}
	notes, err := json.Marshal(t.Notes)
	if err != nil {
		return fmt.Errorf("encoding trial notes: %w", err)
	}

	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storing trial: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var trialID int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO trials
		(run_id, round, idx, warmup, workload, platform, started, duration_ns, error,
		 commands_json, where_json, notes_json, raw_dir)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		string(t.RunID), t.Round, t.Index, t.Warmup, t.Workload, t.Platform, nullTime(t.Started),
		int64(t.Duration), t.Error, string(commands), string(where), string(notes), t.RawDir,
	).Scan(&trialID)
	if err != nil {
		switch s.d.classify(err) {
		case uniqueViolation:
			return fmt.Errorf("cannot store trial: run %s already has a trial for round %d of %s on %s (%w)",
				t.RunID, t.Round, t.Workload, t.Platform, ErrDuplicate)
		case foreignKeyViolation:
			return fmt.Errorf("cannot store trial: %w", noRunError(string(t.RunID)))
		}
		return fmt.Errorf("storing trial: %w", err)
	}
	insertMetric := s.q(`INSERT INTO metrics (trial_id, seq, name, unit, higher_is_better, value,
		diagnostic, quantile, samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	for i, m := range t.Metrics {
		var value any = m.Value
		if math.IsNaN(m.Value) {
			value = nil // SQLite cannot store NaN; both databases keep it as NULL
		}
		if _, err = tx.ExecContext(ctx, insertMetric, trialID, i, m.Name, m.Unit, m.HigherIsBetter, value,
			m.Diagnostic, m.Quantile, m.Samples); err != nil {
			return fmt.Errorf("storing metric %s of trial: %w", m.Name, err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("committing trial: %w", err)
	}
	return nil
}

// checkTrial rejects a trial that the database would store wrongly or that
// could not be told apart from others.
func checkTrial(t Trial) error {
	switch {
	case t.RunID == "":
		return errors.New("cannot store trial: no run ID")
	case t.Workload == "":
		return errors.New("cannot store trial: no workload")
	case t.Platform == "":
		return errors.New("cannot store trial: no platform")
	}
	seen := make(map[string]bool, len(t.Metrics))
	for _, m := range t.Metrics {
		if !(m.Quantile >= 0 && m.Quantile < 1) || m.Samples < 0 {
			return fmt.Errorf("cannot store trial of %s on %s: metric %s: quantile %v or samples %d out of range", t.Workload, t.Platform, m.Name, m.Quantile, m.Samples)
		}
		if m.Name == "" {
			return fmt.Errorf("cannot store trial of %s on %s: a metric has no name", t.Workload, t.Platform)
		}
		if seen[m.Name] {
			return fmt.Errorf("cannot store trial of %s on %s: metric %s reported twice", t.Workload, t.Platform, m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

// runColumns are the columns queryRuns scans, in order.
const runColumns = `r.id, r.study, r.spec, r.seed, r.baseline, r.status, r.stop_reason,
	r.started, r.finished, r.env, r.version,
	(SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id)`

// newestFirst orders runs for Runs and RefLast.
const newestFirst = ` ORDER BY r.started DESC, r.id DESC`

// Run implements Store.
func (s *sqlStore) Run(ctx context.Context, ref string) (Run, error) {
	if ref == "" {
		return Run{}, &userError{msg: "no run given (see `nearnative runs`)", kind: ErrNoRun}
	}
	var runs []Run
	var err error
	if ref == RefLast {
		var last runid.ID
		if last, err = s.newest(ctx); err != nil {
			return Run{}, err
		}
		runs, err = s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = ?`, string(last))
	} else {
		runs, err = s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs r
			WHERE r.id = ? OR substr(r.id, 1, ?) = ?`+newestFirst, ref, len(ref), ref)
	}
	if err != nil {
		return Run{}, err
	}
	for _, r := range runs {
		if string(r.ID) == ref {
			return r, nil
		}
	}
	switch len(runs) {
	case 0:
		return Run{}, noRunError(ref)
	case 1:
		return runs[0], nil
	}
	return Run{}, ambiguousError(ref, len(runs))
}

// newest is the ID of the newest run with a valid ID ("" when none).
func (s *sqlStore) newest(ctx context.Context) (runid.ID, error) {
	ids, err := s.ids(ctx)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		if runid.ID(id).Valid() {
			return runid.ID(id), nil
		}
	}
	return "", nil
}

// ids lists every stored run ID as stored, newest first.
func (s *sqlStore) ids(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT r.id FROM runs r`+newestFirst))
	if err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading runs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	return ids, nil
}

// InvalidRuns implements Store.
func (s *sqlStore) InvalidRuns(ctx context.Context) ([]string, error) {
	ids, err := s.ids(ctx)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, id := range ids {
		if !runid.ID(id).Valid() {
			bad = append(bad, id)
		}
	}
	return bad, nil
}

// Runs implements Store.
func (s *sqlStore) Runs(ctx context.Context) ([]Run, error) {
	return s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs r`+newestFirst)
}

func (s *sqlStore) queryRuns(ctx context.Context, query string, args ...any) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		var (
			r             Run
			id, started   string
			finished, env sql.NullString
		)
		if err := rows.Scan(&id, &r.Study, &r.Spec, &r.Seed, &r.Baseline, &r.Status, &r.StopReason,
			&started, &finished, &env, &r.Version, &r.Trials); err != nil {
			return nil, fmt.Errorf("reading runs: %w", err)
		}
		r.ID = runid.ID(id)
		if !r.ID.Valid() {
			// Not written by nearnative (CreateRun checks the form): the
			// ID must not name a run directory or a lock. InvalidRuns
			// lists such rows.
			continue
		}
		if r.Started, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("reading run %s: %w", id, err)
		}
		if finished.Valid {
			if r.Finished, err = parseTime(finished.String); err != nil {
				return nil, fmt.Errorf("reading run %s: %w", id, err)
			}
		}
		if env.Valid {
			r.Env = json.RawMessage(env.String)
		}
		if len(r.Spec) == 0 {
			r.Spec = nil
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	return runs, nil
}

// Trials implements Store.
func (s *sqlStore) Trials(ctx context.Context, id runid.ID) ([]Trial, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT 1 FROM runs WHERE id = ?`), string(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, noRunError(string(id))
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	trials, byID, err := s.queryTrials(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.queryMetrics(ctx, id, trials, byID); err != nil {
		return nil, err
	}
	return trials, nil
}

// queryTrials reads a run's trials without metrics; byID maps a trial's
// database ID to its position in trials.
func (s *sqlStore) queryTrials(ctx context.Context, id runid.ID) (trials []Trial, byID map[int64]int, err error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, round, idx, warmup, workload, platform, started,
		duration_ns, error, commands_json, where_json, notes_json, raw_dir
		FROM trials WHERE run_id = ? ORDER BY round, idx, id`), string(id))
	if err != nil {
		return nil, nil, fmt.Errorf("reading trials of run %s: %w", id, err)
	}
	defer rows.Close()
	byID = make(map[int64]int)
	for rows.Next() {
		var (
			t                      = Trial{RunID: id}
			trialID, duration      int64
			started                sql.NullString
			commands, where, notes string
		)
		if err := rows.Scan(&trialID, &t.Round, &t.Index, &t.Warmup, &t.Workload, &t.Platform, &started,
			&duration, &t.Error, &commands, &where, &notes, &t.RawDir); err != nil {
			return nil, nil, fmt.Errorf("reading trials of run %s: %w", id, err)
		}
		t.Duration = time.Duration(duration)
		if started.Valid {
			if t.Started, err = parseTime(started.String); err != nil {
				return nil, nil, fmt.Errorf("reading trials of run %s: %w", id, err)
			}
		}
		for _, f := range []struct {
			text string
			dst  *[]string
		}{{commands, &t.Commands}, {where, &t.Where}, {notes, &t.Notes}} {
			if err := json.Unmarshal([]byte(f.text), f.dst); err != nil {
				return nil, nil, fmt.Errorf("reading trials of run %s: decoding %q: %w", id, f.text, err)
			}
		}
		byID[trialID] = len(trials)
		trials = append(trials, t)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading trials of run %s: %w", id, err)
	}
	return trials, byID, nil
}

// queryMetrics fills in the metrics of trials.
func (s *sqlStore) queryMetrics(ctx context.Context, id runid.ID, trials []Trial, byID map[int64]int) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT m.trial_id, m.name, m.unit, m.higher_is_better, m.value,
		m.diagnostic, m.quantile, m.samples
		FROM metrics m JOIN trials t ON t.id = m.trial_id
		WHERE t.run_id = ? ORDER BY m.trial_id, m.seq`), string(id))
	if err != nil {
		return fmt.Errorf("reading metrics of run %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			trialID int64
			m       Metric
			value   sql.NullFloat64
		)
		if err := rows.Scan(&trialID, &m.Name, &m.Unit, &m.HigherIsBetter, &value, &m.Diagnostic, &m.Quantile, &m.Samples); err != nil {
			return fmt.Errorf("reading metrics of run %s: %w", id, err)
		}
		m.Value = math.NaN()
		if value.Valid {
			m.Value = value.Float64
		}
		i, ok := byID[trialID]
		if !ok {
			continue // a trial stored after the trials were read
		}
		trials[i].Metrics = append(trials[i].Metrics, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading metrics of run %s: %w", id, err)
	}
	return nil
}

// Close implements Store.
func (s *sqlStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing result database: %w", err)
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}
