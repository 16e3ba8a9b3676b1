package docker

import (
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
)

// cgroupCPU reads the CPU time of container id from the cgroup file system
// under root, where the engine runs on this machine's kernel (see
// cgroup.UsageAt), under the cgroupfs driver's docker/<id> or the systemd
// driver's system.slice/docker-<id>.scope. It is the same counter the
// engine's stats API reports as total_usage, read in microseconds instead
// of the second a one-shot stats call takes. ok is false when no such
// cgroup is here or it cannot be read (a remote engine, another layout):
// ask the engine then.
func cgroupCPU(root, id string) (d time.Duration, ok bool) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return 0, false
	}
	for _, dir := range []string{"docker/" + id, "system.slice/docker-" + id + ".scope"} {
		if d, found, err := cgroup.UsageAt(root, dir); found {
			return d, err == nil
		}
	}
	return 0, false
}
