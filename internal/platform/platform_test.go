package platform

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCPUSet(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"3", []int{3}},
		{"0-3", []int{0, 1, 2, 3}},
		{"0,2", []int{0, 2}},
		{"0-2,5", []int{0, 1, 2, 5}},
		{"5,0-2", []int{0, 1, 2, 5}},
		{"1,1", []int{1}},
		{"0-2,1-3", []int{0, 1, 2, 3}},
		{"2-2", []int{2}},
		{" 1 , 3 ", []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCPUSet(tt.in)
			if err != nil {
				t.Fatalf("ParseCPUSet(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCPUSet(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCPUSetErrors(t *testing.T) {
	for _, in := range []string{
		"", "a", "3-1", "1-", "-1", "-", "1,", ",1", "1-a", "0-1-2", "1.5", "+1", "1-+3",
		"0-99999999999", "0-100000000", // would otherwise allocate one map entry per CPU
	} {
		t.Run(in, func(t *testing.T) {
			done := make(chan struct{})
			var got []int
			var err error
			go func() {
				got, err = ParseCPUSet(in)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("ParseCPUSet(%q) did not return within 5s", in)
			}
			if err == nil {
				t.Fatalf("ParseCPUSet(%q) = %v, want an error", in, got)
			}
			if !strings.Contains(err.Error(), "cpuset") {
				t.Errorf("error %q does not name the cpuset", err)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"512m", 512 << 20},
		{"512M", 512 << 20},
		{"512mb", 512 << 20},
		{"512MiB", 512 << 20},
		{"2g", 2 << 30},
		{"2G", 2 << 30},
		{"1024k", 1 << 20},
		{"1.5g", 3 << 29},
		{"1t", 1 << 40},
		{"100", 100},
		{" 64m ", 64 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBytes(tt.in)
			if err != nil {
				t.Fatalf("ParseBytes(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseBytes(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseBytesErrors(t *testing.T) {
	for _, in := range []string{
		"x", "-1", "0", "0m", "", "m", "b", "-2g", "12q", "1,5g",
		"nan", "NaN", "inf", "+Inf", "1e30", "99999999t", // not finite / overflow int64
		"0.1", // less than one byte
	} {
		t.Run(in, func(t *testing.T) {
			got, err := ParseBytes(in)
			if err == nil {
				t.Fatalf("ParseBytes(%q) = %d, want an error", in, got)
			}
			if !strings.Contains(err.Error(), "size") {
				t.Errorf("error %q does not say it is about a size", err)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		wantErr string // "" = valid
	}{
		{"zero", Options{}, ""},
		{"all", Options{CPUSet: "0-1", CPUs: 1.5, Memory: "512m"}, ""},
		{"min cpus", Options{CPUs: 0.01}, ""},
		{"bad cpuset", Options{CPUSet: "a"}, "cpuset"},
		{"reversed cpuset", Options{CPUSet: "3-1"}, "cpuset"},
		{"negative cpus", Options{CPUs: -1}, "cpus"},
		{"tiny cpus", Options{CPUs: 0.001}, "at least 0.01"},
		{"nan cpus", Options{CPUs: math.NaN()}, "cpus"},
		{"inf cpus", Options{CPUs: math.Inf(1)}, "cpus"},
		{"bad memory", Options{Memory: "x"}, "size"},
		{"zero memory", Options{Memory: "0"}, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%+v): %v", tt.o, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error containing %q", tt.o, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate(%+v) = %q, want it to contain %q", tt.o, err, tt.wantErr)
			}
		})
	}
}

func TestOptionsStringAndMemoryBytes(t *testing.T) {
	tests := []struct {
		o       Options
		want    string
		wantMem int64
	}{
		{Options{}, "", 0},
		{Options{CPUSet: "0-1"}, "cpuset=0-1", 0},
		{Options{CPUs: 0.5}, "cpus=0.5", 0},
		{Options{Memory: "2g"}, "memory=2g", 2 << 30},
		{Options{CPUSet: "1", CPUs: 1, Memory: "512m"}, "cpuset=1,cpus=1,memory=512m", 512 << 20},
		{Options{CPUs: -1}, "", 0}, // not positive: not shown
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.o, got, tt.want)
		}
		if got := tt.o.MemoryBytes(); got != tt.wantMem {
			t.Errorf("%+v.MemoryBytes() = %d, want %d", tt.o, got, tt.wantMem)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	cmd := func(Listen) []string { return []string{"true"} }
	ok := Spec{Name: "redis", Ports: []string{"a", "b"}, Command: cmd,
		Files: []File{{Path: "conf/redis.conf"}, {Path: "x"}}}
	tests := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{"valid", func(*Spec) {}, ""},
		{"no ports no files", func(s *Spec) { s.Ports, s.Files = nil, nil }, ""},
		{"empty name", func(s *Spec) { s.Name = "" }, "name"},
		{"space in name", func(s *Spec) { s.Name = "my redis" }, "name"},
		{"slash in name", func(s *Spec) { s.Name = "a/b" }, "name"},
		{"colon in name", func(s *Spec) { s.Name = "a:b" }, "name"},
		{"no command", func(s *Spec) { s.Command = nil }, "no command"},
		{"duplicate port", func(s *Spec) { s.Ports = []string{"a", "b", "a"} }, `port "a" declared twice`},
		{"absolute file", func(s *Spec) { s.Files = []File{{Path: "/etc/passwd"}} }, "relative"},
		{"dotdot file", func(s *Spec) { s.Files = []File{{Path: "../x"}} }, "relative"},
		{"inner dotdot file", func(s *Spec) { s.Files = []File{{Path: "a/../../x"}} }, "relative"},
		{"empty file path", func(s *Spec) { s.Files = []File{{Path: ""}} }, "relative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			s.Ports = append([]string(nil), ok.Ports...)
			s.Files = append([]File(nil), ok.Files...)
			tt.mutate(&s)
			err := s.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestListenPort(t *testing.T) {
	l := Listen{Ports: map[string]int{"redis": 6379}}
	if got := l.Port("redis"); got != 6379 {
		t.Errorf("Port(redis) = %d", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Port of an undeclared name did not panic")
		}
	}()
	l.Port("nope")
}

func TestBuiltin(t *testing.T) {
	names := BuiltinNames()
	want := []string{Native, DockerNAT, DockerProxy, DockerBridge, DockerHost}
	if len(names) < len(want) || !reflect.DeepEqual(names[:len(want)], want) {
		t.Errorf("BuiltinNames = %v, want it to start with %v", names, want)
	}
	for _, n := range append(want, DockerNetwork, Veth, OVS, Routed, Macvlan) {
		if !IsBuiltin(n) {
			t.Errorf("IsBuiltin(%q) = false", n)
		}
	}
	if IsBuiltin("vmware") || IsBuiltin("") {
		t.Error("IsBuiltin accepts an unknown name")
	}
}

// bindable checks that a port can be listened on now.
func bindable(t *testing.T, host string, port int) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Errorf("port %d is not bindable: %v", port, err)
		return
	}
	l.Close()
}

func TestFreePorts(t *testing.T) {
	for _, n := range []int{0, 1, 5} {
		ports, err := FreePorts("127.0.0.1", n)
		if err != nil {
			t.Fatalf("FreePorts(%d): %v", n, err)
		}
		if len(ports) != n {
			t.Fatalf("FreePorts(%d) returned %d ports", n, len(ports))
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p <= 0 || p > 65535 {
				t.Errorf("port %d out of range", p)
			}
			if seen[p] {
				t.Errorf("port %d returned twice in %v", p, ports)
			}
			seen[p] = true
			bindable(t, "127.0.0.1", p)
		}
	}
	if _, err := FreePorts("192.0.2.1", 1); err == nil { // TEST-NET-1, not ours
		t.Error("FreePorts on an address not on this host succeeded")
	}
}

func TestAssignPorts(t *testing.T) {
	spec := Spec{Name: "s", Ports: []string{"main", "admin", "metrics"}, Command: func(Listen) []string { return nil }}
	m, err := AssignPorts(spec, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 {
		t.Fatalf("AssignPorts = %v, want 3 ports", m)
	}
	seen := map[int]string{}
	for _, name := range spec.Ports {
		p, ok := m[name]
		if !ok {
			t.Fatalf("port %q not assigned: %v", name, m)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("ports %q and %q both got %d", name, other, p)
		}
		seen[p] = name
		bindable(t, "127.0.0.1", p)
	}
	m, err = AssignPorts(Spec{Name: "none"}, "127.0.0.1")
	if err != nil || len(m) != 0 {
		t.Errorf("AssignPorts with no ports = %v, %v", m, err)
	}
}

func TestWaitTCPListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	start := time.Now()
	if err := WaitTCP(context.Background(), l.Addr().String(), 2*time.Second); err != nil {
		t.Fatalf("WaitTCP on a listener: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("WaitTCP on a listener took %v", d)
	}
}

func TestWaitTCPLateListener(t *testing.T) {
	ports, err := FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	ready := make(chan net.Listener, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ready <- nil
			return
		}
		ready <- l
	}()
	err = WaitTCP(context.Background(), addr, 3*time.Second)
	l := <-ready
	if l == nil {
		t.Skip("lost the port race")
	}
	defer l.Close()
	if err != nil {
		t.Fatalf("WaitTCP with a listener appearing after 150ms: %v", err)
	}
}

func TestWaitTCPTimesOut(t *testing.T) {
	ports, err := FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	start := time.Now()
	err = WaitTCP(context.Background(), addr, 200*time.Millisecond)
	d := time.Since(start)
	if err == nil {
		t.Fatal("WaitTCP on a closed port succeeded")
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "did not accept") {
		t.Errorf("error %q does not name the address and the cause", err)
	}
	if d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("WaitTCP with a 200ms timeout returned after %v", d)
	}
}

func TestWaitTCPCancelled(t *testing.T) {
	ports, err := FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := WaitTCP(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), 10*time.Second); err == nil {
		t.Fatal("WaitTCP with a cancelled context succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("WaitTCP with a cancelled context took %v", d)
	}
}

// TestWaitReady: the readiness loop retries until the probe succeeds, and on
// timeout reports the last error the probe gave before the deadline.
func TestWaitReady(t *testing.T) {
	tries := 0
	err := WaitReady(context.Background(), time.Second, time.Millisecond, func(context.Context) error {
		if tries++; tries < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Errorf("WaitReady = %v after %d tries, want nil after 3", err, tries)
	}
	err = WaitReady(context.Background(), 50*time.Millisecond, time.Millisecond, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err() // cut short by the deadline: not the error to report
		case <-time.After(10 * time.Millisecond):
			return errors.New("connection closed by the peer")
		}
	})
	if err == nil || !strings.Contains(err.Error(), "not ready within 50ms: connection closed by the peer") {
		t.Errorf("WaitReady = %v, want the last probe error before the deadline", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitReady(ctx, time.Minute, time.Millisecond, func(ctx context.Context) error { return ctx.Err() }); err == nil {
		t.Error("WaitReady with a cancelled context succeeded")
	}
}

func TestEveryBuiltinHasAFamily(t *testing.T) {
	for _, i := range Builtin() {
		if Family(i.Name) == "" || FamilyRank(i.Name) >= len(Families) {
			t.Errorf("platform %s has no family", i.Name)
		}
	}
	if Family("no-such-kind") != "" || FamilyRank("no-such-kind") != len(Families) {
		t.Error("an unknown kind has a family")
	}
}

func TestPortPool(t *testing.T) {
	for _, c := range []struct {
		name, file string
		lo, hi     int
	}{
		{"linux default", "32768\t60999\n", 61000, 65535},
		{"wide top taken", "32768 65000\n", 10000, 32767},
		{"whole range ephemeral", "1024 65535\n", 1, 0},
		{"garbage", "x y\n", 1, 0},
		{"one field", "32768\n", 1, 0},
		{"reversed", "60999 32768\n", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "range")
			if err := os.WriteFile(f, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			old := localPortRange
			localPortRange = f
			defer func() { localPortRange = old }()
			lo, hi := portPool()
			if lo != c.lo || hi != c.hi {
				t.Errorf("portPool() = %d-%d, want %d-%d", lo, hi, c.lo, c.hi)
			}
		})
	}
}

// TestFreePortsOutsideEphemeral checks that the ports handed out cannot be
// taken as a connection's source port in the gap before their server binds.
func TestFreePortsOutsideEphemeral(t *testing.T) {
	lo, hi := portPool()
	if hi < lo {
		t.Skipf("this machine's ephemeral range leaves no pool (%s)", localPortRange)
	}
	ports, err := FreePorts("127.0.0.1", 50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Errorf("port %d outside the pool %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Errorf("port %d twice", p)
		}
		seen[p] = true
	}
	// A second call before anything binds them must not hand them out again.
	more, err := FreePorts("127.0.0.1", 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		if seen[p] {
			t.Errorf("port %d handed out twice across calls", p)
		}
	}
}

// TestFreePortsSmallPool: a pool of minPool ports serves many more calls
// than it holds ports (recent keeps half of it free).
func TestFreePortsSmallPool(t *testing.T) {
	f := filepath.Join(t.TempDir(), "range")
	if err := os.WriteFile(f, []byte("1024 64511\n"), 0o644); err != nil { // pool 64512-65535
		t.Fatal(err)
	}
	old := localPortRange
	localPortRange = f
	defer func() { localPortRange = old }()
	for i := 0; i < 3*minPool; i++ {
		ports, err := FreePorts("127.0.0.1", 1)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if ports[0] < 64512 {
			t.Fatalf("call %d: port %d outside the pool", i, ports[0])
		}
	}
}
