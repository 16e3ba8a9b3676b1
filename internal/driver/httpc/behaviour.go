package httpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/nearnative/nearnative/internal/driver"
)

// GetBehaviour is the registered name of the behaviour whose users (or
// open-loop connections) each GET one URL per operation, over one
// keep-alive connection of their own (fasthttp, for the driver's own CPU's
// sake: the simulated users' Client is net/http).
const GetBehaviour = "http-get"

// GetOp is the operation name of GetBehaviour.
const GetOp = "get"

func init() { driver.Register(GetBehaviour, newGetFactory) }

// Parameters of GetBehaviour.
const (
	ParamURL     = "url"     // required: http://host:port/path
	ParamBytes   = "bytes"   // when set, the body length every response must have
	ParamTimeout = "timeout" // per request, default 10s
	// ParamClient picks the HTTP client: fasthttp (default) or nethttp
	// (net/http, the client hey uses, for cross-checks).
	ParamClient = "client"
)

type getFactory struct {
	dial    driver.DialFunc
	nethttp bool
	url     string
	host    string // host:port
	bytes   int64
	timeout time.Duration
}

func newGetFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	u, err := url.Parse(p[ParamURL])
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("parameter %s %q: want an http:// URL", ParamURL, p[ParamURL])
	}
	f := &getFactory{dial: dial, url: u.String(), host: u.Host, bytes: -1, timeout: 10 * time.Second}
	if u.Port() == "" {
		f.host = u.Host + ":80"
	}
	if s := p[ParamBytes]; s != "" {
		if f.bytes, err = strconv.ParseInt(s, 10, 64); err != nil || f.bytes < 0 {
			return nil, fmt.Errorf("parameter %s %q: want a byte count", ParamBytes, s)
		}
	}
	switch p[ParamClient] {
	case "", "fasthttp":
	case "nethttp":
		f.nethttp = true
	default:
		return nil, fmt.Errorf("parameter %s %q: want fasthttp or nethttp", ParamClient, p[ParamClient])
	}
	if s := p[ParamTimeout]; s != "" {
		if f.timeout, err = time.ParseDuration(s); err != nil || f.timeout <= 0 {
			return nil, fmt.Errorf("parameter %s %q: want a positive duration", ParamTimeout, s)
		}
	}
	return f, nil
}

func (f *getFactory) Ops() []string { return []string{GetOp} }
func (f *getFactory) Close() error  { return nil }

func (f *getFactory) NewUser(ctx context.Context, id int, rng *rand.Rand) (driver.User, error) {
	if f.nethttp {
		req, err := http.NewRequest(http.MethodGet, f.url, nil)
		if err != nil {
			return nil, err
		}
		u := &netUser{c: New(Options{MaxConns: 1, NoCookies: true, Timeout: f.timeout, Dial: f.dial}), req: req, bytes: f.bytes}
		u.op = u.get
		return u, nil
	}
	dial := driver.DialWithin(f.dial, DefaultConnectTimeout)
	hc := &fasthttp.HostClient{
		Addr: f.host,
		// The user's connection comes from the run's client host.
		Dial:                func(addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) },
		Name:                "nearnative",
		MaxConns:            1, // one keep-alive connection per user or open-loop worker
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     16 << 10,
		ReadTimeout:         f.timeout,
		WriteTimeout:        f.timeout,
		MaxIdleConnDuration: time.Minute,
	}
	req := &fasthttp.Request{}
	req.SetRequestURI(f.url)
	req.Header.SetMethod(http.MethodGet)
	u := &getUser{hc: hc, req: req, resp: &fasthttp.Response{}, url: f.url, bytes: f.bytes, timeout: f.timeout}
	u.op = u.get
	return u, nil
}

// getUser sends its GETs with fasthttp, on its own goroutine: net/http
// hands each request to a connection's read and write goroutines, which
// cost twice the CPU per request here (27-35 us against 14 us; see
// BENCH.md), CPU the driver would take from the server it drives.
type getUser struct {
	hc      *fasthttp.HostClient
	req     *fasthttp.Request
	resp    *fasthttp.Response
	url     string
	bytes   int64
	timeout time.Duration
	op      driver.Operation
}

func (u *getUser) Next() (string, driver.Operation) { return GetOp, u.op }

func (u *getUser) get(ctx context.Context) error {
	deadline, cut := time.Now().Add(u.timeout), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, cut = d, true
	}
	if err := u.hc.DoDeadline(u.req, u.resp, deadline); err != nil {
		switch {
		case errors.Is(err, fasthttp.ErrTimeout) && cut:
			// The driver's own deadline (the end of its drain), not the
			// request timeout: the request was cut off, not failed.
			return fmt.Errorf("GET %s: %w", u.url, context.DeadlineExceeded)
		case errors.Is(err, fasthttp.ErrTimeout):
			return driver.Failure(driver.CauseTimeout, fmt.Errorf("GET %s: %w", u.url, err))
		case errors.Is(err, fasthttp.ErrConnectionClosed):
			return driver.Failure(driver.CauseClosed, fmt.Errorf("GET %s: %w", u.url, err))
		}
		return fmt.Errorf("GET %s: %w", u.url, err)
	}
	if code := u.resp.StatusCode(); code != http.StatusOK {
		body := u.resp.Body()
		if len(body) > 200 {
			body = body[:200]
		}
		return &StatusError{Method: http.MethodGet, URL: u.url, Code: code, Body: string(body)}
	}
	if n := int64(len(u.resp.Body())); u.bytes >= 0 && n != u.bytes {
		return driver.Failure("short body", fmt.Errorf("GET %s: %d bytes, want %d", u.url, n, u.bytes))
	}
	return nil
}

func (u *getUser) Close() error {
	u.hc.CloseIdleConnections()
	return nil
}

// netUser sends its GETs with net/http.
type netUser struct {
	c     *Client
	req   *http.Request
	bytes int64
	op    driver.Operation
}

func (u *netUser) Next() (string, driver.Operation) { return GetOp, u.op }

func (u *netUser) get(ctx context.Context) error {
	r, err := u.c.Do(u.req.WithContext(ctx))
	if err != nil {
		return err
	}
	if u.bytes >= 0 && r.Bytes != u.bytes {
		return driver.Failure("short body", fmt.Errorf("GET %s: %d bytes, want %d", u.req.URL, r.Bytes, u.bytes))
	}
	return nil
}

func (u *netUser) Close() error { return u.c.Close() }
