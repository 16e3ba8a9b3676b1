package icc

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/workload"
)

func TestParseJSON(t *testing.T) {
	tests := []struct {
		file    string
		gbps    float64
		wantErr string
	}{
		{"testdata/iperf3-3.12-tcp.json", 5.5355670025271263, ""},
		{"testdata/iperf3-3.12-refused.json", 0, "iperf3: unable to connect to server: Connection refused"},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseJSON(b)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: err = %v, want %s", tt.file, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if got := s.BitsPerSecond / 1e9; got < tt.gbps-1e-9 || got > tt.gbps+1e-9 {
			t.Errorf("%s: %v Gbit/s, want %v", tt.file, got, tt.gbps)
		}
		if s.Bytes != 698482688 || s.Seconds < 1 {
			t.Errorf("%s: bytes %v seconds %v", tt.file, s.Bytes, s.Seconds)
		}
	}
	for _, bad := range []string{"", "not json", `{"end":{}}`, `{"end":{"sum_received":{"bits_per_second":0}}}`} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("ParseJSON(%q): no error", bad)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	good, err := os.ReadFile("testdata/iperf3-3.12-tcp.json")
	if err != nil {
		t.Fatal(err)
	}
	refused, err := os.ReadFile("testdata/iperf3-3.12-refused.json")
	if err != nil {
		t.Fatal(err)
	}
	two := Marker + "0\n" + string(good) + "\n" + Marker + "1\n" + string(good) + "\n"
	s, err := ParseEndpoint([]byte(two), 2)
	if err != nil || len(s) != 2 {
		t.Fatalf("two reports: %v, %d streams", err, len(s))
	}
	tests := []struct {
		name, out string
		want      int
		err       string
	}{
		{"missing report", Marker + "0\n" + string(good), 2, "no report of iperf3 client 1"},
		{"failed client", Marker + "0\n" + string(refused), 1, "iperf3 client 0: iperf3: unable to connect"},
		{"no markers", string(good), 1, "no report of iperf3 client 0"},
	}
	for _, tt := range tests {
		if _, err := ParseEndpoint([]byte(tt.out), tt.want); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestLateMillis(t *testing.T) {
	if got := LateMillis([]byte("x\nnearnative: late by 730 ms\n")); got != 730 {
		t.Errorf("LateMillis = %v, want 730", got)
	}
	if got := LateMillis([]byte("")); got != 0 {
		t.Errorf("LateMillis(empty) = %v", got)
	}
}

func TestNewPlan(t *testing.T) {
	tests := []struct {
		topo        string
		count, c, k int
		scale       float64
		servers     []int
		clients     [][]Target
		summary     string
	}{
		{OneToMany, 3, 1, 1, 1, []int{3}, [][]Target{{{0, 0}}, {{0, 1}}, {{0, 2}}}, "one-to-many N=3 (from 3)"},
		{OneToMany, 20, 1, 1, 0.25, []int{5}, nil, "one-to-many N=5 (from 20, scaled by 0.25)"},
		{OneToMany, 1, 1, 1, 0.25, []int{1}, [][]Target{{{0, 0}}}, "N=1"},
		{Pairs, 2, 1, 1, 1, []int{1, 1}, [][]Target{{{0, 0}}, {{1, 0}}}, "pairs N=2"},
		{Grouped, 1, 2, 3, 1, []int{6}, [][]Target{{{0, 0}, {0, 1}, {0, 2}}, {{0, 3}, {0, 4}, {0, 5}}}, "grouped 2x3"},
		{Grouped, 1, 16, 16, 0.25, []int{16}, nil, "grouped 4x4 (from 16x16, scaled by 0.25)"},
	}
	for _, tt := range tests {
		p, err := NewPlan(tt.topo, tt.count, tt.c, tt.k, tt.scale)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Servers, tt.servers) {
			t.Errorf("%s %d %dx%d *%g: servers %v, want %v", tt.topo, tt.count, tt.c, tt.k, tt.scale, p.Servers, tt.servers)
		}
		if tt.clients != nil && !reflect.DeepEqual(p.Clients, tt.clients) {
			t.Errorf("%s: clients %v, want %v", tt.topo, p.Clients, tt.clients)
		}
		if !strings.Contains(p.Summary, tt.summary) {
			t.Errorf("%s: summary %q lacks %q", tt.topo, p.Summary, tt.summary)
		}
		// Every iperf3 server has exactly one client.
		used := map[Target]int{}
		for _, c := range p.Clients {
			for _, tg := range c {
				used[tg]++
			}
		}
		for s, n := range p.Servers {
			for port := 0; port < n; port++ {
				if used[Target{s, port}] != 1 {
					t.Errorf("%s: server %d port %d has %d clients", tt.topo, s, port, used[Target{s, port}])
				}
			}
		}
	}
	for _, bad := range []struct {
		topo  string
		scale float64
	}{{"star", 1}, {OneToMany, 0}, {Pairs, -1}} {
		if _, err := NewPlan(bad.topo, 1, 1, 1, bad.scale); err == nil {
			t.Errorf("NewPlan(%q, scale %g): no error", bad.topo, bad.scale)
		}
	}
}

