package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// DockerDiskRecipe is part of the vm-docker disk cache key.
const DockerDiskRecipe = 1

// guestDockerPackages are installed on top of the workload image for the
// Docker engine inside the guest.
var guestDockerPackages = []string{"docker.io", "kmod", "iptables"}

// seedTar is where the workload image (docker save) waits in the disk
// until the seeding boot loads it into the guest's dockerd.
const seedTar = "/var/lib/nearnative-seed/workload.tar"

// DockerDiskKey is the cache key of a vm-docker disk.
func DockerDiskKey(imageID, kver string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("nearnative-vm-docker-disk\nrecipe=%d/%d\nimage=%s\nkernel=%s\npackages=%s\n",
		DiskRecipe, DockerDiskRecipe, imageID, kver, strings.Join(guestDockerPackages, ","))))
	return hex.EncodeToString(h[:])
}

// buildDockerDisk returns the vm-docker root disk: the workload image plus
// docker.io (installed with apt-get in a container of the workload image),
// the host's modules, and the workload image already loaded into the guest's
// Docker engine by one seeding boot (seed). Cached by its inputs.
func buildDockerDisk(ctx context.Context, api client.APIClient, dir state.Dir, ref string, k vmprobe.Kernel, log io.Writer,
	seed func(ctx context.Context, disk string) error) (Disk, error) {
	start := time.Now()
	insp, _, err := api.ImageInspectWithRaw(ctx, ref)
	if err != nil {
		return Disk{}, fmt.Errorf("vm-docker disk: inspecting workload image %s: %w", ref, err)
	}
	key := DockerDiskKey(insp.ID, k.Version)
	cache := filepath.Join(dir.ImageDir(), "vm")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Disk{}, err
	}
	d := Disk{Path: filepath.Join(cache, "disk-docker-"+key[:16]+".img"), Key: key}
	unlock, err := state.LockFile(ctx, d.Path+".lock", nil)
	if err != nil {
		return d, err
	}
	defer unlock()
	if _, err := os.Stat(d.Path); err == nil {
		d.Cached, d.Took = true, time.Since(start)
		return d, nil
	}
	fmt.Fprintf(log, "vm-docker: building guest disk: %s + %s\n", ref, strings.Join(guestDockerPackages, " "))
	removeStaleTrees(cache)
	tree, err := os.MkdirTemp(cache, "tree-")
	if err != nil {
		return d, err
	}
	defer os.RemoveAll(tree)
	if err := exportWithPackages(ctx, api, ref, guestDockerPackages, tree, log); err != nil {
		return d, err
	}
	if err := addGuestFiles(tree, k.Modules); err != nil {
		return d, err
	}
	if err := saveImage(ctx, api, ref, filepath.Join(tree, seedTar)); err != nil {
		return d, err
	}
	size, err := treeSize(tree)
	if err != nil {
		return d, err
	}
	// The loaded image takes about as much again as its tar.
	size = size*2 + 1<<30
	tmp := d.Path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		return d, err
	}
	defer os.Remove(tmp)
	if err := os.Truncate(tmp, size); err != nil {
		return d, err
	}
	if err := mkfs(ctx, tree, tmp); err != nil {
		return d, err
	}
	os.RemoveAll(tree)
	fmt.Fprintf(log, "vm-docker: loading %s into the guest's Docker engine (one boot)\n", ref)
	if err := seed(ctx, tmp); err != nil {
		return d, fmt.Errorf("vm-docker disk: seeding the guest's Docker engine: %w", err)
	}
	if err := os.Rename(tmp, d.Path); err != nil {
		return d, err
	}
	d.Took = time.Since(start)
	fmt.Fprintf(log, "vm-docker: guest disk %s built in %v\n", d.Path, d.Took.Round(time.Second))
	return d, nil
}

// exportWithPackages runs apt-get install in a container of ref and unpacks
// the container's file system into tree.
func exportWithPackages(ctx context.Context, api client.APIClient, ref string, pkgs []string, tree string, log io.Writer) error {
	id := runid.New()
	script := "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; " +
		"apt-get install -y -qq --no-install-recommends " + strings.Join(pkgs, " ") +
		"; apt-get clean; rm -rf /var/lib/apt/lists/*"
	c, err := api.ContainerCreate(ctx, &container.Config{
		Image: ref, Cmd: []string{"sh", "-c", script},
		Labels: map[string]string{runid.Label: string(id), runid.LabelRole: "vm-docker-disk"},
	}, nil, nil, nil, runid.Prefix+string(id)+"-vmdocker")
	if err != nil {
		return fmt.Errorf("vm-docker disk: creating the install container: %w", err)
	}
	defer api.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	waitC, errC := api.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("vm-docker disk: starting the install container: %w", err)
	}
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		return fmt.Errorf("vm-docker disk: waiting for apt-get: %w", err)
	}
	if code != 0 {
		var out bytes.Buffer
		if rc, err := api.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); err == nil {
			stdcopy.StdCopy(&out, &out, rc)
			rc.Close()
		}
		return fmt.Errorf("vm-docker disk: apt-get install %s exited %d (needs the Debian mirror): %s", strings.Join(pkgs, " "), code, strings.TrimSpace(out.String()))
	}
	if err := exportContainer(ctx, api, c.ID, tree); err != nil {
		return fmt.Errorf("vm-docker disk: %w", err)
	}
	return nil
}

func saveImage(ctx context.Context, api client.APIClient, ref, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	rc, err := api.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("vm-docker disk: saving %s: %w", ref, err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("vm-docker disk: saving %s: %w", ref, err)
	}
	return f.Close()
}
