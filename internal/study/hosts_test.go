package study

import (
	"strings"
	"testing"
)

// TestHostsKey: a study names its hosts file relative to itself; the
// stored study keeps the key; a wrong type is refused with file:line.
func TestHostsKey(t *testing.T) {
	src := "name: x\nhosts: lab/hosts.yaml\nplatforms: [native]\nworkloads:\n  - workload: redis\n"
	s, err := Parse([]byte(src), "/etc/studies/x.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.HostsPath(); got != "/etc/studies/lab/hosts.yaml" {
		t.Fatalf("HostsPath %q", got)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "hosts: lab/hosts.yaml") {
		t.Fatalf("stored study lost its hosts:\n%s", y)
	}
	s.Hosts = "/abs/hosts.yaml"
	if got := s.HostsPath(); got != "/abs/hosts.yaml" {
		t.Fatalf("absolute HostsPath %q", got)
	}
	_, err = Parse([]byte(strings.Replace(src, "hosts: lab/hosts.yaml", "hosts: [a]", 1)), "x.yaml", testRegistry())
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:2: ") {
		t.Fatalf("got %v, want x.yaml:2", err)
	}
}
