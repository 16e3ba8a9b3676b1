package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

func TestSQLite(t *testing.T) {
	testSuite(t, func(t *testing.T) string {
		// A parent directory that does not exist yet: Open creates it.
		return filepath.Join(t.TempDir(), "state dir?#%", "results.db")
	})
}

func TestSQLiteSettings(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "results.db"))
	db := s.(*sqlStore).db
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", fmt.Sprint(busyTimeoutMS)},
		{"synchronous", "2"}, // FULL
	}
	for _, tc := range tests {
		var got string
		if err := db.QueryRowContext(context.Background(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
}

func TestSQLiteOpenErrors(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("this is not a SQLite database\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string // part of the underlying cause
	}{
		{"under a regular file", filepath.Join(regular, "sub", "results.db"), "not a directory"},
		{"directly under a regular file", filepath.Join(regular, "results.db"), "not a directory"},
		{"a directory", dir, "unable to open"},
		{"not a database", garbage, "not a database"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.path)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%s) succeeded", tc.path)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "cannot open result database "+tc.path+": ") ||
				!strings.HasSuffix(msg, ": check the path or pass --db") ||
				!strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("Open(%s) error:\n%s\nwant one line naming the path, containing %q and the hint", tc.path, msg, tc.want)
			}
		})
	}
}

// crashEnv makes TestSQLiteSurvivesKill act as the process that is killed.
const crashEnv = "NEARNATIVE_STORE_TEST_CRASH_DB"

// TestSQLiteSurvivesKill runs a child process that stores a run and trials
// and then dies by SIGKILL without closing anything; a new Open must see every
// trial the child stored.
func TestSQLiteSurvivesKill(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "results.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "stored 5 trials") {
		t.Fatalf("child did not store its trials; output:\n%s", out)
	}

	s := open(t, path)
	r, err := s.Run(ctx, "last")
	if err != nil {
		t.Fatalf("Run after the crash: %v", err)
	}
	if r.Status != StatusRunning || r.Trials != 5 {
		t.Errorf("after the crash: run %s %s with %d trials, want running with 5", r.ID, r.Status, r.Trials)
	}
	trials, err := s.Trials(ctx, r.ID)
	if err != nil {
		t.Fatalf("Trials after the crash: %v", err)
	}
	for i, tr := range trials {
		if tr.Round != i || len(tr.Metrics) != 1 || tr.Metrics[0].Value != float64(i) {
			t.Errorf("trial %d after the crash: %+v", i, tr)
		}
	}
}

// crashChild stores a run with five trials and kills its own process.
func crashChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	id := runid.New()
	if err := s.CreateRun(ctx, Run{ID: id, Study: "crash", Started: time.Now()}); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for round := range 5 {
		err := s.AddTrial(ctx, Trial{RunID: id, Round: round, Workload: "w", Platform: "native",
			Metrics: []Metric{{Name: "ops", Value: float64(round)}}})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	fmt.Println("stored 5 trials")
	_ = os.Stdout.Sync()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // wait for the signal
}

// TestSQLiteMigratesVersion1 opens a database written by a nearnative whose
// schema was version 1 (no metric attributes, no run notes): its trials read
// back with the new attributes zero, and notes can be added.
func TestSQLiteMigratesVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	s := open(t, path)
	db := s.(*sqlStore).db
	// Rebuild the file at version 1.
	for _, stmt := range []string{`DROP TABLE run_notes`, `DROP TABLE metrics`, `DROP TABLE trials`, `DROP TABLE runs`, `DELETE FROM schema_version`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range migrations[0] {
		if _, err := db.ExecContext(ctx, sqliteDialect.types.Replace(stmt)); err != nil {
			t.Fatal(err)
		}
	}
	id := runid.ID("20260101-120000-0001")
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (id, study, seed, baseline, status, stop_reason, started, version)
		VALUES (?, 's', 1, 'native', 'done', '', '2026-01-01T12:00:00.000000000Z', 'v')`, string(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO trials (id, run_id, round, idx, warmup, workload, platform, duration_ns, error, commands_json, where_json, notes_json, raw_dir)
		VALUES (7, ?, 0, 0, 0, 'w', 'native', 1, '', '[]', '[]', '[]', '')`, string(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO metrics (trial_id, seq, name, unit, higher_is_better, value) VALUES (7, 0, 'ops', 'ops/s', 1, 5)`); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	trials, err := s2.Trials(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := Metric{Name: "ops", Unit: "ops/s", HigherIsBetter: true, Value: 5}
	if len(trials) != 1 || len(trials[0].Metrics) != 1 || trials[0].Metrics[0] != want {
		t.Fatalf("trials after migration: %+v, want one with metric %+v", trials, want)
	}
	if err := s2.AddRunNote(ctx, id, RunNote{Kind: NoteWarning, Text: "x"}); err != nil {
		t.Errorf("AddRunNote after migration: %v", err)
	}
}

// TestInvalidRunIDsSkipped: a row whose ID is not a run ID (written by
// something other than nearnative) is never returned, so that it cannot
// name a run directory or a lock; InvalidRuns lists it.
func TestInvalidRunIDsSkipped(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "results.db"))
	good := Run{ID: runid.New(), Study: "s", Baseline: "native", Started: time.Now().Add(-time.Hour)}
	if err := s.CreateRun(ctx, good); err != nil {
		t.Fatal(err)
	}
	db := s.(*sqlStore).db
	for _, bad := range []string{"../../canary", "20990101-000000-zzzz"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO runs (id, study, seed, baseline, status, stop_reason, started, version)
			VALUES (?, 's', 0, 'native', 'running', '', ?, 'x')`, bad, formatTime(time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].ID != good.ID {
		t.Errorf("Runs = %v, %v; want only %s", runs, err, good.ID)
	}
	if r, err := s.Run(ctx, RefLast); err != nil || r.ID != good.ID {
		t.Errorf("Run(last) = %s, %v; want %s (the newer rows are not runs)", r.ID, err, good.ID)
	}
	for _, ref := range []string{"../../canary", "../", "20990101"} {
		if r, err := s.Run(ctx, ref); !errors.Is(err, ErrNoRun) {
			t.Errorf("Run(%q) = %q, %v; want ErrNoRun", ref, r.ID, err)
		}
	}
	bad, err := s.InvalidRuns(ctx)
	if err != nil || len(bad) != 2 {
		t.Errorf("InvalidRuns = %q, %v; want the two rows", bad, err)
	}
}

// TestSQLitePrivate: the database and its journal files are 0600, and an
// existing 0644 database is made private.
func TestSQLitePrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.db")
	s := open(t, path)
	if err := s.CreateRun(context.Background(), Run{ID: runid.New(), Study: "s", Baseline: "native", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		files, _ := filepath.Glob(path + "*")
		if len(files) < 2 {
			t.Fatalf("database files %v, want the database and its WAL", files)
		}
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
			}
		}
	}
	check()
	s.Close()
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path = old
	s = open(t, old)
	if err := s.CreateRun(context.Background(), Run{ID: runid.New(), Study: "s", Baseline: "native", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	check()
}
