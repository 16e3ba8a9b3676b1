package docker

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCgroupCPU(t *testing.T) {
	const id = "0123456789abcdef"
	cases := []struct {
		name, path, content string
		want                time.Duration
		ok                  bool
	}{
		{"v1 cgroupfs", "cpuacct/docker/" + id + "/cpuacct.usage", "1500000000\n", 1500 * time.Millisecond, true},
		{"v1 joint mount, systemd", "cpu,cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage", "42\n", 42, true},
		{"v2 cgroupfs", "docker/" + id + "/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n", 2500 * time.Microsecond, true},
		{"v2 systemd", "system.slice/docker-" + id + ".scope/cpu.stat", "usage_usec 7\n", 7 * time.Microsecond, true},
		{"another container", "cpuacct/docker/fedcba9876543210/cpuacct.usage", "1\n", 0, false},
		{"garbage", "cpuacct/docker/" + id + "/cpuacct.usage", "lots\n", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, c.path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, ok := cgroupCPU(root, id)
			if got != c.want || ok != c.ok {
				t.Errorf("cgroupCPU = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := cgroupCPU(t.TempDir(), "../../etc"); ok {
		t.Error("an id with a path in it was read")
	}
}
