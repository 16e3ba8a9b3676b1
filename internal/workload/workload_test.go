package workload

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParamCheck(t *testing.T) {
	intP := Param{Name: "clients", Type: Int}
	intMin := Param{Name: "clients", Type: Int, Min: 1, HasMin: true}
	intMin0 := Param{Name: "requests", Type: Int, Min: 0, HasMin: true}
	floatP := Param{Name: "ratio", Type: Float}
	floatMin := Param{Name: "ratio", Type: Float, Min: 0.5, HasMin: true}
	boolP := Param{Name: "verbose", Type: Bool}
	durP := Param{Name: "warm", Type: Duration}
	durOpt := Param{Name: "warm", Type: Duration, Optional: true}
	strP := Param{Name: "label", Type: String}
	enumP := Param{Name: "op", Type: String, Enum: []string{"set", "get"}}
	badType := Param{Name: "weird", Type: ParamType("complex")}

	tests := []struct {
		p       Param
		v       string
		wantErr string // "" = valid
	}{
		{intP, "0", ""},
		{intP, "-5", ""},
		{intP, "1000", ""},
		{intP, "1.5", "not an integer"},
		{intP, "", "not an integer"},
		{intP, "ten", "not an integer"},
		{intP, "99999999999999999999", "not an integer"},
		{intMin, "1", ""},
		{intMin, "0", "below the minimum 1"},
		{intMin, "-1", "below the minimum 1"},
		{intMin0, "0", ""},
		{intMin0, "-1", "below the minimum 0"},
		{floatP, "0.25", ""},
		{floatP, "-3", ""},
		{floatP, "1e3", ""},
		{floatP, "abc", "not a number"},
		{floatP, "", "not a number"},
		{floatP, "NaN", "not a number"},
		{floatP, "inf", "not a number"},
		{floatMin, "nan", "not a number"}, // NaN < Min is false: must not slip past the bound
		{floatMin, "0.5", ""},
		{floatMin, "0.49", "below the minimum 0.5"},
		{boolP, "true", ""},
		{boolP, "false", ""},
		{boolP, "1", ""},
		{boolP, "yes", "not true or false"},
		{boolP, "", "not true or false"},
		{durP, "30s", ""},
		{durP, "2m", ""},
		{durP, "1h30m", ""},
		{durP, "0s", "not a positive duration"},
		{durP, "-1s", "not a positive duration"},
		{durP, "30", "not a positive duration"},
		{durP, "", "not a positive duration"},
		{durOpt, "", ""},
		{durOpt, "0s", "not a positive duration"},
		{strP, "", ""},
		{strP, "anything at all", ""},
		{enumP, "set", ""},
		{enumP, "get", ""},
		{enumP, "SET", "not one of set, get"},
		{enumP, "", "not one of set, get"},
		{enumP, "del", "not one of set, get"},
		{badType, "1", "unknown type"},
	}
	for _, tt := range tests {
		t.Run(string(tt.p.Type)+"/"+tt.p.Name+"="+tt.v, func(t *testing.T) {
			err := tt.p.Check(tt.v)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Check(%q): %v", tt.v, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%q) = nil, want an error containing %q", tt.v, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.p.Name) {
				t.Errorf("Check(%q) = %q, want it to name %s and contain %q", tt.v, err, tt.p.Name, tt.wantErr)
			}
		})
	}
}

