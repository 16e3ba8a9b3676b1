package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

// filesTar builds, in memory, a tar archive to extract at "/" that holds
// platform.ContainerDir, the directories below it that files need (0755) and
// files, whose paths are relative to ContainerDir, all owned by own (the
// container's user, as the native platform gives its dir to the server's user).
func filesTar(files []platform.File, own owner) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	root := strings.TrimPrefix(platform.ContainerDir, "/")
	dirs := map[string]bool{root: true}
	for _, f := range files {
		for d := path.Dir(path.Join(root, path.Clean(f.Path))); d != root && d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted) // parents before children
	for _, d := range sorted {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: now, Uid: own.uid, Gid: own.gid}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archiving directory %s: %w", d, err)
		}
	}
	for _, f := range files {
		mode := int64(f.Mode & 0o7777)
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     path.Join(root, path.Clean(f.Path)),
			Mode:     mode,
			Size:     int64(len(f.Content)),
			ModTime:  now,
			Uid:      own.uid,
			Gid:      own.gid,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the file archive: %w", err)
	}
	return buf.Bytes(), nil
}
