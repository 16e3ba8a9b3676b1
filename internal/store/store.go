// Package store keeps runs and their trials in a result database: a SQLite
// file by default, or a PostgreSQL database. Every trial is committed the
// moment it is added, so a crash loses at most the trial in flight.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// Run statuses.
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// RefLast is the run reference that names the newest run.
const RefLast = "last"

// Sentinel errors, wrapped by the errors the Store returns; test with errors.Is.
var (
	// ErrNoRun means no stored run matches the given ID or reference.
	ErrNoRun = errors.New("no such run")
	// ErrAmbiguous means a run reference is a prefix of several run IDs.
	ErrAmbiguous = errors.New("ambiguous run reference")
	// ErrDuplicate means the run or trial is already stored.
	ErrDuplicate = errors.New("duplicate")
)

// Run is one execution of a study.
type Run struct {
	ID         runid.ID
	Study      string
	Spec       []byte // the study as run, YAML
	Seed       int64
	Baseline   string
	Status     string // StatusRunning, StatusDone, StatusInterrupted or StatusFailed
	StopReason string
	Started    time.Time
	Finished   time.Time       // zero while the run has not finished
	Env        json.RawMessage // environment capture
	Version    string          // nearnative version and commit
	Trials     int             // number of stored trials; filled by Store.Run and Store.Runs, ignored by CreateRun
}

// Metric is one measured value of a trial.
type Metric struct {
	Name           string
	Unit           string
	HigherIsBetter bool
	Value          float64 // NaN is stored and returned as NaN
	// Diagnostic marks a metric that explains a result (CPU shares, steal)
	// rather than being one: reports show it without a verdict.
	Diagnostic bool
	// Quantile is q when the value is a q-quantile of per-request
	// observations (0.99 for a p99), else 0.
	Quantile float64
	// Samples is the number of observations behind the value (the requests
	// a latency was computed from); 0 when unknown or not applicable.
	Samples int64
}

// Kinds of run notes.
const (
	// NoteDegraded is a fallback or degraded mode a platform ran in (a VM
	// under TCG, a user-mode network, no CPU cgroup).
	NoteDegraded = "degraded"
	// NoteSkipped is a platform of the study that did not run, with why.
	NoteSkipped = "skipped"
	// NoteWarning is any other condition of the run a reader must know (an
	// environment fact that could not be captured).
	NoteWarning = "warning"
	// NoteClient says where the load ran and over what for the platforms
	// it names (Subject: "native, docker-nat"; Text: "netns veth MTU
	// 1500"). A run without one ran its load on this machine over
	// loopback (every run stored before client hosts existed).
	NoteClient = "client"
	// NoteHosts says what the run's hosts over SSH were: where each role
	// ran, each host's clock offset, and whether they were a test bed
	// sharing this machine's cores.
	NoteHosts = "hosts"
)

// RunNote is something about a run as a whole that its tables must say: a
// degraded mode, a skipped platform. Notes are stored once each.
type RunNote struct {
	Kind    string // NoteDegraded, NoteSkipped, NoteWarning or NoteClient
	Subject string // the platform it concerns, or "" for the run
	Text    string
}

// Trial is one measurement of one workload on one platform within a run.
type Trial struct {
	RunID    runid.ID
	Round    int
	Index    int // position within the round
	Warmup   bool
	Workload string
	Platform string
	Started  time.Time
	Duration time.Duration
	Error    string // non-empty for a failed trial
	Metrics  []Metric
	Commands []string
	Where    []string
	Notes    []string
	RawDir   string
}

// Store keeps runs and trials. Implementations are safe for concurrent use.
// Times come back in UTC.
type Store interface {
	// CreateRun stores a new run. The ID must have the runid form and Started
	// must be set; an empty Status means StatusRunning. Storing an ID twice
	// fails with ErrDuplicate.
	CreateRun(ctx context.Context, r Run) error
	// FinishRun records how a run ended: status is StatusDone,
	// StatusInterrupted or StatusFailed.
	FinishRun(ctx context.Context, id runid.ID, status, reason string, finished time.Time) error
	// SetRunStatus changes a run's status, e.g. back to StatusRunning on
	// --resume; setting StatusRunning also clears the stop reason and the
	// finish time.
	SetRunStatus(ctx context.Context, id runid.ID, status string) error
	// AddTrial stores a trial and its metrics in one transaction, committed
	// before it returns. A trial with the same run, round, workload and
	// platform as a stored one fails with ErrDuplicate; an unknown run fails
	// with ErrNoRun. To store a trial that ended while the run is being
	// cancelled, pass context.WithoutCancel(ctx).
	AddTrial(ctx context.Context, t Trial) error
	// Run returns the run that ref names: a full ID, a unique prefix of one,
	// or RefLast for the newest run. It fails with ErrNoRun or ErrAmbiguous.
	Run(ctx context.Context, ref string) (Run, error)
	// Runs returns all runs, newest first. Run and Runs skip rows whose ID
	// is not a run ID (written by something other than nearnative): such
	// an ID must never name a run directory, a lock or a resource.
	Runs(ctx context.Context) ([]Run, error)
	// InvalidRuns lists the stored run IDs that are not run IDs, which Run
	// and Runs skip, so that a command can say it left them alone.
	InvalidRuns(ctx context.Context) ([]string, error)
	// Trials returns a run's trials ordered by round and index; an unknown
	// run fails with ErrNoRun.
	Trials(ctx context.Context, id runid.ID) ([]Trial, error)
	// AddRunNote stores a note about run id; a note equal to a stored one
	// (same kind, subject and text) is not stored again. An unknown run
	// fails with ErrNoRun.
	AddRunNote(ctx context.Context, id runid.ID, n RunNote) error
	// RunNotes returns a run's notes in the order they were added.
	RunNotes(ctx context.Context, id runid.ID) ([]RunNote, error)
	// Close releases the database.
	Close() error
}

// Open opens the result database named by dsn, creating its schema if it is
// missing. A dsn starting with postgres:// or postgresql:// names a PostgreSQL
// database; anything else is the path of a SQLite file, created with its
// parent directory if needed.
func Open(ctx context.Context, dsn string) (Store, error) {
	if isPostgres(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// userError is an error whose message is written for the user in full and
// that still matches a sentinel with errors.Is.
type userError struct {
	msg  string
	kind error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.kind }

func noRunError(ref string) error {
	return &userError{msg: fmt.Sprintf("no run matches %q (see `nearnative runs`)", ref), kind: ErrNoRun}
}

func ambiguousError(ref string, n int) error {
	return &userError{msg: fmt.Sprintf("%q matches %d runs: give more of the ID", ref, n), kind: ErrAmbiguous}
}

func validStatus(s string) bool {
	switch s {
	case StatusRunning, StatusDone, StatusInterrupted, StatusFailed:
		return true
	}
	return false
}

func checkStatus(s string) error {
	if !validStatus(s) {
		return fmt.Errorf("invalid run status %q (want %s, %s, %s or %s)",
			s, StatusRunning, StatusDone, StatusInterrupted, StatusFailed)
	}
	return nil
}
