package linpack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/hpcc"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		over map[string]string
		ok   bool
	}{
		{"defaults", nil, true},
		{"given n", map[string]string{"n": "2000"}, true},
		{"n below nb", map[string]string{"n": "50"}, false},
		{"fraction zero", map[string]string{"mem_fraction": "0"}, false},
		{"fraction too big", map[string]string{"mem_fraction": "0.9"}, false},
		{"fraction ignored with n", map[string]string{"mem_fraction": "0", "n": "1000"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := workload.Resolve(Workload{}.Params(), tc.over, false)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Workload{}.New(v)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok %v", err, tc.ok)
			}
		})
	}
	q, err := workload.Resolve(Workload{}.Params(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if q["mem_fraction"] != "0.0002" {
		t.Errorf("quick mem_fraction = %s", q["mem_fraction"])
	}
}

// fakePlatform answers every job with canned stdout.
type fakePlatform struct{ stdout []byte }

func (f fakePlatform) Name() string { return "fake" }
func (f fakePlatform) Start(context.Context, string, platform.Spec) (platform.Server, error) {
	return nil, errors.New("no servers")
}
func (f fakePlatform) RunJob(_ context.Context, _ string, spec platform.Spec) (platform.JobResult, error) {
	return platform.JobResult{Stdout: f.stdout, Command: spec.Command(platform.Listen{Dir: platform.ContainerDir}), Where: "fake place"}, nil
}

func TestRunParses(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "hpcc", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	passed := read("hpl-passed.txt")
	tests := []struct {
		name    string
		stdout  []byte
		wantErr error
	}{
		{"passed", passed, nil},
		{"residual failed", read("hpl-failed.txt"), hpcc.ErrResidual},
		{"truncated", passed[:len(passed)*3/4], hpcc.ErrIncomplete},
		{"garbage", []byte("nearnative-np: 2\n" + hpcc.Marker + "\n\x00garbage\n"), hpcc.ErrIncomplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Workload{}.New(workload.Values{"mem_fraction": "0.001", "n": "1000", "nb": "80", "procs": "2"})
			if err != nil {
				t.Fatal(err)
			}
			raw := t.TempDir()
			res, err := in.Run(context.Background(), workload.Trial{Name: "t1", Platform: fakePlatform{tc.stdout}, RawDir: raw})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), filepath.Join(raw, "t1-hpcc.txt")) {
					t.Fatalf("err = %v, want %v pointing to the raw file", err, tc.wantErr)
				}
				if res.Values != nil {
					t.Errorf("failed trial has values %v", res.Values)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := res.Values[MetricGFLOPS]; g < 0.6095 || g > 0.6096 {
				t.Errorf("gflops = %v, want 0.609525", g)
			}
			if r := res.Values[MetricResidual]; r != 0.007251 {
				t.Errorf("residual = %v", r)
			}
			if len(res.Where) != 1 || res.Where[0] != "fake place" {
				t.Errorf("Where = %q", res.Where)
			}
			notes := strings.Join(res.Notes, "\n")
			for _, w := range []string{"hpcc 1.5.0-3 (dpkg)", "HPL N=1000 (given)", "PASSED", "whole suite"} {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q:\n%s", w, notes)
				}
			}
			if len(res.Commands) != 2 || !strings.Contains(res.Commands[1], "mpirun --allow-run-as-root") {
				t.Errorf("Commands = %q", res.Commands)
			}
		})
	}
}
