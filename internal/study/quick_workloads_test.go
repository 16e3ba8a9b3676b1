package study

import (
	"strings"
	"testing"
)

// TestQuickWorkloads checks that quick.workloads keeps the named workloads
// under --quick only, survives a YAML round trip, and rejects unknown names.
func TestQuickWorkloads(t *testing.T) {
	reg := testRegistry()
	src := `name: q
platforms: [native]
workloads:
  - {workload: sleep, name: a}
  - {workload: sleep, name: b}
  - {workload: sleep, name: c}
quick: {rounds: 5, workloads: [c, a]}
`
	tests := []struct {
		quick bool
		want  string
	}{
		{false, "a,b,c"},
		{true, "a,c"},
	}
	for _, tt := range tests {
		s, err := Parse([]byte(src), "t.yaml", reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(Overrides{Quick: tt.quick}, reg); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, w := range s.Workloads {
			names = append(names, w.Name)
		}
		if got := strings.Join(names, ","); got != tt.want {
			t.Errorf("quick=%v: workloads %s, want %s", tt.quick, got, tt.want)
		}
	}
	s, err := Parse([]byte(src), "t.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(y, "again.yaml", reg); err != nil || !strings.Contains(string(y), "workloads: [c, a]") {
		t.Errorf("round trip: %v\n%s", err, y)
	}
	bad := strings.Replace(src, "[c, a]", "[c, zz]", 1)
	if _, err := Parse([]byte(bad), "t.yaml", reg); err == nil || !strings.Contains(err.Error(), `quick.workloads: "zz" is not among the workloads`) {
		t.Errorf("unknown quick workload: err = %v", err)
	}
}
