package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// The tests run real containers. They share one engine and one image: the
// image named by NEARNATIVE_TEST_IMAGE, or one imported from the host's
// redis-server binary and the shared libraries ldd lists for it.

var (
	setupOnce sync.Once
	testEng   *Daemon
	testImage string
	setupErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testEng != nil {
		testEng.Close()
	}
	os.Exit(code)
}

// needEngine returns the shared engine and test image, or skips in -short mode.
func needEngine(t *testing.T) (*Daemon, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Docker daemon; skipped in -short mode")
	}
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		testEng, setupErr = Connect(ctx)
		if setupErr != nil {
			return
		}
		testImage, setupErr = ensureTestImage(ctx, testEng)
	})
	if setupErr != nil {
		t.Fatalf("test setup: %v", setupErr)
	}
	return testEng, testImage
}

// ensureTestImage returns NEARNATIVE_TEST_IMAGE or imports (once per content
// of the host files) a minimal image holding redis-server.
func ensureTestImage(ctx context.Context, eng *Daemon) (string, error) {
	if ref := os.Getenv("NEARNATIVE_TEST_IMAGE"); ref != "" {
		ok, err := eng.imageExists(ctx, ref)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("NEARNATIVE_TEST_IMAGE=%s is not present in the daemon", ref)
		}
		return ref, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("building the test image needs redis-server on the host (apt-get install redis-server): %w", err)
	}
	files, err := lddClosure(bin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("test image: %w", err)
		}
		fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	ref := "nearnative/test-redis:" + hex.EncodeToString(h.Sum(nil))[:12]
	if ok, err := eng.imageExists(ctx, ref); err != nil || ok {
		return ref, err
	}
	tarball, err := rootfsTar(files)
	if err != nil {
		return "", err
	}
	rc, err := eng.API().ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(tarball), SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LABEL nearnative.role=test-image",
		}})
	if err != nil {
		return "", fmt.Errorf("importing the test image: %w", err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("importing the test image: %w", err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return "", fmt.Errorf("importing the test image: %s", out)
	}
	return ref, nil
}

// lddClosure returns bin and the shared libraries (with the loader) it needs.
func lddClosure(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	files := []string{bin}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

// rootfsTar archives files (symlinks followed) plus /etc/passwd, /etc/group
// and /tmp as a root file system.
func rootfsTar(files []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		var chain []string
		for ; d != "/" && !dirs[d]; d = path.Dir(d) {
			chain = append([]string{d}, chain...)
		}
		for _, c := range chain {
			dirs[c] = true
			m := int64(0o755)
			if c == "/tmp" {
				m = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: c[1:] + "/", Mode: m, ModTime: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	}
	addFile := func(name string, content []byte, mode int64) error {
		if err := addDir(path.Dir(name)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name[1:], Mode: mode, Size: int64(len(content)), ModTime: time.Now()}); err != nil {
			return err
		}
		_, err := tw.Write(content)
		return err
	}
	if err := addDir("/tmp"); err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("test image: %w", err)
		}
		if err := addFile(filepath.Clean(f), b, 0o755); err != nil {
			return nil, fmt.Errorf("test image: %w", err)
		}
	}
	if err := addFile("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), 0o644); err != nil {
		return nil, err
	}
	if err := addFile("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// redisSpec runs redis-server on the platform's chosen address.
func redisSpec(name string) platform.Spec {
	return platform.Spec{
		Name:  name,
		Ports: []string{"redis"},
		Command: func(l platform.Listen) []string {
			return []string{"redis-server", "--bind", l.Host, "--port", fmt.Sprint(l.Port("redis")),
				"--save", "", "--appendonly", "no", "--protected-mode", "no"}
		},
	}
}

// newPlatform makes a platform of kind for a fresh run whose leftovers are
// removed when the test ends.
func newPlatform(t *testing.T, kind, name string, opt platform.Options) (*dockerPlatform, platform.Env) {
	t.Helper()
	eng, img := needEngine(t)
	env := platform.Env{Run: runid.New(), LogDir: t.TempDir(), Image: img}
	env.Client = testClient(t, kind, env.Run)
	p, err := New(kind, name, env, eng, opt)
	if err != nil {
		t.Fatalf("New(%s): %v", kind, err)
	}
	t.Cleanup(func() {
		if removed, err := eng.RemoveRun(context.Background(), env.Run); err != nil || len(removed) > 0 {
			t.Errorf("leftovers of run %s: removed %v, err %v", env.Run, removed, err)
		}
	})
	return p.(*dockerPlatform), env
}

// testClient is the client host a run gives a platform of kind (as
// catalog.ClientNeed decides): this machine for docker-proxy, a network
// namespace of the run for the others, removed when the test ends.
func testClient(t *testing.T, kind string, run runid.ID) host.Host {
	t.Helper()
	if kind == platform.DockerProxy || kind == platform.DockerRunscProxy {
		return host.LoopbackHost()
	}
	if err := host.Check(); err != nil {
		t.Skipf("no client host: %v", err)
	}
	h, err := host.NewNS(context.Background(), run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatalf("client host: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("closing the client host: %v", err)
		}
	})
	return h
}

// pingFrom sends PING to the Redis at addr from client host h, as the
// platform's load would reach it.
func pingFrom(t *testing.T, h host.Host, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := h.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			var line string
			if err == nil {
				line, err = bufio.NewReader(c).ReadString('\n')
			}
			c.Close()
			if err == nil && strings.TrimSpace(line) == "+PONG" {
				return
			}
			if err == nil {
				err = fmt.Errorf("answer %q, want +PONG", line)
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("PING %s from the client host (%s): %v", addr, h.Describe(), last)
}

// start starts spec and stops the server when the test ends.
func start(t *testing.T, p platform.Platform, trial string, spec platform.Spec) platform.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := p.Start(ctx, trial, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop in cleanup: %v", err)
		}
	})
	return s
}

// pingRedis sends PING to addr until it answers +PONG or 5 s pass.
func pingRedis(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = pingOnce(addr); last == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("PING %s: %v", addr, last)
}

func pingOnce(addr string) error {
	got, err := redisCommand(addr, "PING")
	if err != nil {
		return err
	}
	if got != "+PONG" {
		return fmt.Errorf("answer %q, want +PONG", got)
	}
	return nil
}

// redisCommand sends an inline command and returns the first answer line.
func redisCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// runContainers lists the containers of run.
func runContainers(t *testing.T, eng *Daemon, run runid.ID) []container.Summary {
	t.Helper()
	cs, err := eng.API().ContainerList(context.Background(), container.ListOptions{All: true, Filters: runFilter(run)})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return cs
}
