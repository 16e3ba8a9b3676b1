package dvdstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Why trials copy a data directory rather than run CREATE DATABASE ...
// TEMPLATE: every trial starts a fresh server on a fresh platform (a new
// container, a new guest), so the loaded database has to be in that
// server's data directory before it starts; a copy of the template's data
// directory puts it there, byte for byte (same heap layout, free space,
// visibility map, statistics), and CREATE DATABASE ... TEMPLATE inside that
// server would only copy it a second time.

// Cache is the directory of loaded templates, one per key. Templates are
// kept across runs (like the image caches); `rm -r` of a template directory
// is always safe between runs.
type Cache struct{ Dir string }

// DefaultCache is the cache under nearnative's state directory,
// apps/dvdstore/templates.
func DefaultCache(home state.Dir) Cache {
	return Cache{Dir: filepath.Join(home.Root, "apps", "dvdstore", "templates")}
}

// Meta describes a template; it is stored next to its data directory.
type Meta struct {
	Key           string     `json:"key"`
	Dataset       string     `json:"dataset"`
	Size          string     `json:"size"`
	Scale         float64    `json:"scale"`
	Seed          uint64     `json:"seed"`
	Counts        Counts     `json:"counts"`
	ServerVersion string     `json:"server_version"`
	SchemaHash    string     `json:"schema_hash"`
	Load          LoadReport `json:"load"`
	// Build is the wall time of the whole build: initdb, server start,
	// load, clean shutdown.
	Build        time.Duration `json:"build"`
	DataDirBytes int64         `json:"data_dir_bytes"`
	Files        int           `json:"files"`
	BuiltAt      time.Time     `json:"built_at"`
}

// Template is a loaded data directory in the cache. Its files belong to
// the host's postgres user; CopyTo makes a trial's copy.
type Template struct {
	// Dir is the PostgreSQL data directory.
	Dir  string
	Meta Meta
}

// Key identifies the template of dataset d for the PostgreSQL server
// version (as `postgres --version` prints it).
func Key(d Dataset, serverVersion string) string {
	c := d.Counts()
	h := sha256.New()
	fmt.Fprintf(h, "dvdstore\nsize %s\ncounts %d %d %d\nseed %d\nschema %s\nserver %s\n",
		d.Size.Name, c.Customers, c.Products, c.OrdersPerMonth, d.Seed, SchemaHash(), serverVersion)
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return fmt.Sprintf("%s-x%s-seed%d-%s", d.Size.Name, strconv.FormatFloat(d.Scale, 'g', -1, 64), d.Seed, sum)
}

// Lookup returns the template of d for the server version, if it has been
// built.
func (c Cache) Lookup(d Dataset, serverVersion string) (Template, bool, error) {
	dir := filepath.Join(c.Dir, Key(d, serverVersion))
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Template{}, false, nil
	}
	if err != nil {
		return Template{}, false, fmt.Errorf("reading template metadata: %w", err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Template{}, false, fmt.Errorf("template metadata %s: %w (remove %s to rebuild it)", filepath.Join(dir, "meta.json"), err, dir)
	}
	t := Template{Dir: filepath.Join(dir, "data"), Meta: m}
	if _, err := os.Stat(filepath.Join(t.Dir, "PG_VERSION")); err != nil {
		return Template{}, false, fmt.Errorf("template %s has metadata but no data directory: remove %s to rebuild it", m.Key, dir)
	}
	return t, true, nil
}

// EstimateBytes is about how much disk a dataset's data directory takes:
// measured at the 10mb size (see BENCH.md) and scaled by rows, plus the
// cluster's own catalogs and WAL.
func EstimateBytes(d Dataset) int64 {
	c := d.Counts()
	const perCustomer, perProduct, perOrder, base = 330, 290, 620, 60 << 20
	return base + int64(c.Customers)*perCustomer + int64(c.Products)*perProduct + int64(c.Orders())*perOrder
}