func TestScaled(t *testing.T) {
	for _, tt := range []struct {
		n     int
		scale float64
		want  int
	}{{20, 0.25, 5}, {16, 0.25, 4}, {2, 0.25, 1}, {1, 0.01, 1}, {4, 1, 4}, {3, 0.5, 2}, {8, 0.25, 2}} {
		if got := Scaled(tt.n, tt.scale); got != tt.want {
			t.Errorf("Scaled(%d, %g) = %d, want %d", tt.n, tt.scale, got, tt.want)
		}
	}
}

func TestParams(t *testing.T) {
	w := Workload{}
	quick, err := workload.Resolve(w.Params(), map[string]string{"topology": "grouped", "containers": "16", "clients": "16"}, true)
	if err != nil {
		t.Fatal(err)
	}
	in, err := w.New(quick)
	if err != nil {
		t.Fatal(err)
	}
	if p := in.(*Instance).Plan(); len(p.Clients) != 4 || p.Streams() != 16 {
		t.Errorf("quick 16x16: %d containers, %d streams, want 4 and 16", len(p.Clients), p.Streams())
	}
	v, _ := workload.Resolve(w.Params(), map[string]string{"duration": "500ms"}, false)
	if _, err := w.New(v); err == nil {
		t.Error("duration 500ms accepted")
	}
}

// TestEstimate: a trial costs its run, iperf3's start and a third of a
// second per endpoint container: quick's three points (counts scaled by
// 0.25) have 2, 5 and 10 endpoints; duration overrides the trial.
func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		quick  bool
		want   time.Duration
	}{
		{map[string]string{"topology": "one-to-many", "count": "4"}, true, time.Second + iperfStart + 2*endpointCost},
		{map[string]string{"topology": "grouped", "containers": "16", "clients": "16"}, true, time.Second + iperfStart + 5*endpointCost},
		{map[string]string{"topology": "pairs", "count": "20"}, true, time.Second + iperfStart + 10*endpointCost},
		{map[string]string{"topology": "pairs", "count": "20"}, false, time.Second + iperfStart + 40*endpointCost},
		{map[string]string{"topology": "pairs", "count": "1", "duration": "3s"}, false, 3*time.Second + iperfStart + 2*endpointCost},
	} {
		v, err := workload.Resolve(Workload{}.Params(), tc.params, tc.quick)
		if err != nil {
			t.Fatal(err)
		}
		in, err := Workload{}.New(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.(*Instance).Estimate(time.Second); got != tc.want {
			t.Errorf("%v quick=%v: Estimate = %v, want %v", tc.params, tc.quick, got, tc.want)
		}
	}
}

func TestClientScript(t *testing.T) {
	s := clientScript([]string{"10.213.1.2:5201", "srv0:5202"}, time.Unix(100, 5), 2*time.Second)
	for _, want := range []string{
		"ready 10.213.1.2 5201 || exit 90;", "ready srv0 5202 || exit 90;", "100000000005 - $(date +%s%N)",
		"iperf3 -c 10.213.1.2 -p 5201 -t 2 -J", "iperf3 -c srv0 -p 5202 -t 2 -J", "echo '" + Marker + "1'", "exit $rc",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
}
