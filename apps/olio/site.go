package olio

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// jsLibraries are the JavaScript libraries the pages load, those of Olio's
// day: Prototype and script.aculo.us, from Debian's packages
// (libjs-prototype, libjs-scriptaculous), copied into the site.
var jsLibraries = map[string]string{
	"prototype.js": "/usr/share/javascript/prototype/prototype.js",
	"effects.js":   "/usr/share/javascript/scriptaculous/effects.js",
	"dragdrop.js":  "/usr/share/javascript/scriptaculous/dragdrop.js",
	"controls.js":  "/usr/share/javascript/scriptaculous/controls.js",
	"builder.js":   "/usr/share/javascript/scriptaculous/builder.js",
}

// installWWW writes the document root: the PHP pages and static/ (CSS and
// JavaScript from the package, the JavaScript libraries, the drawn images),
// every static file dated StaticModTime.
func installWWW(dir string) error {
	files := map[string][]byte{}
	err := fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasPrefix(p, "php/"):
			b, err := sources.ReadFile(p)
			files[strings.TrimPrefix(p, "php/")] = b
			return err
		case strings.HasPrefix(p, "static/"):
			b, err := sources.ReadFile(p)
			files[p] = b
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("olio: reading the embedded site: %w", err)
	}
	for name, src := range jsLibraries {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("olio: the site's JavaScript library %s is missing: install libjs-prototype and libjs-scriptaculous (make setup): %w", src, err)
		}
		files["static/js/"+name] = b
	}
	for name, b := range staticImages() {
		files["static/img/"+name] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("olio: writing the site: %w", err)
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return fmt.Errorf("olio: writing the site: %w", err)
		}
		if strings.HasPrefix(n, "static/") {
			if err := os.Chtimes(p, StaticModTime, StaticModTime); err != nil {
				return fmt.Errorf("olio: dating %s: %w", n, err)
			}
		}
	}
	return nil
}

// Statics lists the URL paths of the site's static files (for tests and
// the driver's records).
func Statics() ([]string, error) {
	var out []string
	err := fs.WalkDir(sources, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, "/"+p)
		}
		return err
	})
	for n := range jsLibraries {
		out = append(out, "/static/js/"+n)
	}
	for n := range staticImages() {
		out = append(out, "/static/img/"+n)
	}
	sort.Strings(out)
	return out, err
}