// Builder is what a template build needs from the run that asks for it.
type Builder struct {
	// Platform runs the build's PostgreSQL (as the postgres user, labelled
	// with the run, swept by cleanup).
	Platform platform.Platform
	// LogDir is the platform's log directory (the run's logs/): a failed
	// build quotes the tail of the server's log from there.
	LogDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// BuildServerName is the build server's spec name; its output is saved as
// LogDir/template-dvdstore-template.log.
const BuildServerName = "dvdstore-template"

// Ensure returns the template of d, building it first if the cache has
// none: a fresh cluster (initdb) started through the native platform as
// the postgres user with BuildSettings, loaded by Load, shut down cleanly,
// checked with pg_controldata, and renamed into place. Concurrent callers
// for the same key wait for one build (a lock file). built says whether
// this call built it.
func (c Cache) Ensure(ctx context.Context, b Builder, d Dataset) (t Template, built bool, err error) {
	if err := d.Validate(); err != nil {
		return t, false, err
	}
	bin, err := pgserver.BinDir()
	if err != nil {
		return t, false, err
	}
	version, err := pgserver.Version(bin)
	if err != nil {
		return t, false, err
	}
	if t, ok, err := c.Lookup(d, version); ok || err != nil {
		return t, false, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return t, false, fmt.Errorf("creating the template cache: %w", err)
	}
	key := Key(d, version)
	unlock, err := state.LockFile(ctx, filepath.Join(c.Dir, key+".lock"), nil)
	if err != nil {
		return t, false, err
	}
	defer unlock()
	if t, ok, err := c.Lookup(d, version); ok || err != nil {
		return t, false, err
	}
	t, err = c.build(ctx, b, d, bin, version)
	return t, err == nil, err
}

// build loads d into a new cluster under the cache and moves it into place.
func (c Cache) build(ctx context.Context, b Builder, d Dataset, bin, version string) (Template, error) {
	log := b.Log
	start := time.Now()
	key := Key(d, version)
	final := filepath.Join(c.Dir, key)
	work := final + ".build"
	// A build dir left by a crashed build (its lock is ours now) goes.
	if err := os.RemoveAll(work); err != nil {
		return Template{}, fmt.Errorf("removing an unfinished template build: %w", err)
	}
	if err := CheckSpace(c.Dir, EstimateBytes(d)*3/2, "the DVD Store template "+d.String()); err != nil {
		return Template{}, err
	}
	uid, gid, err := SystemUser()
	if err != nil {
		return Template{}, err
	}
	data := filepath.Join(work, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return Template{}, fmt.Errorf("creating the template build dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(work)
		}
	}()
	if err := os.Chmod(work, 0o755); err != nil {
		return Template{}, err
	}
	if err := os.Chown(data, uid, gid); err != nil {
		return Template{}, fmt.Errorf("giving the template build dir to postgres: %w", err)
	}
	if err := Reachable(data); err != nil {
		return Template{}, err
	}
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return Template{}, err
	}
	spec, err := pgserver.Spec(pgserver.Config{Name: BuildServerName, Settings: pgserver.BuildSettings(mem), BinDir: bin,
		Data: &platform.Volume{HostPath: data, Path: DataPath}})
	if err != nil {
		return Template{}, err
	}
	logf(log, "dvdstore: building the template %s (key %s) in %s", d, key, work)
	srv, err := b.Platform.Start(ctx, "template", spec)
	if err != nil {
		return Template{}, fmt.Errorf("starting PostgreSQL for the template build: %w", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop(context.WithoutCancel(ctx))
		}
	}()
	addr := srv.Addr(pgserver.Port)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = pgserver.Ready(rctx, spec.Name, addr, "postgres")
	cancel()
	if err != nil {
		return Template{}, fmt.Errorf("template build: %w%s", err, b.logTail())
	}
	rep, err := Load(ctx, addr, d, runtime.NumCPU(), log)
	if err != nil {
		return Template{}, fmt.Errorf("loading the DVD Store template %s: %w%s", d, err, b.logTail())
	}
	stopped = true
	if err := srv.Stop(context.WithoutCancel(ctx)); err != nil {
		return Template{}, fmt.Errorf("stopping the template build's PostgreSQL: %w", err)
	}
	if err := ShutDownCleanly(bin, data); err != nil {
		return Template{}, fmt.Errorf("%w%s", err, b.logTail())
	}
	bytes, files, err := dirSize(data)
	if err != nil {
		return Template{}, err
	}
	m := Meta{Key: key, Dataset: d.String(), Size: d.Size.Name, Scale: d.Scale, Seed: d.Seed, Counts: d.Counts(),
		ServerVersion: version, SchemaHash: SchemaHash(), Load: rep, Build: time.Since(start),
		DataDirBytes: bytes, Files: files, BuiltAt: time.Now().UTC()}
	js, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(work, "meta.json"), js, 0o644); err != nil {
		return Template{}, fmt.Errorf("writing template metadata: %w", err)
	}
	// fsync was off while loading: make the files durable before the
	// template is published.
	if err := syncFS(data); err != nil {
		return Template{}, err
	}
	if err := os.Rename(work, final); err != nil {
		return Template{}, fmt.Errorf("publishing the template: %w", err)
	}
	ok = true
	logf(log, "dvdstore: template %s built in %v: %s; data directory %.1f MB in %d files", d, m.Build.Round(time.Millisecond), rep, float64(bytes)/(1<<20), files)
	return Template{Dir: filepath.Join(final, "data"), Meta: m}, nil
}

