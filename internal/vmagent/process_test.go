package vmagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcess: the server side the platforms share answers through the
// agent, and Stop keeps the output once.
func TestProcess(t *testing.T) {
	c, _ := testAgent(t)
	ctx := context.Background()
	dir := t.TempDir()
	argv := []string{"sh", "-c", "echo one; echo two; sleep 60"}
	pid, err := c.Start(ctx, Proc{Name: "srv", Dir: dir, Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "logs", "trial-srv.log")
	p := &Process{Agent: c, PID: pid, Argv: argv, LogPath: log, Grace: time.Second, Bound: 10 * time.Second}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.LogTail(ctx, 1), "two") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if tail := p.LogTail(ctx, 1); tail != "two" {
		t.Errorf("LogTail(1) = %q, want two", tail)
	}
	if err := p.Exited(ctx); err != nil {
		t.Errorf("Exited while running: %v", err)
	}
	if got := strings.Join(p.Command(), " "); got != strings.Join(argv, " ") {
		t.Errorf("Command = %q", got)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "one\ntwo") {
		t.Errorf("saved log %q, %v", b, err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := p.Exited(ctx); err == nil {
		t.Error("Exited after Stop: nil")
	}
}
