package olio

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/platform"
)

// Timeouts of the loader's server.
const (
	loadReadyTimeout    = 2 * time.Minute
	loadShutdownTimeout = 10 * time.Minute
)

// build makes a template in dir: the file store, then the database.
func (b Builder) build(ctx context.Context, dir string, size Size, version string) (Meta, error) {
	g, err := NewGenerator(size)
	if err != nil {
		return Meta{}, err
	}
	meta := Meta{Size: size, Counts: g.Counts(), Rows: map[string]int64{}, ServerVersion: version,
		GeneratorVersion: GeneratorVersion, LoaderVersion: LoaderVersion, Built: time.Now().UTC()}

	// The generator alone, for the record (LOAD DATA streams it again).
	start := time.Now()
	for _, t := range g.Tables() {
		if _, err := g.Write(t.Name, io.Discard); err != nil {
			return meta, err
		}
	}
	meta.Generate = time.Since(start)

	start = time.Now()
	n, err := writeFileStore(dir, meta.Counts)
	if err != nil {
		return meta, err
	}
	meta.Files, meta.NFiles = time.Since(start), n
	b.logf("olio: file store: %d files in %v", n, meta.Files.Round(time.Millisecond))

	if err := b.loadDB(ctx, dir, g, &meta); err != nil {
		return meta, err
	}
	meta.DBBytes, _, err = datacache.Size(filepath.Join(dir, "db"))
	meta.Total = time.Since(meta.Built)
	return meta, err
}

// loadDB makes the data directory dir/db: mariadb-install-db, a loader
// server, the schema, LOAD DATA of every table streamed from the generator,
// the secondary indexes, ANALYZE, and a clean shutdown.
func (b Builder) loadDB(ctx context.Context, dir string, g *Generator, meta *Meta) (err error) {
	s := b.DB
	s.Name = "olio-load-db"
	s.DataDir = filepath.Join(dir, "db")
	s = s.withDefaults()
	uid, gid, err := datacache.UserIDs(s.User)
	if err != nil {
		return fmt.Errorf("olio: MariaDB's user: %w", err)
	}
	// The pid file is where this process can watch it: the server removes
	// it when its shutdown is complete.
	run := filepath.Join(dir, "run")
	if err := emptyDir(run, uid, gid, 0o755); err != nil {
		return err
	}
	pidFile := filepath.Join(run, "mysqld.pid")

	res, err := b.Platform.RunJob(ctx, "olio-load", platform.Spec{Name: "install-db", Command: func(platform.Listen) []string {
		return []string{"mariadb-install-db", "--no-defaults", "--user=" + s.User, "--datadir=" + s.DataDir,
			"--auth-root-authentication-method=socket", "--skip-test-db"}
	}})
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s%s", err, res.Stdout, res.Stderr)
	}

	spec, err := mariadbSpec(s, true, pidFile)
	if err != nil {
		return err
	}
	start := time.Now()
	srv, err := b.Platform.Start(ctx, "olio-load", spec)
	if err != nil {
		return fmt.Errorf("starting the loader's MariaDB: %w", err)
	}
	defer func() {
		if serr := srv.Stop(context.WithoutCancel(ctx)); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the loader's MariaDB: %w", serr))
		}
	}()
	addr := srv.Addr(PortMySQL)
	if err := ReadyDB(ctx, addr, loadReadyTimeout); err != nil {
		return fmt.Errorf("%w%s", err, b.logTail("olio-load", s.Name))
	}
	db, err := sql.Open("mysql", dsn(addr))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := execScript(ctx, db, "sql/schema.sql"); err != nil {
		return err
	}
	for _, t := range g.Tables() {
		ts := time.Now()
		n, err := loadTable(ctx, db, g, t)
		if err != nil {
			return fmt.Errorf("loading %s: %w%s", t.Name, err, b.logTail("olio-load", s.Name))
		}
		meta.Rows[t.Name] = n
		b.logf("olio: %s: %d rows in %v", t.Name, n, time.Since(ts).Round(time.Millisecond))
	}
	ts := time.Now()
	if err := execScript(ctx, db, "sql/indexes.sql"); err != nil {
		return err
	}
	var names []string
	for _, t := range g.Tables() {
		names = append(names, t.Name)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("ANALYZE TABLE: %w", err)
	}
	meta.Index = time.Since(ts)
	b.logf("olio: indexes and statistics in %v", meta.Index.Round(time.Millisecond))
	db.Close()
	if err := shutdown(ctx, pidFile, loadShutdownTimeout); err != nil {
		return fmt.Errorf("shutting the loader's MariaDB down: %w%s", err, b.logTail("olio-load", s.Name))
	}
	meta.Load = time.Since(start)
	return os.RemoveAll(run)
}

