package sysinfo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestParseDpkgSearch(t *testing.T) {
	out := `postgresql-15: /usr/lib/postgresql/15/bin/postgres
iproute2: /bin/ip
diversion by dash from: /bin/sh
diversion by dash to: /bin/sh.distrib
libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6
redis-server, redis-tools: /usr/share/doc/redis
dpkg-query: no path found matching pattern /usr/bin/ip
`
	want := map[string]string{
		"/usr/lib/postgresql/15/bin/postgres": "postgresql-15",
		"/bin/ip":                             "iproute2",
		"/lib/x86_64-linux-gnu/libc.so.6":     "libc6",
		"/usr/share/doc/redis":                "redis-server",
	}
	if got := ParseDpkgSearch([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestVersionLess(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{
			in:   []string{"/usr/lib/postgresql/15/bin/postgres", "/usr/lib/postgresql/9/bin/postgres", "/usr/lib/postgresql/13/bin/postgres"},
			want: []string{"/usr/lib/postgresql/9/bin/postgres", "/usr/lib/postgresql/13/bin/postgres", "/usr/lib/postgresql/15/bin/postgres"},
		},
		{in: []string{"b", "a", "a1", "a10", "a2"}, want: []string{"a", "a1", "a2", "a10", "b"}},
	}
	for _, tt := range tests {
		got := append([]string(nil), tt.in...)
		sort.Slice(got, func(i, j int) bool { return versionLess(got[i], got[j]) })
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("sorted %v = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestKnownToolsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range KnownTools {
		if s.Name == "" || s.Binary == "" || s.Package == "" {
			t.Errorf("incomplete entry %+v", s)
		}
		if seen[s.Name] {
			t.Errorf("duplicate %s", s.Name)
		}
		seen[s.Name] = true
	}
	for _, name := range []string{"redis-server", "redis-benchmark", "postgres", "pgbench", "fio", "iperf3",
		"sockperf", "gcc", "nginx", "haproxy", "nutcracker", "qemu-system-x86_64", "qemu-img",
		"debootstrap", "ip", "iptables", "ovs-vsctl", "dockerd"} {
		if !seen[name] {
			t.Errorf("KnownTools lacks %s", name)
		}
	}
}

func TestLookupToolsLive(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query: not a Debian system")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	// A hand-installed tool that prints its version on stderr and fails.
	handmade := filepath.Join(t.TempDir(), "nn-handmade")
	if err := os.WriteFile(handmade, []byte("#!/bin/sh\necho \"handmade 1.2\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specs := []ToolSpec{
		KnownTools[0], // redis-server
		{Name: "missing", Binary: "nn-no-such-tool", Package: "nn-no-such-package"},
		{Name: "missing-glob", Binary: "/nonexistent/*/bin/nn-no-such-tool", Package: "nn-no-such-package"},
		{Name: "sh", Binary: "sh", Package: "dash"},
		{Name: "handmade", Binary: handmade, Package: "nn-handmade", VersionArgs: []string{"--version"}},
	}
	start := time.Now()
	got := LookupTools(ctx, specs)
	t.Logf("lookups took %v", time.Since(start))
	if len(got) != len(specs) {
		t.Fatalf("got %d tools for %d specs", len(got), len(specs))
	}
	for i, tool := range got {
		if tool.Name != specs[i].Name {
			t.Errorf("result %d is %s, want %s (spec order)", i, tool.Name, specs[i].Name)
		}
	}

	redis := got[0]
	t.Logf("%+v", redis)
	want, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "redis-server").Output()
	if err != nil {
		t.Skipf("redis-server package not installed: %v", err)
	}
	if redis.Err != "" || redis.Package != "redis-server" || redis.Version != string(want) {
		t.Errorf("redis-server: %+v, want package redis-server version %s", redis, want)
	}
	if !strings.Contains(redis.BinaryVersion, "Redis server v=") {
		t.Errorf("redis-server binary version %q", redis.BinaryVersion)
	}
	for _, miss := range got[1:3] {
		if miss.Err != "not installed: apt-get install -y nn-no-such-package" || miss.Installed() {
			t.Errorf("missing tool: %+v", miss)
		}
	}
	if sh := got[3]; sh.Version == "" || sh.Err != "" || sh.BinaryVersion != "" {
		t.Errorf("sh (found through a symlink, never run): %+v", sh)
	}
	hm := got[4]
	if hm.BinaryVersion != "handmade 1.2" || hm.Version != "" ||
		!strings.HasPrefix(hm.Err, "package version unknown: no Debian package owns") || !hm.Installed() {
		t.Errorf("hand-installed tool: %+v", hm)
	}
}

func TestToolVersionsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tools := ToolVersions(ctx)
	if len(tools) != len(KnownTools) {
		t.Fatalf("got %d tools, want %d", len(tools), len(KnownTools))
	}
	for _, tool := range tools {
		if tool.Version != "" && tool.Err == "" {
			// A lookup may have won the race with cancellation only if
			// it finished; a version without error is then genuine.
			continue
		}
		if tool.Err == "" {
			t.Errorf("%s: no error after cancellation: %+v", tool.Name, tool)
		}
	}
}

// TestToolVersionNote: the note names the host's binary and its Debian
// package when the host has them, and falls back to what the tool's own
// output said when it does not.
func TestToolVersionNote(t *testing.T) {
	ctx := context.Background()
	missing := ToolVersion{Spec: ToolSpec{Name: "nope", Binary: "nn-no-such-tool", Package: "nn-no-such-tool", VersionArgs: []string{"--version"}}}
	if got, want := missing.Note(ctx, "nope 1.0 (from its output)"), "nn-no-such-tool --version: nope 1.0 (from its output)"; got != want {
		t.Errorf("missing tool: %q, want %q", got, want)
	}
	coreutils := ToolVersion{Spec: ToolSpec{Name: "true", Binary: "true", Package: "coreutils", VersionArgs: []string{"--version"}}}
	got := coreutils.Note(ctx, "unused")
	if !strings.HasPrefix(got, "true --version: true (GNU coreutils) ") || !strings.Contains(got, "(Debian coreutils ") || strings.Contains(got, "unused") {
		t.Errorf("host tool: %q, want true's version and its Debian package", got)
	}
}
