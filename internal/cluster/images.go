package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// PauseArchive packs the pause binary as a docker-archive tar (what `docker
// save` writes) tagged PauseImage, for `ctr images import`.
func PauseArchive(pauseBinary []byte) ([]byte, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(pauseBinary)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(pauseBinary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/pause"}, "User": "65535:65535"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{PauseImage}, "Layers": []string{layerName}}})

	var out bytes.Buffer
	aw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if strings.Contains(f.name, "/") {
			dir := f.name[:strings.IndexByte(f.name, '/')+1]
			if err := aw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := aw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// ctr runs containerd's client against the private containerd in the
// namespace the CRI plugin uses.
func (c Config) ctr(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, CtrBinary, append([]string{"--address", c.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return string(out), nil
}

// importPause imports the sandbox image built from the pause binary.
func (c Config) importPause(ctx context.Context, bins Binaries) error {
	bin, err := os.ReadFile(bins["pause"])
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	archive, err := PauseArchive(bin)
	if err != nil {
		return fmt.Errorf("cluster: packing the pause image: %w", err)
	}
	if _, err := c.ctr(ctx, bytes.NewReader(archive), "images", "import", "-"); err != nil {
		return fmt.Errorf("cluster: importing %s: %w", PauseImage, err)
	}
	return nil
}

// ImageSaver writes an image of the local Docker engine as a docker-archive
// tar (the Docker SDK's ImageSave).
type ImageSaver func(ctx context.Context, ref string) (io.ReadCloser, error)

// ContainerdRef is how containerd names an image Docker calls ref.
func ContainerdRef(ref string) string {
	name := ref
	if i := strings.IndexByte(ref, '/'); i < 0 || !strings.ContainsAny(ref[:i], ".:") && ref[:i] != "localhost" {
		if i < 0 {
			name = "library/" + ref
		}
		name = "docker.io/" + name
	}
	if last := name[strings.LastIndexByte(name, '/')+1:]; !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		name += ":latest"
	}
	return name
}

// HasImage reports whether the node's containerd holds ref.
func (c Config) HasImage(ctx context.Context, ref string) bool {
	out, err := c.ctr(ctx, nil, "images", "list", "-q")
	if err != nil {
		return false
	}
	want := ContainerdRef(ref)
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// ImportImage copies image ref from the local Docker engine into the node's
// containerd, where pods find it with imagePullPolicy Never. It does nothing
// when the node holds it already.
func (c Config) ImportImage(ctx context.Context, ref string, save ImageSaver) (bool, error) {
	if c.HasImage(ctx, ref) {
		return false, nil
	}
	rc, err := save(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("cluster: saving %s from Docker: %w", ref, err)
	}
	defer rc.Close()
	if _, err := c.ctr(ctx, rc, "images", "import", "-"); err != nil {
		return false, fmt.Errorf("cluster: importing %s into the node: %w", ref, err)
	}
	return true, nil
}
