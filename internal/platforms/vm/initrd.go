package vm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// InitrdRecipe is part of the initramfs cache key.
const InitrdRecipe = 2

// guestModules are loaded (with their dependencies) before the root disk
// and the network are usable; Debian's cloud kernel builds them as modules.
// qemu_fw_cfg shows the firmware files under /sys/firmware/qemu_fw_cfg,
// where the agent reads its token (vmagent.TokenFwCfg).
var guestModules = []string{"virtio_pci", "virtio_blk", "virtio_net", "qemu_fw_cfg"}

// BuildInitrd returns an initramfs holding exe as /init (with the shared
// libraries it needs when it is dynamically linked) and the virtio modules
// of the guest kernel k. It is cached by the hash of exe and k's version.
func BuildInitrd(dir state.Dir, exe string, k vmprobe.Kernel) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "nearnative-vm-initrd\nrecipe=%d\nkernel=%s\n", InitrdRecipe, k.Version)
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("vm initramfs: %w", err)
	}
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("vm initramfs: hashing %s: %w", exe, err)
	}
	key := hex.EncodeToString(h.Sum(nil))
	cache := filepath.Join(dir.ImageDir(), "vm")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(cache, "initrd-"+key[:16]+".cpio")
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		os.Chtimes(path, now, now) // recently used: pruned last
		return path, nil
	}
	mods, err := moduleOrder(k.Modules, guestModules)
	if err != nil {
		return "", err
	}
	libs, err := sharedLibs(exe)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(cache, "initrd-*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := writeInitrd(tmp, exe, mods, libs); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	pruneInitrds(cache, keepInitrds)
	return path, nil
}

// writeInitrd writes the initramfs to f: the device and mount points,
// nearnative as init, the guest's modules in load order, and the shared
// libraries nearnative needs with their directories.
func writeInitrd(f *os.File, exe string, mods, libs []string) error {
	w := &cpioWriter{w: bufio.NewWriterSize(f, 1<<20)}
	for _, d := range []string{"dev", "proc", "newroot", strings.TrimPrefix(vmagent.ModulesDir, "/")} {
		w.dir(d)
	}
	w.node("dev/console", 0o020600, 5, 1)
	if err := w.fileFrom(strings.TrimPrefix(vmagent.InitPath, "/"), exe, 0o755); err != nil {
		return err
	}
	for i, m := range mods {
		name := fmt.Sprintf("%s/%02d-%s", strings.TrimPrefix(vmagent.ModulesDir, "/"), i, filepath.Base(m))
		if err := w.fileFrom(name, m, 0o644); err != nil {
			return err
		}
	}
	made := map[string]bool{}
	for _, l := range libs {
		rel := strings.TrimPrefix(l, "/")
		for d := filepath.Dir(rel); d != "." && !made[d]; d = filepath.Dir(d) {
			made[d] = true
		}
	}
	var dirs []string
	for d := range made {
		dirs = append(dirs, d)
	}
	sortByDepth(dirs)
	for _, d := range dirs {
		w.dir(d)
	}
	for _, l := range libs {
		if err := w.fileFrom(strings.TrimPrefix(l, "/"), l, 0o755); err != nil {
			return err
		}
	}
	return w.close()
}

// keepInitrds is how many initramfs files (one per nearnative or test
// binary) the cache keeps.
const keepInitrds = 4

// pruneInitrds removes all but the newest keep initramfs files.
func pruneInitrds(dir string, keep int) {
	files, _ := filepath.Glob(filepath.Join(dir, "initrd-*.cpio"))
	type f struct {
		path string
		mod  int64
	}
	var fs []f
	for _, p := range files {
		if st, err := os.Stat(p); err == nil {
			fs = append(fs, f{p, st.ModTime().UnixNano()})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].mod > fs[j].mod })
	for i := keep; i < len(fs); i++ {
		os.Remove(fs[i].path)
	}
}

func sortByDepth(d []string) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && strings.Count(d[j], "/") < strings.Count(d[j-1], "/"); j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// moduleOrder lists the module files for names and their dependencies from
// modules.dep, each after everything it depends on.
func moduleOrder(moddir string, names []string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(moddir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("vm initramfs: %w (is the kernel's modules package installed?)", err)
	}
	deps := map[string][]string{}
	byName := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		base := strings.TrimSuffix(filepath.Base(mod), ".ko")
		byName[strings.ReplaceAll(base, "-", "_")] = mod
	}
	var order []string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(m string) {
		if seen[m] {
			return
		}
		seen[m] = true
		for _, d := range deps[m] {
			visit(d)
		}
		order = append(order, filepath.Join(moddir, m))
	}
	for _, n := range names {
		m, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("vm initramfs: module %s not in %s/modules.dep (built into the kernel?)", n, moddir)
		}
		visit(m)
	}
	return order, nil
}

// sharedLibs returns the ELF interpreter and the libraries exe needs, as host
// paths; none for a static binary.
func sharedLibs(exe string) ([]string, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("vm initramfs: reading %s: %w", exe, err)
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			out = append(out, string(bytes.TrimRight(b, "\x00")))
		}
	}
	needed, _ := f.ImportedLibraries()
	for _, n := range needed {
		found := ""
		for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
			if _, err := os.Stat(filepath.Join(d, n)); err == nil {
				found = filepath.Join(d, n)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("vm initramfs: %s needs %s, which is not on this host", exe, n)
		}
		out = append(out, found)
	}
	return out, nil
}

// cpioWriter writes the "newc" cpio format the kernel unpacks.
type cpioWriter struct {
	w   *bufio.Writer
	ino int
	err error
}

func (c *cpioWriter) header(name string, mode uint32, size int64, rmaj, rmin int) {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	fmt.Fprintf(c.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, len(name)+1, 0)
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.pad(int64(110 + len(name) + 1))
}

func (c *cpioWriter) pad(n int64) {
	for ; n%4 != 0; n++ {
		c.w.WriteByte(0)
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0, 0, 0) }

func (c *cpioWriter) node(name string, mode uint32, maj, min int) { c.header(name, mode, 0, maj, min) }

func (c *cpioWriter) fileFrom(name, src string, perm uint32) error {
	b, err := os.ReadFile(src) // follows symlinks: the target's content
	if err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	c.header(name, 0o100000|perm, int64(len(b)), 0, 0)
	c.w.Write(b)
	c.pad(int64(len(b)))
	return nil
}

func (c *cpioWriter) close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	return c.w.Flush()
}
