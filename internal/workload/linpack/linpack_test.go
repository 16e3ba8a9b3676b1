package linpack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

const gib24 = 24 << 30

func TestValidate(t *testing.T) {
	base := Config{MemFraction: 0.066, DGEMM: 3000, MemBytes: gib24, HostCPUs: 2}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"given n that fits", func(c *Config) { c.N = 20000 }, ""},
		{"n beyond memory", func(c *Config) { c.N = 60000 }, "lower n to at most 50700"},
		{"fraction zero", func(c *Config) { c.MemFraction = 0 }, "mem_fraction"},
		{"fraction ignored with n", func(c *Config) { c.MemFraction = 0; c.N = 1000 }, ""},
		{"fraction too big", func(c *Config) { c.MemFraction = 0.9 }, "at most 0.8"},
		{"all CPUs", func(c *Config) { c.Threads = 2 }, ""},
		{"oversubscribed", func(c *Config) { c.Threads = 3 }, "set threads to at most 2"},
		{"dgemm off", func(c *Config) { c.DGEMM = 0 }, ""},
		{"dgemm beyond memory", func(c *Config) { c.DGEMM = 20000; c.MemBytes = 4 << 30 }, "lower dgemm"},
	}
	for _, tc := range tests {
		c := base
		tc.change(&c)
		err := c.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestSize(t *testing.T) {
	// The flags peak of this development machine: 2 cores x 2596 MHz x 32.
	peak := Peak{GFLOPS: 166.1}
	tests := []struct {
		name  string
		cfg   Config
		trial time.Duration
		want  int
		why   string
	}{
		// 166.1 GFLOPS for 10 s: N^3 = 10 x 166.1e9 x 1.5 -> 13556;
		// 6.6% of 24 GiB allows 14581.
		{"full study", Config{MemFraction: 0.066, MemBytes: gib24}, 10 * time.Second, 13500, "the trial length 10s"},
		{"quick", Config{MemFraction: 0.066, MemBytes: gib24}, 2 * time.Second, 7900, "the trial length 2s"},
		{"20 s trials", Config{MemFraction: 0.066, MemBytes: gib24}, 20 * time.Second, 14500, "mem_fraction=0.066"},
		// The seed's 45K fraction, 3% of 24 GiB: 9800, below the time limit.
		{"memory bound", Config{MemFraction: 0.03, MemBytes: gib24}, 10 * time.Second, 9800, "mem_fraction=0.03"},
		// The seed's own host: 3% of 512 GB is 45K, as the seed ran.
		{"seed host", Config{MemFraction: 0.03, MemBytes: 512e9}, time.Hour, 43800, "mem_fraction=0.03"},
		{"given", Config{N: 777, MemBytes: gib24}, time.Second, 777, "N=777 given"},
		{"floor", Config{MemFraction: 0.066, MemBytes: gib24}, time.Millisecond, MinN, "raised to the minimum"},
	}
	for _, tc := range tests {
		s := tc.cfg.Size(tc.trial, peak)
		if s.N != tc.want || !strings.Contains(s.Why, tc.why) {
			t.Errorf("%s: N=%d (%s), want %d and %q", tc.name, s.N, s.Why, tc.want, tc.why)
		}
		if MatrixBytes(s.N) > int64(MaxFraction*float64(tc.cfg.MemBytes)) {
			t.Errorf("%s: N=%d does not fit", tc.name, s.N)
		}
	}
}

func TestNew(t *testing.T) {
	for over, ok := range map[string]bool{"": true, "n=1000": true, "n=10000000": false, "threads=100000": false, "mem_fraction=0": false} {
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

// fakePlatform answers every job with canned stdout and exit code.
type fakePlatform struct {
	stdout []byte
	code   int
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
	res := platform.JobResult{Stdout: f.stdout, ExitCode: f.code, Command: cmd, Where: "fake place"}
	if f.code != 0 {
		return res, errors.New("exit status 1")
	}
	return res, nil
}

// output is nn-linpack's output as captured on the development machine,
// with this build's ID.
func output(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/nn-linpack.txt")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(b), "build: BUILD", "build: "+benchbin.Linpack.BuildID(), 1))
}

func testInstance() *Instance {
	cpu := CPU{Vendor: "AuthenticAMD", Family: 25, MHz: 2596.148, MHzFrom: "test", ThreadsPerCore: 1,
		Flags: map[string]bool{"sse2": true, "avx": true, "avx2": true, "fma": true, "avx512f": true}}
	return &Instance{cfg: Config{N: 8000, MemBytes: gib24, HostCPUs: 2, DGEMM: 3000}, cpu: cpu}
}

func TestRunParses(t *testing.T) {
	in := testInstance()
	var argv []string
	res, err := in.Run(context.Background(), workload.Trial{Name: "t1", Platform: fakePlatform{stdout: output(t), argv: &argv}, Duration: 2 * time.Second, RawDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); got != benchbin.Linpack.Path()+" -n 8000 -t 0 -g 3000" {
		t.Errorf("argv %q", got)
	}
	// The captured run (a busy moment of the shared machine): 37.7727
	// GFLOPS on 2 threads against 2 x 2596.148 x 16 (Zen 4).
	want := map[string]float64{MetricGFLOPS: 37.7727, MetricResidual: 0.00232634, MetricDGEMM: 45.3871, MetricPeakPct: 37.7727 / 83.076736 * 100}
	for k, w := range want {
		if g := res.Values[k]; g < w*0.9999 || g > w*1.0001 {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{"N=8000 given", "flags peak 83.1 GFLOPS = 2 cores x 2596 MHz", "Zen 4",
		"openblas-pthread/libopenblasp-r0.3.21.so", "Cooperlake", "PASSED", "not netlib HPL"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}

	raw := t.TempDir()
	failed := []byte(strings.Replace(string(output(t)), "check: PASSED", "check: FAILED", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t2", Platform: fakePlatform{stdout: failed, code: 1}, RawDir: raw}); err == nil || !strings.Contains(err.Error(), filepath.Join(raw, "t2-nn-linpack.txt")) {
		t.Errorf("failed check: %v, want an error pointing to the raw file", err)
	}
	failed = []byte(strings.Replace(string(output(t)), "check: PASSED", "check: FAILED", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t3", Platform: fakePlatform{stdout: failed}, RawDir: raw}); err == nil || !strings.Contains(err.Error(), "residual check did not pass") {
		t.Errorf("FAILED with exit 0: %v", err)
	}
	stale := []byte(strings.Replace(string(output(t)), benchbin.Linpack.BuildID(), "0123456789abcdef", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t4", Platform: fakePlatform{stdout: stale}, RawDir: raw}); !errors.Is(err, benchbin.ErrMissing) {
		t.Errorf("another build: %v, want ErrMissing", err)
	}
	noRate := []byte(strings.Replace(string(output(t)), "gflops: 37.7727\n", "", 1))
	if _, err := in.Run(context.Background(), workload.Trial{Name: "t5", Platform: fakePlatform{stdout: noRate}, RawDir: raw}); err == nil || !strings.Contains(err.Error(), `no "gflops" line`) {
		t.Errorf("no rate: %v", err)
	}
}

func TestEstimate(t *testing.T) {
	in := testInstance()
	in.cfg.N = 0
	in.cfg.MemFraction = 0.066
	for _, trial := range []time.Duration{2 * time.Second, 20 * time.Second} {
		e := in.Estimate(trial)
		if e < trial || e > trial*2+3*time.Second {
			t.Errorf("Estimate(%v) = %v", trial, e)
		}
	}
}
