package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

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
	out, errOut, code := e.run("run", study, "--hosts", hosts)
	if code != 0 {
		t.Fatalf("run on the test bed: exit %d\nstderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	m := runLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no run ID in:\n%s", errOut)
	}
	run := runid.ID(m[1])
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
