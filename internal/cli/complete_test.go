package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// complete asks the CLI for completions as a shell does (cobra's hidden
// __complete command) and returns the values offered.
func complete(t *testing.T, db string, words ...string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"__complete"}, words...)
	if db != "" {
		args = append([]string{"__complete", "--db", db}, words...)
	}
	if err := Run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %v\n%s", words, err, stderr.String())
	}
	var out []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		v, _, _ := strings.Cut(l, "\t")
		out = append(out, v)
	}
	return out
}

// TestCompletion: the shell completion offers study names, platform
// names, run IDs and a study's workloads and parameters, and the
// completion command writes a script.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	a, b := seedRuns(t, db, 1)
	has := func(got []string, want ...string) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				t.Errorf("completions %q lack %q", got, w)
			}
		}
	}
	has(complete(t, "", "run", "red"), "redis", "redis-scaleout")
	has(complete(t, "", "studies", "show", "mi"), "micro")
	has(complete(t, "", "run", "redis", "--platforms", "native,docker-"), "native,docker-nat", "native,docker-host")
	has(complete(t, "", "run", "cost", "--platforms", ""), "native-0.8cpu", "vm", "k8s-pod")
	has(complete(t, "", "run", "redis", "--workloads", "redis-set,"), "redis-set,redis-get")
	has(complete(t, "", "run", "redis", "--set", "redis-g"), "redis-get.")
	has(complete(t, "", "run", "redis", "--set", "redis-get.cl"), "redis-get.clients=", "redis-get.client_cpus=")
	has(complete(t, db, "show", ""), "last", string(a), string(b))
	has(complete(t, db, "compare", string(a), ""), string(b))
	has(complete(t, db, "export", "last", "--format", ""), "csv", "json")
	if got := complete(t, db, "cleanup", ""); len(got) != 2 || got[0] != string(b) {
		t.Errorf("cleanup takes a full run ID, newest first, not last: %q", got)
	}
	if got := complete(t, db, "show", string(a), ""); len(got) != 0 {
		t.Errorf("show takes one run, yet a second is offered: %q", got)
	}
	// No database: no IDs, and none is created.
	missing := filepath.Join(dir, "none.db")
	has(complete(t, missing, "report", ""), "last")
	if m, _ := filepath.Glob(missing + "*"); len(m) > 0 {
		t.Errorf("completing created %v", m)
	}

	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"completion", "bash"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "__start_nearnative") {
		t.Errorf("completion bash: %v, %.100q", err, stdout.String())
	}
}
