package studies

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestFiles checks that every embedded file is a study named after its file;
// package study parses and validates them.
func TestFiles(t *testing.T) {
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"redis.yaml": true, "aa.yaml": true, "cost.yaml": true, "redis-scaleout.yaml": true}
	nameLine := regexp.MustCompile(`(?m)^name: (\S+)$`)
	for _, e := range entries {
		delete(want, e.Name())
		data, err := fs.ReadFile(FS, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		m := nameLine.FindSubmatch(data)
		if m == nil || string(m[1]) != strings.TrimSuffix(e.Name(), ".yaml") {
			t.Errorf("%s: want a line \"name: %s\"", e.Name(), strings.TrimSuffix(e.Name(), ".yaml"))
		}
	}
	for name := range want {
		t.Errorf("%s is missing", name)
	}
}
