package tcpstream

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

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

// replaceLast replaces the last occurrence of old in s: in iperf3's JSON the
// end sums come after the per-stream figures.
func replaceLast(t *testing.T, s, old, new string) string {
	t.Helper()
	i := strings.LastIndex(s, old)
	if i < 0 {
		t.Fatalf("%q not in the golden file", old)
	}
	return s[:i] + new + s[i+len(old):]
}

// withError adds iperf3's top-level "error" field to a complete report.
func withError(t *testing.T, s, msg string) string {
	return replaceLast(t, s, "\n}", ",\n\t\"error\":\t\""+msg+"\"\n}")
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		file string
		want Report
	}{
		{"iperf3-3.12-send.json", Report{Version: "iperf 3.12", Reverse: false, Streams: 1, Seconds: 2.00138,
			BytesReceived: 5206179840, BitsPerSecond: 20810360211.454094, SenderBitsPerSecond: 20819077390.0273, Retransmits: 2,
			HostCPUPct: 31.614837631320448, RemoteCPUPct: 65.89253879300007}},
		{"iperf3-3.12-recv.json", Report{Version: "iperf 3.12", Reverse: true, Streams: 1, Seconds: 2.000013,
			BytesReceived: 5481562112, BitsPerSecond: 21926105928.311466, SenderBitsPerSecond: 21938807688.56083, Retransmits: 7,
			HostCPUPct: 75.82445842989738, RemoteCPUPct: 17.18373988288855}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseJSON([]byte(readFile(t, tt.file)))
			if err != nil {
				t.Fatalf("ParseJSON: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseJSON =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
	// Two streams: the sums cover both.
	got, err := ParseJSON([]byte(readFile(t, "iperf3-3.12-send-2streams.json")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Streams != 2 || got.BytesReceived != 803209216 || got.Retransmits != 14 {
		t.Errorf("two streams: %+v", got)
	}
	// A warning line before the JSON object is skipped.
	got, err = ParseJSON([]byte("iperf3: warning - something\n" + readFile(t, "iperf3-3.12-send.json")))
	if err != nil || got.BytesReceived != 5206179840 {
		t.Errorf("with a leading warning: %+v, %v", got, err)
	}
}

func TestParseJSONErrors(t *testing.T) {
	send := readFile(t, "iperf3-3.12-send.json")
	tests := []struct {
		name, out, want string
	}{
		{"empty", "", "no JSON object"},
		{"plain text", "iperf3: error - unable to connect to server: Connection refused\n", "no JSON object"},
		{"truncated", send[:len(send)/2], "not valid JSON"},
		{"refused (real)", readFile(t, "iperf3-3.12-refused.json"), "unable to connect to server: Connection refused"},
		{"proxy, backend not listening (real)", readFile(t, "iperf3-3.12-proxy-not-ready.json"), "control socket has closed unexpectedly"},
		{"no test_start", `{"start":{"version":"iperf 3.12"},"intervals":[],"end":{}}`, "did not start"},
		{"no end summary", `{"start":{"test_start":{"num_streams":1}},"intervals":[],"end":{}}`, "did not finish"},
		{"zero throughput", replaceLast(t, send, "\"bits_per_second\":\t20810360211.454094", "\"bits_per_second\":\t0"), "bits_per_second = 0 is not positive"},
		{"zero bytes", replaceLast(t, send, "\"bytes\":\t5206179840", "\"bytes\":\t0"), "bytes = 0 is not positive"},
		{"no retransmits", replaceLast(t, send, "\"retransmits\":\t2,\n", ""), "no end.sum_sent.retransmits"},
		{"error field with results", withError(t, send, "interrupt - the client has terminated"), "the client has terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJSON([]byte(tt.out))
			if err == nil {
				t.Fatalf("ParseJSON = %+v, want an error", got)
			}
			if got != (Report{}) {
				t.Errorf("ParseJSON returned %+v with its error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseJSON error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestNotStarted(t *testing.T) {
	send := readFile(t, "iperf3-3.12-send.json")
	tests := []struct {
		name, out string
		want      bool
	}{
		{"refused", readFile(t, "iperf3-3.12-refused.json"), true},
		{"proxy without backend", readFile(t, "iperf3-3.12-proxy-not-ready.json"), true},
		{"success", send, false},
		{"failure after data moved", withError(t, send, "interrupt"), false},
		{"not JSON", "iperf3: parameter error\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg, got := notStarted([]byte(tt.out)); got != tt.want || got && msg == "" {
				t.Errorf("notStarted = %q, %v; want %v", msg, got, tt.want)
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

func TestClientArgv(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		addr      string
		secs      int
		want      []string
	}{
		{"defaults", nil, "127.0.0.1:5201", 30,
			[]string{"iperf3", "--client", "127.0.0.1", "--port", "5201", "--time", "30", "--parallel", "1", "--json"}},
		{"recv, 4 streams", map[string]string{"direction": "recv", "streams": "4"}, "192.0.2.2:40001", 2,
			[]string{"iperf3", "--client", "192.0.2.2", "--port", "40001", "--time", "2", "--parallel", "4", "--json", "--reverse"}},
		{"IPv6", nil, "[::1]:7000", 1,
			[]string{"iperf3", "--client", "::1", "--port", "7000", "--time", "1", "--parallel", "1", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newInstance(t, tt.overrides).clientArgv(tt.addr, tt.secs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("clientArgv =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestServerCommand(t *testing.T) {
	spec := newInstance(t, nil).spec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	got := spec.Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"iperf3": 40001}})
	want := []string{"iperf3", "--server", "--bind", "0.0.0.0", "--port", "40001"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("server command %q, want %q", got, want)
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{30 * time.Second, 30}, {2500 * time.Millisecond, 3}, {2400 * time.Millisecond, 2},
		{100 * time.Millisecond, 1}, {0, 1}, {time.Minute, 60},
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
		{"defaults", nil, ""},
		{"recv", map[string]string{"direction": "recv"}, ""},
		{"128 streams", map[string]string{"streams": "128"}, ""},
		{"129 streams", map[string]string{"streams": "129"}, "exceeds iperf3's limit"},
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
}

func TestParamsResolve(t *testing.T) {
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
	if _, err := workload.Resolve(Workload{}.Params(), map[string]string{"direction": "both"}, false); err == nil {
		t.Error("direction=both accepted")
	}
	if _, err := workload.Resolve(Workload{}.Params(), map[string]string{"streams": "0"}, false); err == nil {
		t.Error("streams=0 accepted")
	}
}
