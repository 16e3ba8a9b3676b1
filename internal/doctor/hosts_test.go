package doctor

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/vmagent"
)

// fakeRemote answers the host checks' commands as a healthy Debian host
// would, with the given clock reading and redis-server version.
type fakeRemote struct {
	name  string
	off   vmagent.Offset
	redis string
}

func (f fakeRemote) Name() string           { return f.name }
func (f fakeRemote) Offset() vmagent.Offset { return f.off }
func (f fakeRemote) Output(_ context.Context, cmd string) ([]byte, error) {
	switch {
	case strings.Contains(cmd, "dpkg-query") && strings.Contains(cmd, " redis-server "):
		return []byte(f.redis), nil
	case strings.Contains(cmd, "dpkg-query"):
		return []byte("1.0"), nil
	case strings.HasPrefix(cmd, "df "):
		return []byte("4000000\n4000000\n"), nil
	case strings.Contains(cmd, "/proc/self/stat"):
		return []byte("yes\n"), nil
	}
	return nil, nil
}

// TestHostsClockAndVersions: a host's clock is failed by the rule the run
// refuses it by (the offset with half the round trip counted against it),
// and a workload package whose version differs between hosts is failed
// naming both.
func TestHostsClockAndVersions(t *testing.T) {
	limit := 50 * time.Millisecond
	hosts := []Remote{
		fakeRemote{name: "sut1", off: vmagent.Offset{Offset: 45 * time.Millisecond, RTT: 2 * time.Millisecond}, redis: "5:7.0.15-1"},
		fakeRemote{name: "client1", off: vmagent.Offset{Offset: -45 * time.Millisecond, RTT: 12 * time.Millisecond}, redis: "5:7.0.15-1"},
		fakeRemote{name: "client2", off: vmagent.Offset{Offset: time.Millisecond, RTT: time.Millisecond}, redis: "5:7.0.11-1"},
	}
	status := map[string]Status{}
	for _, c := range Hosts(context.Background(), hosts, limit) {
		switch {
		case strings.HasPrefix(c.Detail, "clock offset"):
			status[c.Name+" clock"] = c.Status
		case c.Name == "hosts redis-server":
			status["redis-server"] = c.Status
			if c.Status == Fail && !strings.Contains(c.Detail, "5:7.0.11-1 on client2; 5:7.0.15-1 on client1, sut1") {
				t.Errorf("versions detail %q", c.Detail)
			}
		case c.Status != OK:
			t.Errorf("%s: %s %s", c.Name, c.Status, c.Detail)
		}
	}
	want := map[string]Status{"host sut1 clock": OK, "host client1 clock": Fail, "host client2 clock": OK, "redis-server": Fail}
	for k, w := range want {
		if status[k] != w {
			t.Errorf("%s: %q, want %q", k, status[k], w)
		}
	}
}

// sockHost is a sut host whose "SSH channel" to a socket is a local dial.
type sockHost struct{ name, sock string }

func (h sockHost) Name() string         { return h.name }
func (h sockHost) DockerSocket() string { return h.sock }
func (h sockHost) DialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

func TestHostDocker(t *testing.T) {
	missing := sockHost{"sut2", filepath.Join(t.TempDir(), "docker.sock")}
	checks := HostDocker(context.Background(), []DockerRemote{missing})
	if len(checks) != 1 || checks[0].Status != Warn || !strings.Contains(checks[0].Detail, "host sut2") || !strings.Contains(checks[0].Fix, "docker_socket") {
		t.Fatalf("an engine that does not answer: %+v, want a warning naming the host and the fix", checks)
	}
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skip("no local dockerd for the answering case")
	}
	checks = HostDocker(context.Background(), []DockerRemote{sockHost{"sut1", "/var/run/docker.sock"}})
	if len(checks) != 1 || checks[0].Status != OK || !strings.Contains(checks[0].Detail, "Docker: dockerd ") {
		t.Fatalf("an answering engine: %+v", checks)
	}
}
