package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
)

// testSuite runs the backend-independent tests. newDSN returns the DSN of a
// fresh, empty database each time it is called.
func testSuite(t *testing.T, newDSN func(t *testing.T) string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newDSN func(t *testing.T) string)
	}{
		{"RoundTrip", testRoundTrip},
		{"RunsOrderAndCounts", testRunsOrder},
		{"RefResolution", testRefs},
		{"Duplicates", testDuplicates},
		{"UnknownRun", testUnknownRun},
		{"Status", testStatus},
		{"InvalidInput", testInvalidInput},
		{"CrashThenReopen", testCrashReopen},
		{"SchemaTooNew", testSchemaTooNew},
		{"RunNotes", testRunNotes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newDSN) })
	}
}

// open opens dsn and closes the store when the test ends.
func open(t *testing.T, dsn string) Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustCreate(t *testing.T, s Store, runs ...Run) {
	t.Helper()
	for _, r := range runs {
		if err := s.CreateRun(context.Background(), r); err != nil {
			t.Fatalf("CreateRun(%s): %v", r.ID, err)
		}
	}
}

func mustAdd(t *testing.T, s Store, trials ...Trial) {
	t.Helper()
	for _, tr := range trials {
		if err := s.AddTrial(context.Background(), tr); err != nil {
			t.Fatalf("AddTrial(round %d %s/%s): %v", tr.Round, tr.Workload, tr.Platform, err)
		}
	}
}

func simpleRun(id string, started time.Time) Run {
	return Run{ID: runid.ID(id), Study: "s", Status: StatusRunning, Started: started}
}

func simpleTrial(id string, round int, platform string) Trial {
	return Trial{RunID: runid.ID(id), Round: round, Workload: "w", Platform: platform}
}

