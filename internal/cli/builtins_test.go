package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload/fio"
)

// TestBuiltinStudies loads every built-in study against the real workload
// registry, with and without --quick, and parses back the study a run
// stores.
func TestBuiltinStudies(t *testing.T) {
	infos, err := study.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	reg := Registry()
	for _, info := range infos {
		for _, quick := range []bool{false, true} {
			s, err := study.Load(info.Name, reg)
			if err != nil {
				t.Errorf("%s: %v", info.Name, err)
				continue
			}
			err = s.Apply(study.Overrides{Quick: quick}, reg)
			if errors.Is(err, fio.ErrNoSpace) {
				// The study is well formed; this machine's disk is too
				// small for its full sizes (fio's file outgrows the RAM).
				t.Logf("%s (quick %v): %v", info.Name, quick, err)
				continue
			}
			if err != nil {
				t.Errorf("%s (quick %v): %v", info.Name, quick, err)
				continue
			}
			// The run stores the study as it ran (every parameter
			// resolved); show, report and resume parse it back.
			y, err := s.YAML()
			if err != nil {
				t.Errorf("%s (quick %v): YAML: %v", info.Name, quick, err)
				continue
			}
			if _, err := study.Parse(y, "run "+info.Name, reg); err != nil {
				t.Errorf("%s (quick %v): the stored study does not parse back: %v", info.Name, quick, err)
			}
		}
	}
}

// TestWorkloadDefaults: every registered workload's defaults, and its
// --quick defaults, pass its own parameter checks (a run stores them and
// parses them back).
func TestWorkloadDefaults(t *testing.T) {
	reg := Registry()
	for _, name := range reg.Names() {
		w, _ := reg.Get(name)
		for _, p := range w.Params() {
			if err := p.Check(p.Default); err != nil {
				t.Errorf("%s: default: %v", name, err)
			}
			if p.Quick != "" {
				if err := p.Check(p.Quick); err != nil {
					t.Errorf("%s: --quick default: %v", name, err)
				}
			}
		}
	}
}

// TestBenchStudies: the study files BENCH.md's figures came from still
// read as studies.
func TestBenchStudies(t *testing.T) {
	files, err := filepath.Glob("../../bench/studies/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bench studies: %v", err)
	}
	for _, f := range files {
		if _, err := study.Load(f, Registry()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestPlatformNamingParams: a parameter that names platforms (web20's
// vm_split, oltp's pin_platforms) may name only the study's own, or its
// keywords; a typo is refused at its line.
func TestPlatformNamingParams(t *testing.T) {
	study1 := func(params string) string {
		return "name: s\nplatforms:\n  - native\n  - vm\nworkloads:\n  - workload: web20\n    params: {" + params + "}\n"
	}
	for _, tc := range []struct {
		name, params, want string // want: "" = accepted
	}{
		{"a platform", "vm_split: vm", ""},
		{"the keyword", "vm_split: all", ""},
		{"a typo", "vm_split: vm-spilt", `s.yaml:7: workloads[0].params.vm_split: "vm-spilt" is not a platform of this study (native, vm or all)`},
		{"one of two", "vm_split: \"vm,nat\"", `"nat" is not a platform of this study`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(f, []byte(study1(tc.params)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := study.Load(f, Registry())
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	pinned, err := os.ReadFile("../../studies/oltp-pinned.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(f, []byte(strings.Replace(string(pinned), "pin_platforms: docker-pinned", "pin_platforms: docker-pined", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := study.Load(f, Registry()); err == nil || !strings.Contains(err.Error(), `"docker-pined" is not a platform of this study`) {
		t.Errorf("oltp pin_platforms typo: %v", err)
	}
}

// TestStudiesDurations: `nearnative studies` gives every built-in study
// the duration its --quick and full runs would print here, or why it
// cannot run; web20-max's quick search is expected to answer within 20
// minutes (it ran over an hour before its steps were sized to answer).
func TestStudiesDurations(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"studies", "--no-check"}, &stdout, &stderr); err != nil {
		t.Fatalf("studies: %v\n%s", err, stderr.String())
	}
	infos, err := study.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	col := `(about (\d+h)?(\d+m)?[\d.]+s( \*)?|refused \*)`
	for _, i := range infos {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(i.Name) + ` +` + col + ` +` + col + ` +\S`)
		m := re.FindStringSubmatch(stdout.String())
		if m == nil {
			t.Errorf("no line for %s:\n%s", i.Name, stdout.String())
			continue
		}
		if i.Name == "web20-max" {
			d, err := time.ParseDuration(strings.TrimSuffix(strings.TrimPrefix(m[1], "about "), " *"))
			if err != nil || d > 20*time.Minute {
				t.Errorf("web20-max --quick: %q, want 20 minutes at most", m[1])
			}
		}
	}
}
