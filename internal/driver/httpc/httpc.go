// Package httpc is the HTTP/1.1 client of nearnative's simulated users:
// net/http with a transport tuned for load (keep-alive, no proxy, no
// compression, bounded connections, timeouts), a cookie jar per user, a
// browser cache of Last-Modified dates for conditional GETs, and multipart
// uploads. It also registers the driver behaviour "http-get": one GET of a
// fixed URL per operation, sent with fasthttp, which costs half the CPU per
// request of net/http (see behaviour.go).
package httpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/textproto"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
)

// Options tune a Client; zero fields take the defaults.
type Options struct {
	// Timeout bounds a whole request, body included (default 30 s).
	Timeout time.Duration
	// ConnectTimeout bounds a TCP connect (default 5 s).
	ConnectTimeout time.Duration
	// MaxConns bounds the connections to one host (default 6, a browser's).
	MaxConns int
	// NoCookies leaves out the cookie jar.
	NoCookies bool
	// Dial opens the client's connections (nil: net.Dialer); the driver
	// gives its behaviour's, which dials from the run's client host.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Defaults of Options.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultMaxConns       = 6
)

// Client is one simulated user's browser: safe for concurrent use by the
// user's own goroutines.
type Client struct {
	hc *http.Client
	tr *http.Transport

	mu       sync.Mutex
	modified map[string]string // URL -> Last-Modified of the copy "in the cache"
	fetched  map[string]bool   // URL -> fetched in this session
}

// New returns a client with its own transport (its own connections) and,
// unless o.NoCookies, its own cookie jar.
func New(o Options) *Client {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	tr := &http.Transport{
		Proxy:                 nil, // the load goes to this machine, never through a proxy
		DialContext:           driver.DialWithin(o.Dial, o.ConnectTimeout),
		MaxIdleConns:          o.MaxConns,
		MaxIdleConnsPerHost:   o.MaxConns,
		MaxConnsPerHost:       o.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.Timeout,
		DisableCompression:    true, // count the bytes the server sends
		ForceAttemptHTTP2:     false,
		// A response of a few kilobytes in one read, not two (the default
		// buffer is 4 KB): every read is a system call, the driver's main
		// cost on a virtual machine.
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 16 << 10,
	}
	c := &Client{tr: tr, modified: map[string]string{}, fetched: map[string]bool{}}
	c.hc = &http.Client{Transport: tr, Timeout: o.Timeout}
	if !o.NoCookies {
		jar, _ := cookiejar.New(nil) // never fails without options
		c.hc.Jar = jar
	}
	return c
}

// Close closes the client's idle connections.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// Response is what a request returned; the body has been read in full.
type Response struct {
	Status int
	Header http.Header
	// Body is kept only when asked for (KeepBody); Bytes counts it always.
	Body  []byte
	Bytes int64
}

// StatusError is a response whose status is not 2xx or 304. Its cause, for
// the driver's failure counts, is "http NNN".
type StatusError struct {
	Method, URL string
	Code        int
	Body        string // the start of the body
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.Code, strings.TrimSpace(e.Body))
}

// Cause implements the driver's failure classification.
func (e *StatusError) Cause() string { return fmt.Sprintf("http %d", e.Code) }

// keepBody asks Do to keep the response body.
type keepBody struct{}

// KeepBody returns ctx asking the client to keep response bodies (pages
// whose content the user reads: links, form tokens).
func KeepBody(ctx context.Context) context.Context { return context.WithValue(ctx, keepBody{}, true) }

// Do sends req, reads the whole body and checks the status.
func (c *Client) Do(req *http.Request) (*Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := &Response{Status: resp.StatusCode, Header: resp.Header}
	keep, _ := req.Context().Value(keepBody{}).(bool)
	if keep || resp.StatusCode >= 400 {
		var b bytes.Buffer
		r.Bytes, err = io.Copy(&b, resp.Body)
		r.Body = b.Bytes()
	} else {
		r.Bytes, err = io.Copy(io.Discard, resp.Body)
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: reading the body: %w", req.Method, req.URL, err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		body := string(r.Body)
		if len(body) > 200 {
			body = body[:200]
		}
		return r, &StatusError{Method: req.Method, URL: req.URL.String(), Code: resp.StatusCode, Body: body}
	}
	if lm := resp.Header.Get("Last-Modified"); lm != "" && req.Method == http.MethodGet {
		c.mu.Lock()
		c.modified[req.URL.String()] = lm
		c.mu.Unlock()
	}
	return r, nil
}

// Get fetches url.
func (c *Client) Get(ctx context.Context, url string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// GetConditional fetches url with If-Modified-Since when the client has
// seen it before (a browser revalidating its cache); 304 Not Modified is a
// success.
func (c *Client) GetConditional(ctx context.Context, url string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	lm, ok := c.modified[url]
	c.mu.Unlock()
	if ok {
		req.Header.Set("If-Modified-Since", lm)
	}
	return c.Do(req)
}

// GetOnce fetches url unless it was fetched before in this session (a
// browser cache that never revalidates); it reports whether it fetched.
func (c *Client) GetOnce(ctx context.Context, url string) (*Response, bool, error) {
	c.mu.Lock()
	done := c.fetched[url]
	c.fetched[url] = true
	c.mu.Unlock()
	if done {
		return nil, false, nil
	}
	r, err := c.Get(ctx, url)
	if err != nil {
		c.mu.Lock()
		delete(c.fetched, url)
		c.mu.Unlock()
	}
	return r, true, err
}

// PostForm posts form fields, URL-encoded.
func (c *Client) PostForm(ctx context.Context, url string, form url.Values) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.Do(req)
}

// File is one file of a multipart upload.
type File struct {
	Field       string // the form field name
	Name        string // the file name sent
	ContentType string // e.g. image/jpeg
	Data        []byte
}

// PostMultipart posts fields and files as multipart/form-data (Olio's
// AddPerson and AddEvent uploads).
func (c *Client) PostMultipart(ctx context.Context, url string, fields map[string]string, files []File) (*Response, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := w.WriteField(k, fields[k]); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, f.Field, f.Name))
		ct := f.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		part, err := w.CreatePart(h)
		if err != nil {
			return nil, err
		}
		if _, err := part.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	return c.Do(req)
}
