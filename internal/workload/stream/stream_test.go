package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/hpcc"
)

// cache is one cache/indexN directory of a fake sysfs.
type cache struct {
	cpu, index, level int
	typ, size, shared string
}

// fakeSysfs writes caches under a temp dir laid out like /sys/devices/system/cpu.
func fakeSysfs(t *testing.T, caches []cache) string {
	t.Helper()
	root := t.TempDir()
	for _, c := range caches {
		d := filepath.Join(root, "cpu"+strconv.Itoa(c.cpu), "cache", "index"+strconv.Itoa(c.index))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": strconv.Itoa(c.level), "type": c.typ, "size": c.size, "shared_cpu_list": c.shared} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Entries that are not CPUs must be ignored.
	if err := os.MkdirAll(filepath.Join(root, "cpufreq"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// thisMachine is the layout of the 2-CPU VM the tests were written on.
func thisMachine() []cache {
	var cs []cache
	for cpu := 0; cpu < 2; cpu++ {
		own := strconv.Itoa(cpu)
		cs = append(cs,
			cache{cpu, 0, 1, "Data", "32K", own},
			cache{cpu, 1, 1, "Instruction", "32K", own},
			cache{cpu, 2, 2, "Unified", "1024K", own},
			cache{cpu, 3, 3, "Unified", "32768K", "0-1"})
	}
	return cs
}

func TestReadLLC(t *testing.T) {
	twoSockets := []cache{
		{0, 0, 2, "Unified", "2048K", "0"}, {0, 1, 3, "Unified", "16384K", "0-1"},
		{1, 0, 2, "Unified", "2048K", "1"}, {1, 1, 3, "Unified", "16384K", "0-1"},
		{2, 0, 2, "Unified", "2048K", "2"}, {2, 1, 3, "Unified", "16384K", "2-3"},
		{3, 0, 2, "Unified", "2048K", "3"}, {3, 1, 3, "Unified", "16384K", "2-3"},
	}
	tests := []struct {
		name   string
		caches []cache
		want   LLC
		ok     bool
	}{
		{"shared L3", thisMachine(), LLC{Level: 3, Size: 32 << 20, Instances: 1, Total: 32 << 20}, true},
		{"two L3 instances", twoSockets, LLC{Level: 3, Size: 16 << 20, Instances: 2, Total: 32 << 20}, true},
		{"private L2 only", []cache{{0, 0, 1, "Data", "48K", "0"}, {0, 1, 2, "Unified", "1280K", "0"}, {1, 0, 2, "Unified", "1280K", "1"}},
			LLC{Level: 2, Size: 1280 << 10, Instances: 2, Total: 2560 << 10}, true},
		{"instruction cache only", []cache{{0, 0, 1, "Instruction", "32K", "0"}}, LLC{}, false},
		{"no caches", nil, LLC{}, false},
		{"bad size", []cache{{0, 0, 3, "Unified", "lots", "0"}}, LLC{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadLLC(fakeSysfs(t, tc.caches))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if got != tc.want {
				t.Errorf("LLC = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := os.Stat(CPUDir); err == nil {
		llc, err := ReadLLC(CPUDir)
		if err != nil {
			t.Fatalf("this host: %v", err)
		}
		t.Logf("this host: %s", llc)
	}
}

// fakePlatform answers every job with canned stdout.
type fakePlatform struct {
	stdout []byte
	spec   *platform.Spec
}

func (f fakePlatform) Name() string { return "fake" }
func (f fakePlatform) Start(context.Context, string, platform.Spec) (platform.Server, error) {
	return nil, errors.New("no servers")
}
func (f fakePlatform) RunJob(_ context.Context, _ string, spec platform.Spec) (platform.JobResult, error) {
	if f.spec != nil {
		*f.spec = spec
	}
	return platform.JobResult{Stdout: f.stdout, Command: spec.Command(platform.Listen{Dir: platform.ContainerDir}), Where: "fake place"}, nil
}

func newInstance(t *testing.T, over map[string]string, cpuDir string) *Instance {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), over, false)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	in.(*Instance).cpuDir = cpuDir
	return in.(*Instance)
}

func TestNew(t *testing.T) {
	for over, ok := range map[string]bool{"32m": true, "1.5g": true, "": true, "lots": false, "0": false} {
		v, err := workload.Resolve(Workload{}.Params(), map[string]string{"llc": over}, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (Workload{}).New(v); (err == nil) != ok {
			t.Errorf("llc=%q: err = %v, want ok %v", over, err, ok)
		}
	}
	if _, err := workload.Resolve(Workload{}.Params(), map[string]string{"llc_multiple": "0"}, false); err == nil {
		t.Error("llc_multiple=0 accepted")
	}
}

func TestPlan(t *testing.T) {
	sys := fakeSysfs(t, thisMachine())
	tests := []struct {
		over   map[string]string
		target int64
		n      int
	}{
		// 4 x 32 MiB = 128 MiB per array: N*N*8/3 >= 2^27 -> N >= 7094.
		{nil, 128 << 20, 7120},
		{map[string]string{"llc_multiple": "1"}, 32 << 20, 3600},
		{map[string]string{"llc": "8m"}, 32 << 20, 3600},
	}
	for _, tc := range tests {
		llc, target, n, err := newInstance(t, tc.over, sys).plan()
		if err != nil {
			t.Fatal(err)
		}
		if target != tc.target || n != tc.n {
			t.Errorf("%v: target %d, N %d; want %d, %d (llc %s)", tc.over, target, n, tc.target, tc.n, llc)
		}
	}
	if _, _, _, err := newInstance(t, map[string]string{"llc": "1t"}, sys).plan(); err == nil {
		t.Error("arrays beyond the RAM: no error")
	}
}

func TestRunParses(t *testing.T) {
	stdout, err := os.ReadFile(filepath.Join("..", "hpcc", "testdata", "stream.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sys := fakeSysfs(t, thisMachine())
	var spec platform.Spec
	in := newInstance(t, map[string]string{"llc_multiple": "0.1"}, sys)
	res, err := in.Run(context.Background(), workload.Trial{Name: "t1", Platform: fakePlatform{stdout, &spec}, RawDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The captured run: 2 processes, averages 90.623746, 58.280719, 75.33942, 73.294565 GB/s each.
	want := map[string]float64{MetricCopy: 181247.492, MetricScale: 116561.438, MetricAdd: 150678.84, MetricTriad: 146589.13}
	for k, w := range want {
		if g := res.Values[k]; g < w-0.01 || g > w+0.01 {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{"240000 elements x 2 processes = 3.7 MiB, 0.11x the host's last-level cache 1 x 32.0 MiB L3",
		"arrays under STREAM's rule", "hpcc stopped after the StarSTREAM section", "only StarSTREAM is reported"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	// 0.1 x 32 MiB = 3.2 MiB per array: N >= 1122, rounded up to 1200.
	for _, f := range spec.Files {
		if f.Path == hpcc.TemplateFile && !strings.Contains(string(f.Content), "\n1200 ") {
			t.Errorf("input lacks N=1200:\n%s", f.Content)
		}
	}

	// Output that does not parse fails the trial, pointing to the raw file.
	bad := []byte(strings.Replace(string(stdout), "Solution Validates", "Failed Validation on array c[]", 1))
	raw := t.TempDir()
	_, err = in.Run(context.Background(), workload.Trial{Name: "t2", Platform: fakePlatform{bad, nil}, RawDir: raw})
	if !errors.Is(err, hpcc.ErrValidation) || !strings.Contains(err.Error(), filepath.Join(raw, "t2-hpcc.txt")) {
		t.Errorf("err = %v, want a validation error pointing to the raw file", err)
	}
	noNP := []byte(strings.Replace(string(stdout), "nearnative-np: 2\n", "", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t3", Platform: fakePlatform{noNP, nil}, RawDir: raw}); err == nil {
		t.Error("unknown process count: no error")
	}
}
