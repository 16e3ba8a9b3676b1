package linpack

import (
	"math"
	"strings"
	"testing"
)

// cpuinfo is the first processor entry of /proc/cpuinfo, with flags.
func cpuinfo(vendor, family, model, mhz, siblings, cores, flags string) string {
	return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: " + family + "\nmodel name\t: " + model +
		"\ncpu MHz\t\t: " + mhz + "\nsiblings\t: " + siblings + "\ncpu cores\t: " + cores + "\nflags\t\t: " + flags +
		"\n\nprocessor\t: 1\nvendor_id\t: ignored\n"
}

func TestPeak(t *testing.T) {
	const (
		sse    = "fpu sse sse2"
		avx    = sse + " avx"
		avx2   = avx + " fma avx2"
		avx512 = avx2 + " avx512f avx512dq"
	)
	tests := []struct {
		name, info, baseKHz string
		threads             int
		perCycle            int
		mhz                 float64
		gflops              float64
		how                 string
	}{
		// This development machine: Zen 4 behind KVM, 2 vCPUs.
		// Zen 4's AVX-512 on 256-bit units: 16 per cycle, not the flags' 32.
		{"zen4 vm", cpuinfo("AuthenticAMD", "25", "AMD EPYC", "2596.148", "2", "2", avx512), "", 2, 16, 2596.148, 83.077, "Zen 4"},
		// AVX-512 elsewhere (Intel): the flags' 32.
		{"avx512 intel", cpuinfo("GenuineIntel", "6", "Intel Xeon", "2000.000", "2", "2", avx512), "", 2, 32, 2000, 128, "avx512f+fma: 2 FMA units"},
		// DESIGN.md's earlier machine: AVX2+FMA, 16 per cycle.
		{"avx2 vm", cpuinfo("AuthenticAMD", "23", "AMD EPYC", "2445.000", "2", "2", avx2), "", 2, 16, 2445, 78.24, "avx2/fma"},
		// Intel with the clock in the model name and SMT: 8 threads on 4 cores.
		{"intel smt", cpuinfo("GenuineIntel", "6", "Intel(R) Xeon(R) CPU E5-4650 0 @ 2.70GHz", "1200.000", "16", "8", avx), "", 8, 8, 2700, 4 * 2700 * 8 / 1000.0, "model name"},
		// cpufreq's base frequency beats the current "cpu MHz".
		{"base freq", cpuinfo("GenuineIntel", "6", "Intel Xeon", "800.000", "4", "4", avx2), "2100000\n", 4, 16, 2100, 4 * 2100 * 16 / 1000.0, "base_frequency"},
		{"sse2 only", cpuinfo("GenuineIntel", "6", "Old", "3000", "1", "1", sse), "", 1, 4, 3000, 12, "sse2"},
	}
	for _, tc := range tests {
		c, err := ParseCPU(strings.NewReader(tc.info), tc.baseKHz)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p := c.Peak(tc.threads)
		if p.PerCycle != tc.perCycle || math.Abs(p.MHz-tc.mhz) > 0.001 || math.Abs(p.GFLOPS-tc.gflops) > 0.01 {
			t.Errorf("%s: %d FLOPs/cycle at %v MHz = %.3f GFLOPS, want %d, %v, %.3f", tc.name, p.PerCycle, p.MHz, p.GFLOPS, tc.perCycle, tc.mhz, tc.gflops)
		}
		if !strings.Contains(p.How, tc.how) || !strings.Contains(p.How, "flags peak") {
			t.Errorf("%s: How %q lacks %q", tc.name, p.How, tc.how)
		}
	}
	for name, info := range map[string]string{
		"no clock": "vendor_id\t: X\nflags\t: sse2\n",
		"no flags": cpuinfo("X", "1", "Y", "1000", "1", "1", ""),
	} {
		if _, err := ParseCPU(strings.NewReader(info), ""); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The host's own figures parse.
	if c, err := ReadCPU(); err != nil {
		t.Errorf("this host: %v", err)
	} else {
		t.Logf("this host: %s", c.Peak(2).How)
	}
}
