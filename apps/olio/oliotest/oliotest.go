// Package oliotest starts the Olio site's three tiers natively for tests:
// a template loaded once per test binary, copied for each stack, MariaDB,
// PHP-FPM and nginx started through the native platform, each checked with
// its readiness probe and stopped (and its copies removed) when the test
// ends.
package oliotest

import (
	"context"
	"database/sql"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// Size is the data set the tests load: Olio's smallest (25 concurrent
// users: 2,500 persons, 622 tags, 1,866 events).
var Size = olio.Size{Users: olio.MinUsers, Seed: 1}

// Env is one test binary's run: its ID, a state root (with the template
// cache) and the native platform.
type Env struct {
	Run      runid.ID
	Root     string
	LogDir   string
	Platform *native.Platform
	Template *olio.Template
}

var (
	envOnce sync.Once
	env     *Env
	envErr  error
)

// Setup returns the test binary's environment, loading the template on
// first use. The caller's TestMain must call Teardown.
func Setup(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts MariaDB, PHP-FPM and nginx")
	}
	envOnce.Do(func() { env, envErr = setup() })
	if envErr != nil {
		t.Fatalf("olio test environment: %v", envErr)
	}
	return env
}

func setup() (*Env, error) {
	run := runid.New()
	root, err := state.TempDir(run, "olio-test")
	if err != nil {
		return nil, err
	}
	// The loader's MariaDB (user mysql) must reach the cache below it.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Run: run, Root: root, LogDir: filepath.Join(root, "logs")}
	e.Platform, err = native.New(platform.Native, platform.Env{Run: run, LogDir: e.LogDir}, state.Dir{Root: root}, platform.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e.Template, err = olio.EnsureTemplate(ctx, olio.Builder{Platform: e.Platform,
		CacheDir: filepath.Join(root, "cache"), LogDir: e.LogDir, Log: os.Stderr}, Size)
	if err != nil {
		return e, err
	}
	return e, nil
}

// Teardown removes the environment (the platform's cgroups, the state
// root with the template cache). Call it from TestMain after m.Run.
func Teardown() {
	if env == nil {
		return
	}
	env.Platform.Close()
	os.RemoveAll(env.Root)
}

// Stack is a running site.
type Stack struct {
	Base    string // http://host:port of nginx
	DBAddr  string
	FPMAddr string
	SiteDir string
	DB      *sql.DB // the application's database, as the application user
}

// IDs returns the uid and gid of a system user.
func IDs(t testing.TB, name string) (int, int) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("system user %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// Start copies the template and starts the three tiers; everything is
// stopped and removed when the test ends. fpm, when not nil, may change the
// PHP-FPM spec (a test of a broken pool); Start then stops after PHP-FPM's
// readiness and returns its error.
func Start(t testing.TB, e *Env, trial string, fpm func(*platform.Spec)) (*Stack, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dbDir := tempDir(t, e, trial+"-db")
	siteDir := tempDir(t, e, trial+"-site")
	muid, mgid := IDs(t, "mysql")
	wuid, wgid := IDs(t, "www-data")
	if err := e.Template.CopyDB(dbDir, muid, mgid); err != nil {
		t.Fatal(err)
	}
	if err := e.Template.CopySite(siteDir, wuid, wgid); err != nil {
		t.Fatal(err)
	}
	st := &Stack{SiteDir: siteDir}

	start := func(spec platform.Spec, err error) platform.Server {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := e.Platform.Start(ctx, trial, spec)
		if err != nil {
			t.Fatalf("starting %s: %v", spec.Name, err)
		}
		t.Cleanup(func() {
			if err := srv.Stop(context.Background()); err != nil {
				t.Errorf("stopping %s: %v", spec.Name, err)
			}
		})
		return srv
	}
	tail := func(name string) string {
		return olio.LogTail(filepath.Join(e.LogDir, trial+"-"+name+".log"), 15)
	}

	db := start(olio.MariaDBSpec(olio.MariaDBSettings{DataDir: dbDir, BufferPool: "128m"}))
	st.DBAddr = db.Addr(olio.PortMySQL)
	if err := olio.ReadyDB(ctx, st.DBAddr, time.Minute); err != nil {
		t.Fatalf("%v%s", err, tail("olio-db"))
	}
	var err error
	if st.DB, err = olio.OpenDB(st.DBAddr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.DB.Close() })

	spec, err := olio.FPMSpec(olio.FPMSettings{SiteDir: siteDir, DBAddr: st.DBAddr, Children: 4})
	if fpm != nil && err == nil {
		fpm(&spec)
	}
	php := start(spec, err)
	st.FPMAddr = php.Addr(olio.PortFCGI)
	if err := olio.ReadyFPM(ctx, st.FPMAddr, siteDir, time.Minute); err != nil {
		if fpm != nil {
			return st, err
		}
		t.Fatalf("%v%s", err, tail("olio-fpm"))
	}

	web := start(olio.NginxSpec(olio.NginxSettings{SiteDir: siteDir, FPMAddr: st.FPMAddr, FileStore: e.Template.FilesDir(), Workers: 2, Connections: 1024}))
	st.Base = "http://" + web.Addr(olio.PortHTTP)
	if err := olio.ReadyWeb(ctx, st.Base, time.Minute); err != nil {
		t.Fatalf("%v%s", err, tail("olio-web"))
	}
	return st, nil
}

// tempDir makes a directory labelled with the run, removed when the test
// ends.
func tempDir(t testing.TB, e *Env, purpose string) string {
	t.Helper()
	d, err := state.TempDir(e.Run, purpose)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
