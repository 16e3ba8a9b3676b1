package olio

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/nearnative/nearnative/internal/ready"
)

// The driver prints "packets.go:58 unexpected EOF" to stderr for every
// connection a server not yet listening closes (a VM's port forward
// accepts before the guest's MariaDB listens: a hundred lines per trial
// while probing); the same error is returned to the caller, which says
// what failed.
func init() { mysql.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Print(...any) {}

// ErrorMarker starts the line with which every page of the site reports a
// failure (with an HTTP error status).
const ErrorMarker = "OLIO-ERROR:"

// poll calls probe until it succeeds, returns an answer that waiting will
// not change (ready.Final: a running server's error), or timeout passes;
// the error names the server.
func poll(ctx context.Context, what string, timeout time.Duration, probe func(context.Context) error) error {
	err := ready.Loop{Timeout: timeout, Attempt: 10 * time.Second}.Wait(ctx, probe)
	var te *ready.TimeoutError
	switch {
	case err == nil:
		return nil
	case ready.IsFinal(err):
		return fmt.Errorf("%s is not ready: %w", what, err)
	case errors.As(err, &te):
		return fmt.Errorf("%s not ready within %v: %w", what, timeout, te.Last)
	}
	return err
}

// ReadyDB waits until the MariaDB server at addr accepts the application's
// user and answers a query on its database.
func ReadyDB(ctx context.Context, addr string, timeout time.Duration) error {
	return poll(ctx, "MariaDB at "+addr, timeout, func(ctx context.Context) error {
		db, err := sql.Open("mysql", dsn(addr))
		if err != nil {
			return err
		}
		defer db.Close()
		var one int
		return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	})
}

// ReadyFPM waits until PHP-FPM at addr runs the site's check page (PHP
// extensions, writable directories, the database) over FastCGI. siteDir is
// the site as PHP-FPM sees it. A running PHP-FPM that reports a problem (a
// missing extension) fails at once, with the problem.
func ReadyFPM(ctx context.Context, addr, siteDir string, timeout time.Duration) error {
	script := path.Join(siteDir, "www", "check.php")
	return poll(ctx, "PHP-FPM at "+addr, timeout, func(ctx context.Context) error {
		resp, err := fcgiGet(ctx, addr, script, "")
		if err != nil {
			return err
		}
		return checkAnswer(resp.Status, resp.Body)
	})
}

// ReadyWeb waits until nginx at base (http://host:port) serves a static
// file and the site's check page, which runs PHP and touches the database.
func ReadyWeb(ctx context.Context, base string, timeout time.Duration) error {
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(ctx context.Context, p string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if err != nil {
			return 0, nil, ready.Final(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	return poll(ctx, "nginx at "+base, timeout, func(ctx context.Context) error {
		status, _, err := get(ctx, "/static/css/site.css")
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return ready.Final(fmt.Errorf("GET /static/css/site.css: HTTP %d", status))
		}
		status, body, err := get(ctx, "/check.php")
		if err != nil {
			return err
		}
		if status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
			return fmt.Errorf("GET /check.php: HTTP %d (PHP-FPM not answering)", status)
		}
		return checkAnswer(status, body)
	})
}

// checkAnswer judges the check page's answer.
func checkAnswer(status int, body []byte) error {
	if status == http.StatusOK && strings.HasPrefix(string(body), "OK olio") {
		return nil
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.Index(msg, ErrorMarker); i >= 0 {
		msg = strings.TrimSpace(msg[i+len(ErrorMarker):])
	}
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	return ready.Final(fmt.Errorf("check.php: HTTP %d: %s", status, msg))
}

// OpenDB opens the application's database at addr as the application's
// user (go-sql-driver/mysql), for probes, checks and tests.
func OpenDB(addr string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn(addr))
	if err != nil {
		return nil, fmt.Errorf("olio: opening the database at %s: %w", addr, err)
	}
	return db, nil
}
