package auction

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// LoaderVersion changes whenever the generator or the loader changes what
// a template holds; it is part of the template's key.
const LoaderVersion = 2

// TemplateOptions say which data template to make and how.
type TemplateOptions struct {
	// State is nearnative's state directory; templates are kept in its
	// data cache (cache/auction).
	State state.Dir
	Size  Size
	Seed  uint64
	// Platform runs the PostgreSQL that loads the data: a native platform
	// of the current run (the server is then labelled with the run, logged
	// and swept by `nearnative cleanup` like any other).
	Platform platform.Platform
	// Run labels the initdb process.
	Run runid.ID
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Validate checks the options.
func (o TemplateOptions) Validate() error {
	if o.State.Root == "" {
		return errors.New("auction template: no state directory")
	}
	if err := o.Size.Validate(); err != nil {
		return err
	}
	if o.Platform == nil {
		return errors.New("auction template: no platform to run the loading PostgreSQL on")
	}
	if _, err := runid.Parse(string(o.Run)); err != nil {
		return fmt.Errorf("auction template: %w", err)
	}
	return nil
}

func (o TemplateOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Template is a PostgreSQL data directory holding the loaded data of one
// size and seed, shut down cleanly, ready to be copied for a trial.
type Template struct {
	// Dir holds pgdata/ (the data directory) and meta.json (Info).
	Dir  string
	Info TemplateInfo
}

// TemplateInfo records what a template holds and how long it took to make.
type TemplateInfo struct {
	Key           string           `json:"key"`
	MaxUsers      int              `json:"max_users"`
	Seed          uint64           `json:"seed"`
	ServerVersion string           `json:"server_version"`
	LoaderVersion int              `json:"loader_version"`
	Rows          map[string]int64 `json:"rows"`
	Bytes         int64            `json:"bytes"`
	// Prepare is generating the relations (Generate); Load is initdb,
	// COPY FREEZE with the rows generated as they stream, keys and
	// indexes, ANALYZE and a clean shutdown.
	Prepare time.Duration `json:"prepare_ns"`
	Load    time.Duration `json:"load_ns"`
	Created time.Time     `json:"created"`
}

// TemplateKey identifies a template: the size, seed, schema, loader and
// generator version, image sizes and the server's version.
func TemplateKey(size Size, seed uint64, serverVersion string) string {
	h := sha256.New()
	fmt.Fprintf(h, "loader %d\nusers %d\nseed %d\nserver %s\nimages %v %v %v\n", LoaderVersion, size.MaxUsers, seed,
		serverVersion, ThumbSize, PreviewSize, FullSize)
	h.Write(readFile("sql/schema.sql"))
	h.Write(readFile("sql/indexes.sql"))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// EnsureTemplate returns the template of the options' size and seed,
// making it first when it is not in the cache (datacache "auction"):
// initdb, a PostgreSQL started on o.Platform, the generated rows streamed
// in with COPY FREEZE, then keys and indexes, ANALYZE and a clean
// shutdown. Concurrent callers wait for one another; a half-made template
// never becomes visible.
func EnsureTemplate(ctx context.Context, o TemplateOptions) (*Template, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	bin, err := pgserver.BinDir()
	if err != nil {
		return nil, err
	}
	version, err := pgserver.Version(bin)
	if err != nil {
		return nil, err
	}
	key := TemplateKey(o.Size, o.Seed, version)
	name := fmt.Sprintf("%s-seed%d-%s", o.Size.Name(), o.Seed, key)
	cache := datacache.New(o.State, "auction")
	// Templates made before the one cache root lived in apps/auction/templates.
	if _, err := cache.Adopt(ctx, filepath.Join(appDir(o.State), "templates"), name, "template.json"); err != nil {
		return nil, err
	}
	t := &Template{}
	t.Dir, _, err = cache.Ensure(ctx, name, &t.Info,
		func(ctx context.Context, dir string) (any, error) {
			info, err := build(ctx, o, bin, dir)
			info.Key, info.ServerVersion = key, version
			return info, err
		})
	if err != nil {
		return nil, fmt.Errorf("making the auction data template %s: %w", o.Size.Name(), err)
	}
	return t, nil
}

// build makes the template's data directory in tmp/pgdata.
func build(ctx context.Context, o TemplateOptions, bin, tmp string) (TemplateInfo, error) {
	info := TemplateInfo{MaxUsers: o.Size.MaxUsers, Seed: o.Seed, LoaderVersion: LoaderVersion, Rows: map[string]int64{}, Created: time.Now().UTC()}
	start := time.Now()
	data, err := Generate(o.Size, o.Seed)
	if err != nil {
		return info, err
	}
	info.Prepare = time.Since(start)
	o.logf("auction data %s: %d users, %d live auctions, %d history items, %d bids, %d images; relations prepared in %v",
		o.Size.Name(), o.Size.Users(), o.Size.ActiveAuctions(), o.Size.HistoryItems(), data.Bids(), data.Images(), info.Prepare.Round(time.Millisecond))

	start = time.Now()
	uid, gid, err := datacache.UserIDs(pgserver.SystemUser)
	if err != nil {
		return info, err
	}
	pgdata := filepath.Join(tmp, "pgdata")
	if err := os.Chown(tmp, uid, gid); err != nil {
		return info, err
	}
	pwfile := filepath.Join(tmp, "pwfile")
	if err := os.WriteFile(pwfile, []byte(DBSuperPass+"\n"), 0o600); err != nil {
		return info, err
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		return info, err
	}
	initdb := exec.CommandContext(ctx, "setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--init-groups", "--",
		filepath.Join(bin, "initdb"), "-D", pgdata, "-U", DBSuperuser, "--pwfile="+pwfile, "--auth=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = append(os.Environ(), runid.EnvVar+"="+string(o.Run))
	initdb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := initdb.CombinedOutput(); err != nil {
		return info, fmt.Errorf("initdb: %w\n%s", err, lastLines(string(out), 10))
	}
	os.Remove(pwfile)

	spec, err := pgserver.Spec(pgserver.Config{Name: "auction-load", Settings: loadSettings(), BinDir: bin, Auth: "scram-sha-256",
		Data: &platform.Volume{HostPath: pgdata, Path: pgdata}})
	if err != nil {
		return info, err
	}
	srv, err := o.Platform.Start(ctx, "template", spec)
	if err != nil {
		return info, fmt.Errorf("starting the loading PostgreSQL: %w", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop(context.WithoutCancel(ctx))
		}
	}()
	addr := srv.Addr(pgserver.Port)
	superDSN := DSN(addr, DBSuperuser, DBSuperPass, "postgres")
	if err := platform.WaitReady(ctx, 60*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, superDSN)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}); err != nil {
		return info, fmt.Errorf("the loading PostgreSQL: %w", err)
	}
	if err := load(ctx, o, addr, data, &info); err != nil {
		return info, err
	}
	// A clean shutdown, so that every trial's copy starts without recovery.
	if err := srv.Stop(context.WithoutCancel(ctx)); err != nil {
		return info, fmt.Errorf("stopping the loading PostgreSQL: %w", err)
	}
	stopped = true
	if err := pgserver.CheckShutDown(ctx, bin, pgdata); err != nil {
		return info, err
	}
	info.Load = time.Since(start)
	info.Bytes, _, _ = datacache.Size(pgdata)
	o.logf("auction data %s: loaded in %v (%.0f MB)", o.Size.Name(), info.Load.Round(time.Millisecond), float64(info.Bytes)/(1<<20))
	return info, nil
}

// load creates the role, database and schema and streams the data in.
func load(ctx context.Context, o TemplateOptions, addr string, data *Data, info *TemplateInfo) error {
	super, err := pgx.Connect(ctx, DSN(addr, DBSuperuser, DBSuperPass, "postgres"))
	if err != nil {
		return err
	}
	defer super.Close(context.WithoutCancel(ctx))
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", DBUser, DBPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", DBName, DBUser),
	} {
		if _, err := super.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	conn, err := pgx.Connect(ctx, DSN(addr, DBUser, DBPassword, DBName))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// One transaction creates the tables, copies the rows in frozen (COPY
	// FREEZE: no vacuum pass, no hint-bit writes in the first trial) and
	// builds the keys and indexes; with wal_level=minimal none of it goes
	// through the WAL.
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, string(readFile("sql/schema.sql"))); err != nil {
		return fmt.Errorf("creating the schema: %w", err)
	}
	for _, t := range data.Tables() {
		st := time.Now()
		n, err := copyFreeze(ctx, tx.Conn(), t)
		if err != nil {
			return fmt.Errorf("loading %s: %w", t.Name, err)
		}
		info.Rows[t.Name] = n
		o.logf("auction data %s: %s: %d rows in %v", o.Size.Name(), t.Name, n, time.Since(st).Round(time.Millisecond))
	}
	st := time.Now()
	if _, err := tx.Exec(ctx, string(readFile("sql/indexes.sql"))); err != nil {
		return fmt.Errorf("creating keys and indexes: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the load: %w", err)
	}
	o.logf("auction data %s: keys and indexes in %v", o.Size.Name(), time.Since(st).Round(time.Millisecond))
	st = time.Now()
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	if _, err := super.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	o.logf("auction data %s: analyze and checkpoint in %v", o.Size.Name(), time.Since(st).Round(time.Millisecond))
	return nil
}

