package icc

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/netns"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/workload"
)

// TestScriptsParse checks the generated shell with bash -n.
func TestScriptsParse(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	scripts := []string{clientScript([]string{"a:1", "b:2"}, time.Now(), time.Second)}
	argv := serverSpec(0, 3).Command(platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"p0": 1, "p1": 2, "p2": 3}})
	scripts = append(scripts, argv[len(argv)-1])
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", "-c", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v: %s\n%s", err, out, s)
		}
	}
}

// TestRun runs one-to-many N=2 (a server endpoint with two iperf3 servers,
// two client containers, 1 s) on docker-network and veth.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs containers; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatalf("no Docker daemon (make setup starts one): %v", err)
	}
	defer eng.Close()
	ref := os.Getenv("NEARNATIVE_TEST_IMAGE")
	if ref == "" {
		cfg, err := image.DefaultConfig()
		if err != nil {
			t.Fatal(err)
		}
		r, ok, err := image.Current(ctx, eng.API(), cfg)
		if err != nil || !ok {
			t.Fatalf("workload image %s not built (make setup builds it): %v", r, err)
		}
		ref = r
	}
	v, err := workload.Resolve(Workload{}.Params(), map[string]string{"count": "2", "duration": "1s"}, false)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Workload{}.New(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{platform.DockerNetwork, platform.Veth} {
		t.Run(kind, func(t *testing.T) {
			id := runid.New()
			env := platform.Env{Run: id, LogDir: t.TempDir(), Image: ref}
			var p platform.Platform
			if kind == platform.DockerNetwork {
				p, err = docker.New(kind, "", env, eng, platform.Options{})
			} else {
				p, err = netns.New(kind, "", env, eng, platform.Options{})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.(platform.Closer).Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				if removed, _ := eng.RemoveRun(context.Background(), id); len(removed) > 0 {
					t.Errorf("left behind: %v", removed)
				}
				if out, _ := exec.Command("ip", "-d", "link", "show").CombinedOutput(); strings.Contains(string(out), "nearnative.run="+string(id)) {
					t.Errorf("links left behind")
				}
			}()
			raw := t.TempDir()
			res, err := in.Run(ctx, workload.Trial{Run: id, Name: "t", Platform: p, Duration: time.Second, RawDir: raw, Log: os.Stderr})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v; where %s", kind, res.Values, strings.Join(res.Where, " | "))
			if !(res.Values[MetricPerContainer] > 0) || res.Values[MetricAggregate] < res.Values[MetricPerContainer] {
				t.Errorf("values %v", res.Values)
			}
			if !strings.Contains(res.Where[0], "one-to-many N=2") {
				t.Errorf("where %q lacks the counts", res.Where[0])
			}
		})
	}
}
