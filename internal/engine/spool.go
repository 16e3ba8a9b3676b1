package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
)

// ErrStore marks a run stopped because the result store would not take a
// trial within its write policy: the trial is kept in the run's directory
// (StoreError.Kept) and `run --resume` stores it first.
var ErrStore = errors.New("the result store failed")

// StoreError is how a run ends when the store would not take a trial.
type StoreError struct {
	Run   runid.ID
	Trial string // the trial's name, r01-redis-native
	Err   error  // the store's last error
	Kept  string // the file the trial is kept in ("" when it could not be written)
}

func (e *StoreError) Error() string {
	if e.Kept == "" {
		return fmt.Sprintf("storing trial %s failed: %v; it could not be kept in a file either (its data is in the log above)", e.Trial, e.Err)
	}
	return fmt.Sprintf("storing trial %s failed: %v; the trial is kept in %s: once the database works, `nearnative run --resume %s` stores it and goes on",
		e.Trial, e.Err, e.Kept, e.Run)
}

func (e *StoreError) Unwrap() []error { return []error{ErrStore, e.Err} }

// spoolDir holds the trials of a run that the store did not take.
func spoolDir(d state.Dir, run runid.ID) string { return filepath.Join(d.RunDir(run), "spool") }

// spooled is a kept trial as a file: the trial, its metrics with values as
// text (JSON has no NaN), and its layout.
type spooled struct {
	Trial   store.Trial       `json:"trial"`
	Metrics []spoolMetric     `json:"metrics"`
	Layout  *placement.Record `json:"layout,omitempty"`
}

type spoolMetric struct {
	store.Metric
	Value string `json:"Value"` // strconv 'g' form; "NaN" for NaN
}

// encodeSpooled is trial t (and its layout) as a spool file's contents.
func encodeSpooled(t store.Trial, l *placement.Record) ([]byte, error) {
	s := spooled{Trial: t, Layout: l}
	s.Trial.Metrics = nil
	for _, m := range t.Metrics {
		s.Metrics = append(s.Metrics, spoolMetric{Metric: m, Value: strconv.FormatFloat(m.Value, 'g', -1, 64)})
	}
	return json.Marshal(s)
}

func decodeSpooled(b []byte) (store.Trial, *placement.Record, error) {
	var s spooled
	if err := json.Unmarshal(b, &s); err != nil {
		return store.Trial{}, nil, err
	}
	t := s.Trial
	for _, m := range s.Metrics {
		v, err := strconv.ParseFloat(m.Value, 64)
		if err != nil {
			return store.Trial{}, nil, fmt.Errorf("metric %s: %w", m.Name, err)
		}
		m.Metric.Value = v
		t.Metrics = append(t.Metrics, m.Metric)
	}
	return t, s.Layout, nil
}

// spool writes trial t of run to the run's spool directory and returns the
// file. The name holds only numbers (round and place in the round), which
// are unique within a run.
func spool(d state.Dir, t store.Trial, l *placement.Record) (string, error) {
	b, err := encodeSpooled(t, l)
	if err != nil {
		return "", err
	}
	dir := spoolDir(d, t.RunID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("trial-r%04d-%04d.json", t.Round, t.Index))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// importSpool stores the trials kept in run's spool directory and removes
// each file once its trial is in the store (a trial stored already counts:
// the store may have taken it before its answer was lost). It returns how
// many trials it stored.
func importSpool(ctx context.Context, st store.Store, d state.Dir, run runid.ID) (int, error) {
	files, err := filepath.Glob(filepath.Join(spoolDir(d, run), "trial-*.json"))
	if err != nil || len(files) == 0 {
		return 0, err
	}
	sort.Strings(files)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return n, fmt.Errorf("reading kept trial %s: %w", f, err)
		}
		t, l, err := decodeSpooled(b)
		if err != nil {
			return n, fmt.Errorf("kept trial %s does not decode: %w", f, err)
		}
		if t.RunID != run {
			return n, fmt.Errorf("kept trial %s belongs to run %q, not %s", f, t.RunID, run)
		}
		switch err := st.AddTrial(ctx, t); {
		case err == nil:
			n++
		case errors.Is(err, store.ErrDuplicate):
		default:
			return n, fmt.Errorf("storing kept trial %s: %w", f, err)
		}
		if ls, ok := st.(store.LayoutStore); ok && l != nil {
			key := store.TrialKey{Run: run, Round: t.Round, Workload: t.Workload, Platform: t.Platform}
			if err := ls.PutLayout(ctx, key, *l); err != nil {
				return n, fmt.Errorf("storing the layout of kept trial %s: %w", f, err)
			}
		}
		if err := os.Remove(f); err != nil {
			return n, err
		}
	}
	os.Remove(spoolDir(d, run)) // when empty
	return n, nil
}
