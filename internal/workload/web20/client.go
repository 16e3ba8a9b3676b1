package web20

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/driver"
)

// SiteConfig describes the site the users drive.
type SiteConfig struct {
	// Base is nginx's address as the driver sees it: http://host:port.
	Base string
	// Counts are the loaded data's (olio.CountsFor of the template's
	// users): users log in as, look up and browse ids within them.
	Counts olio.Counts
	// Users is the number of simulated users sharing the site's
	// connection pool (it sizes the pool's idle connections).
	Users int
	// ConditionalShare of the users revalidate statics with
	// If-Modified-Since (DefaultConditionalShare when 0; a negative value
	// means none).
	ConditionalShare float64
	// AttendChance is the chance that a logged-in user's EventDetail
	// attends the event (DefaultAttendChance when 0; negative: never).
	AttendChance float64
	// RequestTimeout bounds one request (30 s when 0).
	RequestTimeout time.Duration
	// Dial opens the users' connections (nil: net.Dialer); the driver
	// gives the run's client host's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Tag goes into the names of the people the users register, so that
	// the users of two driver runs on the same data (the steps of a
	// find-max search) never register the same name twice: the names are
	// unique in Olio's person table.
	Tag string
}

func (c SiteConfig) withDefaults() SiteConfig {
	if c.ConditionalShare == 0 {
		c.ConditionalShare = DefaultConditionalShare
	}
	if c.AttendChance == 0 {
		c.AttendChance = DefaultAttendChance
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	return c
}

// Validate reports a configuration the users cannot run with.
func (c SiteConfig) Validate() error {
	u, err := url.Parse(c.Base)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("web20: site address %q: want http://host:port", c.Base)
	}
	if c.Counts.Persons < 1 || c.Counts.Tags < 1 || c.Counts.Events < 1 {
		return fmt.Errorf("web20: the site's data counts %+v: want at least one person, tag and event (olio.CountsFor)", c.Counts)
	}
	if c.Users < 1 {
		return fmt.Errorf("web20: %d users: want at least 1", c.Users)
	}
	if c.ConditionalShare > 1 || c.AttendChance > 1 {
		return fmt.Errorf("web20: conditional share %g and attend chance %g must be at most 1", c.ConditionalShare, c.AttendChance)
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("web20: request timeout %v is negative", c.RequestTimeout)
	}
	return nil
}

// Site is the driven site: its address, data counts and the HTTP transport
// its users share (keep-alive connections, no compression, no proxy).
type Site struct {
	cfg       SiteConfig
	base      string
	transport *http.Transport
}

// NewSite checks cfg and makes the shared transport.
func NewSite(cfg SiteConfig) (*Site, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Site{cfg: cfg, base: strings.TrimSuffix(cfg.Base, "/"), transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           driver.DialWithin(cfg.Dial, 10*time.Second),
		MaxIdleConns:          0, // no limit overall
		MaxIdleConnsPerHost:   cfg.Users + 16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.RequestTimeout,
		DisableCompression:    true, // as Olio's driver: nginx serves statics uncompressed
		ForceAttemptHTTP2:     false,
	}}, nil
}

// Close closes the idle connections of the site's users.
func (s *Site) Close() { s.transport.CloseIdleConnections() }

// User is one simulated user: a browser session (cookie jar, login, cache
// of statics and images) and its place in the Markov chain. A User is not
// safe for concurrent use; the driver gives each its own goroutine.
type User struct {
	site        *Site
	id          int
	rng         *rand.Rand
	matrix      Matrix
	client      *http.Client
	conditional bool
	statics     map[string]bool // fetched this session (users without If-Modified-Since)
	images      map[string]bool // fetched this session (every user)
	user        string          // logged-in user name, "" when not logged in
	events      []int           // event ids on the last list page
	prev        Op
	started     bool
	added       int

	// What the last AddPerson, AddEvent and attend did, for checks and
	// records.
	LastPerson    string
	LastEvent     int
	LastEventTags []string
	LastAttended  int
}

// NewUser makes simulated user id (unique in the run: it names the people
// the user registers) with its own random stream, following matrix
// (DefaultMatrix when nil).
func (s *Site) NewUser(id int, r *rand.Rand, matrix *Matrix) *User {
	u := &User{site: s, id: id, rng: r, matrix: DefaultMatrix}
	if matrix != nil {
		u.matrix = *matrix
	}
	u.conditional = r.Float64() < s.cfg.ConditionalShare
	u.NewSession()
	return u
}

