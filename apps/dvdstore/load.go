package dvdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/internal/pgserver"
)

// DBName is the shop's database.
const DBName = "ds2"

// LoadReport says what a load did and how long each phase took.
type LoadReport struct {
	Rows map[string]int // per table, as COPY reported
	// Copy is the wall time of the COPY phase: generation in Go streams
	// into COPY, so this includes generating the rows.
	Copy        time.Duration
	Indexes     time.Duration // keys and indexes
	Constraints time.Duration // foreign keys (each checks every row)
	Finish      time.Duration // trigger, sequences, VACUUM (FREEZE, ANALYZE), CHECKPOINT
	Total       time.Duration
	Bytes       int64 // pg_database_size after the load
	Parallel    int   // connections used
}

// String is one line for logs and notes.
func (r LoadReport) String() string {
	return fmt.Sprintf("load %v (COPY incl. generation %v, indexes %v, foreign keys %v, vacuum/analyze/checkpoint %v) on %d connections, database %.1f MB",
		r.Total.Round(time.Millisecond), r.Copy.Round(time.Millisecond), r.Indexes.Round(time.Millisecond),
		r.Constraints.Round(time.Millisecond), r.Finish.Round(time.Millisecond), r.Parallel, float64(r.Bytes)/(1<<20))
}

// Load creates database DBName on the PostgreSQL server at addr (dropping
// an old one) and fills it with d: the schema and functions, every table
// streamed from the generator with COPY ... FREEZE (each table truncated in
// the same transaction, so that wal_level minimal skips the WAL), then keys
// and indexes, foreign keys, the RESTOCK trigger, sequences past the loaded
// ids, VACUUM (FREEZE, ANALYZE) and a CHECKPOINT. Independent steps run on
// parallel connections (at least 1).
func Load(ctx context.Context, addr string, d Dataset, parallel int, log io.Writer) (LoadReport, error) {
	rep := LoadReport{Rows: map[string]int{}, Parallel: max(1, parallel)}
	g, err := NewGenerator(d)
	if err != nil {
		return rep, err
	}
	start := time.Now()
	conn, err := createDB(ctx, addr)
	if err != nil {
		return rep, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, f := range []string{"schema.sql", "functions.sql"} {
		if _, err := conn.Exec(ctx, sqlFile(f)); err != nil {
			return rep, fmt.Errorf("running %s: %w", f, err)
		}
	}
	t0 := time.Now()
	if err := runParallel(ctx, addr, rep.Parallel, copyJobs(g, &rep)); err != nil {
		return rep, err
	}
	rep.Copy = time.Since(t0)
	logf(log, "dvdstore %s: COPY of %d rows in %v", d, sum(rep.Rows), rep.Copy.Round(time.Millisecond))

	t0 = time.Now()
	if err := runParallel(ctx, addr, rep.Parallel, statementJobs(sqlFile("indexes.sql"))); err != nil {
		return rep, err
	}
	rep.Indexes = time.Since(t0)
	t0 = time.Now()
	if err := runParallel(ctx, addr, rep.Parallel, statementJobs(sqlFile("constraints.sql"))); err != nil {
		return rep, err
	}
	rep.Constraints = time.Since(t0)

	t0 = time.Now()
	if err := finishLoad(ctx, conn); err != nil {
		return rep, err
	}
	rep.Finish = time.Since(t0)
	if err := conn.QueryRow(ctx, "SELECT pg_database_size($1)", DBName).Scan(&rep.Bytes); err != nil {
		return rep, fmt.Errorf("reading the database size: %w", err)
	}
	rep.Total = time.Since(start)
	logf(log, "dvdstore %s: %s", d, rep)
	return rep, nil
}

// createDB drops and creates database DBName at addr and connects to it.
func createDB(ctx context.Context, addr string) (*pgx.Conn, error) {
	admin, err := pgx.Connect(ctx, pgserver.DSN(addr, "postgres"))
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", addr, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	for _, sql := range []string{
		"DROP DATABASE IF EXISTS " + DBName,
		"CREATE DATABASE " + DBName + " TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("%s: %w", sql, err)
		}
	}
	conn, err := pgx.Connect(ctx, pgserver.DSN(addr, DBName))
	if err != nil {
		return nil, fmt.Errorf("connecting to database %s: %w", DBName, err)
	}
	return conn, nil
}

