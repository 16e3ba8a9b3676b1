package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// BuildOptions control one Build.
type BuildOptions struct {
	// Rebuild builds even when the engine already has an image for the
	// current inputs (to pick up archive updates the host has not installed).
	Rebuild bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Dir is the state directory for the versions cache; zero means
	// state.Home().
	Dir state.Dir
}

// Result describes the workload image after Build.
type Result struct {
	Ref      string            // image reference to run (the tag, or Config.Ref)
	ID       string            // image ID (sha256:...)
	Hash     string            // inputs hash; empty for a user-supplied image without the label
	Cached   bool              // true when no build ran (image found, or Config.Ref)
	Duration time.Duration     // wall time of Build
	Size     int64             // image size in bytes
	Versions map[string]string // every installed package in the image and its version
}

// Build returns the workload image for c, building it when the engine does
// not have one for the current inputs (or when o.Rebuild is set). With c.Ref
// set it only checks that the engine has that image.
//
// Building needs root: it runs debootstrap into a temp dir (removed again on
// success, error and cancellation), upgrades the root file system from the
// suite's -updates and -security suites so that its versions match an
// up-to-date host, records the package versions and imports the tree into
// Docker.
func Build(ctx context.Context, api client.APIClient, c Config, o BuildOptions) (Result, error) {
	start := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Dir.Root == "" {
		o.Dir = state.Home()
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	if c.Ref != "" {
		return existing(ctx, api, c.Ref, o.Dir, start, fmt.Sprintf("image %s not found in the Docker engine: pull it or drop --image", c.Ref))
	}
	hash, err := c.Hash(ctx)
	if err != nil {
		return Result{}, err
	}
	tag := TagOf(hash)
	if !o.Rebuild {
		if r, err := existing(ctx, api, tag, o.Dir, start, ""); err == nil || !errors.Is(err, errNotFound) {
			if err == nil {
				err = installPrograms(ctx, api, r.Ref, o.Log)
			}
			return r, err
		}
	}

	unlock, err := state.LockFile(ctx, filepath.Join(o.Dir.ImageDir(), hash, "build.lock"), func() {
		fmt.Fprintln(o.Log, "image: another nearnative process is building the same image; waiting")
	})
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	if !o.Rebuild { // another process may have built it while we waited
		if r, err := existing(ctx, api, tag, o.Dir, start, ""); err == nil || !errors.Is(err, errNotFound) {
			if err == nil {
				err = installPrograms(ctx, api, r.Ref, o.Log)
			}
			return r, err
		}
	}

	fmt.Fprintf(o.Log, "image: building %s from %s packages: %s\n", tag, c.Suite, strings.Join(c.packages(), " "))
	id, versions, err := build(ctx, api, c, hash, tag, o)
	if err != nil {
		return Result{}, fmt.Errorf("building workload image %s: %w", tag, err)
	}
	r := Result{Ref: tag, ID: id, Hash: hash, Versions: versions}
	if err := installPrograms(ctx, api, tag, o.Log); err != nil {
		return r, err
	}
	if insp, err := api.ImageInspect(ctx, id); err == nil {
		r.Size = insp.Size
	}
	r.Duration = time.Since(start)
	fmt.Fprintf(o.Log, "image: built %s (%s, %d MB) in %s\n", tag, shortID(id), r.Size/1e6, r.Duration.Round(time.Second))
	return r, nil
}

var errNotFound = errors.New("image not found")

// existing returns the Result for an image the engine already has. A missing
// image yields an error wrapping errNotFound, with msg as its text if given.
func existing(ctx context.Context, api client.APIClient, ref string, dir state.Dir, start time.Time, msg string) (Result, error) {
	insp, ok, err := inspect(ctx, api, ref)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		if msg == "" {
			msg = "image " + ref + " not found in the Docker engine"
		}
		return Result{}, fmt.Errorf("%s: %w", msg, errNotFound)
	}
	versions, err := versionsOf(ctx, api, insp, dir)
	if err != nil {
		return Result{}, err
	}
	return Result{
		Ref: ref, ID: insp.ID, Hash: labels(insp)[LabelInputs], Cached: true,
		Duration: time.Since(start), Size: insp.Size, Versions: versions,
	}, nil
}

