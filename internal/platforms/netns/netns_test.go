package netns

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
)

// needEnv returns an engine and the workload image (NEARNATIVE_TEST_IMAGE or
// the locally built one), or skips.
func needEnv(t *testing.T) (*docker.Daemon, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes namespaces, links and containers; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatalf("no Docker daemon: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	ref := os.Getenv("NEARNATIVE_TEST_IMAGE")
	if ref == "" {
		cfg, err := image.DefaultConfig()
		if err != nil {
			t.Fatalf("no image config: %v", err)
		}
		r, ok, err := image.Current(ctx, eng.API(), cfg)
		if err != nil || !ok {
			t.Fatalf("workload image %s not built (nearnative image build): %v", r, err)
		}
		ref = r
	}
	return eng, ref
}

// leftovers lists what of run is still on the host: links with its alias,
// namespaces of its short ID, OVS bridges and ports, iptables rules.
func leftovers(t *testing.T, id runid.ID) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	if s, _ := run(ctx, "ip", "-d", "link", "show"); strings.Contains(s, Alias+string(id)) {
		out = append(out, "link alias:\n"+s)
	}
	if s, _ := run(ctx, "ip", "netns", "list"); strings.Contains(s, NamespacePrefix+id.Short()+"-") {
		out = append(out, "namespace: "+s)
	}
	if s, _ := run(ctx, "iptables-save"); strings.Contains(s, Comment+string(id)) {
		out = append(out, "iptables rule")
	}
	if ovsRunning(ctx) {
		if s, _ := run(ctx, "ovs-vsctl", "--timeout=5", "find", "bridge", "external_ids:"+OVSExternalID+"="+string(id)); strings.TrimSpace(s) != "" {
			out = append(out, "ovs bridge: "+s)
		}
	}
	return out
}

// TestTechniques sets each technique up, passes one second of iperf3
// traffic between two endpoints, and checks that nothing is left after.
func TestTechniques(t *testing.T) {
	eng, ref := needEnv(t)
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			id := runid.New()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			p, err := New(kind, "", platform.Env{Run: id, LogDir: t.TempDir(), Image: ref}, eng, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Check(ctx); err != nil {
				t.Fatalf("unavailable here: %v", err)
			}
			defer func() {
				if err := p.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				if l := leftovers(t, id); len(l) > 0 {
					t.Errorf("left behind: %v", l)
				}
				eng.RemoveRun(context.Background(), id)
			}()
			srv, err := p.Start(ctx, "t", platform.Spec{Name: "srv", Ports: []string{"iperf"},
				Command: func(l platform.Listen) []string {
					return []string{"iperf3", "-s", "-p", strconv.Itoa(l.Port("iperf"))}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(ctx)
			t.Log(srv.Describe())
			addr := srv.Addr("iperf")
			host, port, _ := strings.Cut(addr, ":")
			script := "until (exec 3<>/dev/tcp/" + host + "/" + port + ") 2>/dev/null; do sleep 0.05; done; sleep 0.1; " +
				"exec iperf3 -c " + host + " -p " + port + " -t 1 -J"
			res, err := p.RunJob(ctx, "t", platform.Spec{Name: "cli", Command: func(platform.Listen) []string {
				return []string{"timeout", "30", "bash", "-c", script}
			}})
			if err != nil {
				t.Fatalf("%v\nstdout: %s\nstderr: %s", err, res.Stdout, res.Stderr)
			}
			var r struct {
				End struct {
					SumReceived struct {
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
				} `json:"end"`
			}
			if err := json.Unmarshal(res.Stdout, &r); err != nil {
				t.Fatalf("iperf3 output: %v\n%s", err, res.Stdout)
			}
			gbps := r.End.SumReceived.BitsPerSecond / 1e9
			t.Logf("%s: %.2f Gbit/s (%s)", kind, gbps, res.Where)
			if !(gbps > 0) {
				t.Errorf("no traffic: %s", res.Stdout)
			}
			if err := srv.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
}
