package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
)

// ExportInput is a stored run to export one row per trial.
type ExportInput struct {
	Run    store.Run
	Trials []store.Trial
	// Study supplies each platform's base and options; nil leaves those
	// columns empty.
	Study *study.Study
}

// fixedColumns are the export's columns before the metrics, which follow in
// the order the trials first report them, one column per metric name.
var fixedColumns = []string{"run_id", "study", "round", "index", "warmup", "workload", "platform",
	"platform_base", "cpuset", "cpus", "memory", "started", "duration_s", "error"}

// table returns the column names and one row per trial; a cell is a string,
// int, bool, float64 or nil (no value).
func (in ExportInput) table() ([]string, [][]any) {
	var metrics []string
	seen := map[string]bool{}
	for _, t := range in.Trials {
		for _, m := range t.Metrics {
			if !seen[m.Name] {
				seen[m.Name] = true
				metrics = append(metrics, m.Name)
			}
		}
	}
	cols := append(append([]string{}, fixedColumns...), metrics...)
	rows := make([][]any, 0, len(in.Trials))
	for _, t := range in.Trials {
		var base, cpuset, memory any
		var cpus any
		if in.Study != nil {
			if p, ok := in.Study.Platform(t.Platform); ok {
				base = p.Base
				if p.Options.CPUSet != "" {
					cpuset = p.Options.CPUSet
				}
				if p.Options.CPUs > 0 {
					cpus = p.Options.CPUs
				}
				if p.Options.Memory != "" {
					memory = p.Options.Memory
				}
			}
		}
		var started any
		if !t.Started.IsZero() {
			started = t.Started.UTC().Format(time.RFC3339Nano)
		}
		var errText any
		if t.Error != "" {
			errText = t.Error
		}
		row := []any{string(in.Run.ID), in.Run.Study, t.Round, t.Index, t.Warmup, t.Workload, t.Platform,
			base, cpuset, cpus, memory, started, t.Duration.Seconds(), errText}
		byName := map[string]float64{}
		for _, m := range t.Metrics {
			byName[m.Name] = m.Value
		}
		for _, name := range metrics {
			if v, ok := byName[name]; ok && isFinite(v) {
				row = append(row, v)
			} else {
				row = append(row, nil)
			}
		}
		rows = append(rows, row)
	}
	return cols, rows
}

// WriteCSV writes one row per trial with a header row; an absent value is an
// empty field.
func WriteCSV(w io.Writer, in ExportInput) error {
	cols, rows := in.table()
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	if err := cw.Write(cols); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	rec := make([]string, len(cols))
	for _, row := range rows {
		for i, v := range row {
			rec[i] = csvField(v)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

func csvField(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// WriteJSON writes the trials as a JSON array of flat objects with the CSV's
// columns as keys, in the same order (pandas.read_json reads it as records);
// an absent value is null.
func WriteJSON(w io.Writer, in ExportInput) error {
	cols, rows := in.table()
	var b bytes.Buffer
	b.WriteString("[")
	for i, row := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		for j, v := range row {
			if j > 0 {
				b.WriteString(", ")
			}
			k, _ := json.Marshal(cols[j])
			val, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("writing JSON export: column %s: %w", cols[j], err)
			}
			b.Write(k)
			b.WriteString(": ")
			b.Write(val)
		}
		b.WriteString("}")
	}
	if len(rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing JSON export: %w", err)
	}
	return nil
}
