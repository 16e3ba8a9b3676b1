package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mirrors are the Debian archive URLs found in apt sources.
type Mirrors struct {
	Mirror   string // serves the suite itself (and its -updates suite)
	Security string // serves the -security suite; may be empty
}

// aptSource is one source entry of either apt format.
type aptSource struct {
	Types      []string
	URIs       []string
	Suites     []string
	Components []string
}

// HostAptDir is where the host's apt configuration lives.
const HostAptDir = "/etc/apt"

// HostMirrors reads the host's apt sources (sources.list.d/*.sources in
// deb822 format, sources.list and sources.list.d/*.list in one-line format)
// and returns the mirrors that serve suite and its security suite.
func HostMirrors(suite string) (Mirrors, error) { return mirrorsIn(HostAptDir, suite) }

func mirrorsIn(aptDir, suite string) (Mirrors, error) {
	var all []aptSource
	deb822, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.sources"))
	oneLine, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.list"))
	oneLine = append([]string{filepath.Join(aptDir, "sources.list")}, oneLine...)
	read := func(path string, parse func(string) ([]aptSource, error)) error {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading apt sources: %w", err)
		}
		s, err := parse(string(b))
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		all = append(all, s...)
		return nil
	}
	for _, p := range deb822 {
		if err := read(p, parseDeb822Sources); err != nil {
			return Mirrors{}, err
		}
	}
	for _, p := range oneLine {
		if err := read(p, parseOneLineSources); err != nil {
			return Mirrors{}, err
		}
	}
	m := pickMirrors(all, suite)
	if m.Mirror == "" {
		return m, fmt.Errorf("no http(s) Debian mirror for %q in the apt sources under %s", suite, aptDir)
	}
	return m, nil
}

// pickMirrors returns the first http(s) URI of a binary ("deb") source that
// carries suite, and of one that carries its security suite.
func pickMirrors(sources []aptSource, suite string) Mirrors {
	var m Mirrors
	find := func(suites ...string) string {
		for _, s := range sources {
			if !slices.Contains(s.Types, "deb") || !slices.ContainsFunc(s.Suites, func(x string) bool { return slices.Contains(suites, x) }) {
				continue
			}
			for _, u := range s.URIs {
				if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
					return strings.TrimRight(u, "/")
				}
			}
		}
		return ""
	}
	m.Mirror = find(suite)
	m.Security = find(suite+"-security", suite+"/updates")
	return m
}

// parseDeb822Sources parses the deb822 format of sources.list.d/*.sources:
// stanzas of "Field: value" lines separated by blank lines, continuation
// lines starting with white space, '#' lines as comments. Stanzas with
// "Enabled: no" are skipped.
func parseDeb822Sources(text string) ([]aptSource, error) {
	var out []aptSource
	fields := map[string]string{}
	last := ""
	flush := func() error {
		if len(fields) == 0 {
			return nil
		}
		defer func() { fields = map[string]string{}; last = "" }()
		if strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no") {
			return nil
		}
		s := aptSource{
			Types:      strings.Fields(fields["types"]),
			URIs:       strings.Fields(fields["uris"]),
			Suites:     strings.Fields(fields["suites"]),
			Components: strings.Fields(fields["components"]),
		}
		if len(s.Types) == 0 || len(s.URIs) == 0 || len(s.Suites) == 0 {
			return fmt.Errorf("source stanza without Types, URIs or Suites: %v", fields)
		}
		out = append(out, s)
		return nil
	}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.TrimSpace(line) == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: continuation line outside a field", n+1)
			}
			fields[last] += " " + strings.TrimSpace(line)
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("line %d: %q is not a \"Field: value\" line", n+1, line)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseOneLineSources parses the classic sources.list format:
// "deb [options] URI suite component...".
func parseOneLineSources(text string) ([]aptSource, error) {
	var out []aptSource
	for n, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		typ := f[0]
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			end := slices.IndexFunc(f, func(s string) bool { return strings.HasSuffix(s, "]") })
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated [options]", n+1)
			}
			f = f[end+1:]
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d: want \"%s URI suite [component...]\"", n+1, typ)
		}
		out = append(out, aptSource{Types: []string{typ}, URIs: f[:1], Suites: f[1:2], Components: f[2:]})
	}
	return out, nil
}
