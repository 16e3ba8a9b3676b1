package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"one sut of two", Config{Dir: "d", Tag: "tb", Hosts: 2}, ""},
		{"one sut of three", Config{Dir: "d", Tag: "tb", Hosts: 3, Suts: 1}, ""},
		{"two suts of three", Config{Dir: "d", Tag: "tb", Hosts: 3, Suts: 2}, ""},
		{"two suts of two", Config{Dir: "d", Tag: "tb", Hosts: 2, Suts: 2}, "want 1, or 2 of 3 hosts"},
		{"three suts", Config{Dir: "d", Tag: "tb", Hosts: 3, Suts: 3}, "want 1, or 2 of 3 hosts"},
		{"negative suts", Config{Dir: "d", Tag: "tb", Hosts: 3, Suts: -1}, "want 1, or 2 of 3 hosts"},
		{"four hosts", Config{Dir: "d", Tag: "tb", Hosts: 4}, "want 2 or 3"},
		{"bad tag", Config{Dir: "d", Tag: "TB", Hosts: 2}, "tag"},
		{"no dir", Config{Tag: "tb", Hosts: 2}, "no directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", err, c.want)
			}
		})
	}
}

// TestSutPaths: each sut host's dockerd has its own run directory and data
// root, and no test bed's tag can name another's.
func TestSutPaths(t *testing.T) {
	a := Config{Tag: "tb"}
	b := Config{Tag: "tb2"}
	seen := map[string]string{}
	for _, c := range []Config{a, b} {
		for k := 0; k < 2; k++ {
			for _, p := range []string{c.runDirOf(k), c.dockerRootOf(k)} {
				if who, dup := seen[p]; dup {
					t.Errorf("%s used by %s and by tag %s host %d", p, who, c.Tag, k)
				}
				seen[p] = c.Tag
			}
			if n := len(c.DockerSocketOf(k)); n >= 108 {
				t.Errorf("socket %s: %d bytes, over a unix socket path's limit", c.DockerSocketOf(k), n)
			}
		}
	}
	if a.DockerSocket() != "/run/nntb-tb/docker.sock" || a.DockerRoot() != "/var/lib/nearnative/testbed/tb/docker" {
		t.Errorf("the first sut host's paths moved: %s %s (images kept by earlier test beds would be lost)", a.DockerSocket(), a.DockerRoot())
	}
}

// TestRuntimesOnly: a test-bed dockerd gets this machine's registered OCI
// runtimes and nothing else of its daemon.json.
func TestRuntimesOnly(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, content, want string
	}{
		{"runtimes and more", `{"runtimes": {"crun": {"path": "/usr/bin/crun"}}, "bip": "10.9.0.1/24", "log-level": "debug"}`, `{"runtimes":{"crun":{"path":"/usr/bin/crun"}}}`},
		{"no runtimes", `{"bip": "10.9.0.1/24"}`, `{}`},
		{"not json", `{runtimes`, `{}`},
		{"missing", "", `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if c.content != "" {
				if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.TrimSpace(string(runtimesOnly(path))); got != c.want {
				t.Errorf("runtimesOnly = %s, want %s", got, c.want)
			}
		})
	}
}
