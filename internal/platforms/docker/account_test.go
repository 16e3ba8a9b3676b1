package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// TestProxyCPU sums the docker-proxy processes of one container from a
// fixture /proc: another container's proxy and other processes do not count.
func TestProxyCPU(t *testing.T) {
	root := t.TempDir()
	proc := func(pid, comm string, args []string, utime, stime int) {
		d := filepath.Join(root, pid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := pid + " (" + comm + ") S 1 1 1 0 -1 0 0 0 0 0 " + strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " 0 0 20 0 3 0 100 0 0"
		for name, content := range map[string]string{"comm": comm + "\n", "cmdline": strings.Join(args, "\x00") + "\x00", "stat": stat} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxy := func(ip string) []string {
		return []string{"/usr/bin/docker-proxy", "-proto", "tcp", "-host-ip", "127.0.0.1", "-host-port", "4000", "-container-ip", ip, "-container-port", "4000"}
	}
	proc("10", "docker-proxy", proxy("172.17.0.2"), 30, 20)
	proc("11", "docker-proxy", proxy("172.17.0.2"), 5, 5)
	proc("12", "docker-proxy", proxy("172.17.0.3"), 500, 500)
	proc("13", "redis-server", []string{"redis-server", "-container-ip", "172.17.0.2"}, 700, 0)
	hz := time.Second / time.Duration(sysinfo.ClockTicks())
	if got, want := proxyCPU(root, "172.17.0.2"), 60*hz; got != want {
		t.Errorf("proxyCPU = %v, want %v", got, want)
	}
	if got := proxyCPU(root, "172.17.0.9"); got != 0 {
		t.Errorf("proxyCPU of a container without proxies = %v, want 0", got)
	}
}
