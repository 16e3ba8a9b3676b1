package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPostgres runs the shared suite against a throwaway PostgreSQL cluster
// that the test creates, starts and stops.
func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	pg := startPostgres(t)
	var n atomic.Int64
	testSuite(t, func(t *testing.T) string {
		return pg.newSchema(t, fmt.Sprintf("nn_test_%d", n.Add(1)))
	})
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://nn@db.example:5432/results", "postgres://nn@db.example:5432/results"},
		{"postgres://nn:s3cret@db.example/results?sslmode=require", "postgres://nn:xxxxx@db.example/results?sslmode=require"},
		{"postgresql://db.example/results?password=s3cret&user=nn", "postgresql://db.example/results?password=xxxxx&user=nn"},
		{"postgres://nn:s3cret@db.example:bad port/x", "(unparsable PostgreSQL URL)"},
	}
	for _, tc := range tests {
		if got := redactDSN(tc.dsn); got != tc.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

func TestPostgresUnreachable(t *testing.T) {
	port := freePort(t) // nothing listens there
	dsn := fmt.Sprintf("postgres://nn:s3cret@127.0.0.1:%d/results?sslmode=disable&connect_timeout=5", port)
	s, err := Open(context.Background(), dsn)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of an unreachable server succeeded")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("cannot open result database postgres://nn:xxxxx@127.0.0.1:%d/results", port)) ||
		!strings.HasSuffix(msg, "or pass --db") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
		t.Errorf("error:\n%s\nwant one line naming the redacted URL with a hint", msg)
	}
}

// pgCluster is a PostgreSQL cluster started for a test.
type pgCluster struct {
	bin, base, data string
	asPostgres      bool // run the server programs as the postgres OS user
	port            int
	opts            string // the server options it was started with
	admin           *sql.DB
}

// startPostgres creates a cluster in a temporary directory, starts it on a
// free port of 127.0.0.1 and stops it, leaving no process, when t ends. It
// skips the test when the PostgreSQL server programs are not installed.
func startPostgres(t *testing.T) *pgCluster {
	t.Helper()
	c := &pgCluster{bin: postgresBin(t)}
	var uid, gid int
	if os.Geteuid() == 0 {
		// The server refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and there is no postgres user to run the server as: %v", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Skipf("running as root and runuser is missing: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		c.asPostgres = true
	}

	// Not t.TempDir: its parent is private to root, and the server runs as postgres.
	base, err := os.MkdirTemp("", "nearnative-store-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if c.asPostgres {
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	c.base, c.data = base, filepath.Join(base, "data")

	c.run(t, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--no-locale", "--no-sync", "--no-instructions")

	// pg_ctl leaves the server orphaned; as a child subreaper for the start,
	// this process becomes its parent and can reap it after the stop, so not
	// even a zombie is left for init to collect.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()

	// Another process can take the free port before the server binds it: try again.
	for attempt := 1; ; attempt++ {
		c.port = freePort(t)
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off"+
			" -c full_page_writes=off -c synchronous_commit=off -c max_connections=40", c.port, base)
		err := c.runErr("pg_ctl", "-D", c.data, "-l", filepath.Join(base, "server.log"),
			"-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			c.opts = opts
			break
		}
		if attempt == 3 {
			log, _ := os.ReadFile(filepath.Join(base, "server.log"))
			t.Fatalf("starting PostgreSQL: %v\nserver log:\n%s", err, log)
		}
	}
	t.Cleanup(func() { c.stop(t) })

	c.admin, err = sql.Open("pgx", c.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.admin.Close() }) // runs before stop
	return c
}

// postgresBin returns the newest /usr/lib/postgresql/*/bin holding the server
// programs, or skips the test.
func postgresBin(t *testing.T) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "pg_ctl")) && fileExists(filepath.Join(d, "postgres")) {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		t.Skip("PostgreSQL server programs not found in /usr/lib/postgresql/*/bin (install the postgresql package)")
	}
	major := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.Slice(found, func(i, j int) bool { return major(found[i]) < major(found[j]) })
	return found[len(found)-1]
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *pgCluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// newSchema creates an empty schema and returns a DSN whose search_path puts
// the store's tables there. A schema per test is much faster than a database
// (CREATE DATABASE copies a template), and it checks that the store works
// outside the public schema.
func (c *pgCluster) newSchema(t *testing.T, name string) string {
	t.Helper()
	if _, err := c.admin.ExecContext(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating schema %s: %v", name, err)
	}
	return c.dsn("postgres") + "&search_path=" + name
}

// runErr runs one of the server programs, as the postgres user when needed.
func (c *pgCluster) runErr(prog string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{filepath.Join(c.bin, prog)}, args...)
	if c.asPostgres {
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.base
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.WaitDelay = 5 * time.Second // the server must not hold our pipes
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out.String())
	}
	return nil
}

func (c *pgCluster) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if err := c.runErr(prog, args...); err != nil {
		t.Fatal(err)
	}
}

// stop stops the server with pg_ctl stop -m immediate and checks that the
// postmaster and all its children are gone, killing any that are not.
func (c *pgCluster) stop(t *testing.T) {
	pid := c.postmasterPID()
	procs := append(childPIDs(pid), pid)
	if err := c.runErr("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		t.Errorf("stopping PostgreSQL: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range procs {
		if p <= 0 {
			continue
		}
		for !reaped(p) && alive(p) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(p) {
			t.Errorf("PostgreSQL process %d still alive after pg_ctl stop: killing it", p)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// restart starts the stopped server again on its port.
func (c *pgCluster) restart(t *testing.T) {
	t.Helper()
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.base, "server.log"), "-o", c.opts, "-w", "-t", "60", "start")
}

// postmasterPID reads the first line of postmaster.pid; 0 if there is none.
func (c *pgCluster) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	if pid <= 0 {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			p, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			kids = append(kids, p)
		}
	}
	return kids
}

// reaped collects p if it is an exited child of this process.
func reaped(p int) bool {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
	return err == nil && got == p
}

// alive reports whether process p exists and is not a zombie.
func alive(p int) bool {
	if err := syscall.Kill(p, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