// NewSession starts a new browser session: no cookies, no login, an empty
// cache; the next operation is the chain's first (HomePage).
func (u *User) NewSession() {
	jar, _ := cookiejar.New(nil) // never fails without options
	u.client = &http.Client{
		Transport: u.site.transport,
		Jar:       jar,
		Timeout:   u.site.cfg.RequestTimeout,
		// Redirects are requests of their own in Olio's operations.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	u.statics, u.images = map[string]bool{}, map[string]bool{}
	u.user, u.events, u.started = "", nil, false
}

// Conditional reports whether the user's browser revalidates statics.
func (u *User) Conditional() bool { return u.conditional }

// LoggedIn returns the logged-in user name ("" when none).
func (u *User) LoggedIn() string { return u.user }

// RequestError is a failed request: what was asked, and why it failed.
type RequestError struct {
	Method, Path string
	// Cause is a short class for counting failures: "transport", "HTTP
	// 500", "PHP error", "error page", "truncated", "unexpected page".
	Cause  string
	Detail string
	Err    error // the transport error, if any
}

// Error says which request failed and why.
func (e *RequestError) Error() string {
	s := e.Method + " " + e.Path + ": " + e.Cause
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the transport error, if any.
func (e *RequestError) Unwrap() error { return e.Err }

// Cause classifies err for counting failures by cause ("other" when it is
// not a RequestError).
func Cause(err error) string {
	var re *RequestError
	if errors.As(err, &re) {
		return re.Cause
	}
	return "other"
}

// phpError matches PHP's own error messages in a page (HTML or text).
var phpError = regexp.MustCompile(`(?m)(?:<b>|^|PHP )(Fatal error|Parse error|Warning|Notice|Deprecated)(?:</b>)?:\s`)

// response is a fetched page.
type response struct {
	status int
	header http.Header
	body   []byte
}

// kind says how a response is checked.
type kind int

const (
	pageKind     kind = iota // a PHP page: HTML ending in </html>
	fragmentKind             // a PHP answer that is not a whole page
	redirectKind             // a PHP answer that must redirect
	staticKind               // a static file or an image
)

// send runs one request, reads the whole answer and checks it.
func (u *User) send(ctx context.Context, req *http.Request, k kind) (*response, error) {
	path := req.URL.RequestURI()
	fail := func(cause, detail string, err error) error {
		return &RequestError{Method: req.Method, Path: path, Cause: cause, Detail: detail, Err: err}
	}
	resp, err := u.client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, fail("transport", "", err)
	}
	defer resp.Body.Close()
	var body []byte
	if k == staticKind {
		var n int64
		n, err = io.Copy(io.Discard, resp.Body)
		if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
			err = fmt.Errorf("%d of %d bytes", n, resp.ContentLength)
		}
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return nil, fail("transport", "reading the answer", err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header, body: body}
	if r.status >= 400 {
		return r, fail(fmt.Sprintf("HTTP %d", r.status), errorText(body), nil)
	}
	if k == staticKind {
		if r.status != http.StatusOK && r.status != http.StatusNotModified {
			return r, fail(fmt.Sprintf("HTTP %d", r.status), "want 200 or 304", nil)
		}
		return r, nil
	}
	if bytes.Contains(body, []byte(olio.ErrorMarker)) {
		return r, fail("error page", errorText(body), nil)
	}
	if m := phpError.FindIndex(body); m != nil {
		return r, fail("PHP error", firstLine(stripTags(string(body[m[0]:]))), nil)
	}
	switch k {
	case redirectKind:
		if r.status != http.StatusFound && r.status != http.StatusSeeOther {
			return r, fail("unexpected page", fmt.Sprintf("HTTP %d, want a redirect", r.status), nil)
		}
	case pageKind:
		if r.status != http.StatusOK {
			return r, fail("unexpected page", fmt.Sprintf("HTTP %d, want 200", r.status), nil)
		}
		if !bytes.HasSuffix(bytes.TrimSpace(body), []byte("</html>")) {
			return r, fail("truncated", fmt.Sprintf("%d bytes without </html>", len(body)), nil)
		}
	}
	return r, nil
}

// errorText is the useful line of an error answer: the site's error line,
// else the first line of text.
func errorText(body []byte) string {
	s := string(body)
	if i := strings.Index(s, olio.ErrorMarker); i >= 0 {
		return firstLine(strings.TrimSpace(s[i+len(olio.ErrorMarker):]))
	}
	return firstLine(strings.TrimSpace(stripTags(s)))
}

var tags = regexp.MustCompile(`<[^>]*>`)

func stripTags(s string) string { return tags.ReplaceAllString(s, "") }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func (u *User) get(ctx context.Context, path string, k kind) (*response, error) {
	req, err := http.NewRequest(http.MethodGet, u.site.base+path, nil)
	if err != nil {
		return nil, err
	}
	return u.send(ctx, req, k)
}

// embedded finds the statics (scripts, style sheets, images) and file-store
// images a page embeds, each once, in page order.
var embedded = regexp.MustCompile(`<(?:img|script)\s[^>]*?src="(/[^"]+)"|<link\s[^>]*?href="(/static/[^"]+)"`)

// fetchEmbedded fetches what a page embeds as the user's browser would:
// statics with If-Modified-Since when the user's cache is warm, else once
// per session; file-store images once per session.
func (u *User) fetchEmbedded(ctx context.Context, page []byte) error {
	seen := map[string]bool{}
	for _, m := range embedded.FindAllSubmatch(page, -1) {
		p := string(m[1])
		if p == "" {
			p = string(m[2])
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		switch {
		case strings.HasPrefix(p, "/static/"):
			if u.conditional {
				req, err := http.NewRequest(http.MethodGet, u.site.base+p, nil)
				if err != nil {
					return err
				}
				req.Header.Set("If-Modified-Since", olio.StaticModTime.UTC().Format(http.TimeFormat))
				if _, err := u.send(ctx, req, staticKind); err != nil {
					return err
				}
				continue
			}
			if u.statics[p] {
				continue
			}
			if _, err := u.get(ctx, p, staticKind); err != nil {
				return err
			}
			u.statics[p] = true
		case strings.HasPrefix(p, "/files/"):
			if u.images[p] {
				continue
			}
			if _, err := u.get(ctx, p, staticKind); err != nil {
				return err
			}
			u.images[p] = true
		}
	}
	return nil
}

// pageWithEmbedded gets a page and what it embeds.
func (u *User) pageWithEmbedded(ctx context.Context, path string) (*response, error) {
	r, err := u.get(ctx, path, pageKind)
	if err != nil {
		return r, err
	}
	return r, u.fetchEmbedded(ctx, r.body)
}