// sameRun reports whether two runs are equal, times compared as instants.
func sameRun(a, b Run) bool {
	if !a.Started.Equal(b.Started) || !a.Finished.Equal(b.Finished) ||
		!bytes.Equal(a.Spec, b.Spec) || !bytes.Equal(a.Env, b.Env) {
		return false
	}
	a.Started, b.Started, a.Finished, b.Finished = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	a.Spec, b.Spec, a.Env, b.Env = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

// sameTrial reports whether two trials are equal, times compared as instants
// and NaN equal to NaN.
func sameTrial(a, b Trial) bool {
	if !a.Started.Equal(b.Started) || len(a.Metrics) != len(b.Metrics) {
		return false
	}
	for i := range a.Metrics {
		ma, mb := a.Metrics[i], b.Metrics[i]
		if math.IsNaN(ma.Value) && math.IsNaN(mb.Value) {
			ma.Value, mb.Value = 0, 0
		}
		if ma != mb {
			return false
		}
	}
	a.Started, b.Started = time.Time{}, time.Time{}
	a.Metrics, b.Metrics = nil, nil
	return reflect.DeepEqual(a, b)
}

func testRoundTrip(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	cet := time.FixedZone("CET", 3600)
	id := runid.ID("20260315-101112-abcd")
	run := Run{
		ID:       id,
		Study:    "redis-overhead",
		Spec:     []byte("name: redis\nplatforms: [native, docker-nat] # ünïcode\n\x00\xff"),
		Seed:     math.MinInt64 + 7,
		Baseline: "native",
		Status:   StatusRunning,
		Started:  time.Date(2026, 3, 15, 10, 11, 12, 123456789, cet),
		Env:      json.RawMessage(`{"kernel": "6.1.0", "cpus": 2, "docker": null}`),
		Version:  "v0.1.0 (abc1234)",
	}
	mustCreate(t, s, run)

	trials := []Trial{
		{ // stored first, read back last
			RunID: id, Round: 1, Index: 1, Workload: "redis-get", Platform: "docker-nat",
			Duration: 0, Error: "server did not start: exit status 1",
			Commands: []string{}, Notes: []string{"retried once"}, RawDir: "",
		},
		{
			RunID: id, Round: 0, Index: 0, Warmup: true, Workload: "redis-get", Platform: "native",
			Started:  time.Date(2026, 3, 15, 10, 11, 13, 1, cet),
			Duration: 1500*time.Millisecond + time.Nanosecond,
			Metrics: []Metric{
				{Name: "throughput", Unit: "ops/s", HigherIsBetter: true, Value: 123456.789},
				{Name: "p99", Unit: "ms", Value: 0.25, Quantile: 0.99, Samples: 123456},
				{Name: "server_cpu_pct", Unit: "%", Value: 42, Diagnostic: true},
				{Name: "nan", Unit: "x", Value: math.NaN()},
				{Name: "inf", HigherIsBetter: true, Value: math.Inf(1)},
				{Name: "tiny", Value: -1e-300},
			},
			Commands: []string{"redis-server --port 0 --save ''", `redis-benchmark -t get -q "x"`},
			Where:    []string{"cpus 0-1", "host"},
			RawDir:   "/var/lib/nearnative/runs/20260315-101112-abcd/0-native",
		},
		{
			RunID: id, Round: 1, Index: 0, Workload: "redis-get", Platform: "native",
			Started:  time.Date(2026, 3, 15, 9, 11, 14, 0, time.UTC),
			Duration: time.Hour,
			Metrics:  []Metric{{Name: "throughput", Unit: "ops/s", HigherIsBetter: true, Value: 1}},
		},
	}
	mustAdd(t, s, trials...)

	finished := time.Date(2026, 3, 15, 11, 0, 0, 5, cet)
	if err := s.FinishRun(ctx, id, StatusInterrupted, "signal: interrupt", finished); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}

	want := run
	want.Status, want.StopReason, want.Finished, want.Trials = StatusInterrupted, "signal: interrupt", finished, 3
	got, err := s.Run(ctx, string(id))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !sameRun(got, want) {
		t.Errorf("Run:\n got %+v\nwant %+v", got, want)
	}
	if got.Started.Location() != time.UTC || got.Finished.Location() != time.UTC {
		t.Errorf("times not in UTC: %v, %v", got.Started, got.Finished)
	}

	gotTrials, err := s.Trials(ctx, id)
	if err != nil {
		t.Fatalf("Trials: %v", err)
	}
	wantTrials := []Trial{trials[1], trials[2], trials[0]} // by round, index
	if len(gotTrials) != len(wantTrials) {
		t.Fatalf("Trials: got %d, want %d", len(gotTrials), len(wantTrials))
	}
	for i := range wantTrials {
		if !sameTrial(gotTrials[i], wantTrials[i]) {
			t.Errorf("trial %d:\n got %+v\nwant %+v", i, gotTrials[i], wantTrials[i])
		}
	}

	// Metrics are rows, so reports can query them by name.
	ss := s.(*sqlStore)
	var n int
	var sum float64
	err = ss.db.QueryRowContext(ctx, ss.q(`SELECT COUNT(*), SUM(m.value) FROM metrics m
		JOIN trials t ON t.id = m.trial_id WHERE t.run_id = ? AND m.name = ?`), string(id), "throughput").Scan(&n, &sum)
	if err != nil {
		t.Fatalf("querying metrics by name: %v", err)
	}
	if n != 2 || sum != 123457.789 {
		t.Errorf("metrics named throughput: count %d sum %v, want 2 and 123457.789", n, sum)
	}
}

func testRunsOrder(t *testing.T, newDSN func(t *testing.T) string) {
	s := open(t, newDSN(t))
	base := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	mustCreate(t, s,
		simpleRun("20260102-100000-000a", base),
		simpleRun("20260102-120000-000b", base.Add(2*time.Hour)),
		simpleRun("20260102-110000-000c", base.Add(time.Hour)),
		simpleRun("20260102-120000-000d", base.Add(2*time.Hour)), // same start as b: ID breaks the tie
		// Started in another zone: 11:30 UTC.
		simpleRun("20260102-113000-000e", time.Date(2026, 1, 2, 12, 30, 0, 0, time.FixedZone("", 3600))),
	)
	mustAdd(t, s,
		simpleTrial("20260102-120000-000b", 0, "native"),
		simpleTrial("20260102-120000-000b", 0, "docker-nat"),
		simpleTrial("20260102-110000-000c", 0, "native"),
	)
	runs, err := s.Runs(context.Background())
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	type row struct {
		id     runid.ID
		trials int
	}
	want := []row{
		{"20260102-120000-000d", 0},
		{"20260102-120000-000b", 2},
		{"20260102-113000-000e", 0},
		{"20260102-110000-000c", 1},
		{"20260102-100000-000a", 0},
	}
	var got []row
	for _, r := range runs {
		got = append(got, row{r.ID, r.Trials})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Runs:\n got %v\nwant %v", got, want)
	}
}

