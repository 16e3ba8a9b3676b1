package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/report/reporttest"
)

func TestExportGolden(t *testing.T) {
	run, trials := reporttest.Run(reporttest.RunA, 1)
	in := ExportInput{Run: run, Trials: trials, Study: reporttest.Study(t)}
	var c, j bytes.Buffer
	if err := WriteCSV(&c, in); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&j, in); err != nil {
		t.Fatal(err)
	}
	golden(t, "export.csv", c.Bytes())
	golden(t, "export.json", j.Bytes())
	var rows []map[string]any
	if err := json.Unmarshal(j.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(trials) {
		t.Fatalf("%d JSON rows, want %d", len(rows), len(trials))
	}
	if lines := strings.Count(c.String(), "\n"); lines != len(trials)+1 {
		t.Errorf("%d CSV lines, want %d", lines, len(trials)+1)
	}
	for _, k := range append(append([]string{}, fixedColumns...), "ops_per_sec", "cpu_us_per_op", "client_cpu_pct") {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
}
