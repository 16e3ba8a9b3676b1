package e2e

// The faults drill (`make drill`): the long versions of the fault tests,
// run on a quiet machine, whose figures BENCH.md quotes. NEARNATIVE_DRILL=1
// turns them on; NEARNATIVE_DRILL_OUT names the Markdown file the figures
// are appended to. Without NEARNATIVE_DRILL the start/stop cycles and the
// queue run a short version here (`make test`), and the kills and the store
// faults are left to their short versions (TestKillThenRunReaps,
// TestStoreFault*).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// drillOn reports whether the full drill runs (NEARNATIVE_DRILL=1).
func drillOn() bool { return os.Getenv("NEARNATIVE_DRILL") == "1" }

// drillInt is the integer in env, or def.
func drillInt(t *testing.T, env string, def int) int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", env, v)
	}
	return n
}

var reportMu sync.Mutex

// report appends a section to NEARNATIVE_DRILL_OUT (and the test log).
func report(t *testing.T, section string) {
	t.Helper()
	t.Log("\n" + section)
	out := os.Getenv("NEARNATIVE_DRILL_OUT")
	if out == "" || !drillOn() {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("drill report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, section)
}

// sweepers are the real sweepers `cleanup` uses, for leak checks.
func sweepers(t *testing.T, home string) []cleanup.Sweeper {
	t.Helper()
	eng, err := docker.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s := []cleanup.Sweeper{cleanup.Processes{Dir: state.Dir{Root: home}}, cleanup.Containers{Engine: eng},
		vm.Sweeper{}, cleanup.Cgroups{}, cleanup.TempDirs{}}
	return append(s, cleanup.NetworkSweepers()...)
}

// holding lists the kinds of resources run still holds, by every sweeper.
func holding(t *testing.T, sw []cleanup.Sweeper, run runid.ID) []string {
	t.Helper()
	var kinds []string
	for _, s := range sw {
		ids, _ := s.Runs(context.Background())
		for _, id := range ids {
			if id == run {
				kinds = append(kinds, s.Kind())
				break
			}
		}
	}
	return kinds
}

// reapedLine matches the line a run prints for each crashed run it reaped.
var reapedLine = regexp.MustCompile(`reaped crashed run (\d{8}-\d{6}-[0-9a-f]{4}): removed (.*)`)

// reapedItems counts what the reaped lines of stderr name, by kind (the
// first word of each item: container, cgroup, temp, process, network ...).
func reapedItems(stderr string, run runid.ID) (int, map[string]int) {
	kinds := map[string]int{}
	n := 0
	for _, m := range reapedLine.FindAllStringSubmatch(stderr, -1) {
		if runid.ID(m[1]) != run {
			continue
		}
		for _, item := range strings.Split(m[2], "; ") {
			n++
			kinds[strings.Fields(item)[0]]++
		}
	}
	return n, kinds
}

func kindsString(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// drillStudy is the study the kill and store drills run: redis --quick
// (NEARNATIVE_DRILL_STUDY may name a shorter one to try the drill out).
func drillStudy() []string {
	if s := os.Getenv("NEARNATIVE_DRILL_STUDY"); s != "" {
		return []string{s}
	}
	return []string{"redis", "--quick"}
}

// TestDrillKills: SIGKILL `run redis --quick` at random moments; each time
// a new `run redis --quick` must reap what the killed one left, complete,
// and leave nothing of either.
func TestDrillKills(t *testing.T) {
	if !drillOn() {
		t.Skip("the kill drill runs with NEARNATIVE_DRILL=1 (make drill); TestKillThenRunReaps is its short version")
	}
	n := drillInt(t, "NEARNATIVE_DRILL_KILLS", 20)
	e := newEnv(t)
	sw := sweepers(t, e.home)
	args := append([]string{"run"}, drillStudy()...)
	// A fault-free run first: how long a run takes, and what it stores.
	start := time.Now()
	out, errOut, code := e.run(args...)
	if code != 0 {
		t.Fatalf("fault-free run: exit %d\n%s\n%s", code, out, errOut)
	}
	full := time.Since(start)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var b strings.Builder
	fmt.Fprintf(&b, "### Kills (`%s`, %d SIGKILLs, seed %d; a fault-free run took %v)\n\n", strings.Join(args, " "), n, seed, full.Round(time.Second))
	fmt.Fprintln(&b, "| # | killed after | left by the kill | processes left | reaped by the next run | next run | left after |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|")
	failures, totalReaped := 0, 0
	all := map[string]int{}
	for i := 1; i <= n; i++ {
		c, id, _ := e.start(args...)
		at := 3*time.Second + time.Duration(rng.Float64()*float64(full-3*time.Second))
		time.Sleep(at)
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		time.Sleep(500 * time.Millisecond) // the parent-death signals land
		left := holding(t, sw, id)
		procs := len(liveProcesses(e.home, id))
		out, errOut, code := e.run(args...)
		reaped, kinds := reapedItems(errOut, id)
		totalReaped += reaped
		for k, v := range kinds {
			all[k] += v
		}
		next, nextErr := e.store().Run(context.Background(), "last")
		after := append(holding(t, sw, id), holding(t, sw, next.ID)...)
		verdict := "done"
		if code != 0 || nextErr != nil || next.Status != "done" {
			verdict = fmt.Sprintf("FAILED (exit %d)", code)
			failures++
			t.Errorf("cycle %d: the run after the kill: exit %d\n%s\n%s", i, code, out, errOut)
		}
		if len(after) > 0 {
			failures++
			t.Errorf("cycle %d: left behind: %v", i, after)
		}
		if procs > 0 {
			t.Errorf("cycle %d: %d processes of the killed run outlived it", i, procs)
		}
		fmt.Fprintf(&b, "| %d | %v | %s | %d | %d: %s | %s | %s |\n", i, at.Round(100*time.Millisecond), orNone(left), procs,
			reaped, kindsString(kinds), verdict, orNone(after))
	}
	fmt.Fprintf(&b, "\n%d of %d runs after a kill completed and left nothing; %d things reaped in all (%s).\n", n-failures, n, totalReaped, kindsString(all))
	report(t, b.String())
}

// liveProcesses lists the live (not zombie) processes of run: those whose
// environment names it, those in its cgroups, and those its state files
// name (redis-server rewrites its environment with its title, so the first
// way misses it).
func liveProcesses(home string, run runid.ID) []int {
	set := map[int]bool{}
	for _, p := range processesOf(run) {
		set[p] = true
	}
	for _, l := range cgroup.Leftovers(run) {
		b, _ := os.ReadFile(filepath.Join(l.Dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				set[p] = true
			}
		}
		subs, _ := filepath.Glob(filepath.Join(l.Dir, "*", "cgroup.procs"))
		for _, sub := range subs {
			b, _ := os.ReadFile(sub)
			for _, f := range strings.Fields(string(b)) {
				if p, err := strconv.Atoi(f); err == nil {
					set[p] = true
				}
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(home, "runs", string(run), "procs", "*.json"))
	for _, f := range files {
		var st native.ProcState
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &st) == nil && st.PID > 0 {
			if ps, err := sysinfo.ReadProcStat(st.PID); err == nil && ps.StartTime == st.StartTick {
				set[st.PID] = true
			}
		}
	}
	var out []int
	for p := range set {
		if ps, err := sysinfo.ReadProcStat(p); err == nil && ps.State != "Z" {
			out = append(out, p)
		}
	}
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// TestDrillCycles starts and stops one Redis server on each platform again
// and again in this process, which runs the platforms' code as nearnative
// does: nothing may leak (process, container, namespace, link, rule,
// cgroup, directory), and the process's memory, goroutines and open files
// must stay flat. Short (3 cycles) without NEARNATIVE_DRILL; 100 with it
// (NEARNATIVE_DRILL_CYCLES).
func TestDrillCycles(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end: needs root, Docker and the workload image (make setup)")
	}
	cycles := 3
	if drillOn() {
		cycles = drillInt(t, "NEARNATIVE_DRILL_CYCLES", 100)
	}
	ref := workloadImage(t)
	home := t.TempDir()
	t.Setenv(state.EnvLockDir, filepath.Join(home, "locks"))
	dir := state.Dir{Root: home}
	sw := sweepers(t, home)
	engine := &catalog.Docker{}
	defer engine.Close()
	names := []string{platform.Native, platform.DockerNAT, platform.DockerProxy, platform.DockerBridge, platform.DockerHost}
	if kube, err := engine.Kube(context.Background(), dir); err == nil && kube.Reachable(context.Background()) == nil {
		names = append(names, platform.K8sPod)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Start/stop cycles (%d per platform, one Redis server)\n\n", cycles)
	fmt.Fprintln(&b, "| platform | cycles | per cycle | leaked | heap after 1st / last cycle | RSS after 1st / last | goroutines | open files |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			run := runid.New()
			ctx := context.Background()
			env := platform.Env{Run: run, LogDir: filepath.Join(home, "runs", string(run), "logs"), Image: ref}
			// The client host a run gives the platform: the run's
			// namespace, or docker-proxy's loopback.
			hosts := host.NewHosts(run, host.Setting{Client: host.SettingNetns})
			defer hosts.Close(ctx)
			client, err := hosts.For(ctx, catalog.ClientNeed(name))
			if err != nil {
				t.Fatal(err)
			}
			env.Client = client
			p, err := catalog.Build(ctx, study.Platform{Name: name, Base: name}, env, dir, engine)
			if err != nil {
				t.Fatal(err)
			}
			if ch, ok := p.(platform.Checker); ok {
				if err := ch.Check(ctx); err != nil {
					t.Fatalf("%s unavailable: %v", name, err)
				}
			}
			spec := redisSpec()
			var first, last procFigures
			start := time.Now()
			for i := 1; i <= cycles; i++ {
				srv, err := p.Start(ctx, fmt.Sprintf("c%03d", i), spec)
				if err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				if err := redisproto.WaitReady(ctx, srv.Addr("redis"), 30*time.Second); err != nil {
					srv.Stop(ctx)
					t.Fatalf("cycle %d: %v", i, err)
				}
				if err := srv.Stop(ctx); err != nil {
					t.Errorf("cycle %d: stop: %v", i, err)
				}
				if i == 1 {
					first = figures()
				}
			}
			per := time.Since(start) / time.Duration(cycles)
			last = figures()
			if c, ok := p.(platform.Closer); ok {
				if err := c.Close(); err != nil {
					t.Errorf("closing %s: %v", name, err)
				}
			}
			if err := hosts.Close(ctx); err != nil {
				t.Errorf("closing the client host: %v", err)
			}
			leaked := holding(t, sw, run)
			if len(leaked) > 0 {
				t.Errorf("%s leaked after %d cycles: %v", name, cycles, leaked)
			}
			// A leak grows with the cycles; some growth from the first
			// cycle's lazily made things is not one.
			if cycles >= 50 {
				if last.goroutines > first.goroutines+5 {
					t.Errorf("goroutines grew from %d to %d", first.goroutines, last.goroutines)
				}
				if last.fds > first.fds+5 {
					t.Errorf("open files grew from %d to %d", first.fds, last.fds)
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %v | %s | %.1f / %.1f MB | %.1f / %.1f MB | %d / %d | %d / %d |\n", name, cycles, per.Round(10*time.Millisecond),
				orNone(leaked), first.heapMB, last.heapMB, first.rssMB, last.rssMB, first.goroutines, last.goroutines, first.fds, last.fds)
		})
	}
	report(t, b.String())
}

func redisSpec() platform.Spec {
	return platform.Spec{
		Name:  "redis",
		Ports: []string{"redis"},
		User:  "redis",
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
		},
	}
}

// procFigures are this process's resources at a moment.
type procFigures struct {
	heapMB, rssMB   float64
	goroutines, fds int
}

func figures() procFigures {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := procFigures{heapMB: float64(ms.HeapInuse) / 1e6, goroutines: runtime.NumGoroutine()}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		f.fds = len(ents)
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if fs := strings.Fields(line); len(fs) >= 2 && fs[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(fs[1], 64)
				f.rssMB = kb / 1e3
			}
		}
	}
	return f
}

// queued is one run of a queue check: its stderr and the place it said.
type queued struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	id     runid.ID
}