func testRefs(t *testing.T, newDSN func(t *testing.T) string) {
	s := open(t, newDSN(t))
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	mustCreate(t, s,
		simpleRun("20260101-120000-aaaa", base),
		simpleRun("20260101-120000-aaab", base),
		simpleRun("20260102-090000-beef", base.Add(21*time.Hour)),
	)
	tests := []struct {
		ref     string
		want    runid.ID
		wantErr error
		msg     string
	}{
		{ref: "20260101-120000-aaaa", want: "20260101-120000-aaaa"},
		{ref: "20260101-120000-aaab", want: "20260101-120000-aaab"},
		{ref: "20260102", want: "20260102-090000-beef"},
		{ref: "20260102-090000-b", want: "20260102-090000-beef"},
		{ref: "last", want: "20260102-090000-beef"},
		{ref: "20260101-120000-aaa", wantErr: ErrAmbiguous, msg: `"20260101-120000-aaa" matches 2 runs: give more of the ID`},
		{ref: "2026", wantErr: ErrAmbiguous, msg: `"2026" matches 3 runs: give more of the ID`},
		{ref: "abc", wantErr: ErrNoRun, msg: "no run matches \"abc\" (see `nearnative runs`)"},
		{ref: "20260102-090000-BEEF", wantErr: ErrNoRun, msg: "no run matches \"20260102-090000-BEEF\" (see `nearnative runs`)"},
		{ref: "20260101-120000-aaaa0", wantErr: ErrNoRun},
		{ref: "2026%", wantErr: ErrNoRun},
		{ref: "", wantErr: ErrNoRun},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := s.Run(context.Background(), tc.ref)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Run(%q) = %v, %v; want error %v", tc.ref, got.ID, err, tc.wantErr)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Errorf("Run(%q) error:\n got %s\nwant %s", tc.ref, err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run(%q): %v", tc.ref, err)
			}
			if got.ID != tc.want {
				t.Errorf("Run(%q) = %s, want %s", tc.ref, got.ID, tc.want)
			}
		})
	}

	t.Run("last-empty", func(t *testing.T) {
		empty := open(t, newDSN(t))
		if _, err := empty.Run(context.Background(), "last"); !errors.Is(err, ErrNoRun) {
			t.Errorf("Run(last) on an empty database: %v, want ErrNoRun", err)
		}
	})
}

func testDuplicates(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	const id = "20260101-120000-0001"
	mustCreate(t, s, simpleRun(id, time.Now()))

	err := s.CreateRun(ctx, simpleRun(id, time.Now()))
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "already stored") {
		t.Errorf("creating run twice: %v, want ErrDuplicate saying it is already stored", err)
	}

	first := simpleTrial(id, 2, "native")
	first.Metrics = []Metric{{Name: "m", Value: 1}}
	mustAdd(t, s, first)
	tests := []struct {
		name    string
		trial   Trial
		wantErr error
	}{
		{"same trial again", first, ErrDuplicate},
		{"same key, other index and fields", Trial{RunID: id, Round: 2, Index: 5, Workload: "w", Platform: "native", Error: "x"}, ErrDuplicate},
		{"other round", simpleTrial(id, 3, "native"), nil},
		{"other platform", simpleTrial(id, 2, "docker-nat"), nil},
		{"other workload", Trial{RunID: id, Round: 2, Workload: "w2", Platform: "native"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.AddTrial(ctx, tc.trial)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("AddTrial: %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && !strings.Contains(err.Error(), "already has a trial for round 2 of w on native") {
				t.Errorf("error does not say what is duplicated: %v", err)
			}
		})
	}

	// A rejected trial leaves nothing behind, not even its metrics.
	trials, err := s.Trials(ctx, id)
	if err != nil {
		t.Fatalf("Trials: %v", err)
	}
	if len(trials) != 4 || len(trials[0].Metrics) != 1 {
		t.Errorf("after duplicates: %d trials, first with %d metrics; want 4 and 1", len(trials), len(trials[0].Metrics))
	}
}

