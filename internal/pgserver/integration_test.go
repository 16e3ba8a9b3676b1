package pgserver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
)

// TestServerNative starts a fresh cluster through the native platform, as
// PostgreSQL's system user, and checks readiness, the settings the server
// really runs with, and pg_stat_database.
func TestServerNative(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	run := runid.New()
	root := t.TempDir()
	p := testenv.Platforms(t, run, root, platform.Native)[platform.Native]
	s := Tune(gB, 30)
	s.Extra = map[string]string{"application_name": "'nn-test'"}
	spec, err := Spec(Config{Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := p.Start(ctx, "t1", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	addr := srv.Addr(Port)
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	if err := Ready(rctx, "pg", addr, "postgres"); err != nil {
		log, _ := os.ReadFile(filepath.Join(root, "logs", "t1-pg.log"))
		t.Fatalf("%v\nserver log:\n%s", err, log)
	}
	conn, err := pgx.Connect(ctx, DSN(addr, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for name, want := range map[string]string{
		"shared_buffers": "256MB", "max_connections": "30", "fsync": "on", "application_name": "nn-test",
		"max_parallel_workers_per_gather": "0", "lc_collate": "C", "server_encoding": "UTF8",
		"unix_socket_directories": "",
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	a, err := ReadDBStats(ctx, conn, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
			t.Fatal(err)
		}
	}
	// Counters are flushed at most once a second.
	time.Sleep(1100 * time.Millisecond)
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	b, err := ReadDBStats(ctx, conn, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Rates(b)
	if err != nil {
		t.Fatal(err)
	}
	if b.Commits-a.Commits < 50 || r.HitRatio <= 0 || r.HitRatio > 1 {
		t.Errorf("pg_stat_database: %d commits over 50 statements, hit ratio %v (%+v -> %+v)", b.Commits-a.Commits, r.HitRatio, a, b)
	}
	if _, err := ReadDBStats(ctx, conn, "no_such_db"); err == nil {
		t.Error("ReadDBStats of a missing database: no error")
	}

	// A server that does not answer is named in the timeout.
	bad, _ := platform.FreePorts("127.0.0.1", 1)
	tctx, tcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer tcancel()
	err = Ready(tctx, "pg-x", "127.0.0.1:"+strconv.Itoa(bad[0]), "postgres")
	if err == nil || !strings.Contains(err.Error(), "pg-x: PostgreSQL at 127.0.0.1:") {
		t.Errorf("Ready on a closed port: %v", err)
	}
}
