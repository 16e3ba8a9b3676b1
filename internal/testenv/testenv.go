// Package testenv gives integration tests the real environment `make setup`
// prepares: the Docker engine and the current workload image, the built-in
// platforms and guests, the test binary as guest agent and child driver,
// and ways to watch a trial and break it on purpose. Under make test (root,
// not -short) a missing piece means setup is broken, so these helpers fail
// the test rather than skip it.
package testenv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// Log is an io.Writer that sends each write to the test log (for
// workload.Trial.Log).
type Log struct{ T *testing.T }

func (w Log) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// WorkloadImage connects to Docker and returns the engine (closed when the
// test ends) and the current workload image, as `nearnative run` picks it.
func WorkloadImage(t *testing.T) (*docker.Daemon, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatalf("no Docker engine (make setup starts one): %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	cfg, err := image.DefaultConfig()
	if err != nil {
		t.Fatalf("workload image config: %v", err)
	}
	ref, present, err := image.Current(ctx, eng.API(), cfg)
	if err != nil || !present {
		t.Fatalf("workload image %s not present (make setup, or nearnative image build): %v", ref, err)
	}
	return eng, ref
}

// Platforms builds the named built-in platforms (native and docker-*) for
// one run, logging under root; the Docker ones use the current workload
// image. When the test ends the native platform is closed and the run must
// have left no container behind (what is left is removed and reported).
//
// Their clients are on this machine, as with `--client host`: servers on
// 127.0.0.1, except docker-nat's, published on the host side of a link
// the run makes (its DNAT path serves no loopback address, and nothing of a
// run is published on the machine's primary address).
func Platforms(t *testing.T, run runid.ID, root string, kinds ...string) map[string]platform.Platform {
	t.Helper()
	env := platform.Env{Run: run, LogDir: filepath.Join(root, "logs")}
	out := map[string]platform.Platform{}
	var eng *docker.Daemon
	var hosts *host.Hosts
	for _, kind := range kinds {
		if kind == platform.Native {
			p, err := native.New(kind, env, state.Dir{Root: root}, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			out[kind] = p
			continue
		}
		if eng == nil {
			var ref string
			eng, ref = WorkloadImage(t)
			env.Image = ref
			t.Cleanup(func() {
				if removed, err := eng.RemoveRun(context.Background(), run); err != nil || len(removed) > 0 {
					t.Errorf("leftovers of run %s: removed %v, err %v", run, removed, err)
				}
			})
		}
		penv := env
		if kind == platform.DockerNAT {
			if hosts == nil {
				hosts = host.NewHosts(run, host.Setting{Client: host.SettingHost})
				t.Cleanup(func() { hosts.Close(context.Background()) })
			}
			c, err := hosts.For(context.Background(), host.LinkAddress)
			if err != nil {
				t.Fatalf("docker-nat's link: %v", err)
			}
			penv.Client = c
		}
		p, err := docker.New(kind, kind, penv, eng, platform.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = p
	}
	return out
}
