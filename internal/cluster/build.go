package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Binaries are the paths of the cluster's programs by name (the Components,
// "etcd" and "pause").
type Binaries map[string]string

// manifest lists the checksums of the built binaries, one "sha256  name"
// line each, as sha256sum writes them.
const manifest = "SHA256SUMS"

// allBinaries is every program the cluster runs, in build order.
func allBinaries() []string { return append(append([]string{}, Components...), "etcd", "pause") }

// goTool finds the Go toolchain: the one on PATH, else where setup puts it.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go", nil
	}
	return "", errors.New("building the cluster needs the Go toolchain: run `make setup` (it installs the Go named in go.mod)")
}

// Cached returns the binaries when all of them are built and match their
// recorded checksums; ok is false when some are missing (build them with
// EnsureBinaries). A binary that no longer matches its checksum is an
// error: it changed after it was built.
func (c Config) Cached() (Binaries, bool, error) {
	sums, err := readManifest(filepath.Join(c.BinDir(), manifest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	bins := Binaries{}
	for _, name := range allBinaries() {
		path := filepath.Join(c.BinDir(), name)
		want, ok := sums[name]
		if !ok {
			return nil, false, nil
		}
		got, err := fileSHA256(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if got != want {
			return nil, false, fmt.Errorf("cluster: %s has checksum %s, but %s was built with %s: it changed after the build; remove %s and run `nearnative cluster up` to build again",
				path, got[:12], name, want[:12], c.BinDir())
		}
		bins[name] = path
	}
	return bins, true, nil
}

// EnsureBinaries returns the cached binaries, building what is missing
// first: Kubernetes from a scratch module that requires k8s.io/kubernetes
// and replaces its staging modules by their published releases (its module
// zip has no staging directory), etcd from a scratch module that requires
// its server, and the pause program from source. Builds run one package at a
// time (-p 1): about 15 minutes of CPU from a cold cache on two cores.
func (c Config) EnsureBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	bins, ok, err := c.Cached()
	if err != nil || ok {
		return bins, err
	}
	goBin, err := goTool()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.BinDir(), 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	b := builder{goBin: goBin, log: log}
	k8sDir := filepath.Join(c.BuildDir(), "kubernetes-"+KubernetesVersion)
	etcdDir := filepath.Join(c.BuildDir(), "etcd-"+EtcdVersion)
	pauseDir := filepath.Join(c.BuildDir(), "pause")
	ldflags := fmt.Sprintf("-X k8s.io/component-base/version.gitVersion=%s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=%s",
		KubernetesVersion, minorOf(KubernetesVersion))
	sums := map[string]string{}
	for _, name := range allBinaries() {
		out := filepath.Join(c.BinDir(), name)
		if _, err := os.Stat(out); err == nil {
			// Built by an earlier, interrupted EnsureBinaries: the
			// rename below only happens after a successful build.
			if sums[name], err = fileSHA256(out); err != nil {
				return nil, err
			}
			continue
		}
		var err error
		switch {
		case name == "etcd":
			if err = b.etcdModule(ctx, etcdDir); err == nil {
				err = b.build(ctx, etcdDir, "go.etcd.io/etcd/server/v3", out, "")
			}
		case name == "pause":
			if err = writePauseModule(pauseDir); err == nil {
				err = b.build(ctx, pauseDir, ".", out, "-s -w")
			}
		default:
			if err = b.kubernetesModule(ctx, k8sDir); err == nil {
				err = b.build(ctx, k8sDir, "k8s.io/kubernetes/cmd/"+name, out, ldflags)
			}
		}
		if err != nil {
			return nil, err
		}
		if sums[name], err = fileSHA256(out); err != nil {
			return nil, err
		}
	}
	if err := writeManifest(filepath.Join(c.BinDir(), manifest), sums); err != nil {
		return nil, err
	}
	bins, _, err = c.Cached()
	return bins, err
}

func minorOf(v string) string {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return "0"
	}
	return parts[1]
}

type builder struct {
	goBin string
	log   io.Writer
	// k8sReady: the kubernetes module was prepared in this process.
	k8sReady, etcdReady bool
}

func (b *builder) logf(format string, args ...any) {
	if b.log != nil {
		fmt.Fprintf(b.log, format+"\n", args...)
	}
}

// goCmd runs the go tool in dir; its output is returned with the error.
func (b *builder) goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("cluster: go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, lastLines(string(out), 20))
	}
	return out, nil
}

