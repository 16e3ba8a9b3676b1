package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// inspect looks an image up; a missing image is (zero, false, nil).
func inspect(ctx context.Context, api client.APIClient, ref string) (image.InspectResponse, bool, error) {
	insp, err := api.ImageInspect(ctx, ref)
	if errdefs.IsNotFound(err) {
		return image.InspectResponse{}, false, nil
	}
	if err != nil {
		return image.InspectResponse{}, false, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	return insp, true, nil
}

func labels(insp image.InspectResponse) map[string]string {
	if insp.Config == nil {
		return nil
	}
	return insp.Config.Labels
}

// Versions returns every package installed in an image and its version. For a
// workload image built here it reads the versions recorded at build time in
// the state directory (state.Home()); otherwise it creates (without starting)
// a container from the image, copies /var/lib/dpkg/status out of it and
// removes the container again.
func Versions(ctx context.Context, api client.APIClient, ref string) (map[string]string, error) {
	insp, ok, err := inspect(ctx, api, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("image %s not found in the Docker engine", ref)
	}
	return versionsOf(ctx, api, insp, state.Home())
}

func versionsOf(ctx context.Context, api client.APIClient, insp image.InspectResponse, dir state.Dir) (map[string]string, error) {
	if h := labels(insp)[LabelInputs]; h != "" {
		if v, ok := cachedVersions(dir, h, insp.ID); ok {
			return v, nil
		}
	}
	return versionsFromContainer(ctx, api, insp.ID)
}

// cachedVersions reads the versions recorded when image id was built.
func cachedVersions(dir state.Dir, hash, id string) (map[string]string, bool) {
	b, err := os.ReadFile(cachePath(dir, hash))
	if err != nil {
		return nil, false
	}
	var vf versionsFile
	if json.Unmarshal(b, &vf) != nil || vf.Image != id || len(vf.Packages) == 0 {
		return nil, false
	}
	return vf.Packages, true
}

// versionsFromContainer reads the dpkg status file of an image.
func versionsFromContainer(ctx context.Context, api client.APIClient, ref string) (map[string]string, error) {
	var v map[string]string
	err := readFromImage(ctx, api, ref, "/var/lib/dpkg/status", func(r io.Reader) error {
		var err error
		v, err = ParseStatus(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("package versions of %s (not a Debian-based image?): %w", ref, err)
	}
	return v, nil
}

// readFromImage hands the content of a regular file in an image to read,
// through a created, never started container. The container carries a fresh
// run ID label so that `nearnative cleanup` finds it should we die before
// removing it.
func readFromImage(ctx context.Context, api client.APIClient, ref, path string, read func(io.Reader) error) error {
	id := runid.New()
	c, err := api.ContainerCreate(ctx, &container.Config{
		Image:           ref,
		Cmd:             []string{"/bin/true"}, // never run; images without a CMD need one to be created
		NetworkDisabled: true,
		Labels:          map[string]string{runid.Label: string(id), runid.LabelRole: "image-read"},
	}, nil, nil, nil, runid.Prefix+string(id)+"-read")
	if err != nil {
		return fmt.Errorf("creating a container to read %s: %w", path, err)
	}
	defer func() {
		// Already gone is fine; anything else is left for cleanup, which
		// finds the label.
		_ = api.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	}()
	rc, _, err := api.CopyFromContainer(ctx, c.ID, path)
	if err != nil {
		return fmt.Errorf("copying %s: %w", path, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("copying %s: not a regular file", path)
		}
		if err != nil {
			return fmt.Errorf("copying %s: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			return read(tr)
		}
	}
}

// Current returns the reference of the workload image for c's current inputs
// (c.Ref when set) and whether the engine has it. It builds nothing; use
// Stale to find images of earlier inputs.
func Current(ctx context.Context, api client.APIClient, c Config) (ref string, present bool, err error) {
	if err := c.Validate(); err != nil {
		return "", false, err
	}
	ref, err = c.Tag(ctx)
	if err != nil {
		return "", false, err
	}
	_, present, err = inspect(ctx, api, ref)
	if err != nil {
		return ref, false, err
	}
	return ref, present, nil
}

// Info describes a workload image in the engine.
type Info struct {
	ID      string
	Tags    []string
	Hash    string // inputs hash label
	Created time.Time
	Size    int64
}

// Stale lists the workload images (label nearnative.image=workload) other
// than current, newest first, so that a user can be told to remove them.
func Stale(ctx context.Context, api client.APIClient, current string) ([]Info, error) {
	list, err := api.ImageList(ctx, image.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", LabelImage+"="+LabelImageWorkload)),
	})
	if err != nil {
		return nil, fmt.Errorf("listing workload images: %w", err)
	}
	var out []Info
	for _, s := range list {
		if s.ID == current || slices.Contains(s.RepoTags, current) {
			continue
		}
		out = append(out, Info{
			ID: s.ID, Tags: s.RepoTags, Hash: s.Labels[LabelInputs],
			Created: time.Unix(s.Created, 0), Size: s.Size,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}