// copyJobs are the COPY of every generated table, largest first so that
// the connections finish together; each records its rows in rep.
func copyJobs(g *Generator, rep *LoadReport) []job {
	tables := g.Tables()
	sort.SliceStable(tables, func(i, j int) bool { return tables[i].Rows > tables[j].Rows })
	var mu sync.Mutex
	var jobs []job
	for _, t := range tables {
		jobs = append(jobs, job{name: "COPY " + t.Name, run: func(ctx context.Context, c *pgx.Conn) error {
			n, err := copyTable(ctx, c, t)
			mu.Lock()
			rep.Rows[t.Name] = int(n)
			mu.Unlock()
			if err == nil && int(n) != t.Rows {
				err = fmt.Errorf("COPY %s: %d rows loaded, %d generated", t.Name, n, t.Rows)
			}
			return err
		}})
	}
	return jobs
}

// finishLoad adds the RESTOCK trigger, moves the sequences past the loaded
// ids, freezes and analyzes, and checkpoints.
func finishLoad(ctx context.Context, conn *pgx.Conn) error {
	finish := []string{sqlFile("trigger.sql")}
	for _, s := range [][2]string{{"categories", "category"}, {"products", "prod_id"}, {"customers", "customerid"}, {"orders", "orderid"}} {
		finish = append(finish, fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', '%s'), (SELECT max(%s) FROM %s))", s[0], s[1], s[1], s[0]))
	}
	finish = append(finish, "VACUUM (FREEZE, ANALYZE)", "CHECKPOINT")
	for _, sql := range finish {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", firstLine(sql), err)
		}
	}
	return nil
}

// copyTable truncates t and streams it in with COPY FREEZE in one
// transaction.
func copyTable(ctx context.Context, c *pgx.Conn, t Table) (int64, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "TRUNCATE "+t.Name); err != nil {
		return 0, fmt.Errorf("TRUNCATE %s: %w", t.Name, err)
	}
	pr, pw := io.Pipe()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	genErr := make(chan error, 1)
	go func() {
		err := t.Write(gctx, pw)
		pw.CloseWithError(err)
		genErr <- err
	}()
	sql := fmt.Sprintf("COPY %s (%s) FROM STDIN WITH (FREEZE)", t.Name, strings.Join(t.Columns, ", "))
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, pr, sql)
	// Unblock the generator if COPY stopped reading early.
	pr.CloseWithError(errors.New("COPY ended"))
	cancel()
	gerr := <-genErr
	if err != nil {
		return 0, fmt.Errorf("COPY %s: %w", t.Name, err)
	}
	if gerr != nil {
		return 0, fmt.Errorf("generating %s: %w", t.Name, gerr)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("committing %s: %w", t.Name, err)
	}
	return tag.RowsAffected(), nil
}

// job is one step run on one of the parallel connections.
type job struct {
	name string
	run  func(context.Context, *pgx.Conn) error
}

// statementJobs makes a job of each statement of a file of independent
// statements (no function bodies: statements end with ";" at a line end).
func statementJobs(file string) []job {
	var jobs []job
	for _, s := range statements(file) {
		jobs = append(jobs, job{name: firstLine(s), run: func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, s)
			return err
		}})
	}
	return jobs
}

// statements splits SQL text without dollar-quoted bodies into statements,
// dropping "--" comment lines.
func statements(file string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(file, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// runParallel runs jobs on n connections to database DBName; the first
// failure stops the others and is returned with the job's name.
func runParallel(ctx context.Context, addr string, n int, jobs []job) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	for i := 0; i < min(n, len(jobs)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgx.Connect(ctx, pgserver.DSN(addr, DBName))
			if err != nil {
				fail(fmt.Errorf("connecting to database %s: %w", DBName, err))
				for range ch {
				}
				return
			}
			defer c.Close(context.WithoutCancel(ctx))
			for j := range ch {
				if ctx.Err() != nil {
					continue
				}
				if err := j.run(ctx, c); err != nil {
					fail(fmt.Errorf("%s: %w", j.name, err))
				}
			}
		}()
	}
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSuffix(s, ";")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
