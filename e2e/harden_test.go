package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/runid"
)

// smallStudy is a short study on native and one Docker path: 3 rounds
// (1 warm-up) of 2 platforms, 6 trials.
const smallStudy = `name: e2e-harden
description: faults
rounds: 2
min_pairs: 2
warmup: 1
trial: 2s
platforms: [native, docker-nat]
workloads:
  - workload: redis
    params: {clients: 50}
`

// smallTrials is how many trials a fault-free run of smallStudy stores.
const smallTrials = 6

// workloadImage returns the locally built workload image, or fails t.
func workloadImage(t *testing.T) string {
	t.Helper()
	cfg, err := image.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	ref, present, err := image.Current(context.Background(), dockerClient(t), cfg)
	if err != nil || !present {
		t.Fatalf("workload image %s not built (nearnative image build): %v", ref, err)
	}
	return ref
}

// TestCleanupCanary: a container labelled with a run ID that leads out of
// the state directory, and a store row with such an ID, are reported and
// left alone by cleanup, runs, run's reaping and --resume; a canary file
// where the forged ID would lead (the lock directory's ../../canary)
// survives.
func TestCleanupCanary(t *testing.T) {
	e := newEnv(t)
	canary := filepath.Join(filepath.Dir(e.home), "canary")
	if err := os.WriteFile(canary, []byte("still here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(canary) })
	const forged = "../../canary"
	// A real container on the real engine, from an image with the label.
	cli := dockerClient(t)
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: workloadImage(t), Cmd: []string{"true"},
		Labels: map[string]string{runid.Label: forged}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	// A store row with a forged ID, as another program could write it.
	e.store() // creates the schema
	db, err := sql.Open("sqlite", e.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO runs (id, study, seed, baseline, status, stop_reason, started, version)
		VALUES (?, 'x', 0, 'native', 'running', '', '2099-01-01T00:00:00.000000000Z', 'x')`, forged); err != nil {
		t.Fatal(err)
	}
	db.Close()

	checkCanary := func(after string) {
		t.Helper()
		if b, err := os.ReadFile(canary); err != nil || string(b) != "still here\n" {
			t.Fatalf("the canary outside the state directory is gone after %s: %v", after, err)
		}
	}
	out, errOut, code := e.run("cleanup")
	if code != 0 || !strings.Contains(out, `"../../canary", which is not a run ID`) {
		t.Errorf("cleanup: exit %d, stdout:\n%s\nstderr:\n%s\nwant the forged label reported", code, out, errOut)
	}
	checkCanary("cleanup")
	if _, err := cli.ContainerInspect(ctx, c.ID); err != nil {
		t.Errorf("cleanup removed the container with a forged label: %v", err)
	}
	_, errOut, code = e.run("runs")
	if code != 0 || !strings.Contains(errOut, `skipped a stored run with ID "../../canary"`) {
		t.Errorf("runs: exit %d, stderr %q: want the forged row reported", code, errOut)
	}
	checkCanary("runs")
	for _, ref := range []string{forged, "../", "last"} {
		_, errOut, code = e.run("run", "--resume", ref)
		if code != 2 || !strings.Contains(errOut, "no run matches") {
			t.Errorf("run --resume %s: exit %d, stderr %q; want no run", ref, code, errOut)
		}
	}
	checkCanary("run --resume")
	study := e.studyFile(strings.Replace(smallStudy, "[native, docker-nat]", "[native, {name: native-b, base: native}]", 1))
	out, errOut, code = e.run("run", study)
	if code != 0 || !strings.Contains(errOut, `"../../canary", which is not a run ID`) {
		t.Errorf("run: exit %d, stderr:\n%s\nwant the forged label reported by the reaping", code, errOut)
	}
	checkCanary("run")
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.home), "runs")); !os.IsNotExist(err) {
		t.Errorf("something made %s: %v", filepath.Join(filepath.Dir(e.home), "runs"), err)
	}
}

// TestKillThenRunReaps: a run killed with SIGKILL mid-trial leaves no
// process (they die with it); the next run reaps what it left (the
// container, cgroups), says so in a line naming the run, completes, and
// nothing of either run is left.
func TestKillThenRunReaps(t *testing.T) {
	e := newEnv(t)
	study := e.studyFile(smallStudy)
	c, id, _ := e.start("run", study)
	waitFor(t, "a container of the run", 120*time.Second, func() bool { return len(containersOf(t, id)) > 0 })
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	// Processes die with nearnative (parent-death signal); give the kernel
	// a moment to deliver it.
	waitFor(t, "the run's processes to die with it", 10*time.Second, func() bool { return len(liveProcesses(e.home, id)) == 0 })
	if len(containersOf(t, id)) == 0 {
		t.Fatal("no container left after SIGKILL: the test did not kill mid-trial")
	}
	// --no-reap leaves it and says trials may be disturbed.
	tiny := e.studyFile("name: e2e-tiny\nrounds: 2\nmin_pairs: 2\nwarmup: 0\ntrial: 1s\nplatforms: [native, {name: native-b, base: native}]\nworkloads: [{workload: redis, params: {clients: 10}}]\n")
	_, errOut, code := e.run("run", tiny, "--no-reap")
	if code != 0 || !strings.Contains(errOut, "--no-reap: what crashed run(s) "+string(id)+" left is still on the machine, so trials may be disturbed") {
		t.Errorf("run --no-reap: exit %d, stderr:\n%s\nwant the warning naming %s", code, errOut, id)
	}
	if len(containersOf(t, id)) == 0 {
		t.Error("--no-reap removed the killed run's container")
	}
	out, errOut, code := e.run("run", study)
	if code != 0 {
		t.Fatalf("the next run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`reaped crashed run ` + string(id) + `: removed (.*)`).FindStringSubmatch(errOut)
	if m == nil || !strings.Contains(m[1], "container nn-"+string(id)) {
		t.Errorf("the next run did not say it reaped run %s's container:\n%s", id, errOut)
	}
	if left := leftovers(t, id); len(left) > 0 {
		t.Errorf("the killed run left: %v", left)
	}
	r, err := e.store().Run(context.Background(), "last")
	if err != nil || r.Status != "done" || r.Trials != smallTrials {
		t.Errorf("the next run: %+v, %v; want done with %d trials", r, err, smallTrials)
	}
	if left := leftovers(t, r.ID); len(left) > 0 {
		t.Errorf("the next run left: %v", left)
	}
}

// TestPipeClosedByHead: `nearnative run ... 2>&1 | head -n 5` ends soon
// after head has its lines, and leaves no server behind.
func TestPipeClosedByHead(t *testing.T) {
	e := newEnv(t)
	study := e.studyFile(smallStudy)
	c := e.cmd()
	sh := exec.Command("sh", "-c", `"$0" run "$1" 2>&1 | head -n 5`, bin, study)
	sh.Env = c.Env
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	start := time.Now()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		sh.Process.Kill()
		t.Fatalf("the pipeline did not end within 90 s:\n%s", out.String())
	}
	m := runLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no run ID in head's lines:\n%s", out.String())
	}
	id := runid.ID(m[1])
	// The shell waits for every process of the pipeline: nearnative has
	// exited too.
	t.Logf("pipeline ended after %v", time.Since(start).Round(time.Second))
	if left := leftovers(t, id); len(left) > 0 {
		t.Errorf("left behind after head closed the pipe: %v", left)
	}
	if r, err := e.store().Run(context.Background(), string(id)); err != nil || r.Status != "interrupted" {
		t.Errorf("run %s: status %q (%v), want interrupted (resumable)", id, r.Status, err)
	}
}

// TestStoreFaultSQLiteFull: the result database's file system fills up
// mid-run: the run waits for its --store-retry, keeps the trial in a file
// and stops with one line; once space is freed, --resume stores it and
// completes with as many trials as a run without the fault.
func TestStoreFaultSQLiteFull(t *testing.T) {
	e := newEnv(t)
	mnt := tmpfs(t, "4m")
	e.db = filepath.Join(mnt, "results.db")
	study := e.studyFile(strings.Replace(smallStudy, "[native, docker-nat]", "[native, {name: native-b, base: native}]", 1))
	filler := filepath.Join(mnt, "filler")
	storeFault(t, e, study, func() {
		exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").Run() // until the file system is full
	}, func() { os.Remove(filler) })
}

// TestStoreFaultPostgresStopped: the PostgreSQL server holding the results
// stops mid-run: the run waits for its --store-retry, keeps the trial and
// stops; once the server is back, --resume completes it.
func TestStoreFaultPostgresStopped(t *testing.T) {
	e := newEnv(t)
	pg := startPostgres(t)
	e.db = pg.dsn()
	study := e.studyFile(strings.Replace(smallStudy, "[native, docker-nat]", "[native, {name: native-b, base: native}]", 1))
	storeFault(t, e, study, func() { pg.ctl(t, "stop", "-m", "fast") }, func() { pg.start(t) })
}

// storeFault runs study, calls fault once two trials are stored, checks
// that the run stops with one line naming the kept trial, calls repair and
// resumes.
func storeFault(t *testing.T, e *env, study string, fault, repair func()) {
	t.Helper()
	c, id, _ := e.start("run", study, "--store-retry", "3s")
	st := e.store()
	waitFor(t, "two stored trials", 120*time.Second, func() bool {
		r, err := st.Run(context.Background(), string(id))
		return err == nil && r.Trials >= 2
	})
	st.Close()
	fault()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		c.Process.Kill()
		t.Fatal("the run did not stop within 2 minutes of the store fault")
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Errorf("run after the store fault: %v, want exit 3", err)
	}
	kept, _ := filepath.Glob(filepath.Join(e.home, "runs", string(id), "spool", "trial-*.json"))
	if len(kept) != 1 {
		t.Errorf("%d kept trials, want 1: %v", len(kept), kept)
	}
	if left := leftovers(t, id); len(left) > 0 {
		t.Errorf("the stopped run left: %v", left)
	}
	repair()
	out, errOut, code := e.run("run", "--resume", string(id))
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "stored 1 trial(s) of run "+string(id)) {
		t.Errorf("the resume did not say it stored the kept trial:\n%s", errOut)
	}
	r, err2 := e.store().Run(context.Background(), string(id))
	if err2 != nil || r.Status != "done" || r.Trials != smallTrials {
		t.Errorf("resumed run: %+v, %v; want done with %d trials, as without the fault", r, err2, smallTrials)
	}
}

// pgServer is a private PostgreSQL cluster for a test: initdb'd in a temp
// dir, started as the postgres user on a free loopback port, stopped and
// removed when the test ends.
type pgServer struct {
	bin, base, data string
	port            int
}

func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(dirs) == 0 {
		t.Fatal("PostgreSQL server programs not found (install postgresql: make setup)")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Not t.TempDir: its parent is private to root.
	base, err := os.MkdirTemp("", "nearnative-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chown(base, uid, gid); err != nil {
		t.Fatal(err)
	}
	pg := &pgServer{bin: filepath.Dir(dirs[len(dirs)-1]), base: base, data: filepath.Join(base, "data")}
	pg.run(t, "initdb", "-D", pg.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	pg.port = freePort(t)
	pg.start(t)
	t.Cleanup(func() { pg.ctl(t, "stop", "-m", "immediate") })
	return pg
}

func (pg *pgServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

func (pg *pgServer) start(t *testing.T) {
	t.Helper()
	pg.ctl(t, "start", "-l", filepath.Join(pg.base, "server.log"), "-t", "60",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s", pg.port, pg.base))
}

// ctl runs pg_ctl with args and -w; a stop of a stopped server is fine.
func (pg *pgServer) ctl(t *testing.T, args ...string) {
	t.Helper()
	out, err := pg.cmd("pg_ctl", append([]string{"-D", pg.data, "-w"}, args...)...).CombinedOutput()
	if err != nil && !(args[0] == "stop" && bytes.Contains(out, []byte("not running"))) {
		t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

func (pg *pgServer) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := pg.cmd(prog, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}

func (pg *pgServer) cmd(prog string, args ...string) *exec.Cmd {
	c := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pg.bin, prog)}, args...)...)
	c.Dir = pg.base
	c.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	c.WaitDelay = 5 * time.Second // the server must not hold our pipes
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestReapLeavesOtherRuns: a live run of another state directory and lock
// directory (another engineer's, a test's) is not taken for a crashed one:
// neither `cleanup` nor a run's reaping touches it, and it completes.
func TestReapLeavesOtherRuns(t *testing.T) {
	other := newEnv(t)
	e := newEnv(t)
	c, id, _ := other.start("run", other.studyFile(smallStudy))
	waitFor(t, "a container of the other run", 120*time.Second, func() bool { return len(containersOf(t, id)) > 0 })
	out, _, code := e.run("cleanup")
	if code != 0 || strings.Contains(out, "removed ") && strings.Contains(out, string(id)) {
		t.Errorf("cleanup in another state directory touched the live run %s (exit %d):\n%s", id, code, out)
	}
	if !strings.Contains(out, "skipped run "+string(id)+": nothing here says whether it still runs") {
		t.Errorf("cleanup did not list the other run as unknown:\n%s", out)
	}
	study := e.studyFile(strings.Replace(smallStudy, "[native, docker-nat]", "[native, {name: native-b, base: native}]", 1))
	_, errOut, code := e.run("run", study)
	if code != 0 || strings.Contains(errOut, "reaped crashed run "+string(id)) {
		t.Errorf("a run in another state directory reaped the live run %s (exit %d):\n%s", id, code, errOut)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("the other run: %v", err)
	}
	if r, err := other.store().Run(context.Background(), string(id)); err != nil || r.Status != "done" || r.Trials != smallTrials {
		t.Errorf("the other run: %+v, %v; want done with %d trials", r, err, smallTrials)
	}
}
