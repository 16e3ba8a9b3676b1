package vmagent

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "base", "1"), 0o700)
	os.WriteFile(filepath.Join(src, "base", "1", "data"), []byte("rows"), 0o600)
	os.WriteFile(filepath.Join(src, "PG_VERSION"), []byte("15\n"), 0o644)
	os.Symlink("PG_VERSION", filepath.Join(src, "link"))
	var buf bytes.Buffer
	if err := WriteTar(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := ExtractTar(&buf, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "base", "1", "data")); err != nil || string(b) != "rows" {
		t.Fatalf("data = %q, %v", b, err)
	}
	if st, _ := os.Stat(filepath.Join(dst, "base", "1", "data")); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", st.Mode().Perm())
	}
	if l, _ := os.Readlink(filepath.Join(dst, "link")); l != "PG_VERSION" {
		t.Errorf("symlink -> %q", l)
	}
}

// TestTarKeepsRootMode: the copied directory itself keeps its mode (a
// PostgreSQL data directory must be 0700 or 0750), whether the destination
// is new or already made by someone else with another mode.
func TestTarKeepsRootMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o700, 0o750, 0o755} {
		src := filepath.Join(t.TempDir(), "pgdata")
		os.Mkdir(src, 0o700)
		os.Chmod(src, mode)
		os.WriteFile(filepath.Join(src, "PG_VERSION"), []byte("15\n"), 0o600)
		for _, existing := range []bool{false, true} {
			var buf bytes.Buffer
			if err := WriteTar(&buf, src); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "copy")
			if existing {
				os.Mkdir(dst, 0o777)
			}
			if err := ExtractTar(&buf, dst); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != mode {
				t.Errorf("source %v, destination existing %v: copied root has mode %v", mode, existing, st.Mode().Perm())
			}
		}
	}
}

// TestTarKeepsOwners: extracted as root, a tree keeps its numeric owners.
func TestTarKeepsOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	src := t.TempDir()
	os.Mkdir(filepath.Join(src, "sessions"), 0o700)
	os.WriteFile(filepath.Join(src, "sessions", "s1"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(src, "page.php"), []byte("<?php"), 0o644)
	os.Lchown(filepath.Join(src, "sessions"), 33, 33)
	os.Lchown(filepath.Join(src, "sessions", "s1"), 33, 34)
	var buf bytes.Buffer
	if err := WriteTar(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := ExtractTar(&buf, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]uint32{"sessions": {33, 33}, "sessions/s1": {33, 34}, "page.php": {0, 0}} {
		st, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if got := [2]uint32{sys.Uid, sys.Gid}; got != want {
			t.Errorf("%s owned by %v, want %v", name, got, want)
		}
	}
}

func TestExtractRefusesEscape(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../evil", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	err := ExtractTar(&buf, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "leaves the destination") {
		t.Fatalf("ExtractTar = %v, want a refusal", err)
	}
}