func (b Builder) logTail(trial, name string) string {
	if b.LogDir == "" {
		return ""
	}
	return LogTail(filepath.Join(b.LogDir, trial+"-"+name+".log"), 15)
}

// LogTail returns the last n lines of a server log, indented under a
// heading, for error messages ("" when it cannot be read).
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\nlast lines of " + path + ":\n  " + strings.Join(lines, "\n  ")
}

// dsn is the application user's connection string for addr.
func dsn(addr string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = DBUser, DBPassword, "tcp", addr, DBName
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

// execScript runs the statements of an embedded SQL file (separated by
// semicolons at line ends; -- comments).
func execScript(ctx context.Context, db *sql.DB, name string) error {
	b, err := sources.ReadFile(name)
	if err != nil {
		return err
	}
	var stmt strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		stmt.WriteString(line + "\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			if _, err := db.ExecContext(ctx, stmt.String()); err != nil {
				return fmt.Errorf("%s: %w\n%s", name, err, stmt.String())
			}
			stmt.Reset()
		}
	}
	return nil
}

var readerSeq atomic.Int64

// loadTable streams table t from the generator into LOAD DATA LOCAL INFILE
// and checks that the server took every row.
func loadTable(ctx context.Context, db *sql.DB, g *Generator, t Table) (int64, error) {
	name := fmt.Sprintf("olio-%s-%d", t.Name, readerSeq.Add(1))
	type result struct {
		rows int64
		err  error
	}
	done := make(chan result, 1)
	started := false
	mysql.RegisterReaderHandler(name, func() io.Reader {
		started = true
		pr, pw := io.Pipe()
		go func() {
			n, err := g.Write(t.Name, pw)
			pw.CloseWithError(err)
			done <- result{n, err}
		}()
		return pr // a ReadCloser: the driver closes it, which ends the writer
	})
	defer mysql.DeregisterReaderHandler(name)
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET unique_checks = 0, foreign_key_checks = 0"); err != nil {
		return 0, err
	}
	res, err := conn.ExecContext(ctx, fmt.Sprintf("LOAD DATA LOCAL INFILE 'Reader::%s' INTO TABLE %s CHARACTER SET utf8mb4 (%s)",
		name, t.Name, strings.Join(t.Columns, ", ")))
	var gen result
	if started {
		gen = <-done
	}
	if err != nil {
		return 0, err
	}
	if gen.err != nil {
		return 0, gen.err
	}
	rows := gen.rows
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n != rows {
		return n, fmt.Errorf("the server took %d of %d rows (check its warnings)", n, rows)
	}
	return n, nil
}

// shutdown sends SIGTERM to the server named by pidFile and waits until it
// removes the file, which it does last in a clean shutdown.
func shutdown(ctx context.Context, pidFile string, timeout time.Duration) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("reading %s: %w", pidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid < 2 {
		return fmt.Errorf("%s holds %q, not a process id", pidFile, b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling MariaDB (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(pidFile); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MariaDB (pid %d) still shutting down after %v", pid, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeFileStore writes the pool (pool/) and every entity's files (files/,
// hard links to the pool), all read-only; it returns the number of files.
func writeFileStore(dir string, c Counts) (int, error) {
	pool, files := filepath.Join(dir, "pool"), filepath.Join(dir, "files")
	for _, d := range []string{pool, files} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return 0, fmt.Errorf("olio: file store: %w", err)
		}
	}
	kinds := []struct {
		name string
		data func(int) []byte
	}{{"image", SampleImage}, {"thumb", SampleThumb}, {"doc", SampleDocument}}
	for _, k := range kinds {
		for i := range PoolSize {
			if err := os.WriteFile(poolFile(pool, k.name, i), k.data(i), 0o444); err != nil {
				return 0, fmt.Errorf("olio: file store: %w", err)
			}
		}
	}
	n := 0
	link := func(kind string, id int, name string) error {
		// Neighbouring ids get different pictures.
		if err := os.Link(poolFile(pool, kind, (id*7)%PoolSize), filepath.Join(files, name)); err != nil {
			return fmt.Errorf("olio: file store: %w", err)
		}
		n++
		return nil
	}
	for id := 1; id <= c.Persons; id++ {
		if err := link("image", id, PersonImage(id)); err != nil {
			return n, err
		}
		if err := link("thumb", id, PersonThumb(id)); err != nil {
			return n, err
		}
	}
	for id := 1; id <= c.Events; id++ {
		for _, f := range []struct{ kind, name string }{{"image", EventImage(id)}, {"thumb", EventThumb(id)}, {"doc", EventLiterature(id)}} {
			if err := link(f.kind, id, f.name); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func poolFile(pool, kind string, i int) string {
	ext := ".jpg"
	if kind == "doc" {
		ext = ".pdf"
	}
	return filepath.Join(pool, fmt.Sprintf("%s%02d%s", kind, i, ext))
}
