package lxc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/state"
)

// Rootfs returns the root file system of the workload image ref unpacked
// under dir's image directory (lxc/rootfs-<image ID>), exporting it from
// Docker unless a tree of that image ID is there. Containers never write
// it: each gets an overlay of its own on top.
func Rootfs(ctx context.Context, api client.APIClient, dir state.Dir, ref string, log io.Writer) (string, error) {
	insp, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("lxc: inspecting workload image %s: %w", ref, err)
	}
	id := insp.ID
	if len(id) > 7+16 {
		id = id[7 : 7+16] // past "sha256:"
	}
	cache := filepath.Join(dir.ImageDir(), "lxc")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("lxc: %w", err)
	}
	tree := filepath.Join(cache, "rootfs-"+id)
	unlock, err := state.LockFile(ctx, tree+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(tree, "usr")); err == nil {
		return tree, nil
	}
	start := time.Now()
	if log != nil {
		fmt.Fprintf(log, "lxc: unpacking workload image %s into %s (once per image)\n", ref, tree)
	}
	old, _ := filepath.Glob(filepath.Join(cache, "rootfs-*"))
	tmp := tree + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("lxc: %w", err)
	}
	if err := vm.ExportImage(ctx, api, ref, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("lxc root file system: %w", err)
	}
	// What an init of a system container expects and a container image
	// lacks: the mount points LXC mounts on, the agent's mount point.
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", ".nearnative"} {
		os.MkdirAll(filepath.Join(tmp, d), 0o755)
	}
	os.Chmod(filepath.Join(tmp, "tmp"), 0o1777)
	if err := os.WriteFile(filepath.Join(tmp, ".nearnative", "supervise"), nil, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("lxc: %w", err)
	}
	if err := os.Rename(tmp, tree); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("lxc: %w", err)
	}
	// Trees of older images are not used again.
	for _, o := range old {
		if ext := filepath.Ext(o); o != tree && ext != ".lock" && ext != ".tmp" {
			os.RemoveAll(o)
			os.Remove(o + ".lock")
		}
	}
	if log != nil {
		fmt.Fprintf(log, "lxc: root file system ready in %v\n", time.Since(start).Round(time.Second))
	}
	return tree, nil
}
