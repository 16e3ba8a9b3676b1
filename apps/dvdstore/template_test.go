package dvdstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	if err := CheckSpace(dir, 1, "a test"); err != nil {
		t.Errorf("1 byte: %v", err)
	}
	err := CheckSpace(dir, 1<<60, "the DVD Store template 1gb x1 seed 1")
	if err == nil || !strings.Contains(err.Error(), "the DVD Store template 1gb x1 seed 1 needs about") || !strings.Contains(err.Error(), "NEARNATIVE_HOME") {
		t.Errorf("an exabyte: %v", err)
	}
}

func TestReachable(t *testing.T) {
	dir := t.TempDir() // 0700, as os.MkdirTemp makes it
	target := filepath.Join(dir, "a", "data")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := Reachable(target)
	if err == nil || !strings.Contains(err.Error(), "chmod o+x "+dir) {
		t.Errorf("Reachable below a 0700 dir: %v", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := Reachable(target); err != nil && !strings.Contains(err.Error(), filepath.Dir(dir)) {
		t.Errorf("Reachable after chmod: %v", err)
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, "line "+strings.Repeat("x", i%3))
	}
	lines[29] = "FATAL:  could not write to file: No space left on device"
	if err := os.WriteFile(filepath.Join(dir, "template-"+BuildServerName+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := Builder{LogDir: dir}.logTail()
	if !strings.Contains(got, "No space left on device") || strings.Count(got, "\n  ") != 15 || !strings.Contains(got, "last lines of "+dir) {
		t.Errorf("logTail = %q", got)
	}
	if (Builder{}).logTail() != "" || (Builder{LogDir: t.TempDir()}).logTail() != "" {
		t.Error("logTail without a log is not empty")
	}
}
