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

// TestQuickPlatforms checks that quick.platforms keeps the named platforms
// under --quick only (not when --platforms names them), records the ones it
// left out, survives a YAML round trip, and rejects unknown names and a
// list without the baseline.
func TestQuickPlatforms(t *testing.T) {
	reg := testRegistry()
	src := `name: q
platforms: [native, docker-nat, {name: native-pinned, base: native, options: {cpuset: "0"}}, vm]
workloads:
  - {workload: sleep, name: a}
quick: {rounds: 5, platforms: [native, native-pinned]}
`
	tests := []struct {
		o          Overrides
		want, left string
	}{
		{Overrides{}, "native,docker-nat,native-pinned,vm", ""},
		{Overrides{Quick: true}, "native,native-pinned", "docker-nat,vm"},
		{Overrides{Quick: true, Platforms: []string{"native", "vm"}}, "native,vm", ""},
	}
	for _, tt := range tests {
		s, err := Parse([]byte(src), "t.yaml", reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(tt.o, reg); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.PlatformNames(), ","); got != tt.want {
			t.Errorf("%+v: platforms %s, want %s", tt.o, got, tt.want)
		}
		if got := strings.Join(s.QuickLeftOut, ","); got != tt.left {
			t.Errorf("%+v: left out %s, want %s", tt.o, got, tt.left)
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
	if _, err := Parse(y, "again.yaml", reg); err != nil || !strings.Contains(string(y), "platforms: [native, native-pinned]") {
		t.Errorf("round trip: %v\n%s", err, y)
	}
	for bad, want := range map[string]string{
		"[native, zz]":     `t.yaml:5: quick.platforms: "zz" is not among the platforms`,
		"[docker-nat, vm]": `t.yaml:5: quick.platforms: the baseline native must be among them`,
	} {
		b := strings.Replace(src, "[native, native-pinned]", bad, 1)
		if _, err := Parse([]byte(b), "t.yaml", reg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("quick platforms %s: err = %v, want %q", bad, err, want)
		}
	}
}
