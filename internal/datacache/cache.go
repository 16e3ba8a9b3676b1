// Package datacache keeps data that is slow to make and the same for every
// trial (a loaded database's data directory, a loaded key space) built once
// per key under one cache root, and copies it for each trial.
//
// The rules, the same for every user of the package:
//   - Everything lives under Root(home) = <state>/cache/<name>/<key>; an
//     entry is complete when its meta.json exists, and `rm -r` of an entry
//     (or of the whole root) between runs is always safe: it is rebuilt.
//   - Builds of one key take its lock (<key>.lock, a file lock, so two runs
//     and two goroutines wait for one another) and check again under it.
//   - A build runs in .build-<key>-<random> beside the entry; a build left
//     there by a crashed run is removed by the next build of that key (it
//     holds the lock, so no build of that key is alive).
//   - A finished build writes meta.json, is synced to disk and renamed into
//     place: a half-made entry never becomes visible.
package datacache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/state"
)

// MetaFile is the file that marks an entry complete and describes it.
const MetaFile = "meta.json"

// Root is the one cache root under a state directory.
func Root(home state.Dir) string { return filepath.Join(home.Root, "cache") }

// Cache is the directory of one kind of data's entries, one per key.
type Cache struct{ Dir string }

// New returns the cache called name (a workload's or an application's
// name) under home's cache root.
func New(home state.Dir, name string) Cache { return Cache{Dir: filepath.Join(Root(home), name)} }

// Path is where the entry of key lives once built.
func (c Cache) Path(key string) string { return filepath.Join(c.Dir, key) }

// Lookup reads the meta.json of key's entry into meta; ok is false when
// the entry has not been built.
func (c Cache) Lookup(key string, meta any) (ok bool, err error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	p := filepath.Join(c.Path(key), MetaFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", p, err)
	}
	if err := json.Unmarshal(b, meta); err != nil {
		return false, fmt.Errorf("%s: %w (remove %s to rebuild it)", p, err, c.Path(key))
	}
	return true, nil
}

// BuildFunc makes an entry's data in dir (an empty directory of mode 0755
// that becomes the entry) and returns what Ensure writes to its meta.json.
type BuildFunc func(ctx context.Context, dir string) (meta any, err error)

// Ensure returns the directory of key's entry with its meta.json read into
// meta, building it first with build when the cache has none (see the
// package doc for the locking and crash rules). built says whether this
// call built it.
func (c Cache) Ensure(ctx context.Context, key string, meta any, build BuildFunc) (dir string, built bool, err error) {
	dir = c.Path(key)
	if ok, err := c.Lookup(key, meta); ok || err != nil {
		return dir, false, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", false, fmt.Errorf("creating the data cache %s: %w", c.Dir, err)
	}
	unlock, err := state.LockFile(ctx, filepath.Join(c.Dir, key+".lock"), nil)
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if ok, err := c.Lookup(key, meta); ok || err != nil {
		return dir, false, err // another run built it while we waited
	}
	if err := c.sweep(key); err != nil {
		return "", false, err
	}
	work, err := os.MkdirTemp(c.Dir, ".build-"+key+"-")
	if err != nil {
		return "", false, fmt.Errorf("creating a build directory in %s: %w", c.Dir, err)
	}
	defer os.RemoveAll(work) // gone after the rename
	if err := os.Chmod(work, 0o755); err != nil {
		return "", false, err
	}
	m, err := build(ctx, work)
	if err != nil {
		return "", false, err
	}
	if err := publish(work, dir, m); err != nil {
		return "", false, err
	}
	if ok, err := c.Lookup(key, meta); !ok || err != nil {
		return "", false, fmt.Errorf("reading back the entry %s: %v", dir, err)
	}
	return dir, true, nil
}

// sweep removes the builds of key that crashed runs left; the caller holds
// key's lock.
func (c Cache) sweep(key string) error {
	stale, _ := filepath.Glob(filepath.Join(c.Dir, ".build-"+key+"-*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return fmt.Errorf("removing the unfinished build %s: %w", s, err)
		}
	}
	return nil
}

// publish writes meta into work, syncs it to disk and renames it to dir.
func publish(work, dir string, meta any) error {
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", MetaFile, err)
	}
	if err := os.WriteFile(filepath.Join(work, MetaFile), b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", MetaFile, err)
	}
	// Builds may load with fsync off: the files are made durable before
	// the entry is published.
	if err := SyncFS(work); err != nil {
		return err
	}
	if err := os.Rename(work, dir); err != nil {
		return fmt.Errorf("publishing %s: %w", dir, err)
	}
	return nil
}

func checkKey(key string) error {
	if key == "" || strings.ContainsAny(key, "/\x00") || strings.HasPrefix(key, ".") {
		return fmt.Errorf("data cache key %q: want a plain file name", key)
	}
	return nil
}

// SyncFS flushes the file system holding dir.
func SyncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// Adopt moves the entry of key from old, the directory an earlier version
// of nearnative kept such entries in, into the cache, where the cache has
// none yet: old/key, complete when it holds oldMeta (renamed to meta.json;
// its content must be what Lookup reads). It reports whether it moved one.
// The key's lock is held, so a build of the key waits for it.
func (c Cache) Adopt(ctx context.Context, old, key, oldMeta string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	from := filepath.Join(old, key)
	if _, err := os.Stat(filepath.Join(from, oldMeta)); err != nil {
		return false, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return false, fmt.Errorf("creating the data cache %s: %w", c.Dir, err)
	}
	unlock, err := state.LockFile(ctx, filepath.Join(c.Dir, key+".lock"), nil)
	if err != nil {
		return false, err
	}
	defer unlock()
	if _, err := os.Stat(c.Path(key)); err == nil {
		return false, nil
	}
	if oldMeta != MetaFile {
		if err := os.Rename(filepath.Join(from, oldMeta), filepath.Join(from, MetaFile)); err != nil {
			return false, fmt.Errorf("adopting %s: %w", from, err)
		}
	}
	if err := os.Rename(from, c.Path(key)); err != nil {
		return false, fmt.Errorf("adopting %s into %s: %w", from, c.Dir, err)
	}
	return true, nil
}
