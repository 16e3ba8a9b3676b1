package auction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/state"
)

// appDir is where the auction keeps its build and data caches.
func appDir(d state.Dir) string { return filepath.Join(d.Root, "apps", "auction") }

// SourceHash identifies the embedded Java sources (pom.xml and src/): the
// key of the built WAR.
func SourceHash() string {
	h := sha256.New()
	err := fs.WalkDir(javaSource, "java", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := javaSource.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("auction: walking the embedded Java sources: %v", err))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// WARPath is where the WAR built from the embedded sources is kept under the
// state directory.
func WARPath(d state.Dir) string {
	return filepath.Join(appDir(d), "war", SourceHash(), "auction.war")
}

// ErrNoWAR is matched by ReadWAR's error when the application is not built.
var ErrNoWAR = errors.New("the auction application is not built")

// ReadWAR returns the built application, or an error matching ErrNoWAR that
// says how to build it.
func ReadWAR(d state.Dir) ([]byte, error) {
	p := WARPath(d)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is missing: run `make setup` (it runs `go run ./apps/auction/cmd/auction-build`)", ErrNoWAR, p)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the auction application: %w", err)
	}
	return b, nil
}

// BuildWAR builds the application with Maven unless the WAR of these sources
// is already there, and returns its path. The sources are extracted to a
// temporary directory; Maven's local repository is kept under the state
// directory (apps/auction/m2), so later builds need no network. Every
// dependency and plugin version is pinned and the archive's timestamps are
// fixed (pom.xml), so a build is reproducible. Maven's output goes to log.
func BuildWAR(ctx context.Context, d state.Dir, log io.Writer) (string, error) {
	out := WARPath(d)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("building the auction application: Maven (mvn) not found: install Debian's maven and openjdk-17-jdk-headless (`make setup`): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("building the auction application: %w", err)
	}
	unlock, err := state.LockFile(ctx, filepath.Join(appDir(d), "war", ".lock"), nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil { // built while we waited
		return out, nil
	}
	// Build directories left here are a crashed build's: we hold the lock.
	old, _ := filepath.Glob(filepath.Join(appDir(d), "war", "build-*"))
	for _, o := range old {
		os.RemoveAll(o)
	}
	src, err := os.MkdirTemp(filepath.Join(appDir(d), "war"), "build-")
	if err != nil {
		return "", fmt.Errorf("building the auction application: %w", err)
	}
	defer os.RemoveAll(src)
	if err := extract(javaSource, "java", src); err != nil {
		return "", err
	}
	if log == nil {
		log = io.Discard
	}
	var tail bytes.Buffer
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "-Dmaven.repo.local="+filepath.Join(appDir(d), "m2"), "package")
	cmd.Dir = src
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = io.MultiWriter(log, &tail)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the auction application (mvn package in %s): %w\n%s", src, err, lastLines(tail.String(), 20))
	}
	os.Remove(out + ".tmp")
	if _, err := datacache.CopyFile(filepath.Join(src, "target", "auction.war"), out+".tmp", 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", fmt.Errorf("building the auction application: %w", err)
	}
	return out, nil
}

// extract writes the tree under root of fsys into dir.
func extract(fsys fs.FS, root, dir string) error {
	return fs.WalkDir(fsys, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
