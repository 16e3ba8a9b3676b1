package vmagent

import (
	"bufio"
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// dialTimeout bounds the agent's connection to a dial's target.
const dialTimeout = 10 * time.Second

// dial serves /dial?addr=HOST:PORT: the agent connects to addr from where
// it runs and, once connected, the request's connection carries the bytes
// both ways (as an HTTP CONNECT proxy does). A client host whose only way
// in is the agent's port (a driver pod, reached by a port-forward of the
// Kubernetes API) opens its readiness probes and preloads this way.
func (a *agent) dial(w http.ResponseWriter, r *http.Request) {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) != 1 {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	addr := r.URL.Query().Get("addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		http.Error(w, fmt.Sprintf("dial: addr %q: want HOST:PORT", addr), http.StatusBadRequest)
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	target, err := d.DialContext(r.Context(), "tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		target.Close()
		http.Error(w, "dial: connection cannot be taken over", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		target.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		conn.Close()
		target.Close()
		return
	}
	splice(&bufConn{Conn: conn, r: buf.Reader}, target)
}

// splice copies both ways until either side ends, then closes both.
func splice(a, b net.Conn) {
	var once sync.Once
	done := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { io.Copy(a, b); done() }()
	io.Copy(b, a)
	done()
}

// bufConn is a connection whose first bytes were read into r already.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Dial opens a TCP connection to addr from where the agent runs, through
// the agent's own port (see the agent's /dial).
func (c *Client) Dial(ctx context.Context, addr string) (net.Conn, error) {
	u, err := url.Parse(c.Base)
	if err != nil {
		return nil, err
	}
	dial := (&net.Dialer{}).DialContext
	if t, ok := c.HTTP.Transport.(*http.Transport); ok && t.DialContext != nil {
		dial = t.DialContext
	}
	conn, err := dial(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("agent dial %s: reaching the agent: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	req, err := http.NewRequest(http.MethodPost, c.Base+"/dial?addr="+url.QueryEscape(addr), nil)
	if err != nil {
		stop()
		conn.Close()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	br := bufio.NewReader(conn)
	var resp *http.Response
	if err = req.Write(conn); err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if !stop() { // ctx ended: conn is closed, or about to be
		conn.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("agent dial %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		conn.Close()
		return nil, fmt.Errorf("agent dial %s: %s", addr, strings.TrimSpace(string(b)))
	}
	conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: br}, nil
}
