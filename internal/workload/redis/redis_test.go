package redis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
)

const csvHeader = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`

func TestParseCSV(t *testing.T) {
	real, err := os.ReadFile("testdata/redis-benchmark-7.0-set.csv")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		out  string
		want Row
	}{
		{"brief example", csvHeader + "\n" + `"SET","28328.61","1.239","0.144","0.839","3.343","6.439","21.279"` + "\n",
			Row{Test: "SET", RPS: 28328.61, AvgMs: 1.239, MinMs: 0.144, P50Ms: 0.839, P95Ms: 3.343, P99Ms: 6.439, MaxMs: 21.279}},
		{"real redis-benchmark 7.0.15 output", string(real),
			Row{Test: "SET", RPS: 39447.73, AvgMs: 0.877, MinMs: 0.216, P50Ms: 0.719, P95Ms: 1.639, P99Ms: 4.575, MaxMs: 15.215}},
		{"GET, CRLF, no trailing newline", csvHeader + "\r\n" + `"GET","100000.00","0.5","0.1","0.4","0.9","1.5","3.0"`,
			Row{Test: "GET", RPS: 100000, AvgMs: 0.5, MinMs: 0.1, P50Ms: 0.4, P95Ms: 0.9, P99Ms: 1.5, MaxMs: 3}},
		{"noise before the header is ignored", "WARNING: something\n" + csvHeader + "\n" + `"SET","1.5","1","1","1","1","1","1"` + "\n",
			Row{Test: "SET", RPS: 1.5, AvgMs: 1, MinMs: 1, P50Ms: 1, P95Ms: 1, P99Ms: 1, MaxMs: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCSV([]byte(tt.out))
			if err != nil {
				t.Fatalf("ParseCSV: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseCSV = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseCSVErrors(t *testing.T) {
	row := `"SET","28328.61","1.239","0.144","0.839","3.343","6.439","21.279"`
	tests := []struct {
		name, out, want string
	}{
		{"empty", "", "no CSV header"},
		{"blank lines", "\n\n", "no CSV header"},
		{"no header", row + "\n", "no CSV header"},
		{"connection error text", "Could not connect to Redis at 127.0.0.1:1: Connection refused\n", "no CSV header"},
		{"header only", csvHeader + "\n", "found 0"},
		{"two rows", csvHeader + "\n" + row + "\n" + strings.Replace(row, "SET", "GET", 1) + "\n", "found 2"},
		{"non-numeric rps", csvHeader + "\n" + `"SET","fast","1.239","0.144","0.839","3.343","6.439","21.279"` + "\n", `"rps"`},
		{"non-numeric latency", csvHeader + "\n" + `"SET","28328.61","1.239","0.144","0.839","3.343","n/a","21.279"` + "\n", `"p99_latency_ms"`},
		{"empty field", csvHeader + "\n" + `"SET","28328.61","","0.144","0.839","3.343","6.439","21.279"` + "\n", `"avg_latency_ms"`},
		{"NaN rps", csvHeader + "\n" + `"SET","nan","1.239","0.144","0.839","3.343","6.439","21.279"` + "\n", `"rps"`},
		{"Inf latency", csvHeader + "\n" + `"SET","28328.61","+Inf","0.144","0.839","3.343","6.439","21.279"` + "\n", `"avg_latency_ms"`},
		{"rps 0", csvHeader + "\n" + `"SET","0.00","1.239","0.144","0.839","3.343","6.439","21.279"` + "\n", "not positive"},
		{"rps negative", csvHeader + "\n" + `"SET","-5","1.239","0.144","0.839","3.343","6.439","21.279"` + "\n", "not positive"},
		{"truncated row", csvHeader + "\n" + `"SET","28328.61","1.239"` + "\n", "found 0"},
		{"truncated mid-field", csvHeader + "\n" + `"SET","28328.61","1.2`, "not CSV"},
		{"truncated header", `"test","rps","avg_lat`, "not CSV"},
		{"header missing a column", `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_ms"` + "\n" + row + "\n", `"max_latency_ms" missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCSV([]byte(tt.out))
			if err == nil {
				t.Fatalf("ParseCSV = %+v, want an error", got)
			}
			if got != (Row{}) {
				t.Errorf("ParseCSV returned %+v with its error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseCSV error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func newInstance(t *testing.T, overrides map[string]string) *Instance {
	t.Helper()
	v, err := workload.Resolve(Workload{}.Params(), overrides, false)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Instance)
}

func TestBenchArgv(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		n, keys   int
		want      []string
	}{
		{"defaults", nil, 50000, 1000,
			[]string{"redis-benchmark", "-h", "127.0.0.1", "-p", "6379", "-c", "1000", "-n", "50000", "-P", "1",
				"-t", "set", "-d", "1", "-r", "1000", "--csv"}},
		{"get, pipelined, threads", map[string]string{"op": "get", "clients": "50", "pipeline": "16", "datasize": "64", "threads": "2"}, 7, 9,
			[]string{"redis-benchmark", "-h", "127.0.0.1", "-p", "6379", "-c", "50", "-n", "7", "-P", "16",
				"-t", "get", "-d", "64", "-r", "9", "--csv", "--threads", "2"}},
		{"threads 1 adds no --threads", map[string]string{"threads": "1"}, 1, 1,
			[]string{"redis-benchmark", "-h", "127.0.0.1", "-p", "6379", "-c", "1000", "-n", "1", "-P", "1",
				"-t", "set", "-d", "1", "-r", "1", "--csv"}},
		{"pinned client", map[string]string{"client_cpus": "1", "threads": "4"}, 100, 10,
			[]string{"taskset", "-c", "1", "redis-benchmark", "-h", "127.0.0.1", "-p", "6379", "-c", "1000", "-n", "100", "-P", "1",
				"-t", "set", "-d", "1", "-r", "10", "--csv", "--threads", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newInstance(t, tt.overrides)
			got := in.benchArgv("127.0.0.1:6379", tt.n, tt.keys)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("benchArgv =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
	// An IPv6 address is split into host and port correctly.
	got := newInstance(t, nil).benchArgv("[::1]:7000", 1, 1)
	if got[2] != "::1" || got[4] != "7000" {
		t.Errorf("benchArgv with [::1]:7000: -h %q -p %q", got[2], got[4])
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		wantErr   string
	}{
		{"defaults", nil, ""},
		{"keyspace at the limit", map[string]string{"keyspace": strconv.Itoa(MaxKeyspace)}, ""},
		{"keyspace above the limit", map[string]string{"keyspace": strconv.Itoa(MaxKeyspace + 1)}, "exceeds redis-benchmark's limit"},
		{"huge keyspace", map[string]string{"keyspace": "100000000000"}, "exceeds redis-benchmark's limit"},
		{"client_cpus list", map[string]string{"client_cpus": "0,1"}, ""},
		{"client_cpus bad", map[string]string{"client_cpus": "a"}, "parameter client_cpus"},
		{"client_cpus reversed", map[string]string{"client_cpus": "3-1"}, "parameter client_cpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := workload.Resolve(Workload{}.Params(), tt.overrides, false)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Workload{}.New(v)
			if tt.wantErr == "" {
				if err != nil || in == nil {
					t.Fatalf("New = %v, %v", in, err)
				}
				if len(in.Metrics()) == 0 {
					t.Error("instance reports no metrics")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParamsResolve(t *testing.T) {
	// The declared defaults must pass their own checks.
	for _, quick := range []bool{false, true} {
		v, err := workload.Resolve(Workload{}.Params(), nil, quick)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range (Workload{}).Params() {
			if p.Type == workload.String && p.Enum == nil {
				continue
			}
			if err := p.Check(v[p.Name]); err != nil {
				t.Errorf("quick=%v: default %s=%q fails its own check: %v", quick, p.Name, v[p.Name], err)
			}
		}
	}
}

// resp sends one command in RESP and returns the first reply line and, for a
// bulk string, its payload.
func resp(t *testing.T, r *bufio.Reader, c net.Conn, args ...string) (string, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") || line == "$-1" {
		return line, ""
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		t.Fatalf("%v: bad bulk length %q", args, line)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	return line, string(buf[:n])
}

// TestPreloadRealServer starts a real redis-server and checks that Preload
// writes the keys redis-benchmark's -r draws, with values of the given size.
func TestPreloadRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	ports, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := redisproto.WaitReady(ctx, addr, 5*time.Second); err != nil {
		t.Fatalf("%v\nredis-server output:\n%s", err, log.String())
	}

	if err := Preload(ctx, (&net.Dialer{}).DialContext, addr, 10000, 1); err != nil {
		t.Fatalf("Preload: %v", err)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if line, _ := resp(t, r, c, "DBSIZE"); line != ":10000" {
		t.Errorf("DBSIZE = %q, want :10000", line)
	}
	if line, val := resp(t, r, c, "GET", "key:000000000042"); line != "$1" || len(val) != 1 {
		t.Errorf("GET key:000000000042 = %q %q, want a 1-byte value", line, val)
	}
	if line, _ := resp(t, r, c, "EXISTS", "key:000000009999"); line != ":1" {
		t.Errorf("EXISTS key:000000009999 = %q, want :1 (last key)", line)
	}
	if line, _ := resp(t, r, c, "EXISTS", "key:000000010000"); line != ":0" {
		t.Errorf("EXISTS key:000000010000 = %q, want :0 (one past the last key)", line)
	}
}

// TestNativeServerUnprivileged: natively the password-less server runs as
// the redis user, not as root.
func TestNativeServerUnprivileged(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("starts redis-server as root would (root only)")
	}
	u, err := user.Lookup("redis")
	if err != nil {
		t.Skipf("no redis user (install redis-server): %v", err)
	}
	// Temp dirs in /tmp, as in a run: the redis user must reach them.
	run := runid.New()
	env := platform.Env{Run: run, LogDir: t.TempDir()}
	p, err := native.New("native", env, state.Dir{Root: t.TempDir()}, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in := &Instance{clients: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := p.Start(ctx, "t0", in.spec())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	if err := redisproto.WaitReady(ctx, srv.Addr("redis"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The wrappers (cgroup shell, setpriv) exec, so the group leader is
	// the server. (redis-server rewrites its environment with its title, so
	// /proc/PID/environ no longer names the run.)
	var pid int
	if _, err := fmt.Sscanf(strings.TrimPrefix(srv.Describe(), "host process pid "), "%d", &pid); err != nil {
		t.Fatalf("no pid in %q", srv.Describe())
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if strings.TrimSpace(string(comm)) != "redis-server" {
		t.Fatalf("process %d is %q, not redis-server", pid, comm)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	found := false
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			found = true
			if f[1] != u.Uid || f[2] != u.Uid {
				t.Errorf("redis-server %d runs as uid %s/%s, want redis (%s)", pid, f[1], f[2], u.Uid)
			}
		}
	}
	if !found {
		t.Fatal("no Uid line in /proc/PID/status")
	}
}
