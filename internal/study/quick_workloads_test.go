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
// under --quick only, that --platforms wins over it, that it survives a
// YAML round trip, and that it must name study platforms and the baseline.
func TestQuickPlatforms(t *testing.T) {
	reg := testRegistry()
	src := `name: q
platforms: [native, docker-nat, vm, {name: slow, base: vm}]
workloads: [{workload: sleep}]
quick: {rounds: 5, platforms: [docker-nat, native]}
`
	tests := []struct {
		o    Overrides
		want string
	}{
		{Overrides{}, "native,docker-nat,vm,slow"},
		{Overrides{Quick: true}, "native,docker-nat"},
		{Overrides{Quick: true, Platforms: []string{"native", "slow"}}, "native,slow"},
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
	}
	s, err := Parse([]byte(src), "t.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(y, "again.yaml", reg); err != nil || !strings.Contains(string(y), "platforms: [docker-nat, native]") {
		t.Errorf("round trip: %v\n%s", err, y)
	}
	for bad, want := range map[string]string{
		"[docker-nat, zz]": `t.yaml:4: quick.platforms: "zz" is not among the platforms`,
		"[docker-nat, vm]": `t.yaml:4: quick.platforms: the baseline native must be among them`,
	} {
		_, err := Parse([]byte(strings.Replace(src, "[docker-nat, native]", bad, 1)), "t.yaml", reg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("quick.platforms %s: err = %v, want %q", bad, err, want)
		}
	}
}
