// Package e2e runs the real nearnative binary against the real Docker engine,
// real redis-server and the workload image that `make setup` builds.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nearnative-e2e-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "nearnative")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/nearnative").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building nearnative: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type env struct {
	t    *testing.T
	home string
	db   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: needs root, Docker and the workload image (make setup)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("end-to-end tests run as root (sudo make test)")
	}
	home := t.TempDir()
	e := &env{t: t, home: home, db: filepath.Join(home, "results.db")}
	t.Cleanup(func() {
		// Whatever a test leaves is a failure, but remove it for the next.
		// Only this test's runs: other runs on the machine are not ours.
		st, err := store.Open(context.Background(), e.db)
		if err != nil {
			return // no database: the test stored no run
		}
		defer st.Close()
		runs, _ := st.Runs(context.Background())
		for _, r := range runs {
			out, _ := e.cmd("cleanup", string(r.ID)).CombinedOutput()
			if bytes.Contains(out, []byte("removed ")) {
				t.Errorf("test left resources of run %s behind:\n%s", r.ID, out)
			}
		}
	})
	return e
}

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(bin, args...)
	// A lock directory of the test's own: its runs neither wait for other
	// runs on the machine nor look alive to their cleanups.
	c.Env = append(os.Environ(), "NEARNATIVE_HOME="+e.home, "NEARNATIVE_DB="+e.db, "NEARNATIVE_LOCK_DIR="+filepath.Join(e.home, "locks"))
	return c
}

// run runs nearnative and returns stdout, stderr and the exit code.
func (e *env) run(args ...string) (string, string, int) {
	e.t.Helper()
	c := e.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (e *env) studyFile(yaml string) string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "study.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) store() store.Store {
	e.t.Helper()
	st, err := store.Open(context.Background(), e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func containersOf(t *testing.T, run runid.ID) []string {
	t.Helper()
	list, err := dockerClient(t).ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", runid.Label+"="+string(run)))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, strings.Join(c.Names, ","))
	}
	return names
}

// processesOf lists processes whose environment carries the run ID.
func processesOf(run runid.ID) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if bytes.Contains(env, []byte(runid.EnvVar+"="+string(run)+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leftovers describes everything of run still on the machine.
func leftovers(t *testing.T, run runid.ID) []string {
	var out []string
	for _, c := range containersOf(t, run) {
		out = append(out, "container "+c)
	}
	for _, p := range processesOf(run) {
		out = append(out, fmt.Sprintf("process %d", p))
	}
	for _, l := range cgroup.Leftovers(run) {
		out = append(out, "cgroup "+l.Dir)
	}
	dirs, _ := state.TempDirs(run)
	for _, d := range dirs {
		out = append(out, "temp dir "+d)
	}
	return append(out, networkLeftovers(run)...)
}

// networkLeftovers describes the network objects of run still on the
// machine: its client host's namespace (named nn-<short>-...), links and
// iptables rules labelled with it. A namespace's routes go with it.
func networkLeftovers(run runid.ID) []string {
	var out []string
	label := runid.Label + "=" + string(run)
	lines := func(argv ...string) []string {
		b, _ := exec.Command(argv[0], argv[1:]...).Output()
		return strings.Split(string(b), "\n")
	}
	for _, l := range lines("ip", "netns", "list") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], runid.Prefix+run.Short()+"-") {
			if lo, _ := exec.Command("ip", "-n", f[0], "-d", "link", "show", "dev", "lo").Output(); bytes.Contains(lo, []byte(label)) {
				out = append(out, "network namespace "+f[0])
			}
		}
	}
	for _, l := range lines("ip", "-o", "link", "show") {
		if strings.Contains(l, "alias "+label) {
			out = append(out, "link "+strings.Fields(l)[1])
		}
	}
	for _, l := range lines("iptables-save") {
		if strings.Contains(l, label) {
			out = append(out, "iptables rule "+l)
		}
	}
	return out
}

// runLine finds a run's own ID in its output ("run ID: 4 trials planned"),
// not the ID of another run it names first: the one it waits for
// ("measured by run ID (study ..."), or one it reaped ("reaped crashed run
// ID: removed ...").
var runLine = regexp.MustCompile(`run (\d{8}-\d{6}-[0-9a-f]{4}): \d+ trials planned`)

// startTimeout bounds how long a run takes to print its ID: its platforms'
// checks come first, and a sut host's fresh dockerd is given the workload
// image then (1.3 GB; about 35 s on the test bed when quiet, over 60 s
// once beside other work; TestDockerOnTestBedHost's two sut hosts each
// take one).
const startTimeout = 5 * time.Minute

