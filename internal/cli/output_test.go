package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStdoutDash: "-" is standard output for every file flag, and what
// goes there is the document alone, so that it pipes into jq or a CSV
// reader; run's and show's --json are the same document.
func TestStdoutDash(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	a, _ := seedRuns(t, db, 0.8)
	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"--db", db}, args...), &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}

	// show --json -: the JSON alone, the document show --json FILE writes.
	out, _, err := run("show", "last", "--json", "-")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("show last --json - is not JSON alone: %v\n%s", err, out)
	}
	if doc["run_id"] == nil || doc["results"] == nil {
		t.Errorf("show --json - lacks run_id or results: %v", doc)
	}
	file := filepath.Join(dir, "show.json")
	text, errText, err := run("show", "last", "--json", file)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(file); string(data) != out {
		t.Errorf("show --json FILE and --json - differ")
	}
	if !strings.Contains(text, "ops_per_sec") || !strings.Contains(errText, "wrote "+file) {
		t.Errorf("show --json FILE: the table on stdout and the file on stderr, got:\n%s\n%s", text, errText)
	}

	// export: CSV by default, on stdout; JSON with --format json.
	out, _, err = run("export", string(a))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 13 || recs[0][0] != "run_id" {
		t.Errorf("export to stdout: %d records, %v", len(recs), err)
	}
	out, _, err = run("export", string(a), "--format", "json")
	var rows []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 12 {
		t.Errorf("export --format json: %v, %d rows", err, len(rows))
	}
	out, _, err = run("export", string(a), "--format", "json", "-o", filepath.Join(dir, "t.json"))
	if data, _ := os.ReadFile(filepath.Join(dir, "t.json")); err != nil || out != "" || json.Unmarshal(data, &rows) != nil {
		t.Errorf("export -o FILE: %v, stdout %q", err, out)
	}
	_, errText, err = run("export", string(a), "--json", filepath.Join(dir, "old.json"))
	if err != nil || !strings.Contains(errText, "it is now --format json -o FILE") {
		t.Errorf("export --json FILE (old spelling): %v, stderr %q", err, errText)
	}

	// report --html -.
	out, _, err = run("report", "last", "--html", "-")
	if err != nil || !strings.Contains(out, "<html") {
		t.Errorf("report --html -: %v, %.80q", err, out)
	}

	for _, args := range [][]string{
		{"export", string(a), "--csv", "-", "--json", "-"}, // two documents on one stream
		{"export", string(a), "--format", "xml"},
		{"export", string(a), "--csv", "x.csv", "--format", "json"}, // old and new spellings mixed
	} {
		out, _, err := run(args...)
		if ExitCode(err) != ExitBadInput || out != "" {
			t.Errorf("%v: exit %d (%v), stdout %.60q; want bad input and nothing written", args, ExitCode(err), err, out)
		}
	}
}