// copyFreeze streams a table's rows in as CSV with COPY ... FREEZE (the
// table must have been created in the same transaction).
func copyFreeze(ctx context.Context, conn *pgx.Conn, t Table) (int64, error) {
	pr, pw := io.Pipe()
	var rows int64
	go func() {
		next := t.Rows()
		w := bufio.NewWriterSize(pw, 1<<20)
		var line []byte
		for {
			r, err := next()
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if r == nil {
				break
			}
			line = line[:0]
			for i, v := range r {
				if i > 0 {
					line = append(line, ',')
				}
				if line, err = appendCSV(line, v); err != nil {
					pw.CloseWithError(fmt.Errorf("column %s: %w", t.Columns[i], err))
					return
				}
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return // the copy ended early; its error is reported
			}
			rows++
		}
		pw.CloseWithError(w.Flush())
	}()
	sql := fmt.Sprintf("COPY %s (%s) FROM STDIN WITH (FORMAT csv, FREEZE)", t.Name, strings.Join(t.Columns, ", "))
	tag, err := conn.PgConn().CopyFrom(ctx, pr, sql)
	pr.Close()
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// appendCSV appends v as a CSV field PostgreSQL reads back as the same
// value: NULL unquoted and empty, text always quoted.
func appendCSV(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return b, nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case bool:
		if x {
			return append(b, 't'), nil
		}
		return append(b, 'f'), nil
	case string:
		b = append(b, '"')
		for i := 0; i < len(x); i++ {
			if x[i] == '"' {
				b = append(b, '"')
			}
			b = append(b, x[i])
		}
		return append(b, '"'), nil
	case time.Time:
		return x.UTC().AppendFormat(b, "2006-01-02 15:04:05.999999Z07:00"), nil
	case []byte:
		b = append(b, '\\', 'x')
		return hex.AppendEncode(b, x), nil
	case pgtype.Numeric:
		if !x.Valid || x.NaN || x.Exp > 0 {
			return nil, fmt.Errorf("numeric %v not supported", x)
		}
		digits := x.Int.String()
		neg := strings.HasPrefix(digits, "-")
		digits = strings.TrimPrefix(digits, "-")
		scale := int(-x.Exp)
		for len(digits) <= scale {
			digits = "0" + digits
		}
		if neg {
			b = append(b, '-')
		}
		b = append(b, digits[:len(digits)-scale]...)
		if scale > 0 {
			b = append(append(b, '.'), digits[len(digits)-scale:]...)
		}
		return b, nil
	}
	return nil, fmt.Errorf("value %v of type %T not supported", v, v)
}

// CopyTo copies the template's data directory into dst (created if
// missing, else it must be empty) and gives every file to uid:gid, the
// user the server will run as where it runs (inside a container image the
// system users' ids may differ from the host's). dst itself gets mode
// 0700, as PostgreSQL demands.
func (t *Template) CopyTo(dst string, uid, gid int) error {
	_, err := datacache.CopyTree(filepath.Join(t.Dir, "pgdata"), dst, datacache.CopyOptions{UID: uid, GID: gid, RootMode: 0o700})
	if err != nil {
		return fmt.Errorf("copying the data template: %w", err)
	}
	return nil
}
