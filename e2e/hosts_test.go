package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testbed"
)

// TestStudiesOnTestBedHosts runs redis and redis-scaleout with --hosts on
// a test bed of three hosts (network namespaces with an sshd each): the
// servers on the sut host, the load on the two driver hosts. The run is
// stored here with the hosts' lines and the test-bed label in its table,
// each server on the sut host by its notes (the scale-out's twemproxy and
// HAProxy beside the driver), and `cleanup --hosts` finds nothing of it
// on any host afterwards.
func TestStudiesOnTestBedHosts(t *testing.T) {
	e := newEnv(t)
	if err := testbed.Check(); err != nil {
		t.Skip(err)
	}
	cfg := testbed.Config{Dir: t.TempDir(), Tag: fmt.Sprintf("e%02d", rand.IntN(100)), Hosts: 3}
	hosts, err := testbed.Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testbed.Down(context.Background(), cfg) })
	sut, d1, d2 := cfg.Tag+"1", cfg.Tag+"2", cfg.Tag+"3"
	study := e.studyFile(`name: e2e-hosts
rounds: 2
min_pairs: 2
warmup: 0
trial: 1s
platforms: [native, {name: native-b, base: native}]
workloads:
  - workload: redis
    params: {clients: 10}
  - workload: redis-scaleout
    params: {keyspace: 20000, warmup: 200ms, clients: 10}
`)
	out, errOut, run := e.runOnHosts(study, hosts)
	for _, want := range []string{
		"status done",
		"hosts: roles: servers on sut host " + sut,
		"load driver on driver hosts " + d1,
		"hosts: clock: host " + sut,
		"hosts: test bed: the hosts are network namespaces of one machine",
		"client: driver hosts " + d1,
		"on sut host " + sut + ", listening on redis",
		"redis-scaleout  scale-out",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"started i0-redis-0: process", "on sut host " + sut, "on driver host " + d1} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the progress lacks %q", want)
		}
	}
	if !strings.Contains(out, d2) {
		t.Errorf("the second driver host %s carries none of the load:\n%s", d2, out)
	}
	clean, cerr, code := e.run("cleanup", "--hosts", hosts, string(run))
	if code != 0 {
		t.Fatalf("cleanup --hosts: exit %d: %s", code, cerr)
	}
	for _, h := range []string{sut, d1, d2} {
		if !strings.Contains(clean, "host "+h+": nothing to clean up") {
			t.Errorf("cleanup --hosts on %s after a finished run:\n%s", h, clean)
		}
	}
	if left := leftovers(t, run); len(left) > 0 {
		t.Errorf("the run left behind: %v", left)
	}
}

// TestDockerOnTestBedHost runs redis and redis-scaleout on docker-nat and
// docker-host on the test bed's sut host, whose own dockerd (in its namespace) is driven
// through the SSH connection: the image is copied there from this
// machine's engine, each container is published on (or listens at) the
// sut host's address, and the load comes from the driver host. A run
// killed mid-trial leaves its container on that engine, and `cleanup
// --hosts` removes it there.
func TestDockerOnTestBedHost(t *testing.T) {
	e := newEnv(t)
	if err := testbed.Check(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath(testbed.Dockerd); err != nil {
		t.Skip("dockerd not installed")
	}
	// Two sut hosts, each with a dockerd: the runs below use the first,
	// the topology at the end both (one test bed for both, as copying
	// the image to a fresh engine is most of the time).
	cfg := testbed.Config{Dir: t.TempDir(), Tag: fmt.Sprintf("d%02d", rand.IntN(100)), Hosts: 3, Suts: 2, Docker: true, Purge: true}
	hosts, err := testbed.Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testbed.Down(context.Background(), cfg) })
	sut := cfg.Tag + "1"
	f, err := hostfile.Load(hosts)
	if err != nil {
		t.Fatal(err)
	}
	sutAddr := f.Hosts[0].Address
	// The containers of run on the sut host's engine.
	onSUT := func(run runid.ID) []string {
		out, err := exec.Command("docker", "-H", "unix://"+cfg.DockerSocket(), "ps", "-a", "--format", "{{.Names}}",
			"--filter", "label="+runid.Label+"="+string(run)).Output()
		if err != nil {
			t.Fatalf("listing the sut host's containers: %v", err)
		}
		return strings.Fields(string(out))
	}
	study := e.studyFile(`name: e2e-hosts-docker
rounds: 2
min_pairs: 2
warmup: 0
trial: 1s
platforms: [native, docker-nat, docker-host]
workloads:
  - workload: redis
    params: {clients: 10}
  - workload: redis-scaleout
    params: {keyspace: 20000, warmup: 200ms, clients: 10}
`)
	// Killed mid-trial: the container stays on the sut host's engine
	// until cleanup --hosts.
	c, killed, _ := e.start("run", study, "--hosts", hosts)
	waitFor(t, "a container of the run on the sut host", startTimeout, func() bool { return len(onSUT(killed)) > 0 })
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	if left := onSUT(killed); len(left) == 0 {
		t.Fatal("no container left on the sut host after SIGKILL: the test did not kill mid-trial")
	}
	clean, cerr, code := e.run("cleanup", "--hosts", hosts, string(killed))
	if code != 0 || !strings.Contains(clean, "host "+sut+": removed") || !strings.Contains(clean, "container "+runid.Prefix+string(killed)) {
		t.Fatalf("cleanup --hosts after the kill: exit %d, stdout:\n%s\nstderr:\n%s", code, clean, cerr)
	}
	if left := onSUT(killed); len(left) > 0 {
		t.Fatalf("cleanup --hosts left %v on the sut host", left)
	}
	e.run("cleanup", string(killed)) // this machine's client-side leftovers

	out, errOut, run := e.runOnHosts(study, hosts)
	for _, want := range []string{
		"status done",
		"docker-nat: container ",
		"on sut host " + sut + " (dockerd ",
		"), on docker0 ",
		"published " + sutAddr + ":",
		"docker-host: container ",
		"), on the host network, listening " + sutAddr + ":",
		"server CPU: the container's cgroup on sut host " + sut,
		"hosts: test bed",
		"redis-scaleout  scale-out",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"host " + sut + ": making sure its Docker engine",
		// The scale-out's Redis in containers there (twemproxy and
		// HAProxy beside the driver reach them at published ports).
		"started i0-redis-0: container ",
		"-docker-nat-i0-redis-0 on sut host " + sut,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the progress lacks %q:\n%s", want, errOut)
		}
	}
	if left := onSUT(run); len(left) > 0 {
		t.Errorf("the run left %v on the sut host's engine", left)
	}
	if left := leftovers(t, run); len(left) > 0 {
		t.Errorf("the run left behind: %v", left)
	}
	spreadOverSUTs(t, e, cfg, hosts, f)
}