// build makes the root file system and imports it; it returns the image ID and
// the installed package versions.
func build(ctx context.Context, api client.APIClient, c Config, hash, tag string, o BuildOptions) (id string, versions map[string]string, err error) {
	for _, tool := range []string{"debootstrap", "chroot", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", nil, fmt.Errorf("%s is needed to build the workload image (apt-get install %s): %w", tool, tool, err)
		}
	}
	if os.Geteuid() != 0 {
		return "", nil, errors.New("building the workload image needs root (debootstrap, chroot)")
	}
	tmp, err := state.TempDir(runid.New(), "image")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if rerr := removeTree(tmp); rerr != nil {
			fmt.Fprintf(o.Log, "image: %v\n", rerr)
			if err == nil {
				err = rerr
			}
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	step := buildSteps(o.Log)
	if err := makeRootfs(ctx, rootfs, c, o.Log, step); err != nil {
		return "", nil, err
	}

	versions, err = statusOf(rootfs)
	if err != nil {
		return "", nil, err
	}
	var missing []string
	for _, p := range c.packages() {
		if versions[p] == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("packages not installed in the root file system: %s", strings.Join(missing, " "))
	}
	vf := versionsFile{Hash: hash, Suite: c.Suite, Packages: versions}
	if err := vf.write(filepath.Join(rootfs, "etc", "nearnative", "versions.json")); err != nil {
		return "", nil, err
	}

	done := step("importing into Docker")
	id, err = importTree(ctx, api, rootfs, hash, o.Log)
	if err != nil {
		return "", nil, err
	}
	done()
	if err := tagImage(ctx, api, id, tag, o.Log); err != nil {
		return "", nil, err
	}
	vf.Image = id
	if err := vf.write(cachePath(o.Dir, hash)); err != nil {
		return "", nil, err
	}
	return id, versions, nil
}

// buildSteps returns step, which logs what a build step does and returns
// the function that logs how long it took.
func buildSteps(log io.Writer) func(what string) func() {
	return func(what string) func() {
		fmt.Fprintf(log, "image: %s\n", what)
		t := time.Now()
		return func() { fmt.Fprintf(log, "image: %s took %s\n", what, time.Since(t).Round(100*time.Millisecond)) }
	}
}

// makeRootfs makes the image's root file system: debootstrap with the
// packages, the suite's updates and security fixes, and nearnative's
// benchmark programs.
func makeRootfs(ctx context.Context, rootfs string, c Config, log io.Writer, step func(string) func()) error {
	if err := writePolicy(rootfs); err != nil {
		return err
	}
	done := step("debootstrap (downloads and installs the packages; a minute or more)")
	if err := run(ctx, log, "  ", "debootstrap", "--variant=minbase", "--include="+strings.Join(c.packages(), ","),
		c.Suite, rootfs, c.Mirror); err != nil {
		return err
	}
	done()
	// debootstrap removes the policy-rc.d it found (it installs its own
	// during its run), so write ours again before apt configures packages.
	if err := writePolicy(rootfs); err != nil {
		return err
	}

	if err := writeSources(rootfs, c); err != nil {
		return err
	}
	done = step("upgrading from " + c.Suite + "-updates and " + c.Suite + "-security")
	for _, args := range [][]string{
		{"apt-get", "update"},
		{"apt-get", "-y", "-o", "Dpkg::Options::=--force-confold", "upgrade"},
		{"apt-get", "clean"},
	} {
		if err := inChroot(ctx, log, rootfs, args...); err != nil {
			return err
		}
	}
	if err := tidy(rootfs); err != nil {
		return err
	}
	done()
	done = step("compiling nearnative's benchmark programs into " + benchbin.Dir)
	if err := benchbin.Build(ctx, filepath.Join(rootfs, benchbin.Dir), log); err != nil {
		return err
	}
	done()

	return nil
}

