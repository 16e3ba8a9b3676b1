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
	"github.com/nearnative/nearnative/internal/ready"
)

//go:embed web/httpd.conf.tmpl web/www/*.php
var webFS embed.FS

// SitePort is the name of the port of site i (0-based) of a web server.
func SitePort(i int) string { return "http" + strconv.Itoa(i) }

// WebPort is the port of a web server's first (or only) site.
var WebPort = SitePort(0)

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
// the shop's PHP pages, which call the database's functions. It serves one
// site per database: a virtual host on its own port (SitePort(i)). The
// seed's native layout is one Apache with a virtual host per instance; in
// containers each instance has an Apache of its own with one site.
type WebConfig struct {
	// Name is the spec's name (default "web").
	Name string
	// DBAddrs are the databases' host:port as the web server sees them,
	// one site each.
	DBAddrs []string
	// Workers is the fixed number of Apache processes, shared by the
	// sites: the most concurrent connections it serves. It must cover the
	// users of every site, since a keep-alive connection holds its
	// process. Each process keeps one persistent connection to each
	// database it has served, so each database must accept Workers
	// connections from this server.
	Workers int
	// KeepAlive is how long an idle connection is kept (default 15 s).
	KeepAlive time.Duration
}

// DefaultWorkers serves the seed's 4 driver threads per instance with room
// to spare.
const DefaultWorkers = 16

// Validate checks the configuration.
func (c WebConfig) Validate() error {
	if len(c.DBAddrs) == 0 {
		return fmt.Errorf("dvdstore web: no database address (one per site)")
	}
	for _, a := range c.DBAddrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || strings.ContainsAny(host, "\" \n") {
			return fmt.Errorf("dvdstore web: database address %q: want host:port", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("dvdstore web: database address %q: bad port", a)
		}
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

type site struct {
	I   int
	DSN string // libpq connection string of the site's database
}

// Render returns the Apache configuration of c.
func (c WebConfig) Render() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ka := c.KeepAlive
	if ka == 0 {
		ka = 15 * time.Second
	}
	var sites []site
	for i, a := range c.DBAddrs {
		host, port, _ := net.SplitHostPort(a)
		sites = append(sites, site{I: i, DSN: fmt.Sprintf("host=%s port=%s dbname=%s user=postgres connect_timeout=10", host, port, DBName)})
	}
	var b bytes.Buffer
	err := confTmpl.Execute(&b, struct {
		Modules          string
		Workers          int
		KeepAliveSeconds int
		Sites            []site
	}{ApacheModules, c.Workers, int(ka / time.Second), sites})
	if err != nil {
		return nil, fmt.Errorf("rendering httpd.conf: %w", err)
	}
	return b.Bytes(), nil
}

// WebSpec returns the spec of one web server. Site i's pages are reached at
// Addr(SitePort(i)): /ready.php, /login.php, /newcustomer.php, /browse.php,
// /prices.php and /purchase.php.
func WebSpec(c WebConfig) (platform.Spec, error) {
	if c.Name == "" {
		c.Name = "web"
	}
	conf, err := c.Render()
	if err != nil {
		return platform.Spec{}, err
	}
	files := []platform.File{{Path: "httpd.conf", Content: conf}}
	pages, _ := fs.Glob(webFS, "web/www/*.php")
	for _, p := range pages {
		b, _ := webFS.ReadFile(p)
		files = append(files, platform.File{Path: "www/" + path.Base(p), Content: b})
	}
	var ports []string
	for i := range c.DBAddrs {
		ports = append(ports, SitePort(i))
	}
	return platform.Spec{
		Name:  c.Name,
		Ports: ports,
		User:  WebUser,
		Env:   serverEnv(),
		Files: files,
		Command: func(l platform.Listen) []string {
			argv := []string{ApacheBin, "-d", l.Dir, "-f", path.Join(l.Dir, "httpd.conf"), "-C", "Define NN_DIR " + l.Dir}
			for i, name := range ports {
				port := strconv.Itoa(l.Port(name))
				argv = append(argv, "-C", fmt.Sprintf("Define NN_LISTEN%d %s", i, net.JoinHostPort(l.Host, port)),
					"-C", fmt.Sprintf("Define NN_PORT%d %s", i, port))
			}
			return append(argv, "-DFOREGROUND")
		},
	}, nil
}

var readyMark = regexp.MustCompile(`<p class="ready">(\d+) categories</p>`)

// WebReady waits until the web server's site at addr (host:port) serves
// /ready.php, a page that queries the site's database, retrying until ctx
// ends (a topology.ReadyFunc). The error names the server and says what the
// last attempt saw; callers add the tail of its log.
func WebReady(ctx context.Context, addr string) error {
	url := "http://" + addr + "/ready.php"
	client := &http.Client{Timeout: 5 * time.Second}
	err := ready.Loop{}.Wait(ctx, func(ctx context.Context) error { return getReady(ctx, client, url) })
	var te *ready.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("the DVD Store web server at %s did not serve %s within %v: %w", addr, url, te.Waited, te.Last)
	}
	return err
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
