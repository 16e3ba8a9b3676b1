// Package dvdstoretest starts a DVD Store instance natively for tests, as
// net/http/httptest does for HTTP servers: the 10mb template is built once
// per test binary in a temporary cache, every Start gets a fresh copy of it,
// PostgreSQL and (when asked) Apache run through the native platform and
// stop when the test ends. Test binaries that use it call Main from
// TestMain, which removes the cache at the end.
package dvdstoretest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
)

var (
	cacheOnce sync.Once
	cacheDir  string
	cacheErr  error

	tmplOnce sync.Once
	tmpl     dvdstore.Template
	tmplErr  error
)

// Main runs the tests and removes the template cache afterwards.
func Main(m *testing.M) {
	code := m.Run()
	Teardown()
	os.Exit(code)
}

// Teardown removes the test binary's template cache (Cache); a TestMain
// that does not use Main calls it after the tests.
func Teardown() {
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
}

// Cache is the test binary's template cache: a temporary directory the
// postgres user can reach.
func Cache(t testing.TB) dvdstore.Cache {
	t.Helper()
	cacheOnce.Do(func() {
		cacheDir, cacheErr = os.MkdirTemp("", "dvdstore-test-cache-")
		if cacheErr == nil {
			cacheErr = os.Chmod(cacheDir, 0o755)
		}
	})
	if cacheErr != nil {
		t.Fatal(cacheErr)
	}
	return dvdstore.Cache{Dir: cacheDir}
}

// Dataset is DVD Store's 10 MB size, seed 1.
func Dataset() dvdstore.Dataset {
	s, err := dvdstore.ParseSize("10mb")
	if err != nil {
		panic(err)
	}
	return dvdstore.Dataset{Size: s, Scale: 1, Seed: 1}
}

// Template builds Dataset's template once per test binary, through the
// native platform p of the first test that asks.
func Template(t testing.TB, p *native.Platform) dvdstore.Template {
	t.Helper()
	c := Cache(t)
	tmplOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		var built bool
		tmpl, built, tmplErr = c.Ensure(ctx, dvdstore.Builder{Platform: p, Log: testenv.Log{T: t.(*testing.T)}}, Dataset())
		if tmplErr == nil && !built {
			tmplErr = errors.New("the first Ensure in an empty cache did not build")
		}
		t.Logf("template built in %v", time.Since(start).Round(time.Millisecond))
	})
	if tmplErr != nil {
		t.Fatalf("template: %v", tmplErr)
	}
	return tmpl
}

// Stack is one instance of the shop started natively.
type Stack struct {
	Run      runid.ID
	Root     string // the run's state root: logs/ holds the servers' output
	Platform *native.Platform
	DB, Web  platform.Server
	DBAddr   string
	WebAddr  string // "" without a web server
}

// Options size the stack.
type Options struct {
	Web            bool
	Workers        int // Apache processes (default 4)
	MaxConnections int // PostgreSQL's (default 40)
}

// Start starts a stack whose database is a fresh copy of the template.
func Start(t *testing.T, o Options) *Stack {
	t.Helper()
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 40
	}
	s := &Stack{Run: runid.New(), Root: t.TempDir()}
	s.Platform = testenv.Platforms(t, s.Run, s.Root, platform.Native)[platform.Native].(*native.Platform)
	tm := Template(t, s.Platform)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	uid, gid, err := dvdstore.SystemUser()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := state.TempDir(s.Run, "t1-db-data")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	rep, err := tm.CopyTo(data, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("template copied: %d files, %.1f MB in %v", rep.Files, float64(rep.Bytes)/(1<<20), rep.Wall.Round(time.Millisecond))
	spec, err := dvdstore.DBSpec(dvdstore.DBConfig{Memory: 512 << 20, MaxConnections: o.MaxConnections,
		Data: platform.Volume{HostPath: data, Path: dvdstore.DataPath}})
	if err != nil {
		t.Fatal(err)
	}
	s.DB = StartServer(t, ctx, s.Platform, spec)
	s.DBAddr = s.DB.Addr(pgserver.Port)
	if err := dvdstore.DBReady(ctx, s.DBAddr); err != nil {
		t.Fatalf("%v\n%s", err, LogTail(s.Root, "t1-db"))
	}
	if o.Web {
		spec, err := dvdstore.WebSpec(dvdstore.WebConfig{DBAddrs: []string{s.DBAddr}, Workers: o.Workers})
		if err != nil {
			t.Fatal(err)
		}
		s.Web = StartServer(t, ctx, s.Platform, spec)
		s.WebAddr = s.Web.Addr(dvdstore.WebPort)
		if err := dvdstore.WebReady(ctx, s.WebAddr); err != nil {
			t.Fatalf("%v\n%s", err, LogTail(s.Root, "t1-web"))
		}
	}
	return s
}

// StartServer starts spec as trial t1 and stops it when the test ends.
func StartServer(t *testing.T, ctx context.Context, p platform.Platform, spec platform.Spec) platform.Server {
	t.Helper()
	srv, err := p.Start(ctx, "t1", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", spec.Name, err)
		}
	})
	return srv
}

// LogTail returns a server's saved output, for failure messages.
func LogTail(root, name string) string {
	b, _ := os.ReadFile(filepath.Join(root, "logs", name+".log"))
	return fmt.Sprintf("%s log:\n%s", name, b)
}

// Conn connects to the shop's database; it is closed when the test ends.
func (s *Stack) Conn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), pgserver.DSN(s.DBAddr, dvdstore.DBName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