// logTail is the end of the build server's log, for error messages.
func (b Builder) logTail() string {
	if b.LogDir == "" {
		return ""
	}
	path := filepath.Join(b.LogDir, "template-"+BuildServerName+".log")
	out, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\nlast lines of " + path + ":\n  " + strings.Join(lines, "\n  ")
}

// ShutDownCleanly checks with pg_controldata that the cluster in data was
// shut down cleanly (so a copy starts without crash recovery).
func ShutDownCleanly(bin, data string) error {
	out, err := exec.Command(filepath.Join(bin, "pg_controldata"), data).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_controldata %s: %w: %s", data, err, strings.TrimSpace(string(out)))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Database cluster state" {
			if s := strings.TrimSpace(v); s != "shut down" {
				return fmt.Errorf("the template's cluster state is %q, not \"shut down\": PostgreSQL did not stop cleanly", s)
			}
			return nil
		}
	}
	return fmt.Errorf("pg_controldata %s printed no cluster state", data)
}

// CopyReport says what a copy did.
type CopyReport struct {
	Bytes int64
	Files int
	Wall  time.Duration
}

// CopyTo copies the template's data directory to dst, which must not exist
// yet (its parent must), giving every file to uid:gid, the user the server
// will run as (inside a container image the postgres user's uid may differ
// from the host's), and syncs the file system so that the copy is on disk
// before the trial. dst's parent must be searchable by that user.
func (t Template) CopyTo(dst string, uid, gid int) (CopyReport, error) {
	start := time.Now()
	var rep CopyReport
	if _, err := os.Lstat(dst); err == nil {
		return rep, fmt.Errorf("copying the template: %s already exists", dst)
	}
	if err := CheckSpace(filepath.Dir(dst), t.Meta.DataDirBytes, "a copy of the DVD Store template"); err != nil {
		return rep, err
	}
	err := filepath.WalkDir(t.Dir, func(src string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(t.Dir, src)
		to := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if rel == "postmaster.pid" {
				return nil
			}
			n, err := copyFile(src, to, info.Mode().Perm())
			if err != nil {
				return err
			}
			rep.Bytes += n
			rep.Files++
		default:
			return fmt.Errorf("%s: not a regular file or directory (%v)", src, info.Mode().Type())
		}
		// Mkdir and OpenFile apply the umask: set the template's mode.
		if err := os.Chmod(to, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Lchown(to, uid, gid)
	})
	if err != nil {
		os.RemoveAll(dst)
		return rep, fmt.Errorf("copying the template %s to %s: %w", t.Dir, dst, err)
	}
	// Written back before the trial starts, so that the trial's own I/O
	// does not compete with the copy's.
	if err := syncFS(dst); err != nil {
		os.RemoveAll(dst)
		return rep, err
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// copyFile copies one file; io.Copy between two files uses
// copy_file_range, so the kernel copies (or shares extents where the file
// system can).
func copyFile(src, dst string, mode fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// SystemUser returns the host's uid and gid of PostgreSQL's system user.
func SystemUser() (uid, gid int, err error) {
	u, err := user.Lookup(pgserver.SystemUser)
	if err != nil {
		return 0, 0, fmt.Errorf("PostgreSQL's system user %q: %w (install the postgresql package with `make setup`)", pgserver.SystemUser, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// Reachable checks that every directory above path is searchable by
// others, so that the postgres user reaches a data directory below a
// root-owned tree.
func Reachable(path string) error {
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (mode %v) is not searchable by the postgres user, which must reach %s: chmod o+x %s, or set %s to a directory that is",
				d, fi.Mode().Perm(), path, d, state.EnvHome)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// CheckSpace refuses when the file system of dir has less than need bytes
// free, saying what needed it.
func CheckSpace(dir string, need int64, what string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need {
		return fmt.Errorf("%s needs about %.1f GB in %s, but only %.1f GB are free: free some space, or set %s to a larger disk",
			what, float64(need)/(1<<30), dir, float64(free)/(1<<30), state.EnvHome)
	}
	return nil
}

func dirSize(dir string) (bytes int64, files int, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			bytes += info.Size()
			files++
		}
		return nil
	})
	return bytes, files, err
}

// syncFS flushes the file system holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
