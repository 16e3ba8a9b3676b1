package vmagent

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Put copies the tree under the host directory src into dest on the agent's
// side (a guest's disk), replacing nothing outside dest. It streams a tar
// archive, so data directories of any size go through without staging.
func (c *Client) Put(ctx context.Context, src, dest string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteTar(pw, src)) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/put?dir="+url.QueryEscape(dest), pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("guest agent /put %s: %w", dest, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("guest agent /put %s: %s: %s", dest, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// WriteTar writes the tree under dir (relative names, modes, symlinks) as a
// tar stream. The first entry is dir itself as ".", so that its mode and
// owner arrive too: PostgreSQL refuses a data directory that is not 0700
// or 0750.
func WriteTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	return tw.Close()
}

// ExtractTar unpacks a tar stream into dest; names that would leave dest
// are refused. Run as root, it keeps each entry's numeric owner, as tar
// does for root: a tree prepared on the host for a system user whose uid
// is fixed in Debian (www-data, 33) arrives that user's; a user whose uid
// differs between the host and the image needs the volume's Own.
func ExtractTar(r io.Reader, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	root := os.Geteuid() == 0
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(hdr.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("tar entry %q leaves the destination", hdr.Name)
		}
		path := filepath.Join(dest, name)
		mode := hdr.FileInfo().Mode().Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, mode|0o700); err != nil {
				return err
			}
			os.Chmod(path, mode)
		case tar.TypeSymlink:
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.Symlink(hdr.Linkname, path); err != nil {
				return err
			}
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(path), 0o755)
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			continue
		}
		if root {
			if err := os.Lchown(path, hdr.Uid, hdr.Gid); err != nil {
				return err
			}
		}
	}
}

func (a *agent) put(r *http.Request) (any, error) {
	dest := r.URL.Query().Get("dir")
	if !filepath.IsAbs(dest) {
		return nil, fmt.Errorf("dir %q: want an absolute path", dest)
	}
	if err := ExtractTar(r.Body, dest); err != nil {
		return nil, fmt.Errorf("unpacking into %s: %w", dest, err)
	}
	return struct{}{}, nil
}
