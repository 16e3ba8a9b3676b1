package datacache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

type meta struct{ N int }

func TestEnsureBuildsOnce(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "x")}
	var builds atomic.Int32
	build := func(ctx context.Context, dir string) (any, error) {
		builds.Add(1)
		return meta{N: 7}, os.WriteFile(filepath.Join(dir, "data"), []byte("d"), 0o644)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m meta
			dir, _, err := c.Ensure(context.Background(), "k1", &m, build)
			if err == nil && (m.N != 7 || dir != c.Path("k1")) {
				err = errors.New("wrong entry")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(c.Path("k1"), "data")); err != nil {
		t.Error(err)
	}
}

func TestEnsureCrashRule(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	stale := filepath.Join(c.Dir, ".build-k-123")
	other := filepath.Join(c.Dir, ".build-kk-123")
	for _, d := range []string{stale, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var m meta
	_, _, err := c.Ensure(context.Background(), "k", &m, func(context.Context, string) (any, error) {
		return nil, errors.New("load failed")
	})
	if err == nil || !strings.Contains(err.Error(), "load failed") {
		t.Fatalf("failed build: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(c.Dir, ".build-k-*"))
	if len(left) != 0 {
		t.Errorf("after a failed build: %v left", left)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another key's build went: %v", err)
	}
	if ok, err := c.Lookup("k", &m); ok || err != nil {
		t.Errorf("Lookup after a failed build: %v %v", ok, err)
	}
	if _, err := c.Lookup("../k", &m); err == nil {
		t.Error("a key with a slash was taken")
	}
}

func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	os.Chmod(src, 0o700)
	os.MkdirAll(filepath.Join(src, "sub"), 0o700)
	os.WriteFile(filepath.Join(src, "sub", "a"), []byte("aaaa"), 0o600)
	os.WriteFile(filepath.Join(src, "pid"), []byte("1"), 0o600)
	os.WriteFile(filepath.Join(src, "base"), []byte("bb"), 0o600)
	os.Symlink("sub/a", filepath.Join(src, "ln"))
	for _, tc := range []struct {
		name  string
		o     CopyOptions
		files int
		mode  map[string]os.FileMode
	}{
		{"source modes", CopyOptions{UID: -1}, 4, map[string]os.FileMode{".": 0o700, "sub": 0o700, "sub/a": 0o600}},
		{"set modes", CopyOptions{UID: -1, RootMode: 0o750, DirMode: 0o755, FileMode: 0o640, Skip: func(r string) bool { return r == "pid" }},
			3, map[string]os.FileMode{".": 0o750, "sub": 0o755, "sub/a": 0o640}},
		{"links", CopyOptions{UID: os.Getuid(), GID: os.Getgid(), Link: func(r string) bool { return r == "base" }},
			4, map[string]os.FileMode{"base": 0o600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "copy")
			rep, err := CopyTree(src, dst, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Files != tc.files {
				t.Errorf("%d files, want %d", rep.Files, tc.files)
			}
			for rel, want := range tc.mode {
				fi, err := os.Stat(filepath.Join(dst, rel))
				if err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: %v %v, want %v", rel, fi.Mode().Perm(), err, want)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dst, "ln")); string(b) != "aaaa" {
				t.Errorf("link reads %q", b)
			}
			if _, err := CopyTree(src, dst, tc.o); err == nil || !strings.Contains(err.Error(), "not empty") {
				t.Errorf("copy onto a full dir: %v", err)
			}
		})
	}
	n, files, err := Size(src)
	if err != nil || n != 7 || files != 3 {
		t.Errorf("Size = %d %d %v, want 7 3", n, files, err)
	}
}

func TestAdopt(t *testing.T) {
	root := t.TempDir()
	old := filepath.Join(root, "old")
	os.MkdirAll(filepath.Join(old, "k"), 0o755)
	os.WriteFile(filepath.Join(old, "k", "template.json"), []byte(`{"N": 3}`), 0o644)
	c := Cache{Dir: filepath.Join(root, "cache", "x")}
	if ok, err := c.Adopt(context.Background(), old, "missing", "template.json"); ok || err != nil {
		t.Errorf("Adopt of a missing entry: %v %v", ok, err)
	}
	if ok, err := c.Adopt(context.Background(), old, "k", "template.json"); !ok || err != nil {
		t.Fatalf("Adopt: %v %v", ok, err)
	}
	var m meta
	if ok, err := c.Lookup("k", &m); !ok || err != nil || m.N != 3 {
		t.Errorf("Lookup after Adopt: %v %v %+v", ok, err, m)
	}
	if _, err := os.Stat(filepath.Join(old, "k")); err == nil {
		t.Error("the old entry is still there")
	}
}