// kubernetesModule writes the scratch module that builds Kubernetes.
func (b *builder) kubernetesModule(ctx context.Context, dir string) error {
	if b.k8sReady {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	b.logf("cluster: resolving k8s.io/kubernetes %s and its staging modules (Go module proxy)", KubernetesVersion)
	out, err := b.goCmd(ctx, dir, "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion)
	if err != nil {
		return err
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(out, &info); err != nil || info.GoMod == "" {
		return fmt.Errorf("cluster: reading `go mod download` of k8s.io/kubernetes: %v", err)
	}
	gomod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	staging := StagingModules(gomod)
	if len(staging) == 0 {
		return fmt.Errorf("cluster: k8s.io/kubernetes %s names no staging modules in its go.mod", KubernetesVersion)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), KubernetesGoMod(staging), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), toolsGo("build", componentImports()), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if _, err := b.goCmd(ctx, dir, "mod", "tidy"); err != nil {
		return err
	}
	b.k8sReady = true
	return nil
}

func componentImports() []string {
	var out []string
	for _, c := range Components {
		out = append(out, "k8s.io/kubernetes/cmd/"+c)
	}
	return out
}

// StagingModules returns the module paths that k8s.io/kubernetes's go.mod
// replaces by ./staging directories.
func StagingModules(gomod []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "replace "))
		if len(f) == 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			out = append(out, f[0])
		}
	}
	sort.Strings(out)
	return out
}

// KubernetesGoMod is the scratch module's go.mod: k8s.io/kubernetes at the
// pinned version with every staging module replaced by its release.
func KubernetesGoMod(staging []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "module nearnative.local/kubernetes-build\n\ngo 1.22.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", KubernetesVersion)
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, StagingVersion)
	}
	b.WriteString(")\n")
	return b.Bytes()
}

func toolsGo(pkg string, imports []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "//go:build tools\n\npackage %s\n\nimport (\n", pkg)
	for _, i := range imports {
		fmt.Fprintf(&b, "\t_ %q\n", i)
	}
	b.WriteString(")\n")
	return b.Bytes()
}

// etcdModule writes the scratch module that builds etcd's server.
func (b *builder) etcdModule(ctx context.Context, dir string) error {
	if b.etcdReady {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module nearnative.local/etcd-build\n\ngo 1.22.0\n"), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), toolsGo("build", []string{"go.etcd.io/etcd/server/v3"}), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	b.logf("cluster: resolving etcd %s (Go module proxy)", EtcdVersion)
	if _, err := b.goCmd(ctx, dir, "get", "go.etcd.io/etcd/server/v3@"+EtcdVersion); err != nil {
		return err
	}
	b.etcdReady = true
	return nil
}

// pauseSource is the sandbox's program: it sleeps until told to stop and
// reaps the orphans a pod's PID namespace hands it.
const pauseSource = `// Command pause holds a pod's namespaces until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
`

func writePauseModule(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module nearnative.local/pause\n\ngo 1.22.0\n"), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(pauseSource), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// build compiles pkg in module dir into out, through a temporary file so
// that an interrupted build leaves no binary behind.
func (b *builder) build(ctx context.Context, dir, pkg, out, ldflags string) error {
	start := time.Now()
	b.logf("cluster: building %s (go build -p 1; minutes from a cold cache)", filepath.Base(out))
	tmp := out + ".tmp"
	args := []string{"build", "-p", "1", "-trimpath", "-o", tmp}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	if _, err := b.goCmd(ctx, dir, append(args, pkg)...); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	b.logf("cluster: built %s in %v", filepath.Base(out), time.Since(start).Round(time.Second))
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("cluster: checksum of %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readManifest(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && len(f[0]) == 64 {
			out[f[1]] = f[0]
		}
	}
	return out, nil
}

func writeManifest(path string, sums map[string]string) error {
	var names []string
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
