package study

import (
	"reflect"
	"strings"
	"testing"
)

func TestUntilCIMetrics(t *testing.T) {
	reg := testRegistry()
	src := "name: t\nuntil_ci: 2\nuntil_ci_metrics: [ops_per_sec, cpu_us_per_op]\nplatforms: [native]\nworkloads: [{workload: redis}]\n"
	s, err := Parse([]byte(src), "t.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ops_per_sec", "cpu_us_per_op"}
	if !reflect.DeepEqual(s.UntilCIMetrics, want) {
		t.Fatalf("UntilCIMetrics = %v, want %v", s.UntilCIMetrics, want)
	}
	if err := s.Apply(Overrides{Seed: 1}, reg); err != nil {
		t.Fatal(err)
	}
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out, "again.yaml", reg)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(again.UntilCIMetrics, want) {
		t.Errorf("round trip lost until_ci_metrics:\n%s", out)
	}
	if err := s.Apply(Overrides{CIMetrics: []string{"latency_p99_ms"}}, reg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.UntilCIMetrics, []string{"latency_p99_ms"}) {
		t.Errorf("--ci-metrics did not replace the list: %v", s.UntilCIMetrics)
	}
	for _, bad := range []string{"until_ci_metrics: ops_per_sec\n", "until_ci_metrics: [{a: 1}]\n"} {
		_, err := Parse([]byte("name: t\n"+bad+"platforms: [native]\nworkloads: [{workload: redis}]\n"), "b.yaml", reg)
		if err == nil || !strings.HasPrefix(err.Error(), "b.yaml:2:") {
			t.Errorf("%q: want a b.yaml:2 error, got %v", bad, err)
		}
	}
}
