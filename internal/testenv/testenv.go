// Package testenv gives integration tests the real environment `make setup`
// prepares: the Docker engine and the current workload image. Under make
// test (root, not -short) a missing piece means setup is broken, so these
// helpers fail the test rather than skip it.
package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform/docker"
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
func WorkloadImage(t *testing.T) (*docker.Engine, string) {
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
