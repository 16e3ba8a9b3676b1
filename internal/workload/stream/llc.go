package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/platform"
)

// CPUDir is where Linux describes the CPUs and their caches.
const CPUDir = "/sys/devices/system/cpu"

// LLC describes the machine's last-level cache: the highest cache level
// holding data, counted once per instance (an instance is shared by the
// CPUs of its shared_cpu_list).
type LLC struct {
	Level     int
	Size      int64 // bytes of one instance
	Instances int
	Total     int64 // bytes over all instances
}

// String describes the cache for notes ("1 x 32.0 MiB L3").
func (c LLC) String() string {
	return fmt.Sprintf("%d x %.1f MiB L%d", c.Instances, float64(c.Size)/(1<<20), c.Level)
}

// ReadLLC reads the last-level cache from the cache/index* directories of
// every cpuN under dir (level, type, size, shared_cpu_list), as
// /sys/devices/system/cpu/cpu0/cache/index3/size says "32768K".
func ReadLLC(dir string) (LLC, error) {
	idx, err := filepath.Glob(filepath.Join(dir, "cpu[0-9]*", "cache", "index[0-9]*"))
	if err != nil || len(idx) == 0 {
		return LLC{}, fmt.Errorf("no CPU cache information under %s: set the llc parameter (e.g. llc=32m)", dir)
	}
	sort.Strings(idx)
	type inst struct {
		level int
		size  int64
	}
	seen := map[string]inst{} // by level and shared_cpu_list
	top := 0
	for _, d := range idx {
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(d, name))
			return strings.TrimSpace(string(b))
		}
		if read("type") == "Instruction" {
			continue
		}
		level, err := strconv.Atoi(read("level"))
		if err != nil {
			continue
		}
		size, err := platform.ParseBytes(read("size"))
		if err != nil {
			return LLC{}, fmt.Errorf("cache size in %s: %w", d, err)
		}
		shared := read("shared_cpu_list")
		if shared == "" {
			shared = d // unknown sharing: count it once per CPU
		}
		seen[strconv.Itoa(level)+"/"+shared] = inst{level, size}
		top = max(top, level)
	}
	var c LLC
	c.Level = top
	for _, i := range seen {
		if i.level != top {
			continue
		}
		c.Instances++
		c.Total += i.size
		c.Size = max(c.Size, i.size)
	}
	if c.Instances == 0 {
		return LLC{}, fmt.Errorf("no data cache found under %s: set the llc parameter (e.g. llc=32m)", dir)
	}
	return c, nil
}