func testUnknownRun(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	const id = "20260101-120000-dead"
	tests := []struct {
		name string
		call func() error
	}{
		{"AddTrial", func() error { return s.AddTrial(ctx, simpleTrial(id, 0, "native")) }},
		{"FinishRun", func() error { return s.FinishRun(ctx, id, StatusDone, "", time.Now()) }},
		{"SetRunStatus", func() error { return s.SetRunStatus(ctx, id, StatusFailed) }},
		{"Trials", func() error { _, err := s.Trials(ctx, id); return err }},
		{"Run", func() error { _, err := s.Run(ctx, id); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), `no run matches "`+id+`"`) {
				t.Errorf("%s on an unknown run: %v, want ErrNoRun naming the run", tc.name, err)
			}
		})
	}
}

func testStatus(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	const id = "20260101-120000-5a5a"
	mustCreate(t, s, simpleRun(id, time.Now()))
	finished := time.Date(2026, 1, 1, 13, 0, 0, 0, time.UTC)

	steps := []struct {
		name       string
		do         func() error
		wantErr    bool
		status     string
		reason     string
		finishedAt time.Time
	}{
		{"interrupt", func() error { return s.FinishRun(ctx, id, StatusInterrupted, "signal: interrupt", finished) },
			false, StatusInterrupted, "signal: interrupt", finished},
		{"finish as running is refused", func() error { return s.FinishRun(ctx, id, StatusRunning, "", finished) },
			true, StatusInterrupted, "signal: interrupt", finished},
		{"unknown status is refused", func() error { return s.SetRunStatus(ctx, id, "paused") },
			true, StatusInterrupted, "signal: interrupt", finished},
		{"mark failed keeps reason", func() error { return s.SetRunStatus(ctx, id, StatusFailed) },
			false, StatusFailed, "signal: interrupt", finished},
		{"resume clears the end", func() error { return s.SetRunStatus(ctx, id, StatusRunning) },
			false, StatusRunning, "", time.Time{}},
		{"done", func() error { return s.FinishRun(ctx, id, StatusDone, "", finished.Add(time.Hour)) },
			false, StatusDone, "", finished.Add(time.Hour)},
	}
	for _, st := range steps {
		err := st.do()
		if (err != nil) != st.wantErr {
			t.Fatalf("%s: error %v, want error %v", st.name, err, st.wantErr)
		}
		r, err := s.Run(ctx, id)
		if err != nil {
			t.Fatalf("%s: Run: %v", st.name, err)
		}
		if r.Status != st.status || r.StopReason != st.reason || !r.Finished.Equal(st.finishedAt) {
			t.Errorf("%s: status %q reason %q finished %v; want %q %q %v",
				st.name, r.Status, r.StopReason, r.Finished, st.status, st.reason, st.finishedAt)
		}
	}
}

func testInvalidInput(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	const id = "20260101-120000-1234"
	mustCreate(t, s, simpleRun(id, time.Now()))
	badEnv := simpleRun("20260101-120000-0bad", time.Now())
	badEnv.Env = json.RawMessage(`{"unterminated`)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"run ID not an ID", func() error { return s.CreateRun(ctx, simpleRun("abc", time.Now())) }, "not a run ID"},
		{"run without start", func() error { return s.CreateRun(ctx, simpleRun("20260101-120000-0000", time.Time{})) }, "no start time"},
		{"run with bad status", func() error {
			r := simpleRun("20260101-120000-0001", time.Now())
			r.Status = "paused"
			return s.CreateRun(ctx, r)
		}, "invalid run status"},
		{"run with bad env", func() error { return s.CreateRun(ctx, badEnv) }, "not valid JSON"},
		{"trial without platform", func() error { return s.AddTrial(ctx, Trial{RunID: id, Workload: "w"}) }, "no platform"},
		{"trial without workload", func() error { return s.AddTrial(ctx, Trial{RunID: id, Platform: "p"}) }, "no workload"},
		{"metric twice", func() error {
			tr := simpleTrial(id, 0, "native")
			tr.Metrics = []Metric{{Name: "a"}, {Name: "a"}}
			return s.AddTrial(ctx, tr)
		}, "metric a reported twice"},
		{"metric without name", func() error {
			tr := simpleTrial(id, 0, "native")
			tr.Metrics = []Metric{{Value: 1}}
			return s.AddTrial(ctx, tr)
		}, "no name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if runs, err := s.Runs(ctx); err != nil || len(runs) != 1 || runs[0].Trials != 0 {
		t.Errorf("after invalid input: Runs = %+v, %v; want just the one run without trials", runs, err)
	}
}

