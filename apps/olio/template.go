package olio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
)

// LoaderVersion changes whenever the way the template is loaded changes
// (schema, indexes, server settings that shape the data directory); with
// GeneratorVersion, the schema text and the server version it keys the
// template cache.
const LoaderVersion = 1

// CacheDir is where templates are kept under a state directory
// (internal/datacache, whose rules they follow). Templates are a cache,
// kept across runs like the workload image's build cache; delete the
// directory to reclaim the space.
func CacheDir(d state.Dir) string { return datacache.New(d, "olio").Dir }

// Template is a loaded data set: a MariaDB data directory (shut down
// cleanly, fully purged) and the file store, ready to be copied per trial.
type Template struct {
	Dir  string // the template's directory in the cache
	Meta Meta
}

// Meta describes a template; it is stored as meta.json beside the data.
type Meta struct {
	Key              string           `json:"key"`
	Size             Size             `json:"size"`
	Counts           Counts           `json:"counts"`
	Rows             map[string]int64 `json:"rows"`
	ServerVersion    string           `json:"server_version"`
	GeneratorVersion int              `json:"generator_version"`
	LoaderVersion    int              `json:"loader_version"`
	// Generate is the time the generator alone takes to make every table
	// (measured separately, writing to io.Discard); Load the time from
	// the server's start to its clean shutdown (generation streamed into
	// LOAD DATA, indexes, ANALYZE, shutdown); Files the time to write the
	// file store.
	Generate time.Duration `json:"generate_ns"`
	Load     time.Duration `json:"load_ns"`
	Index    time.Duration `json:"index_ns"`
	Files    time.Duration `json:"files_ns"`
	// Total is the whole build: generator, file store, mariadb-install-db,
	// load and shutdown.
	Total   time.Duration `json:"total_ns"`
	DBBytes int64         `json:"db_bytes"`
	NFiles  int           `json:"files"`
	Built   time.Time     `json:"built"`
}

// DBDir is the template's MariaDB data directory.
func (t *Template) DBDir() string { return filepath.Join(t.Dir, "db") }

// FilesDir is the template's file store: the loaded entities' images and
// documents, read-only, served to every trial (NginxSettings.FileStore).
func (t *Template) FilesDir() string { return filepath.Join(t.Dir, "files") }

// Builder loads templates. The loader's MariaDB runs on Platform (the
// native platform: the template lives in this machine's state directory),
// mariadb-install-db runs as its job.
type Builder struct {
	Platform interface {
		platform.Platform
		platform.JobRunner
	}
	// CacheDir holds the templates (CacheDir(state.Home()) by default).
	CacheDir string
	// LogDir is the platform's log directory, to show the loader server's
	// log tail when it fails; optional.
	LogDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// DB sets the loader server's buffer pool; the rest is the loader's.
	DB MariaDBSettings
}

func (b Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}

// ServerVersion asks the host's mariadbd for its version.
func ServerVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "mariadbd", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("olio: asking mariadbd for its version (install mariadb-server, make setup): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Key names the template of a size for a server version: a change of the
// size, the seed, the generator, the loader, the schema or the server gives
// another template.
func Key(s Size, serverVersion string) string {
	h := sha256.New()
	fmt.Fprintf(h, "olio template\nusers %d\nseed %d\ngenerator %d\nloader %d\nserver %s\nredo %s\n",
		s.Users, s.Seed, GeneratorVersion, LoaderVersion, serverVersion, logFileSize)
	for _, f := range []string{"sql/schema.sql", "sql/indexes.sql", "conf/my.cnf.tmpl"} {
		b, _ := sources.ReadFile(f)
		h.Write(b)
	}
	return fmt.Sprintf("u%d-s%d-%s", s.Users, s.Seed, hex.EncodeToString(h.Sum(nil))[:12])
}

// EnsureTemplate returns the template of size, loading it first when the
// cache has none. Concurrent callers (two runs) wait for one build; a build
// left half-made by a crash is removed by the next.
func EnsureTemplate(ctx context.Context, b Builder, size Size) (*Template, error) {
	if err := size.Validate(); err != nil {
		return nil, err
	}
	if b.CacheDir == "" {
		b.CacheDir = CacheDir(state.Home())
	}
	version, err := ServerVersion(ctx)
	if err != nil {
		return nil, err
	}
	key := Key(size, version)
	t := &Template{}
	t.Dir, _, err = datacache.Cache{Dir: b.CacheDir}.Ensure(ctx, key, &t.Meta, func(ctx context.Context, dir string) (any, error) {
		b.logf("olio: loading the data template for %s (once; cached in %s)", size, b.CacheDir)
		meta, err := b.build(ctx, dir, size, version)
		meta.Key = key
		if err == nil {
			b.logf("olio: template %s: %d persons, %d events, %d tags; generate %v, load %v (indexes %v), files %v",
				key, meta.Counts.Persons, meta.Counts.Events, meta.Counts.Tags,
				meta.Generate.Round(time.Millisecond), meta.Load.Round(time.Millisecond), meta.Index.Round(time.Millisecond), meta.Files.Round(time.Millisecond))
		}
		return meta, err
	})
	if err != nil {
		return nil, fmt.Errorf("olio: loading the template for %s: %w", size, err)
	}
	return t, nil
}

// CopyDB copies the template's data directory into dst (made if missing;
// it must be empty) for a server running as uid:gid, which owns every copy.
// The copy is exact: the server changes its files.
func (t *Template) CopyDB(dst string, uid, gid int) error {
	_, err := datacache.CopyTree(t.DBDir(), dst, datacache.CopyOptions{UID: uid, GID: gid, RootMode: 0o750, DirMode: 0o750, FileMode: 0o640})
	if err != nil {
		return fmt.Errorf("olio: copying the database template: %w", err)
	}
	return nil
}

// CopySite makes a site directory in dst for PHP-FPM's user uid:gid: www/
// (the PHP pages and the statics), and files/ (where the site stores what
// its users upload), sessions/ and tmp/ (uploads, nginx's buffers), the
// latter three writable by uid:gid. The loaded files are not copied: nginx
// serves them from the template's file store (NginxSettings.FileStore),
// which no trial changes, and a trial's uploads from files/, so every trial
// starts from an exact copy without linking the whole store (345,000 files
// at the seed's size).
func (t *Template) CopySite(dst string, uid, gid int) error {
	if err := emptyDir(dst, 0, 0, 0o755); err != nil {
		return err
	}
	if err := installWWW(filepath.Join(dst, "www")); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"files", 0o755}, {"sessions", 0o700}, {"tmp", 0o755}} {
		p := filepath.Join(dst, d.name)
		if err := os.Mkdir(p, d.mode); err != nil {
			return fmt.Errorf("olio: making the site: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil { // past the umask
			return fmt.Errorf("olio: making the site: %w", err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("olio: giving %s to uid %d: %w", p, uid, err)
		}
	}
	return nil
}

// emptyDir makes dir (or checks that it is empty) with mode, owned by
// uid:gid.
func emptyDir(dir string, uid, gid int, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("olio: making %s: %w", dir, err)
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("olio: %w", err)
	} else if len(ents) > 0 {
		return fmt.Errorf("olio: copy destination %s is not empty", dir)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("olio: %w", err)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("olio: giving %s to uid %d: %w", dir, uid, err)
	}
	return nil
}
