package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root: the directory above that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// userDocs are the pages a user reads: README.md and every page under
// docs/, relative to root.
func userDocs(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// TestDocsCommandsParse: every `nearnative ...` command line in README.md
// and docs/ (code blocks and inline code) names a command that exists with
// flags that exist and take the values given.
func TestDocsCommandsParse(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, f := range userDocs(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range commandLines(f, string(data)) {
			n++
			if err := checkCommandLine(l.text); err != nil {
				t.Errorf("%s: `%s`: %v", l.where, l.text, err)
			}
		}
	}
	if n == 0 {
		t.Error("README.md and docs/ hold no nearnative command line: the reader is shown none?")
	}
	t.Logf("%d command lines checked", n)
}

// mdLink is an inline link or image target, [text](target "title"), or a
// reference definition, [label]: target.
var mdLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)

// TestDocsLinksResolve: every relative link in README.md and docs/ names a
// file or directory of the repository (a link out of it is broken for
// every reader but this machine's).
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	for _, f := range userDocs(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokenLinks(root, f, string(data)) {
			t.Error(b)
		}
	}
}

// brokenLinks returns a line for every relative link of file f (relative
// to root, text md) that does not resolve to a path inside root.
func brokenLinks(root, f, md string) []string {
	var out []string
	for i, line := range strings.Split(stripCode(md), "\n") {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1] + m[2]
			if target == "" || strings.HasPrefix(target, "#") || regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target) {
				continue // in-page anchors, http:, mailto:
			}
			target, _, _ = strings.Cut(target, "#")
			target, _, _ = strings.Cut(target, "?")
			path := filepath.Clean(filepath.Join(root, filepath.Dir(f), target))
			if rel, err := filepath.Rel(root, path); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				out = append(out, fmt.Sprintf("%s:%d: link %q leaves the repository", f, i+1, m[0]))
				continue
			}
			if _, err := os.Stat(path); err != nil {
				out = append(out, fmt.Sprintf("%s:%d: link %q: %v", f, i+1, m[0], err))
			}
		}
	}
	return out
}

// stripCode blanks fenced code blocks and code spans, keeping the lines,
// so that text shown as code is not read as a link.
func stripCode(md string) string {
	lines := strings.Split(md, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
			continue
		}
		lines[i] = inlineCode.ReplaceAllString(l, "``")
	}
	return strings.Join(lines, "\n")
}

// TestDocsCheckers: the checkers find what they are for (a test that cannot
// fail is no test).
func TestDocsCheckers(t *testing.T) {
	md := "Run `nearnative run redis --quick` or `nearnative run redis --quik`.\n" +
		"```\n$ sudo nearnative show last --json - | jq .\nnearnative: an error message\n" +
		"NEARNATIVE_HOME=/tmp/x nearnative studies show redis > my.yaml\nsource <(nearnative completion bash)\n" +
		"nearnative runz\nnearnative run redis --rounds N --trial=DURATION\nnearnative export RUN [--format csv|json] [-o FILE]\n```\n" +
		"\n    nearnative runs   # stored runs\n"
	var got []string
	for _, l := range commandLines("x.md", md) {
		got = append(got, l.where+" "+l.text)
	}
	want := []string{
		"x.md:1 nearnative run redis --quick", "x.md:1 nearnative run redis --quik",
		"x.md:3 nearnative show last --json -",
		"x.md:5 nearnative studies show redis > my.yaml", "x.md:6 nearnative completion bash)",
		"x.md:7 nearnative runz", "x.md:8 nearnative run redis --rounds N --trial=DURATION",
		"x.md:9 nearnative export RUN [--format csv|json] [-o FILE]",
		"x.md:12 nearnative runs # stored runs",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("command lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"nearnative run redis --quick", true},
		{"nearnative run redis --quik", false},
		{"nearnative show last --json -", true},
		{"nearnative studies show redis > my.yaml", true},
		{"nearnative completion bash)", true},
		{"nearnative runz", false},
		{"nearnative cluster upp", false},
		{"nearnative cluster up|down|status", true},
		{"nearnative cluster up|dwn", false},
		{"nearnative run redis --rounds N --trial=DURATION", true},
		{"nearnative run redis --rounds many", false},
		{"nearnative export RUN [--format csv|json] [-o FILE]", true},
		{"nearnative run redis -q", true},
		{"nearnative run --help", true},
		{"nearnative --version", true},
	} {
		if err := checkCommandLine(tc.line); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.line, err, tc.ok)
		}
	}
	// Links: ones that resolve, one that does not, one out of the tree.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "docs", "studies"), 0o755)
	os.WriteFile(filepath.Join(root, "README.md"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "docs", "studies", "redis.md"), nil, 0o644)
	page := "[up](../../README.md) [web](https://x) [top](#top) [self](redis.md#reading) `[code](nope.md)`\n" +
		"![fig](missing.svg \"a figure\")\n[ref]: ../../../outside.md\n"
	got = brokenLinks(root, "docs/studies/redis.md", page)
	if len(got) != 2 || !strings.Contains(got[0], "missing.svg") || !strings.Contains(got[1], "leaves the repository") {
		t.Errorf("broken links: %q, want missing.svg and the link out of the repository", got)
	}
}
