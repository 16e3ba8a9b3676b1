package httpmax

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/ready"
)

// PagePath is the static page nginx serves.
const PagePath = "/index.html"

// nginxConf is nginx's configuration: in the foreground, logs to stderr
// (kept by the platform), no access log, keep-alive without a request cap,
// everything under the server's own directory. "user root" keeps the
// workers able to read the server's private directory when the master runs
// as root (natively and in containers); as another user nginx ignores it
// with a warning.
const nginxConf = `daemon off;
master_process on;
worker_processes %[1]s;
pid %[2]s/nginx.pid;
error_log stderr warn;
user root;
events {
    worker_connections 4096;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush %[5]s;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    types { text/html html; }
    default_type application/octet-stream;
    server {
        listen %[3]s:%[4]d reuseport backlog=4096;
        root %[2]s/www;
        location / { }
    }
}
`

// NginxConf is http-max's nginx configuration with worker_processes
// workers (auto or a count), its pid, temporary files and page (www/) under
// dir, listening on host:port. http-max runs it with nopush true, nginx's
// usual tcp_nopush on; bench/plateau also runs it with false, under which
// nginx does not cork a response (BENCH.md, "The 40 ms plateau").
func NginxConf(workers, dir, host string, port int, nopush bool) string {
	onoff := "off"
	if nopush {
		onoff = "on"
	}
	return fmt.Sprintf(nginxConf, workers, dir, host, port, onoff)
}

// Page returns http-max's static HTML page of exactly n bytes, which
// nginx serves at PagePath.
func Page(n int) []byte {
	head := "<!DOCTYPE html>\n<html><head><title>nearnative http-max</title></head><body>\n<p>"
	tail := "</p>\n</body></html>\n"
	var b bytes.Buffer
	b.WriteString(head)
	for i := 0; b.Len() < n-len(tail); i++ {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789 "[i%37])
	}
	b.WriteString(tail)
	out := b.Bytes()
	if len(out) > n { // n smaller than the markup: plain bytes
		out = bytes.Repeat([]byte("x"), n)
	}
	return out
}

// spec is the nginx server on the platform.
func (in *Instance) spec() platform.Spec { return Spec(in.pageBytes, in.workers) }

// Spec is nginx serving a static page of pageBytes at PagePath on its port
// "http", with worker_processes workers (auto or a count). The driver
// cross-check (bench/driverbench) starts the same server.
func Spec(pageBytes int, workers string) platform.Spec {
	return platform.Spec{
		Name:  "nginx",
		Ports: []string{"http"},
		Files: []platform.File{{Path: "www/index.html", Content: Page(pageBytes)}},
		Command: func(l platform.Listen) []string {
			conf := NginxConf(workers, l.Dir, l.Host, l.Port("http"), true)
			return []string{"sh", "-c", `printf '%s' "$1" > "$2/nginx.conf" && exec nginx -p "$2" -c "$2/nginx.conf" -e stderr`,
				"nginx-start", conf, l.Dir}
		},
	}
}

// WaitReady GETs url until nginx serves the whole page of size bytes: an
// open port is not readiness (Docker's userland proxy accepts before the
// container listens).
func WaitReady(ctx context.Context, url string, size int, timeout time.Duration) error {
	err := ready.Loop{Timeout: timeout, Every: 50 * time.Millisecond}.Wait(ctx, func(ctx context.Context) error {
		return getOnce(ctx, url, size)
	})
	var te *ready.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("nginx did not serve %s within %v: %w", url, timeout, te.Last)
	}
	return err
}

// probeClient is the client of one-off GETs from this machine (readiness,
// checking on a server that stopped answering): a fresh connection each,
// bounded to 2 s.
var probeClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 2 * time.Second}

// getOnce GETs url once with probeClient and checks that the whole page
// of size bytes came back.
func getOnce(ctx context.Context, url string, size int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || b.Len() != size {
		return fmt.Errorf("GET %s: HTTP %d, %d bytes (want 200, %d)", url, resp.StatusCode, b.Len(), size)
	}
	return nil
}

// checkWorkers accepts nginx's worker_processes values: auto or a count.
func checkWorkers(s string) error {
	if s == "auto" {
		return nil
	}
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err != nil || n < 1 || n > 1024 {
		return fmt.Errorf("parameter nginx_workers %q: want auto or a number of processes from 1", s)
	}
	return nil
}
