package image

import (
	"context"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// engine returns a client for the real engine, or skips the test unless it is
// a long test asked for with NEARNATIVE_IMAGE_TEST=1 (builds take a minute).
func engine(t *testing.T, env string) client.APIClient {
	t.Helper()
	if testing.Short() || os.Getenv(env) != "1" {
		t.Skipf("set %s=1 (and no -short) to build a real image", env)
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if _, err := api.Ping(context.Background()); err != nil {
		t.Fatalf("Docker engine: %v", err)
	}
	return api
}

// testWriter sends build progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestBuildIntegration(t *testing.T) {
	api := engine(t, "NEARNATIVE_IMAGE_TEST")
	ctx := context.Background()
	t.Setenv(state.EnvHome, t.TempDir())
	dir := state.Home()

	c, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.Packages = []string{"redis-tools"}
	tag, err := c.Tag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	remove := func() {
		if _, err := api.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !strings.Contains(err.Error(), "No such image") {
			t.Logf("removing %s: %v", tag, err)
		}
	}
	remove() // a leftover from an earlier run would make the first Build cached
	t.Cleanup(remove)
	tempsBefore, _ := state.TempDirs("")

	r, err := Build(ctx, api, c, BuildOptions{Log: testWriter{t}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s (%s) in %s, %d MB, %d packages", r.Ref, r.ID, r.Duration, r.Size/1e6, len(r.Versions))
	if r.Cached || r.Ref != tag || r.Versions["redis-tools"] == "" {
		t.Errorf("result: cached %v, ref %s (want %s), redis-tools %q", r.Cached, r.Ref, tag, r.Versions["redis-tools"])
	}

	insp, err := api.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if l := insp.Config.Labels; l[LabelImage] != LabelImageWorkload || l[LabelInputs] != r.Hash {
		t.Errorf("labels = %v", l)
	}
	if !slices.Equal(insp.Config.Cmd, []string{"/bin/bash"}) {
		t.Errorf("Cmd = %v", insp.Config.Cmd)
	}

	// Versions from the cache and from the image itself agree with the build.
	v, err := Versions(ctx, api, tag)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, r.Versions) {
		t.Errorf("Versions (cached) differs from the build's")
	}
	v, err = versionsFromContainer(ctx, api, tag)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, r.Versions) {
		t.Errorf("Versions (from the image) differs from the build's: %v", Compare(r.Versions, v))
	}
	for _, f := range []string{"/usr/sbin/policy-rc.d", "/etc/nearnative/versions.json"} {
		var content []byte
		if err := readFromImage(ctx, api, tag, f, func(r io.Reader) error {
			content, err = io.ReadAll(r)
			return err
		}); err != nil || len(content) == 0 {
			t.Errorf("%s in the image: %q, %v", f, content, err)
		}
	}
	host, err := HostVersions(ctx, Names(v))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Compare(host, v) {
		t.Logf("host vs image: %s", m)
	}

	start := time.Now()
	r2, err := Build(ctx, api, c, BuildOptions{Log: testWriter{t}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); !r2.Cached || d > 5*time.Second || r2.ID != r.ID {
		t.Errorf("second build: cached %v in %s, ID %s (first %s)", r2.Cached, d, r2.ID, r.ID)
	}
	t.Logf("second build: cached in %s", time.Since(start))

	ref, present, err := Current(ctx, api, c)
	if err != nil || ref != tag || !present {
		t.Errorf("Current = %s, %v, %v", ref, present, err)
	}
	stale, err := Stale(ctx, api, tag)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		if s.ID == r.ID {
			t.Errorf("Stale lists the current image")
		}
	}

	_, err = Build(ctx, api, Config{Ref: "nearnative/no-such-image:1"}, BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "pull it or drop --image") {
		t.Errorf("missing Ref: err = %v", err)
	}
	r3, err := Build(ctx, api, Config{Ref: tag}, BuildOptions{Dir: dir})
	if err != nil || r3.ID != r.ID || !reflect.DeepEqual(r3.Versions, r.Versions) {
		t.Errorf("Ref = built image: %v", err)
	}

	// Nothing left behind: no temp dir, no container.
	tempsAfter, _ := state.TempDirs("")
	for _, d := range tempsAfter {
		if !slices.Contains(tempsBefore, d) {
			t.Errorf("temp dir left behind: %s", d)
		}
	}
	cs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", runid.LabelRole+"=image-read"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) > 0 {
		t.Errorf("%d containers left behind", len(cs))
	}
}

// TestBuildCancel checks that cancelling a build stops debootstrap and
// removes the temp dir.
func TestBuildCancel(t *testing.T) {
	api := engine(t, "NEARNATIVE_IMAGE_TEST")
	t.Setenv(state.EnvHome, t.TempDir())
	c, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.Packages = []string{"procps"}
	tempsBefore, _ := state.TempDirs("")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Build(ctx, api, c, BuildOptions{Rebuild: true, Log: testWriter{t}})
	if err == nil {
		t.Fatal("build finished within 8 s; cannot test cancellation")
	}
	t.Logf("cancelled after %s: %v", time.Since(start), err)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("cancellation took %s", d)
	}
	tempsAfter, _ := state.TempDirs("")
	for _, d := range tempsAfter {
		if !slices.Contains(tempsBefore, d) {
			t.Errorf("temp dir left behind: %s", d)
		}
	}
}

// TestBuildDefault builds the default image into the real state directory
// and keeps it (NEARNATIVE_IMAGE_FULL=1; several minutes).
func TestBuildDefault(t *testing.T) {
	api := engine(t, "NEARNATIVE_IMAGE_FULL")
	ctx := context.Background()
	c, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(ctx, api, c, BuildOptions{Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s (%s): %d MB, %d packages, built in %s (cached %v)", r.Ref, r.ID, r.Size/1e6, len(r.Versions), r.Duration, r.Cached)
	host, err := HostVersions(ctx, c.Packages)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Compare(host, r.Versions) {
		t.Logf("default package differs: %s", m)
	}
	all, err := HostVersions(ctx, Names(r.Versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d image packages differ from the host", len(Compare(all, r.Versions)), len(r.Versions))
}
