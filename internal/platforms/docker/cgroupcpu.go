package docker

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupCPU reads the CPU time of container id from the cgroup file system
// under root, where the engine runs on this machine's kernel: cgroup v1
// cpuacct.usage (nanoseconds) or v2 cpu.stat usage_usec, under the
// cgroupfs driver's docker/<id> or the systemd driver's
// system.slice/docker-<id>.scope. It is the same counter the engine's
// stats API reports as total_usage, read in microseconds instead of the
// second a one-shot stats call takes. ok is false when no such cgroup is
// here (a remote engine, another layout): ask the engine then.
func cgroupCPU(root, id string) (d time.Duration, ok bool) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return 0, false
	}
	for _, dir := range []string{"docker/" + id, "system.slice/docker-" + id + ".scope"} {
		for _, v1 := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
			b, err := os.ReadFile(filepath.Join(root, v1, dir, "cpuacct.usage"))
			if err != nil {
				continue
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			if err == nil && n >= 0 {
				return time.Duration(n), true
			}
		}
		b, err := os.ReadFile(filepath.Join(root, dir, "cpu.stat"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(line, "usage_usec "); found {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
					return time.Duration(n) * time.Microsecond, true
				}
			}
		}
	}
	return 0, false
}
