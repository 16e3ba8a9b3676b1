package pgbench

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/workload"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSummary(t *testing.T) {
	real := readFile(t, "pgbench-15-tpcb.txt")
	want := Summary{Version: "pgbench (15.20 (Debian 15.20-0+deb12u1))", Processed: 2722, Failed: 0,
		LatencyAvgMs: 2.927, TPS: 1366.495361, DurationS: 2}
	got, err := ParseSummary([]byte(real))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ParseSummary =\n  %+v\nwant\n  %+v", got, want)
	}
	crlf, err := ParseSummary([]byte(strings.ReplaceAll(real, "\n", "\r\n")))
	if err != nil || crlf.TPS != want.TPS {
		t.Errorf("CRLF: %+v, %v", crlf, err)
	}
}

func TestParseSummaryErrors(t *testing.T) {
	real := readFile(t, "pgbench-15-tpcb.txt")
	drop := func(prefix string) string {
		var keep []string
		for _, l := range strings.Split(real, "\n") {
			if !strings.HasPrefix(l, prefix) {
				keep = append(keep, l)
			}
		}
		if len(keep) == len(strings.Split(real, "\n")) {
			t.Fatalf("no line starts with %q", prefix)
		}
		return strings.Join(keep, "\n")
	}
	tests := []struct{ name, out, want string }{
		{"empty", "", "no \"number of transactions"},
		{"refused", readFile(t, "pgbench-15-refused.txt"), "Connection refused"},
		{"init output", readFile(t, "pgbench-15-init.txt"), "no \"number of transactions"},
		{"no tps", drop("tps = "), "no \"tps\""},
		{"no latency", drop("latency average"), "latency average"},
		{"no duration", drop("duration:"), "duration"},
		{"nothing processed", strings.Replace(real, "processed: 2722", "processed: 0", 1), "no transaction processed"},
		{"aborted", real + "Run was aborted; the above results are incomplete.\n", "aborted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSummary([]byte(tt.out))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseSummary = %+v, %v; want an error containing %q", got, err, tt.want)
			}
			if got != (Summary{}) {
				t.Errorf("ParseSummary returned %+v with its error", got)
			}
		})
	}
}

func TestLatencyLogs(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "t1-pgbench-log")
	real := readFile(t, "pgbench-15-log.txt")
	if err := os.WriteFile(prefix+".123", []byte(real), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second thread's file, with a failed transaction (no latency).
	if err := os.WriteFile(prefix+".123.1", []byte("2 1 1000 0 1795429508 539593\n3 1 failed 0 1795429508 539600\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lat, err := ReadLatencyLogs(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Count(real, "\n") + 1; len(lat) != want {
		t.Errorf("%d latencies, want %d", len(lat), want)
	}
	if err := os.WriteFile(prefix+".123.2", []byte("1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLatencyLogs(prefix); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("short line: %v", err)
	}
	if lat, err := ReadLatencyLogs(filepath.Join(dir, "none")); err != nil || len(lat) != 0 {
		t.Errorf("no logs: %v, %v", lat, err)
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tt := range []struct{ q, want float64 }{{0.5, 5}, {0.95, 10}, {0.9, 9}, {0.1, 1}, {1, 10}, {0.01, 1}} {
		if got := Percentile(v, tt.q); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func newInstance(t *testing.T, overrides map[string]string) *Instance {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), overrides, false)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Instance)
}

func TestArgv(t *testing.T) {
	in := newInstance(t, nil)
	got := in.initArgv("/pg/pgbench", "127.0.0.1:5433")
	want := []string{"/pg/pgbench", "-h", "127.0.0.1", "-p", "5433", "-U", "postgres", "-i", "-s", "10", "-I", "dtGvp", "-q", "postgres"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("initArgv = %q", got)
	}
	in = newInstance(t, map[string]string{"clients": "16", "threads": "4", "script": "select-only", "protocol": "simple"})
	got = in.runArgv("/pg/pgbench", "172.17.0.2:41000", 1500*time.Millisecond, "/raw/t1-pgbench-log")
	want = []string{"/pg/pgbench", "-h", "172.17.0.2", "-p", "41000", "-U", "postgres", "-b", "select-only", "-M", "simple",
		"-c", "16", "-j", "4", "-T", "2", "-n", "-l", "--log-prefix", "/raw/t1-pgbench-log", "postgres"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runArgv = %q", got)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		want      string
	}{
		{"defaults", nil, ""},
		{"threads above clients", map[string]string{"clients": "2", "threads": "4"}, "more than clients"},
		{"bad memory", map[string]string{"memory": "lots"}, "parameter memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := workload.Resolve(Workload{}.Params(), tt.overrides, false)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Workload{}.New(v)
			if tt.want == "" {
				if err != nil || len(in.Metrics()) != 8 {
					t.Fatalf("New = %v, %v", in, err)
				}
				if s := in.(*Instance).settings; s.SharedBuffers != 512<<20 || s.MaxConnections != 18 {
					t.Errorf("settings for 2g and 8 clients: %s", s.Describe())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := workload.Resolve(Workload{}.Params(), map[string]string{"script": "tpcc"}, false); err == nil {
		t.Error("unknown script accepted")
	}
}
