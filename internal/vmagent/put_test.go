package vmagent

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
