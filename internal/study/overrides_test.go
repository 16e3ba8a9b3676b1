package study

import (
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/workload"
)

// TestOverrideWorkloadsAndParams: --workloads picks workloads (winning
// over quick.workloads), and --set sets a parameter of one workload or of
// every workload of a kind, checked as the file's params are, the error
// naming the flag, the parameter and what it takes.
func TestOverrideWorkloadsAndParams(t *testing.T) {
	// testRegistry's, with a sleep that has a parameter naming platforms.
	redis, _ := testRegistry().Get("redis")
	reg := workload.NewRegistry(redis, fakeWorkload{name: "sleep", params: []workload.Param{
		{Name: "length", Type: workload.Duration, Default: "10s", Quick: "1s"},
		{Name: "label", Type: workload.String, Default: "x"},
		{Name: "on", Type: workload.String, Optional: true, Platforms: true, Keywords: []string{"all"}},
	}})
	src := `name: o
platforms: [native]
workloads:
  - {workload: sleep, name: a}
  - {workload: sleep, name: b, params: {label: y}}
  - {workload: redis, name: r}
quick: {rounds: 5, workloads: [a]}
`
	set := func(specs ...string) []ParamSet {
		var out []ParamSet
		for _, s := range specs {
			ps, err := ParseParamSet(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ps)
		}
		return out
	}
	tests := []struct {
		name string
		o    Overrides
		want string // workloads as name:label:length:clients, or the error's words
		err  bool
	}{
		{"none", Overrides{}, "a:x:10s: b:y:10s: r:::1000", false},
		{"workloads in the given order", Overrides{Workloads: []string{"r", "b"}}, "r:::1000 b:y:10s:", false},
		{"workloads win over quick's", Overrides{Quick: true, Workloads: []string{"b"}}, "b:y:1s:", false},
		{"quick's", Overrides{Quick: true}, "a:x:1s:", false},
		{"unknown workload", Overrides{Workloads: []string{"zz"}}, `--workloads: "zz" is not a workload of study o (its workloads: a, b, r)`, true},
		{"listed twice", Overrides{Workloads: []string{"a", "a"}}, `--workloads: "a" is listed twice`, true},
		{"set one by name", Overrides{Params: set("b.label=z")}, "a:x:10s: b:z:10s: r:::1000", false},
		{"set a kind", Overrides{Params: set("sleep.length=3s")}, "a:x:3s: b:y:3s: r:::1000", false},
		{"set wins over the quick default", Overrides{Quick: true, Params: set("a.length=4s")}, "a:x:4s:", false},
		{"set a redis parameter", Overrides{Params: set("r.clients=50")}, "a:x:10s: b:y:10s: r:::50", false},
		{"bad value", Overrides{Params: set("r.clients=0")}, "--set r.clients=0: parameter clients: 0 is below the minimum 1 (clients takes an integer of at least 1; default 1000)", true},
		{"bad enum", Overrides{Params: set("r.op=put")}, `--set r.op=put: parameter op: "put" is not one of set, get (op takes one of set, get; default set)`, true},
		{"unknown parameter", Overrides{Params: set("r.nope=1")}, `--set r.nope=1: workload r (redis): unknown parameter "nope" (known: op, clients`, true},
		{"platforms a parameter names", Overrides{Params: set("a.on=native,all")}, "a:x:10s: b:y:10s: r:::1000", false},
		{"a platform the study lacks", Overrides{Params: set("a.on=docker-nat")}, `--set a.on=docker-nat: parameter on: "docker-nat" is not a platform of this study (native or all)`, true},
		{"not in the run", Overrides{Quick: true, Params: set("b.label=z")}, `--set b.label=z: no workload "b" in this run (its workloads: a (sleep))`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(src), "t.yaml", reg)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Apply(tc.o, reg)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %q", err, tc.want)
				}
				if len(s.Workloads) != 3 || s.Workloads[1].Params["label"] != "y" {
					t.Errorf("a failed Apply changed the study: %+v", s.Workloads)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range s.Workloads {
				got = append(got, w.Name+":"+w.Values["label"]+":"+w.Values["length"]+":"+w.Values["clients"])
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got %s, want %s", g, tc.want)
			}
			// The run stores its study with the values set.
			y, err := s.YAML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(y, "stored", reg)
			if err != nil || len(back.Workloads) != len(s.Workloads) {
				t.Fatalf("stored study: %v\n%s", err, y)
			}
			for i, w := range back.Workloads {
				if w.Values["label"] != s.Workloads[i].Values["label"] || w.Values["length"] != s.Workloads[i].Values["length"] {
					t.Errorf("stored %s: %v, ran %v", w.Name, w.Values, s.Workloads[i].Values)
				}
			}
		})
	}
	for _, bad := range []string{"clients=5", ".x=1", "a.=1", "a.b"} {
		if _, err := ParseParamSet(bad); err == nil || !strings.Contains(err.Error(), "want workload.param=value") {
			t.Errorf("ParseParamSet(%q) = %v", bad, err)
		}
	}
	if ps, err := ParseParamSet("web.v2.users=a=b"); err != nil || ps.Workload != "web.v2" || ps.Param != "users" || ps.Value != "a=b" {
		t.Errorf("dotted name: %+v %v", ps, err)
	}
}

// TestWithQuick: the study as --quick runs it, printed as a file, runs
// as the quick run when read back without --quick.
func TestWithQuick(t *testing.T) {
	reg := testRegistry()
	src := `name: q
platforms: [native, native-b2]
workloads:
  - {workload: sleep, name: a}
  - {workload: sleep, name: b}
quick: {rounds: 5, warmup: 0, trial: 2s, workloads: [b]}
`
	src = strings.Replace(src, "native-b2", "{name: native-b2, base: native}", 1)
	s, err := Parse([]byte(src), "t.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.WithQuick(reg)
	if err != nil {
		t.Fatal(err)
	}
	y, err := q.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), "quick:") || !strings.Contains(string(y), "seed: 0") {
		t.Errorf("the quick block or a seed is left:\n%s", y)
	}
	back, err := Parse(y, "copy.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Apply(Overrides{}, reg); err != nil {
		t.Fatal(err)
	}
	if back.Warmup != 0 || back.Trial.String() != "2s" || len(back.Workloads) != 1 || back.Workloads[0].Values["length"] != "1s" {
		t.Errorf("read back: warmup %d, trial %v, workloads %+v", back.Warmup, back.Trial, back.Workloads)
	}
	if len(s.Workloads) != 2 || s.Warmup != DefaultWarmup {
		t.Errorf("WithQuick changed the study it was called on")
	}
}
