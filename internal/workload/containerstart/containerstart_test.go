package containerstart

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestMedian(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{3 * ms}, 3 * ms},
		{[]time.Duration{5 * ms, 1 * ms, 3 * ms}, 3 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 9 * ms}, 3 * ms},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestStarts times starts natively and in a Docker container reached from
// a client host: each trial reports a median start that a real server
// answered, and leaves nothing running.
func TestStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers; skipped in -short mode")
	}
	run := runid.New()
	root := t.TempDir()
	plats := testenv.Platforms(t, run, root, platform.Native, platform.DockerBridge)
	client, err := host.NewNS(context.Background(), run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	in, err := Workload{}.New(workload.Values{"starts": "3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{platform.Native, platform.DockerBridge} {
		t.Run(name, func(t *testing.T) {
			// The platforms were built without a client host: native
			// listens on 127.0.0.1, which the namespace cannot reach, so
			// its trial runs its client on this machine.
			var c host.Host
			if name == platform.DockerBridge {
				if err := client.Route(context.Background(), mustPrefix("172.16.0.0/12")); err != nil {
					t.Fatal(err)
				}
				c = client
			}
			res, err := in.Run(context.Background(), workload.Trial{Run: run, Name: "r00-cs-" + name, Platform: plats[name], Client: c, Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v; %s", res.Values, res.Where)
			start := res.Values[MetricStart]
			if !(start > 0) || start > 30000 || res.Values[MetricStartMax] < start || !(res.Values[MetricStop] > 0) {
				t.Errorf("values %v: want a positive median start below the slowest one, and a stop time", res.Values)
			}
			if len(res.Where) != 1 || !strings.Contains(strings.Join(res.Notes, " "), "first PING") {
				t.Errorf("where %q notes %q", res.Where, res.Notes)
			}
		})
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
