// Package auctiontest starts the whole auction natively for integration
// tests: PostgreSQL on a copy of the data template, RabbitMQ, J application
// servers and nginx, each through the native platform (own process group
// and cgroup, log under the test's run, swept by cleanup), all stopped when
// the test ends, which must leave no process or temp dir of the run behind.
package auctiontest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
)

// Options size the stack.
type Options struct {
	MaxUsers   int           // data size (default 30: two live auctions)
	Seed       uint64        // data seed (default 1)
	AppServers int           // default 2
	ItemIdle   time.Duration // default 2s
	// BrokerAddr replaces the broker with this address (a test of an
	// unreachable broker); no broker is started.
	BrokerAddr string
	// NoWait skips waiting for the application servers and nginx (the
	// database and the broker are waited for).
	NoWait bool
}

// Stack is a running auction.
type Stack struct {
	Run      runid.ID
	Root     string // the test's state root: logs, process state
	Template *auction.Template
	DB       string   // PostgreSQL host:port
	Broker   string   // RabbitMQ AMQP host:port
	Apps     []string // application servers' host:port
	Web      string   // nginx host:port
	Servers  map[string]platform.Server
	logDir   string
	t        *testing.T
	nat      platform.Platform
}

// LogTail returns the last lines of the named server's log.
func (s *Stack) LogTail(name string, n int) string {
	b, err := os.ReadFile(filepath.Join(s.logDir, "stack-"+name+".log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Start starts the auction natively and stops it when the test ends. The
// WAR must have been built (make setup); the data template is made in
// nearnative's state directory the first time.
func Start(t *testing.T, o Options) *Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL, RabbitMQ, Tomcat and nginx; skipped in -short mode")
	}
	o = o.withDefaults()
	home := state.Home()
	war, err := auction.ReadWAR(home)
	if err != nil {
		t.Fatal(err)
	}
	run := runid.New()
	root := t.TempDir()
	s := &Stack{Run: run, Root: root, Servers: map[string]platform.Server{}, logDir: filepath.Join(root, "logs"),
		t: t, nat: testenv.Platforms(t, run, root, platform.Native)[platform.Native]}
	// Registered first, so it runs last: after every server is stopped.
	t.Cleanup(func() { checkClean(t, root, run) })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	s.Template, err = auction.EnsureTemplate(ctx, auction.TemplateOptions{
		State: home, Size: auction.Size{MaxUsers: o.MaxUsers}, Seed: o.Seed, Platform: s.nat, Run: run, Log: testenv.Log{T: t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("data template %s (%v)", s.Template.Dir, time.Since(start).Round(time.Millisecond))
	data := s.copyTemplate()

	// Every server starts at once (the application servers retry the
	// database and the broker until they answer); then each is waited for.
	start = time.Now()
	s.startAll(ctx, o, war, data)
	s.wait(ctx, "pg", s.DB, auction.PostgresReady)
	if o.BrokerAddr == "" {
		s.wait(ctx, "broker", s.Broker, auction.BrokerReady)
	}
	if o.NoWait {
		return s
	}
	for i, a := range s.Apps {
		s.wait(ctx, fmt.Sprintf("app%d", i+1), a, auction.AppReady)
	}
	s.wait(ctx, "web", s.Web, auction.WebReady)
	t.Logf("PostgreSQL, RabbitMQ, %d application servers and nginx ready after %v", o.AppServers, time.Since(start).Round(time.Millisecond))
	return s
}

func (o Options) withDefaults() Options {
	if o.MaxUsers == 0 {
		o.MaxUsers = 30
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.AppServers == 0 {
		o.AppServers = 2
	}
	if o.ItemIdle == 0 {
		o.ItemIdle = 2 * time.Second
	}
	return o
}

// copyTemplate copies the data template for PostgreSQL into a temp dir of
// the run, removed when the test ends.
func (s *Stack) copyTemplate() string {
	t := s.t
	uid, gid, err := lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	data, err := state.TempDir(s.Run, "pgdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) }) // after PostgreSQL stops (cleanups run last first)
	start := time.Now()
	if err := s.Template.CopyTo(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Logf("copied the template in %v", time.Since(start).Round(time.Millisecond))
	return data
}

// startAll starts PostgreSQL on data, RabbitMQ (unless o names one), the
// application servers and nginx.
func (s *Stack) startAll(ctx context.Context, o Options, war []byte, data string) {
	t := s.t
	pgSpec, err := pgserver.Spec(auction.PostgresConfig("pg", data, 0))
	if err != nil {
		t.Fatal(err)
	}
	s.DB = s.start(ctx, pgSpec).Addr(auction.PortPostgres)
	if o.BrokerAddr != "" {
		s.Broker = o.BrokerAddr
	} else {
		bSpec, err := auction.BrokerSpec("broker", auction.BrokerSettings{})
		if err != nil {
			t.Fatal(err)
		}
		s.Broker = s.start(ctx, bSpec).Addr(auction.PortAMQP)
	}
	for i := 1; i <= o.AppServers; i++ {
		spec, err := auction.AppServerSpec(fmt.Sprintf("app%d", i), auction.AppServerSettings{
			DB: s.DB, Broker: s.Broker, WAR: war, ItemIdle: o.ItemIdle, Heap: "256m",
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Apps = append(s.Apps, s.start(ctx, spec).Addr(auction.PortHTTP))
	}
	webSpec, err := auction.WebSpec("web", auction.WebSettings{AppServers: s.Apps, ItemIdle: o.ItemIdle, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Web = s.start(ctx, webSpec).Addr(auction.PortHTTP)
}

// start starts one server natively, stopped when the test ends.
func (s *Stack) start(ctx context.Context, spec platform.Spec) platform.Server {
	t := s.t
	t.Helper()
	srv, err := s.nat.Start(ctx, "stack", spec)
	if err != nil {
		t.Fatalf("starting %s: %v", spec.Name, err)
	}
	t.Cleanup(func() {
		st := time.Now()
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", spec.Name, err)
		}
		if d := time.Since(st); d > 3*time.Second {
			t.Logf("stopping %s took %v; last lines of its log:\n%s", spec.Name, d.Round(time.Millisecond), s.LogTail(spec.Name, 8))
		}
	})
	s.Servers[spec.Name] = srv
	return srv
}

// wait probes the named server at addr until it is ready; generous: the
// servers boot together, and `make test` loads the machine with every other
// package's tests.
func (s *Stack) wait(ctx context.Context, name, addr string, probe func(context.Context, string) error) {
	s.t.Helper()
	if err := platform.WaitReady(ctx, 150*time.Second, 200*time.Millisecond, func(ctx context.Context) error { return probe(ctx, addr) }); err != nil {
		s.t.Fatalf("%s: %v\nlast lines of its log:\n%s", name, err, s.LogTail(name, 15))
	}
}

// checkClean fails the test when the run left processes or temp dirs.
func checkClean(t *testing.T, root string, run runid.ID) {
	t.Helper()
	if left, err := state.TempDirs(run); err != nil || len(left) > 0 {
		t.Errorf("temp dirs left by run %s: %v %v", run, left, err)
	}
	begin := time.Now()
	defer func() { t.Logf("checked for leftovers in %v", time.Since(begin).Round(time.Millisecond)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := cleanup.Processes{Dir: state.Dir{Root: root}}.Runs(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		if !slices.Contains(runs, run) {
			return
		}
		if time.Now().After(deadline) {
			removed, err := cleanup.Processes{Dir: state.Dir{Root: root}}.Remove(context.Background(), run)
			t.Errorf("processes of run %s still running: %v %v", run, removed, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lookup(name string) (int, int, error) {
	u, g, err := datacache.UserIDs(name)
	if err != nil {
		return 0, 0, errors.New("user " + name + ": " + err.Error())
	}
	return u, g, nil
}
