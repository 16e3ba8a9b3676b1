package tcprr

import (
	"context"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSummary(t *testing.T) {
	real := readFile(t, "sockperf-3.7-pingpong-full-rtt.txt")
	want := Summary{Version: "3.7-no.git",
		TotalSeconds: 2.000, TotalSent: 119779, TotalReceived: 119778,
		ValidSeconds: 1.550, ValidSent: 92503, ValidReceived: 92503,
		MeanUs: 16.737, StdDevUs: 24.573,
		P50Us: 15.092, P90Us: 15.943, P99Us: 55.412, P999Us: 111.856, MinUs: 14.791, MaxUs: 3957.677,
		Observations: 92503}
	got, err := ParseSummary([]byte(real))
	if err != nil {
		t.Fatalf("ParseSummary: %v", err)
	}
	if got != want {
		t.Errorf("ParseSummary =\n  %+v\nwant\n  %+v", got, want)
	}
	if tps := got.TransactionsPerSec(); tps < 59679 || tps > 59680 {
		t.Errorf("TransactionsPerSec = %v, want 92503/1.550", tps)
	}

	// Without colour escapes, with CRLF line ends, and with a saved raw
	// file's header lines the result is the same.
	plain := ansi.ReplaceAllString(real, "")
	for name, out := range map[string]string{
		"no colours": plain,
		"CRLF":       strings.ReplaceAll(real, "\n", "\r\n"),
		"raw header": "# sockperf ping-pong ...\n# exit 0, wall 4.3s, cpu 400ms\n" + real,
	} {
		got, err := ParseSummary([]byte(out))
		if err != nil || got != want {
			t.Errorf("%s: ParseSummary = %+v, %v", name, got, err)
		}
	}
}

func TestParseSummaryErrors(t *testing.T) {
	real := readFile(t, "sockperf-3.7-pingpong-full-rtt.txt")
	drop := func(sub string) string {
		var keep []string
		for _, l := range strings.Split(real, "\n") {
			if !strings.Contains(l, sub) {
				keep = append(keep, l)
			}
		}
		out := strings.Join(keep, "\n")
		if out == real {
			t.Fatalf("no line contains %q", sub)
		}
		return out
	}
	replace := func(old, new string) string {
		if !strings.Contains(real, old) {
			t.Fatalf("%q not in the golden file", old)
		}
		return strings.Replace(real, old, new, 1)
	}
	tests := []struct {
		name, out, want string
	}{
		{"empty", "", "no sockperf summary"},
		{"refused (real)", readFile(t, "sockperf-3.7-refused.txt"), "ERROR: Can`t connect socket (errno=111 Connection refused)"},
		{"proxy without backend (real)", readFile(t, "sockperf-3.7-proxy-not-ready.txt"), "ERROR: A connection was forcibly closed by a peer"},
		{"bad message size (real)", readFile(t, "sockperf-3.7-bad-msgsize.txt"), "Invalid message size: 1 (min: 14)"},
		{"one-way latency (real, no --full-rtt)", readFile(t, "sockperf-3.7-pingpong-latency.txt"), "one-way latency"},
		{"truncated before the summary", real[:strings.Index(real, "[Valid Duration]")], "no sockperf summary"},
		{"no total run", drop("[Total Run]"), "no [Total Run]"},
		{"no mean", drop("avg-rtt"), "no sockperf summary"},
		{"no p99", drop("percentile 99.000"), "no 99.000 percentile"},
		{"no max", drop("<MAX>"), "no MAX percentile"},
		{"bad number", replace("ReceivedMessages=92503", "ReceivedMessages=x"), "no ReceivedMessages"},
		{"fractional count", replace("ReceivedMessages=92503", "ReceivedMessages=1.5"), "not a whole number"},
		{"zero received", replace("ReceivedMessages=92503", "ReceivedMessages=0"), "nothing was measured"},
		{"zero mean", replace("avg-rtt=16.737", "avg-rtt=0.000"), "not positive"},
		{"percentiles out of order", replace("percentile 99.000 =   55.412", "percentile 99.000 =    5.412"), "out of order"},
		{"two servers", real + "sockperf: ========= Printing statistics for Server No: 1\nsockperf: [Valid Duration] RunTime=1.550 sec; SentMessages=1; ReceivedMessages=1\n", "want one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSummary([]byte(tt.out))
			if err == nil {
				t.Fatalf("ParseSummary = %+v, want an error", got)
			}
			if got != (Summary{}) {
				t.Errorf("ParseSummary returned %+v with its error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseSummary error %q does not contain %q", err, tt.want)
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

func TestCommands(t *testing.T) {
	in := newInstance(t, map[string]string{"tool": "sockperf", "msgsize": "14"})
	got := in.clientArgv("192.0.2.2:40001", 30*time.Second)
	want := []string{"sockperf", "ping-pong", "--tcp", "-i", "192.0.2.2", "-p", "40001", "-m", "14", "-t", "30", "--mps=max", "--full-rtt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("clientArgv =\n  %q\nwant\n  %q", got, want)
	}
	if got := newInstance(t, map[string]string{"tool": "sockperf", "msgsize": "64"}).clientArgv("127.0.0.1:1", 2*time.Second); got[8] != "64" {
		t.Errorf("msgsize 64: %q", got)
	}
	spec := in.spec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := spec.Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"sockperf": 40001}})
	if want := []string{"sockperf", "server", "--tcp", "-i", "0.0.0.0", "-p", "40001"}; !reflect.DeepEqual(srv, want) {
		t.Errorf("server command %q, want %q", srv, want)
	}

	// The default: nn-rr with the seed's 1-byte messages, the trial length
	// as given (no rounding to whole seconds).
	rr := newInstance(t, nil)
	got = rr.clientArgv("192.0.2.2:40001", 2500*time.Millisecond)
	want = []string{benchbin.RR.Path(), "client", "-i", "192.0.2.2", "-p", "40001", "-m", "1", "-t", "2.5", "-w", "0.5"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nn-rr clientArgv =\n  %q\nwant\n  %q", got, want)
	}
	spec = rr.spec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	srv = spec.Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"rr": 40001}})
	if want := []string{benchbin.RR.Path(), "server", "-i", "0.0.0.0", "-p", "40001"}; !reflect.DeepEqual(srv, want) {
		t.Errorf("nn-rr server command %q, want %q", srv, want)
	}
	if rr.port() != "rr" || in.port() != "sockperf" {
		t.Errorf("ports %s, %s", rr.port(), in.port())
	}
}

