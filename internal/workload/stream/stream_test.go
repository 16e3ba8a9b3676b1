package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
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
	argv   *[]string
}

func (f fakePlatform) Name() string { return "fake" }
func (f fakePlatform) Start(context.Context, string, platform.Spec) (platform.Server, error) {
	return nil, errors.New("no servers")
}
func (f fakePlatform) RunJob(_ context.Context, _ string, spec platform.Spec) (platform.JobResult, error) {
	cmd := spec.Command(platform.Listen{Dir: platform.ContainerDir})
	if f.argv != nil {
		*f.argv = cmd
	}
	return platform.JobResult{Stdout: f.stdout, Command: cmd, Where: "fake place"}, nil
}

// thisLLC is the development machine's cache: one 32 MiB L3.
var thisLLC = LLC{Level: 3, Size: 32 << 20, Instances: 1, Total: 32 << 20}

func TestConfig(t *testing.T) {
	const gib24 = 24 << 30
	base := Config{MemFraction: 0.088, LLC: thisLLC, Reps: 10, MemBytes: gib24, HostCPUs: 2}
	tests := []struct {
		name    string
		change  func(*Config)
		want    int64  // elements per array
		why     string // in Size's text
		wantErr string // Validate's error, "" = valid
	}{
		// 8.8% of 24 GiB over 3 arrays of 8-byte doubles.
		{"full study", func(*Config) {}, 94489280, "mem_fraction=0.088", ""},
		// --quick: 4 x 32 MiB = 128 MiB per array = 2^24 elements.
		{"quick", func(c *Config) { c.MemFraction = 0 }, 1 << 24, "4.0x the host's last-level cache 1 x 32.0 MiB L3, McCalpin's minimum", ""},
		// A small memory share never goes below the rule.
		{"rule wins", func(c *Config) { c.MemFraction = 0.001 }, 1 << 24, "McCalpin's minimum (mem_fraction=0.001", ""},
		// The seed's host: 8.8% of 512 GB is its 2 billion elements (45 GB).
		{"seed host", func(c *Config) { c.MemBytes = 512e9 }, 1877333333, "mem_fraction", ""},
		{"given", func(c *Config) { c.Elements = 1 << 25 }, 1 << 25, "(given), 8.0x", ""},
		{"given cache", func(c *Config) {
			c.MemFraction = 0
			c.LLC = LLC{Size: 8 << 20, Instances: 1, Total: 8 << 20}
			c.LLCGiven = true
		}, 1 << 22, "the given cache llc=8.0 MiB", ""},
		{"below the rule", func(c *Config) { c.Elements = 1<<24 - 1 }, 0, "", "set elements to at least 16777216"},
		{"beyond memory", func(c *Config) { c.Elements = 1 << 30 }, 0, "", "set elements to at most"},
		{"fraction too big", func(c *Config) { c.MemFraction = 0.81 }, 0, "", "between 0 and 0.8"},
		{"oversubscribed", func(c *Config) { c.Threads = 3 }, 0, "", "set threads to at most 2"},
		{"cache beyond memory", func(c *Config) { c.LLC.Total = 8 << 30 }, 0, "", "does not fit"},
	}
	for _, tc := range tests {
		c := base
		tc.change(&c)
		err := c.Validate()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		n, why := c.Size()
		if n != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %d elements (%s), want %d and %q", tc.name, n, why, tc.want, tc.why)
		}
		if n*8 < RuleMultiple*c.LLC.Total {
			t.Errorf("%s: arrays of %d bytes break the rule", tc.name, n*8)
		}
	}
}

func TestNew(t *testing.T) {
	for over, ok := range map[string]bool{"": true, "llc=32m": true, "llc=lots": false, "elements=1000": false, "threads=4096": false, "mem_fraction=0.9": false} {
		o := map[string]string{}
		if k, v, found := strings.Cut(over, "="); found {
			o[k] = v
		}
		v, err := workload.Resolve(Workload{}.Params(), o, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (Workload{}).New(v); (err == nil) != ok {
			t.Errorf("%s: err = %v, want ok %v", over, err, ok)
		}
	}
}

func output(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/nn-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(b), "build: BUILD", "build: "+benchbin.Stream.BuildID(), 1))
}

func TestRunParses(t *testing.T) {
	in := &Instance{cfg: Config{LLC: thisLLC, Reps: 10, MemBytes: 24 << 30, HostCPUs: 2}}
	var argv []string
	res, err := in.Run(context.Background(), workload.Trial{Name: "t1", Platform: fakePlatform{output(t), &argv}, Duration: 2 * time.Second, RawDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); got != benchbin.Stream.Path()+" -n 16777216 -t 0 -k 10 -T 2" {
		t.Errorf("argv %q", got)
	}
	// The captured run (the shared machine, busy).
	want := map[string]float64{MetricCopy: 22689.3, MetricScale: 25079.5, MetricAdd: 24171.5, MetricTriad: 25168.0}
	for k, w := range want {
		if g := res.Values[k]; g != w {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{"16777216 elements = 128.0 MiB", "4.0x the host's last-level cache", "23 repetitions", "2 threads on 2 CPUs", "validation a 0 b 0 c 0"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	// A long trial spends at most MaxBudget repeating.
	in.Run(context.Background(), workload.Trial{Name: "t1", Platform: fakePlatform{output(t), &argv}, Duration: time.Hour, RawDir: t.TempDir()})
	if argv[len(argv)-1] != "25" {
		t.Errorf("budget for a 1h trial: %q", argv)
	}

	raw := t.TempDir()
	bad := []byte(strings.Replace(string(output(t)), "check: PASSED", "check: FAILED", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t2", Platform: fakePlatform{bad, nil}, RawDir: raw}); err == nil || !strings.Contains(err.Error(), filepath.Join(raw, "t2-nn-stream.txt")) {
		t.Errorf("failed validation: %v, want an error pointing to the raw file", err)
	}
	noTriad := []byte(strings.Replace(string(output(t)), "triad-mbps: 25168.0\n", "", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t3", Platform: fakePlatform{noTriad, nil}, RawDir: raw}); err == nil || !strings.Contains(err.Error(), "triad-mbps") {
		t.Errorf("no triad: %v", err)
	}
}