var testParams = []Param{
	{Name: "op", Type: String, Default: "set", Enum: []string{"set", "get"}},
	{Name: "clients", Type: Int, Default: "1000", Min: 1, HasMin: true},
	{Name: "preload", Type: Int, Default: "1000000", Quick: "200000", Min: 1, HasMin: true},
	{Name: "warm", Type: Duration, Default: "10s", Quick: "1s"},
	{Name: "label", Type: String, Default: ""},
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		quick     bool
		want      Values
	}{
		{"defaults", nil, false,
			Values{"op": "set", "clients": "1000", "preload": "1000000", "warm": "10s", "label": ""}},
		{"quick defaults", nil, true,
			Values{"op": "set", "clients": "1000", "preload": "200000", "warm": "1s", "label": ""}},
		{"overrides", map[string]string{"op": "get", "clients": "50", "label": "x"}, false,
			Values{"op": "get", "clients": "50", "preload": "1000000", "warm": "10s", "label": "x"}},
		{"override beats quick default", map[string]string{"preload": "7"}, true,
			Values{"op": "set", "clients": "1000", "preload": "7", "warm": "1s", "label": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(testParams, tt.overrides, tt.quick)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		want      []string
	}{
		{"unknown", map[string]string{"threads": "2"},
			[]string{`unknown parameter "threads"`, "known: op, clients, preload, warm, label"}},
		{"bad enum", map[string]string{"op": "del"}, []string{"parameter op", "not one of set, get"}},
		{"below min", map[string]string{"clients": "0"}, []string{"parameter clients", "below the minimum 1"}},
		{"bad duration", map[string]string{"warm": "soon"}, []string{"parameter warm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(testParams, tt.overrides, false)
			if err == nil {
				t.Fatalf("Resolve = %v, want an error", got)
			}
			if got != nil {
				t.Errorf("Resolve returned values %v with an error", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestResolveDoesNotCheckDefaults(t *testing.T) {
	// Defaults are the workload author's; Resolve trusts them and a
	// workload with no parameters accepts no overrides.
	v, err := Resolve(nil, nil, false)
	if err != nil || len(v) != 0 {
		t.Fatalf("Resolve(nil) = %v, %v", v, err)
	}
	if _, err := Resolve(nil, map[string]string{"x": "1"}, false); err == nil || !strings.Contains(err.Error(), `unknown parameter "x"`) {
		t.Errorf("override on a workload without parameters: %v", err)
	}
}

func TestValuesCanonical(t *testing.T) {
	tests := []struct {
		v    Values
		want string
	}{
		{Values{}, ""},
		{nil, ""},
		{Values{"a": "1"}, "a=1"},
		{Values{"op": "set", "clients": "1000", "b": "", "a_z": "x"}, "a_z=x b= clients=1000 op=set"},
		{Values{"Z": "1", "a": "2"}, "Z=1 a=2"}, // byte order
	}
	for _, tt := range tests {
		for i := 0; i < 5; i++ { // map iteration order varies; the result must not
			if got := tt.v.Canonical(); got != tt.want {
				t.Fatalf("Canonical(%v) = %q, want %q", tt.v, got, tt.want)
			}
		}
	}
}

func TestValuesAccessors(t *testing.T) {
	v := Values{"n": "42", "f": "0.5", "b": "true", "d": "1m30s", "s": "hello"}
	if got := v.Int("n"); got != 42 {
		t.Errorf("Int = %d", got)
	}
	if got := v.Float("f"); got != 0.5 {
		t.Errorf("Float = %v", got)
	}
	if got := v.Bool("b"); !got {
		t.Errorf("Bool = %v", got)
	}
	if got := v.Duration("d"); got != 90*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if got := v.String("s"); got != "hello" {
		t.Errorf("String = %q", got)
	}
	for name, f := range map[string]func(){
		"Int":      func() { v.Int("s") },
		"Float":    func() { v.Float("s") },
		"Bool":     func() { v.Bool("s") },
		"Duration": func() { v.Duration("missing") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s on a bad value did not panic", name)
				}
			}()
			f()
		}()
	}
}

type fakeWorkload struct{ name string }

func (f fakeWorkload) Name() string                 { return f.name }
func (f fakeWorkload) Description() string          { return "fake " + f.name }
func (f fakeWorkload) Params() []Param              { return nil }
func (f fakeWorkload) New(Values) (Instance, error) { return fakeInstance{}, nil }

type fakeInstance struct{}

func (fakeInstance) Metrics() []Metric                          { return nil }
func (fakeInstance) Run(context.Context, Trial) (Result, error) { return Result{}, nil }

func TestRegistry(t *testing.T) {
	r := NewRegistry(fakeWorkload{"redis"}, fakeWorkload{"fio"}, fakeWorkload{"oltp"})
	if got, want := r.Names(), []string{"fio", "oltp", "redis"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	all := r.All()
	if len(all) != 3 || all[0].Name() != "fio" || all[2].Name() != "redis" {
		t.Errorf("All = %v", all)
	}
	w, ok := r.Get("oltp")
	if !ok || w.Name() != "oltp" {
		t.Errorf("Get(oltp) = %v, %v", w, ok)
	}
	if w, ok := r.Get("nope"); ok || w != nil {
		t.Errorf("Get(nope) = %v, %v", w, ok)
	}

	empty := NewRegistry()
	if n := empty.Names(); len(n) != 0 {
		t.Errorf("empty registry Names = %v", n)
	}
	if _, ok := empty.Get("redis"); ok {
		t.Error("empty registry has redis")
	}

	// A later workload with the same name replaces the earlier one.
	dup := NewRegistry(fakeWorkload{"a"}, fakeWorkload{"a"})
	if n := dup.Names(); !reflect.DeepEqual(n, []string{"a"}) {
		t.Errorf("duplicate names: %v", n)
	}
}
