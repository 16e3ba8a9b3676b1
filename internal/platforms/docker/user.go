package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"os"
	"path/filepath"

	"github.com/docker/docker/errdefs"

	"github.com/nearnative/nearnative/internal/platform"
)

// owner is who the server's directory and files belong to in the container.
type owner struct{ uid, gid int }

// containerOwner resolves the container user spec ("name", "uid",
// "name:group", "uid:gid") to numbers the way the runtime will, reading
// /etc/passwd and /etc/group from the created container only when names or a
// primary group must be looked up. Empty means root.
func (p *dockerPlatform) containerOwner(ctx context.Context, id, user string) (owner, error) {
	if user == "" {
		return owner{}, nil
	}
	u, g, _ := strings.Cut(user, ":")
	_, uerr := strconv.Atoi(u)
	_, gerr := strconv.Atoi(g)
	var passwd, group []byte
	var err error
	if uerr != nil || g == "" {
		if passwd, err = p.containerFile(ctx, id, "/etc/passwd"); err != nil {
			return owner{}, err
		}
	}
	if g != "" && gerr != nil {
		if group, err = p.containerFile(ctx, id, "/etc/group"); err != nil {
			return owner{}, err
		}
	}
	return lookupOwner(user, passwd, group)
}

// containerFile reads a small file from the container; a missing file reads
// as empty.
func (p *dockerPlatform) containerFile(ctx context.Context, id, path string) ([]byte, error) {
	rc, _, err := p.eng.cli.CopyFromContainer(ctx, id, path)
	if errdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from the container: %w", path, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s from the container: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(tr, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s from the container: %w", path, err)
	}
	return b, nil
}

// lookupOwner resolves user against the contents of /etc/passwd and
// /etc/group. As in runc, a numeric uid missing from passwd has gid 0.
func lookupOwner(user string, passwd, group []byte) (owner, error) {
	if user == "" {
		return owner{}, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	var o owner
	uid, err := strconv.Atoi(u)
	if err == nil {
		o.uid = uid
		if f := findEntry(passwd, 4, 2, u); f != nil {
			o.gid, _ = strconv.Atoi(f[3])
		}
	} else {
		f := findEntry(passwd, 4, 0, u)
		if f == nil {
			return owner{}, fmt.Errorf("user %q not found in the image's /etc/passwd", u)
		}
		o.uid, _ = strconv.Atoi(f[2])
		o.gid, _ = strconv.Atoi(f[3])
	}
	if !hasGroup || g == "" {
		return o, nil
	}
	if gid, err := strconv.Atoi(g); err == nil {
		o.gid = gid
		return o, nil
	}
	f := findEntry(group, 3, 0, g)
	if f == nil {
		return owner{}, fmt.Errorf("group %q not found in the image's /etc/group", g)
	}
	o.gid, _ = strconv.Atoi(f[2])
	return o, nil
}

// findEntry returns the colon-separated fields of the first line of a
// passwd- or group-format file that has at least minFields fields, a numeric
// third field, and value in field col; nil when there is none.
func findEntry(file []byte, minFields, col int, value string) []string {
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) < minFields || f[col] != value {
			continue
		}
		if _, err := strconv.Atoi(f[2]); err == nil {
			return f
		}
	}
	return nil
}

// ownVolumes gives the host trees of the volumes marked Own to the
// container user own, so that a server running as a system user of the image
// can write a data directory prepared on the host. On an engine whose
// containers run in a user namespace (the Flavor's MapOwner) every volume
// goes to the host ids of its container user, root for the others.
func (p *dockerPlatform) ownVolumes(ctx context.Context, vols []platform.Volume, own owner) error {
	for _, v := range vols {
		host := own
		switch {
		case p.eng.flavor.MapOwner != nil:
			// A user namespace shifts the container's users: its root
			// is an unprivileged user of the host, which must own even
			// a volume the spec does not give to the server's user.
			if !v.Own {
				host = owner{}
			}
			host.uid, host.gid = p.eng.flavor.MapOwner(host.uid, host.gid)
		case !v.Own:
			continue
		}
		if p.site != nil {
			if err := p.site.Own(ctx, v.HostPath, host.uid, host.gid); err != nil {
				return fmt.Errorf("giving volume %s to uid %d on host %s: %w", v.HostPath, host.uid, p.site.Host, err)
			}
			continue
		}
		err := filepath.WalkDir(v.HostPath, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, host.uid, host.gid)
		})
		if err != nil {
			return fmt.Errorf("giving volume %s to uid %d: %w", v.HostPath, host.uid, err)
		}
	}
	return nil
}