// installPrograms copies nearnative's benchmark programs from the image ref
// to benchbin.Dir on the host, unless the host already has these builds, so
// that native runs the same bytes as the containers and guests. Each file is
// written under a temporary name and renamed.
func installPrograms(ctx context.Context, api client.APIClient, ref string, log io.Writer) error {
	for _, p := range benchbin.Programs {
		if p.CheckHost() == nil {
			continue
		}
		if err := os.MkdirAll(benchbin.Dir, 0o755); err != nil {
			return fmt.Errorf("installing %s: %w", p.Name, err)
		}
		tmp := filepath.Join(benchbin.Dir, "."+p.Name+".tmp")
		err := readFromImage(ctx, api, ref, p.Path(), func(r io.Reader) error {
			f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, r); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		})
		if err == nil {
			err = p.CheckFile(tmp)
		}
		if err == nil {
			err = os.Rename(tmp, p.Path())
		}
		if err != nil {
			os.Remove(tmp)
			return fmt.Errorf("installing %s on the host from image %s: %w", p.Name, ref, err)
		}
		fmt.Fprintf(log, "image: installed %s from %s\n", p.Path(), ref)
	}
	return nil
}

// writePolicy installs a policy-rc.d that forbids starting services while
// packages are configured; it stays in the image, where nothing should start
// on its own either.
func writePolicy(rootfs string) error {
	p := filepath.Join(rootfs, "usr", "sbin", "policy-rc.d")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("preparing root file system: %w", err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n# nearnative: no service starts on package installation\nexit 101\n"), 0o755); err != nil {
		return fmt.Errorf("writing policy-rc.d: %w", err)
	}
	return nil
}

// writeSources replaces debootstrap's sources.list by deb822 sources with the
// suite, its -updates suite and (when known) its -security suite.
func writeSources(rootfs string, c Config) error {
	const keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	var b strings.Builder
	fmt.Fprintf(&b, "Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n", c.Mirror, c.Suite, c.Suite, keyring)
	if c.SecurityMirror != "" {
		fmt.Fprintf(&b, "\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: %s\n", c.SecurityMirror, c.Suite, keyring)
	}
	apt := filepath.Join(rootfs, "etc", "apt")
	if err := os.Remove(filepath.Join(apt, "sources.list")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing apt sources: %w", err)
	}
	if err := os.WriteFile(filepath.Join(apt, "sources.list.d", "debian.sources"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing apt sources: %w", err)
	}
	return nil
}

// inChroot runs a command inside the root file system with /proc mounted (in
// the command's private mount namespace, so it never outlives the command).
func inChroot(ctx context.Context, log io.Writer, rootfs string, args ...string) error {
	sh := `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`
	return run(ctx, log, "  ", "/bin/sh", append([]string{"-c", sh, rootfs}, args...)...)
}

// tidy drops the package lists and caches that apt-get clean leaves, and the
// host's name and resolver configuration that debootstrap copied in (Docker
// provides its own; so will the VM).
func tidy(rootfs string) error {
	for _, f := range []string{"etc/hostname", "etc/resolv.conf"} {
		p := filepath.Join(rootfs, f)
		// Remove first: a symlink here must not lead the write to the host.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("clearing %s: %w", f, err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return fmt.Errorf("clearing %s: %w", f, err)
		}
	}
	for _, pattern := range []string{"var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, pattern))
		for _, m := range matches {
			if filepath.Base(m) == "lock" || filepath.Base(m) == "partial" {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("cleaning apt caches: %w", err)
			}
		}
	}
	return nil
}

// statusOf parses the dpkg status file of a root file system.
func statusOf(rootfs string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(rootfs, "var", "lib", "dpkg", "status"))
	if err != nil {
		return nil, fmt.Errorf("reading installed packages: %w", err)
	}
	defer f.Close()
	return ParseStatus(f)
}

