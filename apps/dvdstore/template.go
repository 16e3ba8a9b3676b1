package dvdstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/datacache"
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
type Cache struct {
	Dir string
	// Legacy is where an earlier version kept the templates
	// (apps/dvdstore/templates); a template found there is moved into Dir.
	Legacy string
}

// DefaultCache is the cache under nearnative's state directory,
// cache/dvdstore (internal/datacache, whose rules it follows).
func DefaultCache(home state.Dir) Cache {
	return Cache{Dir: datacache.New(home, "dvdstore").Dir, Legacy: filepath.Join(home.Root, "apps", "dvdstore", "templates")}
}

func (c Cache) store() datacache.Cache { return datacache.Cache{Dir: c.Dir} }

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
	key := Key(d, serverVersion)
	var m Meta
	if ok, err := c.store().Lookup(key, &m); !ok || err != nil {
		return Template{}, false, err
	}
	t := Template{Dir: filepath.Join(c.store().Path(key), "data"), Meta: m}
	if _, err := os.Stat(filepath.Join(t.Dir, "PG_VERSION")); err != nil {
		return Template{}, false, fmt.Errorf("template %s has metadata but no data directory: remove %s to rebuild it", m.Key, c.store().Path(key))
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
	key := Key(d, version)
	if c.Legacy != "" {
		if _, err := c.store().Adopt(ctx, c.Legacy, key, datacache.MetaFile); err != nil {
			return t, false, err
		}
	}
	if t, ok, err := c.Lookup(d, version); ok || err != nil {
		return t, false, err
	}
	var m Meta
	dir, built, err := c.store().Ensure(ctx, key, &m, func(ctx context.Context, work string) (any, error) {
		return c.build(ctx, b, d, bin, version, work)
	})
	if err != nil {
		return t, false, err
	}
	return Template{Dir: filepath.Join(dir, "data"), Meta: m}, built, nil
}

// build loads d into a new cluster in work/data (work becomes the entry).
func (c Cache) build(ctx context.Context, b Builder, d Dataset, bin, version, work string) (Meta, error) {
	log := b.Log
	start := time.Now()
	key := Key(d, version)
	if err := CheckSpace(c.Dir, EstimateBytes(d)*3/2, "the DVD Store template "+d.String()); err != nil {
		return Meta{}, err
	}
	uid, gid, err := SystemUser()
	if err != nil {
		return Meta{}, err
	}
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return Meta{}, fmt.Errorf("creating the template build dir: %w", err)
	}
	if err := os.Chown(data, uid, gid); err != nil {
		return Meta{}, fmt.Errorf("giving the template build dir to postgres: %w", err)
	}
	if err := Reachable(data); err != nil {
		return Meta{}, err
	}
	logf(log, "dvdstore: building the template %s (key %s) in %s", d, key, work)
	rep, err := b.load(ctx, d, bin, data)
	if err != nil {
		return Meta{}, err
	}
	bytes, files, err := datacache.Size(data)
	if err != nil {
		return Meta{}, err
	}
	m := Meta{Key: key, Dataset: d.String(), Size: d.Size.Name, Scale: d.Scale, Seed: d.Seed, Counts: d.Counts(),
		ServerVersion: version, SchemaHash: SchemaHash(), Load: rep, Build: time.Since(start),
		DataDirBytes: bytes, Files: files, BuiltAt: time.Now().UTC()}
	logf(log, "dvdstore: template %s built in %v: %s; data directory %.1f MB in %d files", d, m.Build.Round(time.Millisecond), rep, float64(bytes)/(1<<20), files)
	return m, nil
}

// load runs the build's PostgreSQL on data (natively, as the postgres
// user, with BuildSettings), loads d into it, shuts it down and checks that
// it stopped cleanly.
func (b Builder) load(ctx context.Context, d Dataset, bin, data string) (LoadReport, error) {
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return LoadReport{}, err
	}
	spec, err := pgserver.Spec(pgserver.Config{Name: BuildServerName, Settings: pgserver.BuildSettings(mem), BinDir: bin,
		Data: &platform.Volume{HostPath: data, Path: DataPath}})
	if err != nil {
		return LoadReport{}, err
	}
	srv, err := b.Platform.Start(ctx, "template", spec)
	if err != nil {
		return LoadReport{}, fmt.Errorf("starting PostgreSQL for the template build: %w", err)
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
		return LoadReport{}, fmt.Errorf("template build: %w%s", err, b.logTail())
	}
	rep, err := Load(ctx, addr, d, runtime.NumCPU(), b.Log)
	if err != nil {
		return rep, fmt.Errorf("loading the DVD Store template %s: %w%s", d, err, b.logTail())
	}
	stopped = true
	if err := srv.Stop(context.WithoutCancel(ctx)); err != nil {
		return rep, fmt.Errorf("stopping the template build's PostgreSQL: %w", err)
	}
	if err := pgserver.CheckShutDown(ctx, bin, data); err != nil {
		return rep, fmt.Errorf("%w%s", err, b.logTail())
	}
	return rep, nil
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

// CopyReport says what a copy did.
type CopyReport = datacache.CopyReport

// CopyTo copies the template's data directory to dst, which must not exist
// yet (its parent must), giving every file to uid:gid, the user the server
// will run as (inside a container image the postgres user's uid may differ
// from the host's), and syncs the file system so that the copy is on disk
// before the trial. dst's parent must be searchable by that user.
func (t Template) CopyTo(dst string, uid, gid int) (CopyReport, error) {
	if _, err := os.Lstat(dst); err == nil {
		return CopyReport{}, fmt.Errorf("copying the template: %s already exists", dst)
	}
	if err := CheckSpace(filepath.Dir(dst), t.Meta.DataDirBytes, "a copy of the DVD Store template"); err != nil {
		return CopyReport{}, err
	}
	return datacache.CopyTree(t.Dir, dst, datacache.CopyOptions{UID: uid, GID: gid, Sync: true,
		Skip: func(rel string) bool { return rel == "postmaster.pid" }})
}

// SystemUser returns the host's uid and gid of PostgreSQL's system user.
func SystemUser() (uid, gid int, err error) { return datacache.UserIDs(pgserver.SystemUser) }

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