// testCrashReopen leaves the first store open, as a crashed process would,
// and checks that a second Open sees every trial added before the "crash".
func testCrashReopen(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	dsn := newDSN(t)
	first := open(t, dsn)
	const id = "20260101-120000-c4a5"
	mustCreate(t, first, simpleRun(id, time.Now()))
	for round := range 3 {
		mustAdd(t, first, Trial{RunID: id, Round: round, Workload: "w", Platform: "native",
			Metrics: []Metric{{Name: "ops", Value: float64(round)}}})
	}

	second := open(t, dsn)
	r, err := second.Run(ctx, "last")
	if err != nil {
		t.Fatalf("second store: Run: %v", err)
	}
	if r.ID != id || r.Status != StatusRunning || r.Trials != 3 {
		t.Errorf("second store sees run %s status %s with %d trials; want %s running with 3", r.ID, r.Status, r.Trials, id)
	}
	trials, err := second.Trials(ctx, id)
	if err != nil {
		t.Fatalf("second store: Trials: %v", err)
	}
	for i, tr := range trials {
		if len(tr.Metrics) != 1 || tr.Metrics[0].Value != float64(i) {
			t.Errorf("trial %d metrics %+v, want ops=%d", i, tr.Metrics, i)
		}
	}
	// The crashed run is resumed by the new process.
	if err := second.SetRunStatus(ctx, id, StatusRunning); err != nil {
		t.Fatalf("second store: SetRunStatus: %v", err)
	}
	mustAdd(t, second, Trial{RunID: id, Round: 3, Workload: "w", Platform: "native"})
	if r, err := first.Run(ctx, id); err != nil || r.Trials != 4 {
		t.Errorf("first store after the second wrote: %d trials, %v; want 4", r.Trials, err)
	}
}

func testSchemaTooNew(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	dsn := newDSN(t)
	s := open(t, dsn)
	ss := s.(*sqlStore)
	if _, err := ss.db.ExecContext(ctx, ss.q(`UPDATE schema_version SET version = ?`), schemaVersion+1); err != nil {
		t.Fatalf("bumping schema version: %v", err)
	}
	s2, err := Open(ctx, dsn)
	if err == nil {
		_ = s2.Close()
		t.Fatal("Open of a database with a newer schema succeeded")
	}
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade nearnative") {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaTooNew telling to upgrade", err)
	}
}

func testRunNotes(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	s := open(t, newDSN(t))
	id := runid.ID("20260315-101112-abcd")
	other := runid.ID("20260315-101113-abcd")
	mustCreate(t, s, simpleRun(string(id), time.Now()), simpleRun(string(other), time.Now()))
	notes := []RunNote{
		{Kind: NoteDegraded, Subject: "vm", Text: "emulated (TCG)"},
		{Kind: NoteSkipped, Subject: "vm-docker", Text: "no KVM"},
		{Kind: NoteDegraded, Subject: "vm", Text: "emulated (TCG)"}, // again: stored once
		{Kind: NoteWarning, Text: "environment: no /proc/cpuinfo"},
	}
	for _, n := range notes {
		if err := s.AddRunNote(ctx, id, n); err != nil {
			t.Fatalf("AddRunNote(%+v): %v", n, err)
		}
	}
	if err := s.AddRunNote(ctx, other, notes[0]); err != nil {
		t.Fatalf("the same note for another run: %v", err)
	}
	got, err := s.RunNotes(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []RunNote{notes[0], notes[1], notes[3]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RunNotes = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name string
		id   runid.ID
		n    RunNote
		want string
	}{
		{"unknown kind", id, RunNote{Kind: "odd", Text: "x"}, "unknown kind"},
		{"no text", id, RunNote{Kind: NoteWarning}, "no text"},
		{"unknown run", "20990101-000000-0000", RunNote{Kind: NoteWarning, Text: "x"}, "no run matches"},
	} {
		if err := s.AddRunNote(ctx, tc.id, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: AddRunNote error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
