package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeoutMS is how long a SQLite statement waits for another process's
// lock on the file before it fails.
const busyTimeoutMS = 10000

var sqliteDialect = &dialect{
	name:      "SQLite",
	types:     strings.NewReplacer("{{id}}", "INTEGER PRIMARY KEY", "{{blob}}", "BLOB"),
	classify:  classifySQLite,
	transient: transientSQLite,
}

// transientSQLite: a full disk or file system, an I/O error, or another
// process's lock held past the busy timeout.
func transientSQLite(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

func classifySQLite(err error) violation {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return noViolation
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return uniqueViolation
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return foreignKeyViolation
	}
	return noViolation
}

// sqliteOpenError is the one-line error for a SQLite file that cannot be used.
func sqliteOpenError(path string, err error) error {
	return fmt.Errorf("cannot open result database %s: %w: check the path or pass --db", path, err)
}

// sqliteDSN turns a file path into a modernc.org/sqlite DSN with the settings
// every connection needs: WAL so readers do not block the writer, a busy
// timeout for other processes' locks, foreign keys, full sync so that a
// committed trial survives a power cut, and write transactions that take the
// lock when they begin rather than failing halfway.
func sqliteDSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	u := url.URL{Scheme: "file", Path: abs}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// privateFile makes the database file only its owner can read (0600),
// creating it empty when it is missing: SQLite gives its journal files the
// database's mode, so they are private too. Results name commands, hosts
// and configurations other local users have no business reading.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil // SQLite says what is wrong with the path, in its words
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if int(st.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		return nil // another user's file: theirs to decide
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func openSQLite(ctx context.Context, path string) (Store, error) {
	if path == "" {
		return nil, errors.New("cannot open result database: no path given: pass --db")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, sqliteOpenError(path, err)
	}
	if err := privateFile(path); err != nil {
		return nil, sqliteOpenError(path, err)
	}
	dsn, err := sqliteDSN(path)
	if err != nil {
		return nil, sqliteOpenError(path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, sqliteOpenError(path, err)
	}
	// One connection: the process never waits on its own locks, and the
	// busy timeout covers other processes.
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, sqliteOpenError(path, err)
	}
	if err := migrate(ctx, db, sqliteDialect); err != nil {
		_ = db.Close()
		return nil, sqliteOpenError(path, err)
	}
	return &sqlStore{db: db, d: sqliteDialect}, nil
}