func TestParseRR(t *testing.T) {
	out := readFile(t, "nn-rr.txt")
	got, err := ParseRR([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Version: "nn-rr BUILD", TotalSeconds: 1.000003, TotalSent: 63996, TotalReceived: 63996,
		ValidSeconds: 1.000003, ValidSent: 63996, ValidReceived: 63996, MeanUs: 15.626, StdDevUs: 27.085,
		P50Us: 14.862, P90Us: 15.744, P99Us: 21.232, P999Us: 58.436, MinUs: 14.572, MaxUs: 4380.691, Observations: 63996}
	if got != want {
		t.Errorf("ParseRR =\n  %+v\nwant\n  %+v", got, want)
	}
	for name, bad := range map[string]string{
		"no statistics": out[:strings.Index(out, "transactions:")],
		"no p99":        strings.Replace(out, "rtt-p99-us: 21.232\n", "", 1),
		"zero":          strings.Replace(out, "transactions: 63996", "transactions: 0", 1),
		"out of order":  strings.Replace(out, "rtt-p99-us: 21.232", "rtt-p99-us: 1.0", 1),
	} {
		if _, err := ParseRR([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ParseRR([]byte("nn-rr: connecting to 127.0.0.1 port 1: Connection refused\n")); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("error line: %v", err)
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{30 * time.Second, 30}, {2500 * time.Millisecond, 3}, {time.Second, 2}, {0, 2}, {3 * time.Second, 3},
	}
	for _, tt := range tests {
		if got := seconds(tt.d); got != tt.want {
			t.Errorf("seconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		wantErr   string
	}{
		{"defaults: nn-rr, 1 byte", nil, ""},
		{"nn-rr, 64 bytes", map[string]string{"msgsize": "64"}, ""},
		{"sockperf at its minimum", map[string]string{"tool": "sockperf", "msgsize": "14"}, ""},
		{"sockperf below its header", map[string]string{"tool": "sockperf"}, "set msgsize to at least 14, or tool=rr"},
		{"too large", map[string]string{"msgsize": "65001"}, "above 65000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := workload.Resolve(Workload{}.Params(), tt.overrides, false)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Workload{}.New(v)
			if tt.wantErr == "" {
				if err != nil || in == nil || len(in.Metrics()) == 0 {
					t.Fatalf("New = %v, %v", in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	for _, bad := range []map[string]string{{"msgsize": "0"}, {"tool": "netperf"}} {
		if _, err := workload.Resolve(Workload{}.Params(), bad, false); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	for _, quick := range []bool{false, true} {
		v, err := workload.Resolve(Workload{}.Params(), nil, quick)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range (Workload{}).Params() {
			if err := p.Check(v[p.Name]); err != nil {
				t.Errorf("quick=%v: default %s=%q fails its own check: %v", quick, p.Name, v[p.Name], err)
			}
		}
	}
}

// TestWaitReady checks the probe against a listener that holds connections,
// one that closes them at once (a proxy without its backend) and a closed
// port.
func TestWaitReady(t *testing.T) {
	listen := func(t *testing.T, hold bool) string {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				if !hold {
					c.Close()
					continue
				}
				go func() { time.Sleep(time.Second); c.Close() }()
			}
		}()
		return l.Addr().String()
	}
	ctx := context.Background()
	if err := WaitReady(ctx, listen(t, true), 2*time.Second); err != nil {
		t.Errorf("holding listener: %v", err)
	}
	if err := WaitReady(ctx, listen(t, false), 500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "closed by the peer") {
		t.Errorf("closing listener: %v, want a 'closed by the peer' error", err)
	}
	ports, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), 500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("closed port: %v, want connection refused", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := WaitReady(cctx, listen(t, false), time.Minute); err == nil {
		t.Error("cancelled context: no error")
	}
}
