package dvdstore

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

//go:embed web/httpd.conf.tmpl web/www/*.php
var webFS embed.FS

// WebPort is the name of the web server's port.
const WebPort = "http"

// WebUser runs Apache: Debian's www-data. Apache started as root would
// switch to it for its workers anyway; starting as www-data keeps every file
// it writes (pid file, mutexes) in its own directory.
const WebUser = "www-data"

// ApacheBin and ApacheModules are Debian's apache2 binary and module
// directory (the same on the host and in the workload image).
const (
	ApacheBin     = "/usr/sbin/apache2"
	ApacheModules = "/usr/lib/apache2/modules"
)

// WebConfig describes one web server: Apache with mod_php (prefork) serving
// the shop's PHP pages, which call the database's functions.
type WebConfig struct {
	// Name is the spec's name (default "web").
	Name string
	// DBAddr is the database's host:port as the web server sees it.
	DBAddr string
	// Workers is the fixed number of Apache processes: the most concurrent
	// connections it serves (each holds one persistent database
	// connection). It must cover the users of the instance: a keep-alive
	// connection holds its process.
	Workers int
	// KeepAlive is how long an idle connection is kept (default 15 s).
	KeepAlive time.Duration
}

// DefaultWorkers serves the seed's 4 driver threads per instance with room
// to spare.
const DefaultWorkers = 16

// Validate checks the configuration.
func (c WebConfig) Validate() error {
	host, port, err := net.SplitHostPort(c.DBAddr)
	if err != nil || host == "" {
		return fmt.Errorf("dvdstore web: database address %q: want host:port", c.DBAddr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("dvdstore web: database address %q: bad port", c.DBAddr)
	}
	if c.Workers < 1 || c.Workers > 4096 {
		return fmt.Errorf("dvdstore web: %d Apache workers: want 1 to 4096", c.Workers)
	}
	if c.KeepAlive < 0 || (c.KeepAlive > 0 && c.KeepAlive < time.Second) {
		return fmt.Errorf("dvdstore web: keep-alive %v: want 0 (default) or at least 1s", c.KeepAlive)
	}
	return nil
}

var confTmpl = template.Must(template.ParseFS(webFS, "web/httpd.conf.tmpl"))

// Render returns the Apache configuration and the PHP configuration file
// of c.
func (c WebConfig) Render() (httpdConf, configPHP []byte, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	ka := c.KeepAlive
	if ka == 0 {
		ka = 15 * time.Second
	}
	var b bytes.Buffer
	err = confTmpl.Execute(&b, struct {
		Modules          string
		Workers          int
		KeepAliveSeconds int
	}{ApacheModules, c.Workers, int(ka / time.Second)})
	if err != nil {
		return nil, nil, fmt.Errorf("rendering httpd.conf: %w", err)
	}
	host, port, _ := net.SplitHostPort(c.DBAddr)
	dsn := fmt.Sprintf("host=%s port=%s dbname=%s user=postgres connect_timeout=10", host, port, DBName)
	php := fmt.Sprintf("<?php\n// Written by nearnative: the database as this web server sees it.\nconst DS_DSN = '%s';\n", dsn)
	return b.Bytes(), []byte(php), nil
}

// WebSpec returns the spec of one web server. Its pages (reached at
// Addr(WebPort)): /ready.php, /login.php, /newcustomer.php, /browse.php,
// /prices.php and /purchase.php.
func WebSpec(c WebConfig) (platform.Spec, error) {
	if c.Name == "" {
		c.Name = "web"
	}
	conf, php, err := c.Render()
	if err != nil {
		return platform.Spec{}, err
	}
	files := []platform.File{{Path: "httpd.conf", Content: conf}, {Path: "www/config.php", Content: php}}
	pages, _ := fs.Glob(webFS, "web/www/*.php")
	for _, p := range pages {
		b, _ := webFS.ReadFile(p)
		files = append(files, platform.File{Path: "www/" + path.Base(p), Content: b})
	}
	return platform.Spec{
		Name:  c.Name,
		Ports: []string{WebPort},
		User:  WebUser,
		Files: files,
		Command: func(l platform.Listen) []string {
			return []string{ApacheBin, "-d", l.Dir, "-f", path.Join(l.Dir, "httpd.conf"),
				"-C", "Define NN_DIR " + l.Dir,
				"-C", "Define NN_LISTEN " + net.JoinHostPort(l.Host, strconv.Itoa(l.Port(WebPort))),
				"-DFOREGROUND"}
		},
	}, nil
}

var readyMark = regexp.MustCompile(`<p class="ready">(\d+) categories</p>`)

// WebReady waits until the web server at addr (host:port) serves
// /ready.php, a page that queries the database, retrying until ctx ends.
// The error names the server and says what the last attempt saw; callers
// add the tail of its log.
func WebReady(ctx context.Context, name, addr string) error {
	url := "http://" + addr + "/ready.php"
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	var last error
	for {
		last = getReady(ctx, client, url)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return ctx.Err()
			}
			return fmt.Errorf("%s: the DVD Store web server at %s did not serve %s within %v: %w",
				name, addr, url, time.Since(start).Round(100*time.Millisecond), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func getReady(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	m := readyMark.FindSubmatch(body)
	if m == nil {
		return fmt.Errorf("the page lacks the ready mark: %s", snippet(body))
	}
	if string(m[1]) != strconv.Itoa(len(Categories)) {
		return fmt.Errorf("the database has %s categories, want %d", m[1], len(Categories))
	}
	return nil
}

var tags = regexp.MustCompile(`<[^>]*>`)

// snippet is a page's text without tags, shortened, for error messages.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(tags.ReplaceAllString(string(b), " ")), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
