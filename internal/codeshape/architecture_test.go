package codeshape

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// packageDirs lists the directories under internal/, apps/, cmd/ and bench/
// that hold a Go package (a non-test or test .go file), relative to root.
func packageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, top := range []string{"internal", "apps", "cmd", "bench"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				seen[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// TestArchitectureNamesEveryPackage: docs/architecture.md names every
// package directory (as `path` in backquotes, or in its layer table), so
// that a new package cannot arrive without saying what it owns.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dirs := packageDirs(t)
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories (%v): is root wrong?", len(dirs), dirs)
	}
	for _, d := range dirs {
		if !strings.Contains(doc, "`"+d+"`") {
			t.Errorf("docs/architecture.md does not name package %s: say what it owns (as `%s`)", d, d)
		}
	}
}