// start launches nearnative in the background and returns its run ID once
// printed.
func (e *env) start(args ...string) (*exec.Cmd, runid.ID, *bytes.Buffer) {
	e.t.Helper()
	c := e.cmd(args...)
	var stdout bytes.Buffer
	c.Stdout = &stdout
	pr, pw, _ := os.Pipe()
	c.Stderr = pw
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	pw.Close()
	ids := make(chan runid.ID, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := runLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				ids <- runid.ID(m[1])
				sent = true
			}
		}
	}()
	select {
	case id := <-ids:
		return c, id, &stdout
	case <-time.After(startTimeout):
		c.Process.Kill()
		e.t.Fatalf("nearnative printed no run ID within %v", startTimeout)
	}
	return nil, "", nil
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
}

const allPlatforms = "[native, docker-nat, docker-proxy, docker-bridge, docker-host]"

// TestRedisStudyAllPlatforms runs a short real Redis study on every
// platform and checks the table, the JSON and the stored run.
func TestRedisStudyAllPlatforms(t *testing.T) {
	e := newEnv(t)
	study := e.studyFile(`name: e2e-redis
description: short real study
rounds: 2
min_pairs: 2
warmup: 1
trial: 1s
platforms: ` + allPlatforms + `
workloads:
  - workload: redis
    params: {clients: 50}
`)
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	out, errOut, code := e.run("run", study, "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"ops_per_sec (ops/s, higher is better)", "cpu_us_per_op (us, lower is better)", "docker-proxy", "baseline",
		"client: netns veth MTU 1500 (docker-bridge, docker-host, docker-nat, native); host loopback (docker-proxy)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		RunID       string          `json:"run_id"`
		Study       string          `json:"study"`
		Baseline    string          `json:"baseline"`
		Environment json.RawMessage `json:"environment"`
		Results     []map[string]any
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Study != "e2e-redis" || doc.Baseline != "native" || len(doc.Environment) < 10 {
		t.Errorf("JSON header wrong: %s %s %s", doc.Study, doc.Baseline, doc.Environment)
	}
	seen := map[string]bool{}
	for _, r := range doc.Results {
		if r["metric"] != "ops_per_sec" {
			continue
		}
		p := r["platform"].(string)
		seen[p] = true
		if n := r["n"].(float64); n != 2 || r["pairs"].(float64) != 2 {
			t.Errorf("%s: n = %v, pairs %v, want 2 counted rounds", p, n, r["pairs"])
		}
		// Plausible on any machine: Redis SET over loopback or a bridge.
		if mean := r["mean"].(float64); mean < 1000 || mean > 5e6 {
			t.Errorf("%s: implausible mean %v ops/s", p, mean)
		}
		if p != "native" && (r["ratio_ci_low"] == nil || r["ratio_ci_high"] == nil) {
			t.Errorf("%s: no CI", p)
		}
	}
	if len(seen) != 5 {
		t.Errorf("JSON covers platforms %v, want 5", seen)
	}
	st := e.store()
	r, err := st.Run(context.Background(), doc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "done" || r.Trials != 15 {
		t.Errorf("stored run: status %s, %d trials; want done, 15", r.Status, r.Trials)
	}
	trials, _ := st.Trials(context.Background(), r.ID)
	for _, tr := range trials {
		if len(tr.Commands) < 2 || !strings.Contains(strings.Join(tr.Commands, " "), "redis-benchmark") {
			t.Errorf("trial %d/%s records no client command: %v", tr.Round, tr.Platform, tr.Commands)
		}
	}
	// show re-renders the same tables from the store.
	shown, _, code := e.run("show", doc.RunID)
	if code != 0 || shown != out {
		t.Errorf("show differs from the run's own output (exit %d):\n%s\n---\n%s", code, shown, out)
	}
	list, _, _ := e.run("runs")
	if !strings.Contains(list, doc.RunID) {
		t.Errorf("runs does not list %s:\n%s", doc.RunID, list)
	}
	if left := leftovers(t, runid.ID(doc.RunID)); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestKillCleanupResume SIGKILLs a run mid-trial, checks that cleanup removes
// everything it made, and that --resume completes the run without repeating
// stored trials.
func TestKillCleanupResume(t *testing.T) {
	e := newEnv(t)
	study := e.studyFile(`name: e2e-kill
description: killed and resumed
rounds: 2
min_pairs: 2
warmup: 1
trial: 2s
platforms: [native, docker-nat, {name: native-limited, base: native, options: {cpus: 1.5}}]
workloads:
  - workload: redis
    params: {clients: 50}
`)
	c, id, _ := e.start("run", study)
	st := e.store()
	ctx := context.Background()
	// Kill once two trials are stored and the next one has made something.
	waitFor(t, "two stored trials and a live server", 120*time.Second, func() bool {
		r, err := st.Run(ctx, string(id))
		return err == nil && r.Trials >= 2 && len(leftovers(t, id)) > 0
	})
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	before, err := st.Trials(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, id); len(left) == 0 {
		t.Fatal("nothing left after SIGKILL: the test did not kill mid-trial")
	}
	if left := networkLeftovers(id); len(left) == 0 {
		t.Fatal("no client host left after SIGKILL: the run made none, or the test cannot see it")
	}
	// Only this run: other packages' integration tests run at the same time
	// and their resources are not ours to sweep.
	out, errOut, code := e.run("cleanup", string(id))
	if code != 0 || !strings.Contains(out, "removed ") {
		t.Fatalf("cleanup exit %d:\n%s\n%s", code, out, errOut)
	}
	if left := leftovers(t, id); len(left) > 0 {
		t.Fatalf("cleanup left: %v", left)
	}
	out, _, _ = e.run("cleanup", string(id))
	if !strings.Contains(out, "nothing to clean up") {
		t.Errorf("second cleanup should find nothing:\n%s", out)
	}

	out, errOut, code = e.run("run", "--resume", string(id))
	if code != 0 {
		t.Fatalf("resume exit %d:\n%s\n%s", code, out, errOut)
	}
	after, err := st.Trials(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 9 {
		t.Errorf("resumed run has %d trials, want 3 rounds x 3 platforms = 9", len(after))
	}
	type key struct {
		round    int
		platform string
	}
	seen := map[key]store.Trial{}
	for _, tr := range after {
		k := key{tr.Round, tr.Platform}
		if _, dup := seen[k]; dup {
			t.Errorf("trial %v stored twice", k)
		}
		seen[k] = tr
	}
	for _, b := range before {
		a := seen[key{b.Round, b.Platform}]
		if !a.Started.Equal(b.Started) {
			t.Errorf("trial %d/%s was repeated by the resume", b.Round, b.Platform)
		}
	}
	r, _ := st.Run(ctx, string(id))
	if r.Status != "done" {
		t.Errorf("resumed run status %s, want done", r.Status)
	}
}

// TestInterruptIsGraceful sends one SIGINT, SIGTERM or SIGHUP: the run
// stops, removes what it made, is stored as interrupted and exits 130.
func TestInterruptIsGraceful(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				// nearnative keeps an inherited ignored SIGHUP or SIGINT
				// ignored (TestSIGHUPIgnoredStaysIgnored), and so does
				// the run this test starts.
				t.Skipf("%v is ignored by whoever started the tests (nohup, or a background job): nearnative rightly ignores it too", sig)
			}
			e := newEnv(t)
			study := e.studyFile(`name: e2e-int
description: interrupted
rounds: 2
min_pairs: 2
trial: 20s
platforms: [docker-bridge]
baseline: docker-bridge
workloads:
  - workload: redis
    params: {clients: 50}
`)
			c, id, _ := e.start("run", study)
			waitFor(t, "a container", 60*time.Second, func() bool { return len(containersOf(t, id)) > 0 })
			c.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 130 {
					t.Errorf("exit after %v: %v, want code 130", sig, err)
				}
			case <-time.After(30 * time.Second):
				c.Process.Kill()
				t.Fatalf("nearnative did not stop within 30 s of %v", sig)
			}
			if left := leftovers(t, id); len(left) > 0 {
				t.Errorf("%v left: %v", sig, left)
			}
			r, err := e.store().Run(context.Background(), string(id))
			if err != nil || r.Status != "interrupted" {
				t.Errorf("run status %q (%v), want interrupted", r.Status, err)
			}
		})
	}
}

