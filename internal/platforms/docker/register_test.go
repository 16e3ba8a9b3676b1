package docker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMergeRuntimes(t *testing.T) {
	rts := map[string]RuntimeEntry{
		"runsc": {Path: "/usr/bin/runsc", Args: []string{"--platform=ptrace"}},
		"crun":  {Path: "/usr/bin/crun"},
	}
	// The user's settings and runtimes stay; ours are added.
	conf := []byte(`{"log-level": "warn", "runtimes": {"kata": {"path": "/usr/bin/kata"}, "crun": {"path": "/opt/crun"}}}`)
	out, added, kept, err := MergeRuntimes(conf, rts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(added, ",") != "runsc" || strings.Join(kept, ",") != "crun" {
		t.Errorf("added %v kept %v, want runsc added and the user's crun kept", added, kept)
	}
	var doc struct {
		LogLevel string                  `json:"log-level"`
		Runtimes map[string]RuntimeEntry `json:"runtimes"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if doc.LogLevel != "warn" || doc.Runtimes["kata"].Path != "/usr/bin/kata" || doc.Runtimes["crun"].Path != "/opt/crun" ||
		doc.Runtimes["runsc"].Args[0] != "--platform=ptrace" {
		t.Errorf("merged: %s", out)
	}
	// A second merge changes nothing.
	again, added, _, err := MergeRuntimes(out, rts)
	if err != nil || len(added) > 0 || string(again) != string(out) {
		t.Errorf("second merge: added %v, err %v", added, err)
	}
	// No file yet.
	out, added, _, err = MergeRuntimes(nil, rts)
	if err != nil || len(added) != 2 || !strings.Contains(string(out), `"crun"`) {
		t.Errorf("from nothing: %s %v %v", out, added, err)
	}
	if _, _, _, err := MergeRuntimes([]byte(`[1]`), rts); err == nil {
		t.Error("a configuration that is not an object was accepted")
	}
}

func TestWriteDaemonConfigBackup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.json")
	os.WriteFile(path, []byte(`{"a": 1}`), 0o644)
	backup, err := WriteDaemonConfig(path, []byte(`{"a": 1, "runtimes": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backup); string(b) != `{"a": 1}` {
		t.Errorf("backup %s holds %q", backup, b)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "runtimes") {
		t.Errorf("file holds %q", b)
	}
}

func TestDaemonConfigPath(t *testing.T) {
	root := t.TempDir()
	write := func(pid, comm, cmdline string) {
		d := filepath.Join(root, pid)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "comm"), []byte(comm+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "cmdline"), []byte(strings.ReplaceAll(cmdline, " ", "\x00")+"\x00"), 0o644)
	}
	if _, _, found := DaemonConfigPath(root); found {
		t.Error("found a dockerd in an empty /proc")
	}
	// A test bed host's dockerd, on a socket of its own, is not the one.
	write("9", "dockerd", "/usr/sbin/dockerd --config-file /tmp/tb/dockerd.json -H unix:///run/nntb-tb/docker.sock")
	if _, _, found := DaemonConfigPath(root); found {
		t.Error("took a dockerd on another socket for the machine's")
	}
	write("10", "dockerd", "dockerd --config-file /etc/nn/d.json --add-runtime=x=/bin/x")
	path, flags, found := DaemonConfigPath(root)
	if !found || path != "/etc/nn/d.json" || !flags {
		t.Errorf("DaemonConfigPath = %s %v %v", path, flags, found)
	}
}