var placeLine = regexp.MustCompile(`this run is (next|\d+(?:st|nd|rd|th)) in line`)

// queueOnce starts three runs of study within a second and checks that the
// second and third wait, that each says its place, that they measure in
// the order of the places they said, and that all complete.
func queueOnce(t *testing.T, e *env, study string) (order []int, places []string) {
	t.Helper()
	var qs []*queued
	for i := 0; i < 3; i++ {
		c := e.cmd("run", study)
		var errb bytes.Buffer
		c.Stdout, c.Stderr = nil, &errb
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, &queued{cmd: c, stderr: &errb})
		time.Sleep(300 * time.Millisecond)
	}
	for i, q := range qs {
		if err := q.cmd.Wait(); err != nil {
			t.Errorf("run %d of 3: %v\n%s", i+1, err, q.stderr.String())
		}
		if m := runLine.FindStringSubmatch(q.stderr.String()); m != nil {
			q.id = runid.ID(m[1])
		}
	}
	seen := map[runid.ID]int{}
	for i, q := range qs {
		if q.id == "" {
			t.Fatalf("run %d printed no run ID of its own:\n%s", i+1, firstLines(q.stderr.String(), 8))
		}
		if j, dup := seen[q.id]; dup {
			t.Fatalf("runs %d and %d both read as run %s: the order below would compare a run with itself", j+1, i+1, q.id)
		}
		seen[q.id] = i
	}
	st := e.store()
	type started struct {
		i  int
		at time.Time
	}
	var firsts []started
	var firstAt []time.Time // by run, for a failure's log
	for i, q := range qs {
		trials, err := st.Trials(context.Background(), q.id)
		if err != nil || len(trials) == 0 {
			t.Fatalf("run %d (%s): %d trials, %v", i+1, q.id, len(trials), err)
		}
		firsts = append(firsts, started{i, trials[0].Started})
		firstAt = append(firstAt, trials[0].Started)
		p := "did not wait"
		if m := placeLine.FindStringSubmatch(q.stderr.String()); m != nil {
			p = m[1]
		}
		places = append(places, p)
	}
	sort.Slice(firsts, func(a, b int) bool { return firsts[a].at.Before(firsts[b].at) })
	for _, f := range firsts {
		order = append(order, f.i)
	}
	// Whoever did not wait measured first; then "next", then "2nd".
	rank := map[string]int{"did not wait": 0, "next": 1, "2nd": 2}
	for k := 1; k < len(order); k++ {
		a, b := places[order[k-1]], places[order[k]]
		if rank[a] > rank[b] {
			t.Errorf("measured out of turn: a run that said %q measured before one that said %q (places %v, order %v)", a, b, places, order)
			for i, q := range qs {
				t.Logf("run %d (%s), first trial at %s, stderr's first lines:\n%s", i+1, q.id, firstAt[i].Format("15:04:05.000"), firstLines(q.stderr.String(), 8))
			}
		}
	}
	waited := 0
	for _, p := range places {
		if p != "did not wait" {
			waited++
		}
	}
	if waited != 2 {
		t.Errorf("%d runs waited, want 2 (places %v)", waited, places)
	}
	return order, places
}

