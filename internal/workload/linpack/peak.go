package linpack

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// CPU is what the peak is derived from: /proc/cpuinfo of the host.
type CPU struct {
	Vendor string // vendor_id
	Model  string // model name
	Family int    // cpu family
	// MHz is the nominal clock and MHzFrom says where it came from.
	MHz     float64
	MHzFrom string
	Flags   map[string]bool
	// ThreadsPerCore is siblings / cpu cores (2 with SMT), 1 when unknown.
	ThreadsPerCore int
}

// modelGHz finds the clock some model names carry ("... @ 2.70GHz").
var modelGHz = regexp.MustCompile(`@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz`)

// ParseCPU reads /proc/cpuinfo text (the first processor's entry is
// enough). baseKHz is the content of cpufreq's base_frequency, when the
// kernel has it ("" when not). The nominal clock is taken, in this order,
// from the model name ("@ 2.70GHz"), from base_frequency, and from the
// "cpu MHz" line (which is the current clock where the kernel scales it,
// and the TSC rate inside most virtual machines).
func ParseCPU(r io.Reader, baseKHz string) (CPU, error) {
	c := CPU{Flags: map[string]bool{}, ThreadsPerCore: 1}
	var siblings, cores int
	var cpuMHz float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if strings.TrimSpace(sc.Text()) == "" && c.Vendor != "" {
				break // the first processor's entry is complete
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			c.Vendor = v
		case "model name":
			c.Model = v
		case "cpu family":
			c.Family, _ = strconv.Atoi(v)
		case "cpu MHz":
			cpuMHz, _ = strconv.ParseFloat(v, 64)
		case "siblings":
			siblings, _ = strconv.Atoi(v)
		case "cpu cores":
			cores, _ = strconv.Atoi(v)
		case "flags":
			for _, f := range strings.Fields(v) {
				c.Flags[f] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading cpuinfo: %w", err)
	}
	if siblings > 0 && cores > 0 && siblings >= cores {
		c.ThreadsPerCore = siblings / cores
	}
	if m := modelGHz.FindStringSubmatch(c.Model); m != nil {
		g, _ := strconv.ParseFloat(m[1], 64)
		c.MHz, c.MHzFrom = g*1000, "the model name"
	} else if khz, err := strconv.ParseFloat(strings.TrimSpace(baseKHz), 64); err == nil && khz > 0 {
		c.MHz, c.MHzFrom = khz/1000, "cpufreq base_frequency"
	} else if cpuMHz > 0 {
		c.MHz, c.MHzFrom = cpuMHz, `/proc/cpuinfo "cpu MHz"`
	}
	if !(c.MHz > 0) {
		return c, fmt.Errorf("cpuinfo gives no clock rate (no \"cpu MHz\" line, no GHz in the model name)")
	}
	if len(c.Flags) == 0 {
		return c, fmt.Errorf("cpuinfo has no flags line (not x86?)")
	}
	return c, nil
}

// ReadCPU reads the host's /proc/cpuinfo and cpufreq base frequency.
func ReadCPU() (CPU, error) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return CPU{}, fmt.Errorf("reading /proc/cpuinfo: %w", err)
	}
	defer f.Close()
	base, _ := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency")
	return ParseCPU(f, string(base))
}

// FlopsPerCycle is the double-precision FLOPs one core can start per cycle
// as the CPU flags suggest, and why: two FMA units (a multiply and an add
// each) of the widest vector the flags offer, as on every x86 core with FMA
// since Intel Haswell and AMD Zen; without FMA, one add and one multiply
// unit. The flags cannot tell how many units a core really has: AMD Zen 4
// runs 512-bit instructions on 256-bit units (16, not 32: known here by its
// family), some Intel parts have one 512-bit FMA unit.
func (c CPU) FlopsPerCycle() (int, string) {
	flags := c.Flags
	switch {
	case c.zen4():
		return 16, "avx512f+fma on AMD family 25, Zen 4: AVX-512 runs on its 2 FMA units of 256 bits, 2 x 4 doubles x 2"
	case flags["avx512f"] && flags["fma"]:
		return 32, "avx512f+fma: 2 FMA units x 8 doubles x 2"
	case flags["fma"] && flags["avx"]:
		return 16, "avx2/fma: 2 FMA units x 4 doubles x 2"
	case flags["avx"]:
		return 8, "avx without fma: 1 add + 1 multiply unit x 4 doubles"
	case flags["sse2"]:
		return 4, "sse2: 1 add + 1 multiply unit x 2 doubles"
	}
	return 2, "no vector flags: 1 add + 1 multiply per cycle"
}

// zen4 reports an AMD Zen 4 core: family 25 is Zen 3 and Zen 4, and only
// Zen 4 has AVX-512.
func (c CPU) zen4() bool {
	return c.Vendor == "AuthenticAMD" && c.Family == 25 && c.Flags["avx512f"] && c.Flags["fma"]
}

// Peak is a theoretical peak rate.
type Peak struct {
	GFLOPS   float64
	Cores    float64
	MHz      float64
	PerCycle int
	// How says how the figure was derived, for the notes.
	How string
}

// Peak returns the flags-derived peak of threads BLAS threads: threads /
// ThreadsPerCore cores (SMT siblings share their core's units) x the
// nominal clock x FlopsPerCycle.
func (c CPU) Peak(threads int) Peak {
	per, why := c.FlopsPerCycle()
	cores := float64(threads) / float64(max(c.ThreadsPerCore, 1))
	p := Peak{Cores: cores, MHz: c.MHz, PerCycle: per, GFLOPS: cores * c.MHz * float64(per) / 1000}
	p.How = fmt.Sprintf("flags peak %.1f GFLOPS = %s cores x %.0f MHz (%s) x %d DP FLOPs/cycle (%s)",
		p.GFLOPS, trimFloat(cores), c.MHz, c.MHzFrom, per, why)
	if c.zen4() {
		p.How += "; Zen 4 boosts above its nominal clock, so a rate may pass this peak"
	}
	return p
}

func trimFloat(f float64) string {
	if f == math.Trunc(f) {
		return strconv.Itoa(int(f))
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}