// spreadOverSUTs runs a topology whose roles are placed on the test bed's
// two sut hosts, each with its own dockerd: HAProxy's container on the
// first reaches the nginx containers on the second at that host's
// address, where only their ports are published, and the load comes from
// the third host. A trial fails unless HAProxy's statistics show every
// backend served.
func spreadOverSUTs(t *testing.T, e *env, cfg testbed.Config, hosts string, f *hostfile.File) {
	t.Helper()
	sut1, sut2 := cfg.Tag+"1", cfg.Tag+"2"
	addr1, addr2 := f.Hosts[0].Address, f.Hosts[1].Address
	b, err := os.ReadFile(hosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, append(b, []byte("place: {lb: "+sut1+", web: "+sut2+"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	study := e.studyFile(`name: e2e-hosts-docker-spread
rounds: 2
min_pairs: 2
warmup: 0
trial: 1s
platforms: [native, docker-nat, docker-host]
workloads:
  - workload: http-max
    params: {limit: 1s, lb: haproxy, backends: 2, start_rate: 50, max_steps: 2, coarse_interval: 500ms}
`)
	out, _, run := e.runOnHosts(study, hosts)
	for _, want := range []string{
		"status done",
		// HAProxy on the first sut host, the nginx servers on the second,
		// published there (docker-nat) or listening there (docker-host).
		"-docker-nat-i0-lb-0: i0-lb-0 at ",
		"i0-web-0: container ",
		"on sut host " + sut2 + " (dockerd ",
		"published " + addr2 + ":",
		"published " + addr1 + ":",
		"on sut host " + sut1 + " (dockerd ",
		"on the host network, listening " + addr2 + ":",
		"hosts: test bed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	// Every trial counted: one whose HAProxy sent no request to a backend
	// fails.
	for _, p := range []string{"native", "docker-nat", "docker-host"} {
		if !regexp.MustCompile(`(?m)^  ` + p + `\s+2\s`).MatchString(out) {
			t.Errorf("%s has not 2 counted trials:\n%s", p, out)
		}
	}
	for k, sock := range []string{cfg.DockerSocketOf(0), cfg.DockerSocketOf(1)} {
		left, err := exec.Command("docker", "-H", "unix://"+sock, "ps", "-a", "-q", "--filter", "label="+runid.Label+"="+string(run)).Output()
		if err != nil {
			t.Fatalf("listing sut host %d's containers: %v", k+1, err)
		}
		if len(strings.Fields(string(left))) > 0 {
			t.Errorf("the run left containers on sut host %d: %s", k+1, left)
		}
	}
	if left := leftovers(t, run); len(left) > 0 {
		t.Errorf("the run left behind: %v", left)
	}
}

// runOnHosts runs study with --hosts hosts, which must succeed, and
// returns its table, its progress and its run ID.
func (e *env) runOnHosts(study, hosts string) (out, errOut string, run runid.ID) {
	e.t.Helper()
	out, errOut, code := e.run("run", study, "--hosts", hosts)
	if code != 0 {
		e.t.Fatalf("run on the test bed: exit %d\nstderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	m := runLine.FindStringSubmatch(errOut)
	if m == nil {
		e.t.Fatalf("no run ID in:\n%s", errOut)
	}
	return out, errOut, runid.ID(m[1])
}