// importTree streams the root file system as a tar archive into the engine and
// returns the new (untagged) image's ID.
func importTree(ctx context.Context, api client.APIClient, rootfs, hash string, log io.Writer) (string, error) {
	tar := command(ctx, "tar", "--numeric-owner", "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*",
		"-C", rootfs, "-cf", "-", ".")
	var stderr strings.Builder
	tar.Stderr = &stderr
	out, err := tar.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("tar: %w", err)
	}
	if err := tar.Start(); err != nil {
		return "", fmt.Errorf("tar: %w", err)
	}
	src := &countingReader{r: out}
	stop := progress(log, &src.n)
	body, err := api.ImageImport(ctx, image.ImportSource{Source: src, SourceName: "-"}, "", image.ImportOptions{
		Message: "nearnative workload image " + hash,
		Changes: []string{
			`CMD ["/bin/bash"]`,
			"LABEL " + LabelImage + "=" + LabelImageWorkload,
			"LABEL " + LabelInputs + "=" + hash,
		},
	})
	var id string
	if err == nil {
		id, err = readImportStream(body)
		body.Close()
	}
	stop()
	if err != nil {
		killGroup(tar)
	}
	io.Copy(io.Discard, out)
	werr := tar.Wait()
	if err == nil && werr != nil {
		err = fmt.Errorf("tar: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		if id != "" { // the engine may have accepted a truncated archive
			api.ImageRemove(context.WithoutCancel(ctx), id, image.RemoveOptions{Force: true})
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("importing root file system: %w", err)
	}
	fmt.Fprintf(log, "image: imported %d MB as %s\n", src.n.Load()/1e6, shortID(id))
	return id, nil
}

// readImportStream reads the engine's JSON messages after an import and
// returns the image ID it reports.
func readImportStream(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	for {
		var m struct {
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return id, fmt.Errorf("reading import response: %w", err)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			return id, fmt.Errorf("engine: %s", strings.TrimSpace(m.Error+" "+m.ErrorDetail.Message))
		}
		if s := strings.TrimSpace(m.Status); strings.HasPrefix(s, "sha256:") {
			id = s
		}
	}
	if id == "" {
		return "", errors.New("engine did not report an image ID")
	}
	return id, nil
}

// tagImage points tag at id. An image the tag pointed to before (a rebuild)
// is removed when nothing else uses it.
func tagImage(ctx context.Context, api client.APIClient, id, tag string, log io.Writer) error {
	old, hadOld, err := inspect(ctx, api, tag)
	if err != nil {
		return err
	}
	if err := api.ImageTag(ctx, id, tag); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", shortID(id), tag, err)
	}
	if hadOld && old.ID != id {
		if _, err := api.ImageRemove(ctx, old.ID, image.RemoveOptions{PruneChildren: true}); err == nil {
			fmt.Fprintf(log, "image: removed the previous %s (%s)\n", tag, shortID(old.ID))
		}
	}
	return nil
}

// removeTree removes a build's temp dir. It refuses while anything is
// mounted below it, so that a leaked mount is never deleted through.
func removeTree(dir string) error {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("checking mounts before removing %s: %w", dir, err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return fmt.Errorf("not removing %s: %s is still mounted", dir, f[4])
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing build dir: %w", err)
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// progress logs a byte counter every 10 s until stop is called.
func progress(log io.Writer, n *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fmt.Fprintf(log, "image: %d MB sent to the engine\n", n.Load()/1e6)
			}
		}
	}()
	return func() { close(quit); <-done }
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// versionsFile is the JSON form of an image's package versions, kept at
// /etc/nearnative/versions.json inside the image and in the state directory.
type versionsFile struct {
	Hash     string            `json:"hash"`
	Suite    string            `json:"suite,omitempty"`
	Image    string            `json:"image,omitempty"` // image ID; only in the state directory copy
	Packages map[string]string `json:"packages"`
}

func (v versionsFile) write(path string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding versions: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing versions: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing versions: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing versions: %w", err)
	}
	return nil
}

func cachePath(dir state.Dir, hash string) string {
	return filepath.Join(dir.ImageDir(), hash, "versions.json")
}