// TestDrillQueue: three runs started within a second measure one after the
// other, in the order they said they stood in line, and all complete. Once
// without NEARNATIVE_DRILL; NEARNATIVE_DRILL_QUEUE times (default 5) with it.
func TestDrillQueue(t *testing.T) {
	e := newEnv(t)
	repeats := 1
	if drillOn() {
		repeats = drillInt(t, "NEARNATIVE_DRILL_QUEUE", 5)
	}
	study := e.studyFile(`name: e2e-queue
rounds: 2
min_pairs: 2
warmup: 0
trial: 1s
platforms: [native, {name: native-b, base: native}]
workloads:
  - workload: redis
    params: {clients: 50}
`)
	var b strings.Builder
	fmt.Fprintf(&b, "### Queue (3 runs started 0.3 s apart, %d times)\n\n", repeats)
	fmt.Fprintln(&b, "| # | places said (runs 1, 2, 3) | measured in the order | all complete |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	for i := 1; i <= repeats; i++ {
		failed := t.Failed()
		order, places := queueOnce(t, e, study)
		ok := "yes"
		if t.Failed() && !failed {
			ok = "NO"
		}
		var o []string
		for _, k := range order {
			o = append(o, strconv.Itoa(k+1))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", i, strings.Join(places, ", "), strings.Join(o, ", "), ok)
	}
	report(t, b.String())
}

// TestDrillStoreFaults: the result database fails mid-run, briefly (the
// run waits and completes by itself) or for longer than --store-retry (the
// run stops, keeps the trial, and --resume completes it), on SQLite (a
// full file system) and on PostgreSQL (the server stopped); each run ends
// with as many trials as the fault-free run.
func TestDrillStoreFaults(t *testing.T) {
	if !drillOn() {
		t.Skip("the store drill runs with NEARNATIVE_DRILL=1 (make drill); TestStoreFault* are its short version")
	}
	args := append(drillStudy(), "--platforms", "native,docker-bridge")
	if os.Getenv("NEARNATIVE_DRILL_STUDY") != "" {
		args = drillStudy()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Store faults (`run %s`)\n\n", strings.Join(args, " "))
	fmt.Fprintln(&b, "| database | fault | the run | trials | fault-free run's trials |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		for _, long := range []bool{false, true} {
			name := db + map[bool]string{false: " brief", true: " long"}[long]
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				var fault, repair func()
				if db == "SQLite" {
					mnt := tmpfs(t, "8m")
					e.db = filepath.Join(mnt, "results.db")
					filler := filepath.Join(mnt, "filler")
					fault = func() { exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").Run() }
					repair = func() { os.Remove(filler) }
				} else {
					pg := startPostgres(t)
					e.db = pg.dsn()
					fault = func() { pg.ctl(t, "stop", "-m", "fast") }
					repair = func() { pg.start(t) }
				}
				// The fault-free run on the same database.
				out, errOut, code := e.run(append([]string{"run"}, args...)...)
				if code != 0 {
					t.Fatalf("fault-free run: exit %d\n%s\n%s", code, out, errOut)
				}
				ref, _ := e.store().Run(context.Background(), "last")
				retry := "60s"
				if long {
					retry = "5s"
				}
				c, id, _ := e.start(append(append([]string{"run"}, args...), "--store-retry", retry)...)
				st := e.store()
				after := 2 + rand.IntN(max(ref.Trials-4, 1))
				waitFor(t, fmt.Sprintf("%d stored trials", after), 10*time.Minute, func() bool {
					r, err := st.Run(context.Background(), string(id))
					return err == nil && r.Trials >= after
				})
				st.Close()
				fault()
				how := ""
				if !long {
					time.Sleep(5 * time.Second)
					repair()
					if err := c.Wait(); err != nil {
						t.Errorf("a run whose store failed for 5 s (retried for %s): %v", retry, err)
						how = "FAILED"
					} else {
						how = fmt.Sprintf("waited for the store (failed 5 s after trial %d) and completed", after)
					}
				} else {
					err := c.Wait()
					ee, ok := err.(*exec.ExitError)
					if !ok || ee.ExitCode() != 3 {
						t.Errorf("a run whose store failed for good: %v, want exit 3", err)
					}
					repair()
					out, errOut, code := e.run("run", "--resume", string(id))
					if code != 0 {
						t.Errorf("resume: exit %d\n%s\n%s", code, out, errOut)
					}
					how = fmt.Sprintf("stopped after trial %d with the trial kept (exit %d); --resume completed it", after, ee.ExitCode())
				}
				r, err := e.store().Run(context.Background(), string(id))
				if err != nil || r.Trials != ref.Trials || r.Status != store.StatusDone {
					t.Errorf("run %s: %d trials, status %s (%v); want %d, done", id, r.Trials, r.Status, err, ref.Trials)
				}
				what := map[bool]string{false: "failed for 5 s", true: "failed past --store-retry 5s"}[long]
				if db == "SQLite" {
					what = "file system full, " + what
				} else {
					what = "server stopped, " + what
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %d |\n", db, what, how, r.Trials, ref.Trials)
			})
		}
	}
	report(t, b.String())
}

// tmpfs mounts a tmpfs of size in a temp dir until t ends.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	return mnt
}

// firstLines is the first n lines of s, for a failure's log.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
