package datacache

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// CopyOptions say how CopyTree makes a trial's copy.
type CopyOptions struct {
	// UID and GID own every copied file and directory (the user the server
	// runs as where it runs: inside a container image the system users'
	// ids may differ from the host's); -1 keeps root's.
	UID, GID int
	// RootMode, DirMode and FileMode are the modes of the destination
	// itself, of the directories and of the files below it; 0 keeps the
	// source's.
	RootMode, DirMode, FileMode fs.FileMode
	// Skip leaves out the file at rel (a path relative to the source).
	Skip func(rel string) bool
	// Link hard-links the file at rel rather than copying it, where the
	// file system allows: for files the server only reads.
	Link func(rel string) bool
	// Sync flushes the file system after the copy, so that the trial's own
	// I/O does not compete with the copy's write-back.
	Sync bool
}

// CopyReport says what a copy did.
type CopyReport struct {
	Bytes int64
	Files int
	Wall  time.Duration
}

// CopyTree copies the tree src to dst, which must be missing or an empty
// directory: directories, regular files (the kernel's copy_file_range, or
// shared extents, through io.Copy) and symbolic links. On failure what it
// made is removed.
func CopyTree(src, dst string, o CopyOptions) (CopyReport, error) {
	start := time.Now()
	var rep CopyReport
	made, err := emptyDest(dst)
	if err != nil {
		return rep, err
	}
	err = filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if o.Skip != nil && o.Skip(rel) {
			return nil
		}
		n, err := copyEntry(p, filepath.Join(dst, rel), rel, e, o)
		if n >= 0 && !e.IsDir() {
			rep.Bytes += n
			rep.Files++
		}
		return err
	})
	if err == nil && o.Sync {
		err = SyncFS(dst)
	}
	if err != nil {
		clear(dst, made)
		return rep, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// emptyDest makes dst or checks that it is an empty directory; made says
// whether it made it.
func emptyDest(dst string) (made bool, err error) {
	es, err := os.ReadDir(dst)
	switch {
	case os.IsNotExist(err):
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return false, fmt.Errorf("copying to %s: %w", dst, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("copying to %s: %w", dst, err)
	case len(es) > 0:
		return false, fmt.Errorf("copying to %s: it is not empty", dst)
	}
	return false, nil
}

// clear undoes a failed copy: dst goes if the copy made it, else its
// contents.
func clear(dst string, made bool) {
	if made {
		os.RemoveAll(dst)
		return
	}
	es, _ := os.ReadDir(dst)
	for _, e := range es {
		os.RemoveAll(filepath.Join(dst, e.Name()))
	}
}

// copyEntry copies one entry of the tree to `to` and gives it to the
// owner; n is the bytes of a regular file, -1 for anything else.
func copyEntry(from, to, rel string, e fs.DirEntry, o CopyOptions) (n int64, err error) {
	info, err := e.Info()
	if err != nil {
		return -1, err
	}
	mode, n := info.Mode().Perm(), int64(-1)
	switch {
	case e.IsDir():
		mode = pick(o.DirMode, mode)
		if rel == "." {
			mode = pick(o.RootMode, info.Mode().Perm())
		} else if err := os.Mkdir(to, mode); err != nil {
			return -1, err
		}
	case info.Mode().IsRegular():
		mode = pick(o.FileMode, mode)
		if o.Link != nil && o.Link(rel) && os.Link(from, to) == nil {
			return info.Size(), nil // a link shares the source's mode and owner
		}
		if n, err = CopyFile(from, to, mode); err != nil {
			return n, err
		}
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return -1, err
		}
		if err := os.Symlink(target, to); err != nil {
			return -1, err
		}
		return 0, chown(to, o)
	default:
		return -1, fmt.Errorf("%s: not a regular file, directory or link (%v)", from, info.Mode().Type())
	}
	// Mkdir and OpenFile apply the umask: set the mode past it.
	if err := os.Chmod(to, mode); err != nil {
		return n, err
	}
	return n, chown(to, o)
}

func pick(want, have fs.FileMode) fs.FileMode {
	if want != 0 {
		return want
	}
	return have
}

func chown(p string, o CopyOptions) error {
	if o.UID < 0 {
		return nil
	}
	return os.Lchown(p, o.UID, o.GID)
}

// CopyFile copies the regular file src to dst, which must not exist, with
// mode perm (before the umask), and returns the bytes copied; io.Copy
// between two files uses copy_file_range, so the kernel copies (or shares
// extents where the file system can).
func CopyFile(src, dst string, perm fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("copying %s: %w", src, err)
	}
	return n, nil
}

// Size is the bytes and number of the regular files below dir.
func Size(dir string) (bytes int64, files int, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			bytes += info.Size()
			files++
		}
		return nil
	})
	return bytes, files, err
}

// UserIDs returns the uid and gid of a system user of this machine
// (postgres, mysql, rabbitmq, tomcat, www-data), which the data's owner
// must be where a server runs natively.
func UserIDs(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("system user %s: %w (is its server installed? `make setup`)", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}