// TestBadInput: one clear line, a non-zero exit, nothing stored.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	badStudy := e.studyFile("name: bad\nrounds: 5\nplatforms: [native]\nworkloads:\n  - workload: redis\n    params: {clients: many}\n")
	fewRounds := e.studyFile("name: bad\nrounds: 3\nplatforms: [native]\nworkloads:\n  - workload: redis\n")
	unknownKey := e.studyFile("name: bad\nrounds: 3\nplatfroms: [native]\n")
	unknownPlat := e.studyFile("name: bad\nplatforms: [native, docker-natt]\nworkloads: [{workload: redis}]\n")
	badMTU := e.studyFile("name: bad\nclient: netns\nclient_mtu: 100000\nplatforms: [native]\nworkloads: [{workload: redis}]\n")
	// docker0's subnet is routed on every machine the tests run on.
	taken := e.studyFile("name: bad\nclient_subnet: 172.17.0.0/30\nplatforms: [native]\nworkloads: [{workload: redis}]\n")
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown study", []string{"run", "nosuchstudy"}, 2, []string{"no built-in study or file named", "redis"}},
		{"bad param", []string{"run", badStudy}, 2, []string{badStudy + ":6:", "clients", "not an integer"}},
		{"unknown key", []string{"run", unknownKey}, 2, []string{unknownKey + ":3:", "platfroms"}},
		{"unknown platform", []string{"run", unknownPlat}, 2, []string{unknownPlat + ":2:", "docker-natt"}},
		{"unknown flag", []string{"run", "redis", "--roundz", "3"}, 2, []string{"unknown flag"}},
		{"bad db", []string{"--db", "/proc/nonexistent/x.db", "runs"}, 3, []string{"cannot open result database"}},
		{"unknown run", []string{"show", "20200101-000000-abcd"}, 2, []string{"no run matches"}},
		{"bad cleanup id", []string{"cleanup", "xyz"}, 2, []string{"not a run ID"}},
		{"unknown platform flag", []string{"run", "redis", "--quick", "--platforms", "native,vmware"}, 2, []string{"vmware"}},
		{"no verdict possible", []string{"run", fewRounds}, 2, []string{fewRounds + ":2:", "min_pairs: 5 is above rounds (3)"}},
		{"rounds below min_pairs", []string{"run", "redis", "--rounds", "4"}, 2, []string{"--rounds 4", "min_pairs (5)"}},
		{"client_mtu out of range", []string{"run", badMTU}, 2, []string{badMTU + ":3:", "client_mtu 100000: want 576 to 65535"}},
		{"unknown client", []string{"run", "redis", "--quick", "--client", "vm"}, 2, []string{`--client "vm": want netns or host`}},
		{"client subnet taken", []string{"run", taken, "--no-wait"}, 2, []string{"client_subnet 172.17.0.0/30 collides with this machine's routes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := e.run(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 {
				t.Errorf("want one line on stderr, got %d:\n%s", len(lines), errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
	runs, _, _ := e.run("runs")
	if !strings.Contains(runs, "no runs stored") {
		t.Errorf("bad input stored something:\n%s", runs)
	}
}

// TestRemoteDockerHostRefused: a DOCKER_HOST on another machine is refused
// with one line and exit 3 before anything starts.
func TestRemoteDockerHostRefused(t *testing.T) {
	e := newEnv(t)
	c := e.cmd("run", "redis", "--quick", "--platforms", "native,docker-nat")
	c.Env = append(c.Env, "DOCKER_HOST=tcp://192.0.2.10:2376")
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3\nstderr: %s", err, errb.String())
	}
	if lines := strings.Split(strings.TrimSpace(errb.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "DOCKER_HOST=tcp://192.0.2.10:2376") {
		t.Errorf("want one line naming DOCKER_HOST, got:\n%s", errb.String())
	}
	if runs, _, _ := e.run("runs"); !strings.Contains(runs, "no runs stored") {
		t.Errorf("a refused run stored something:\n%s", runs)
	}
}

// TestTwoRunsMeasureOneAfterTheOther starts two runs together: the second
// waits for the machine's measuring lock, says which run holds it, and
// measures only after the first has finished; a third with --no-wait exits
// 3 at once.
func TestTwoRunsMeasureOneAfterTheOther(t *testing.T) {
	e := newEnv(t)
	study := e.studyFile(`name: e2e-lock
rounds: 2
min_pairs: 2
warmup: 0
trial: 1s
platforms: [native, {name: native-b, base: native}]
workloads:
  - workload: redis
    params: {clients: 50}
`)
	first, id1, _ := e.start("run", study)
	second := e.cmd("run", study)
	var out2, err2 bytes.Buffer
	second.Stdout, second.Stderr = &out2, &err2
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	noWait, noWaitErr, code := e.run("run", study, "--no-wait")
	if code != 3 || !strings.Contains(noWaitErr, "the machine is being measured by run "+string(id1)) {
		t.Errorf("--no-wait while busy: exit %d, stderr %q (stdout %q); want 3 naming run %s", code, noWaitErr, noWait, id1)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("second run: %v\n%s", err, err2.String())
	}
	if !strings.Contains(err2.String(), "waiting: the machine is being measured by run "+string(id1)) || !strings.Contains(err2.String(), "this run is next in line") {
		t.Errorf("the second run did not say whom it waited for and its place:\n%s", err2.String())
	}
	st := e.store()
	runs, err := st.Runs(context.Background())
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs stored (%v), want 2: the --no-wait run stores nothing", len(runs), err)
	}
	var firstEnd time.Time
	trials1, _ := st.Trials(context.Background(), id1)
	for _, tr := range trials1 {
		if end := tr.Started.Add(tr.Duration); end.After(firstEnd) {
			firstEnd = end
		}
	}
	for _, r := range runs {
		if r.ID == id1 {
			continue
		}
		trials2, _ := st.Trials(context.Background(), r.ID)
		for _, tr := range trials2 {
			if tr.Started.Before(firstEnd) {
				t.Errorf("run %s trial round %d on %s started %v, before the first run's last trial ended (%v)", r.ID, tr.Round, tr.Platform, tr.Started, firstEnd)
			}
		}
	}
}
