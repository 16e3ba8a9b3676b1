package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// TestExtraTables runs the steps and series tests on both databases.
func TestExtraTables(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		testSteps(t, filepath.Join(t.TempDir(), "r.db"))
		testSeries(t, filepath.Join(t.TempDir(), "r.db"))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a PostgreSQL server")
		}
		pg := startPostgres(t)
		var n atomic.Int64
		dsn := func() string { return pg.newSchema(t, fmt.Sprintf("nn_extra_%d", n.Add(1))) }
		testSteps(t, dsn())
		testSeries(t, dsn())
	})
}

func testSteps(t *testing.T, dsn string) {
	ctx := context.Background()
	s := open(t, dsn)
	ss, ok := s.(StepStore)
	if !ok {
		t.Fatal("the store keeps no steps")
	}
	id := "20250101-000000-aaaa"
	key := TrialKey{Run: simpleRun(id, time.Now()).ID, Round: 2, Workload: "http-max", Platform: "native"}
	if err := ss.AddStep(ctx, key, Step{Seq: 0, Phase: "coarse", Value: 1000, Pass: true}); !errors.Is(err, ErrNoRun) {
		t.Errorf("step of an unknown run: %v, want ErrNoRun", err)
	}
	mustCreate(t, s, simpleRun(id, time.Now()))
	started := time.Date(2025, 1, 1, 0, 0, 1, 500, time.UTC)
	want := []Step{
		{Seq: 0, Phase: "coarse", Value: 1000, Pass: true, Started: started, Duration: time.Second, Summary: "p99 1ms", Detail: []byte(`{"p99_ms":1}`)},
		{Seq: 1, Phase: "coarse", Value: 2000, Pass: false, Started: started.Add(time.Second), Duration: time.Second, Summary: "p99 20ms", Detail: []byte(`{}`)},
	}
	for _, st := range want {
		if err := ss.AddStep(ctx, key, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.AddStep(ctx, key, want[1]); !errors.Is(err, ErrDuplicate) {
		t.Errorf("step stored twice: %v, want ErrDuplicate", err)
	}
	other := key
	other.Platform = "docker-nat"
	if err := ss.AddStep(ctx, other, Step{Seq: 0, Phase: "coarse", Value: 5}); err != nil {
		t.Fatal(err)
	}
	got, err := ss.Steps(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps:\n%+v\nwant\n%+v", got, want)
	}
	// A reopened store (a resumed run) sees them.
	s2 := open(t, dsn)
	got, err = s2.(StepStore).Steps(ctx, key)
	if err != nil || len(got) != 2 {
		t.Errorf("after reopening: %d steps, %v", len(got), err)
	}
}

func testSeries(t *testing.T, dsn string) {
	ctx := context.Background()
	s := open(t, dsn)
	ss, ok := s.(SeriesStore)
	if !ok {
		t.Fatal("the store keeps no series")
	}
	id := "20250101-000000-bbbb"
	mustCreate(t, s, simpleRun(id, time.Now()))
	key := TrialKey{Run: simpleRun(id, time.Now()).ID, Round: 0, Workload: "w", Platform: "native"}
	first := []SeriesPoint{
		{Step: 0, Sec: 0, Phase: "ramp-up", Op: "get", Count: 10, MeanUs: 100, P50Us: 90, P90Us: 150, P99Us: 300, MaxUs: 400},
		{Step: 0, Sec: 1, Phase: "steady", Op: "get", Count: 20, Failures: 1, MeanUs: 110, P50Us: 95, P90Us: 160, P99Us: 310, MaxUs: 500},
	}
	if err := ss.PutSeries(ctx, key, 0, first); err != nil {
		t.Fatal(err)
	}
	// Step 0 again (the trial ran again after an interrupt) replaces it.
	again := []SeriesPoint{{Step: 0, Sec: 0, Phase: "steady", Op: "get", Count: 7}}
	if err := ss.PutSeries(ctx, key, 0, again); err != nil {
		t.Fatal(err)
	}
	step1 := []SeriesPoint{{Step: 1, Sec: 0, Phase: "steady", Op: "get", Count: 3}, {Step: 1, Sec: 0, Phase: "steady", Op: "put", Count: 4}}
	if err := ss.PutSeries(ctx, key, 1, step1); err != nil {
		t.Fatal(err)
	}
	got, err := ss.Series(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	want := append(again, step1...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("series:\n%+v\nwant\n%+v", got, want)
	}
	bad := key
	bad.Run = "20250101-000000-cccc"
	if err := ss.PutSeries(ctx, bad, 0, first); !errors.Is(err, ErrNoRun) {
		t.Errorf("series of an unknown run: %v", err)
	}
}
