package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// ParseStatus reads a dpkg status file (/var/lib/dpkg/status) and returns the
// version of every installed package. Packages that are known but not
// installed (removed, config files only, half-installed) are left out.
func ParseStatus(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	var pkg, version, status string
	flush := func() {
		if pkg != "" && version != "" {
			if f := strings.Fields(status); len(f) == 3 && f[2] == "installed" {
				if _, dup := out[pkg]; !dup { // first architecture wins
					out[pkg] = version
				}
			}
		}
		pkg, version, status = "", "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // continuation of a multi-line field (Description, Conffiles)
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			pkg = v
		case "Version":
			version = v
		case "Status":
			status = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading dpkg status: %w", err)
	}
	flush()
	return out, nil
}

// HostVersions returns the host's installed version of each package, asking
// dpkg-query. A package that is not installed maps to "".
func HostVersions(ctx context.Context, pkgs []string) (map[string]string, error) {
	out := make(map[string]string, len(pkgs))
	for _, p := range pkgs {
		out[p] = ""
	}
	if len(pkgs) == 0 {
		return out, nil
	}
	args := append([]string{"-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", "--"}, pkgs...)
	cmd := exec.CommandContext(ctx, "dpkg-query", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		// Exit status 1 means some packages are unknown; the rest are listed.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("dpkg-query: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
	}
	for _, line := range strings.Split(string(stdout), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		name, version, abbrev := f[0], f[1], f[2]
		if _, asked := out[name]; !asked || out[name] != "" {
			continue
		}
		// Status-Abbrev is desired/status/error, e.g. "ii "; the second
		// letter 'i' means installed.
		if len(abbrev) >= 2 && abbrev[1] == 'i' {
			out[name] = version
		}
	}
	return out, nil
}

// Mismatch is a package whose version differs between the host and an image.
// An empty version means the package is not installed on that side.
type Mismatch struct {
	Package string
	Host    string
	Image   string
}

func (m Mismatch) String() string {
	v := func(s string) string {
		if s == "" {
			return "not installed"
		}
		return s
	}
	return fmt.Sprintf("%s: host %s, image %s", m.Package, v(m.Host), v(m.Image))
}

// Compare returns, sorted by package name, the packages named in host whose
// version in img differs, including packages missing on either side. Packages
// only in img are not compared: an image lists all it has, while the host side
// lists what was asked for. To compare every package of an image, pass
// HostVersions(ctx, Names(img)).
func Compare(host, img map[string]string) []Mismatch {
	var out []Mismatch
	for _, p := range Names(host) {
		if host[p] != img[p] {
			out = append(out, Mismatch{Package: p, Host: host[p], Image: img[p]})
		}
	}
	return out
}

// Names returns the package names of a version map, sorted.
func Names(versions map[string]string) []string {
	out := make([]string, 0, len(versions))
	for p := range versions {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
