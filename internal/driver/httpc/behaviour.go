package httpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
)

// GetBehaviour is the registered name of the behaviour whose users (or
// open-loop connections) each GET one URL per operation, over one
// keep-alive connection of their own.
const GetBehaviour = "http-get"

// GetOp is the operation name of GetBehaviour.
const GetOp = "get"

func init() { driver.Register(GetBehaviour, newGetFactory) }

// Parameters of GetBehaviour.
const (
	ParamURL     = "url"     // required: http://host:port/path
	ParamBytes   = "bytes"   // when set, the body length every response must have
	ParamTimeout = "timeout" // per request, default 10s
)

type getFactory struct {
	url     string
	bytes   int64
	timeout time.Duration
}

func newGetFactory(p map[string]string) (driver.Factory, error) {
	u, err := url.Parse(p[ParamURL])
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("parameter %s %q: want an http:// URL", ParamURL, p[ParamURL])
	}
	f := &getFactory{url: u.String(), bytes: -1, timeout: 10 * time.Second}
	if s := p[ParamBytes]; s != "" {
		if f.bytes, err = strconv.ParseInt(s, 10, 64); err != nil || f.bytes < 0 {
			return nil, fmt.Errorf("parameter %s %q: want a byte count", ParamBytes, s)
		}
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
	c := New(Options{MaxConns: 1, NoCookies: true, Timeout: f.timeout})
	req, err := http.NewRequest(http.MethodGet, f.url, nil)
	if err != nil {
		return nil, err
	}
	u := &getUser{c: c, req: req, bytes: f.bytes}
	u.op = u.get
	return u, nil
}

type getUser struct {
	c     *Client
	req   *http.Request
	bytes int64
	op    driver.Operation
}

func (u *getUser) Next() (string, driver.Operation) { return GetOp, u.op }

func (u *getUser) get(ctx context.Context) error {
	r, err := u.c.Do(u.req.WithContext(ctx))
	if err != nil {
		return err
	}
	if u.bytes >= 0 && r.Bytes != u.bytes {
		return driver.Failure("short body", fmt.Errorf("GET %s: %d bytes, want %d", u.req.URL, r.Bytes, u.bytes))
	}
	return nil
}

func (u *getUser) Close() error { return u.c.Close() }
