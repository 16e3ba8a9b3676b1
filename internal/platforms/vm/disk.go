package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// DiskRecipe is part of the disk cache key; bump it when the steps below
// change the disk's contents.
const DiskRecipe = 1

// Disk is a built (or cached) guest root disk.
type Disk struct {
	Path   string
	Cached bool
	Took   time.Duration
	Key    string
}

// DiskKey is the cache key of a guest disk: image ID, kernel version, recipe.
func DiskKey(imageID, kver string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("nearnative-vm-disk\nrecipe=%d\nimage=%s\nkernel=%s\n", DiskRecipe, imageID, kver)))
	return hex.EncodeToString(h[:])
}

// BuildDisk returns the raw ext4 root disk made from the workload image ref
// plus the guest kernel's modules, building it unless a disk of the same
// inputs is cached under dir's image directory.
func BuildDisk(ctx context.Context, api client.APIClient, dir state.Dir, ref string, k vmprobe.Kernel, log io.Writer) (Disk, error) {
	start := time.Now()
	insp, _, err := api.ImageInspectWithRaw(ctx, ref)
	if err != nil {
		return Disk{}, fmt.Errorf("vm disk: inspecting workload image %s: %w", ref, err)
	}
	key := DiskKey(insp.ID, k.Version)
	cache := filepath.Join(dir.ImageDir(), "vm")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Disk{}, fmt.Errorf("vm disk: %w", err)
	}
	d := Disk{Path: filepath.Join(cache, "disk-"+key[:16]+".img"), Key: key}
	unlock, err := state.LockFile(ctx, d.Path+".lock", nil)
	if err != nil {
		return d, err
	}
	defer unlock()
	if _, err := os.Stat(d.Path); err == nil {
		d.Cached, d.Took = true, time.Since(start)
		return d, nil
	}
	fmt.Fprintf(log, "vm: building guest disk from %s and kernel modules %s\n", ref, k.Version)
	removeStaleTrees(cache)
	tree, err := os.MkdirTemp(cache, "tree-")
	if err != nil {
		return d, fmt.Errorf("vm disk: %w", err)
	}
	defer os.RemoveAll(tree)
	if err := ExportImage(ctx, api, ref, tree); err != nil {
		return d, fmt.Errorf("vm disk: %w", err)
	}
	if err := addGuestFiles(tree, k.Modules); err != nil {
		return d, err
	}
	size, err := treeSize(tree)
	if err != nil {
		return d, err
	}
	// Headroom for server data, logs and job scratch files.
	size = size*3/2 + 1<<30
	tmp := d.Path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		return d, err
	}
	if err := os.Truncate(tmp, size); err != nil {
		return d, fmt.Errorf("vm disk: %w", err)
	}
	if err := mkfs(ctx, tree, tmp); err != nil {
		os.Remove(tmp)
		return d, err
	}
	if err := os.Rename(tmp, d.Path); err != nil {
		return d, fmt.Errorf("vm disk: %w", err)
	}
	d.Took = time.Since(start)
	fmt.Fprintf(log, "vm: guest disk %s built in %v\n", d.Path, d.Took.Round(time.Second))
	return d, nil
}

// removeStaleTrees removes unpacked trees that a crashed build left in the
// cache (a live build finishes its tree within minutes).
func removeStaleTrees(cache string) {
	trees, _ := filepath.Glob(filepath.Join(cache, "tree-*"))
	for _, t := range trees {
		if st, err := os.Stat(t); err == nil && time.Since(st.ModTime()) > 2*time.Hour {
			os.RemoveAll(t)
		}
	}
}

// mkfs makes an ext4 file system holding tree in the file img, without
// mounting anything.
func mkfs(ctx context.Context, tree, img string) error {
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "nnroot", "-E", "root_owner=0:0",
		"-d", tree, img).CombinedOutput(); err != nil {
		return fmt.Errorf("vm disk: mkfs.ext4 -d: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// ExportImage writes the file system of ref into dir: a created (never
// started) container's export stream, unpacked by tar with owners and modes.
// The vm platforms build their guests' disks from it, the lxc platform its
// containers' root file system.
func ExportImage(ctx context.Context, api client.APIClient, ref, dir string) error {
	id := runid.New()
	c, err := api.ContainerCreate(ctx, &container.Config{
		Image: ref, Cmd: []string{"/bin/true"}, NetworkDisabled: true,
		Labels: map[string]string{runid.Label: string(id), runid.LabelRole: "vm-disk-export"},
	}, nil, nil, nil, runid.Prefix+string(id)+"-export")
	if err != nil {
		return fmt.Errorf("creating a container to export %s: %w", ref, err)
	}
	defer api.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	return exportContainer(ctx, api, c.ID, dir)
}

// exportContainer unpacks the file system of container id into dir.
func exportContainer(ctx context.Context, api client.APIClient, id, dir string) error {
	rc, err := api.ContainerExport(ctx, id)
	if err != nil {
		return fmt.Errorf("exporting container %s: %w", id, err)
	}
	defer rc.Close()
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf", "-", "-C", dir)
	cmd.Stdin = rc
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("unpacking the export of container %s: %w: %s", id, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// addGuestFiles adds the guest kernel's module directory (modules, the
// directory named after the kernel release) and the few files a guest needs
// that a container image lacks.
func addGuestFiles(tree, modules string) error {
	src := modules
	dst := filepath.Join(tree, "lib", "modules")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst+"/").CombinedOutput(); err != nil {
		return fmt.Errorf("vm disk: copying %s: %w: %s", src, err, out)
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "nearnative"} {
		os.MkdirAll(filepath.Join(tree, d), 0o755)
	}
	os.Chmod(filepath.Join(tree, "tmp"), 0o1777)
	files := map[string]string{
		"etc/hostname": "nearnative-guest\n",
		"etc/hosts":    "127.0.0.1 localhost nearnative-guest\n",
		"etc/fstab":    "# the nearnative agent mounts everything\n",
	}
	for name, content := range files {
		p := filepath.Join(tree, name)
		os.Remove(p) // docker export leaves empty placeholders
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func treeSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		n += 4096 // inode and directory entry overhead
		return nil
	})
	return n, err
}
