package olio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// A FastCGI client for one request, enough to ask PHP-FPM for a page
// without nginx (the readiness probe of the PHP tier). The Go standard
// library has only the server side (net/http/fcgi), against which this is
// tested.

const (
	fcgiVersion      = 1
	fcgiBeginRequest = 1
	fcgiEndRequest   = 3
	fcgiParams       = 4
	fcgiStdin        = 5
	fcgiStdout       = 6
	fcgiStderr       = 7
	fcgiResponder    = 1
	fcgiRequestID    = 1
)

// fcgiResponse is PHP's answer: the CGI status, headers and body, and what
// the script wrote to FastCGI's stderr.
type fcgiResponse struct {
	Status int
	Header textproto.MIMEHeader
	Body   []byte
	Stderr []byte
}

// fcgiGet sends a GET for script (its path as PHP-FPM sees it) with query
// to the FastCGI server at addr.
func fcgiGet(ctx context.Context, addr, script, query string) (*fcgiResponse, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	host, port, _ := net.SplitHostPort(addr)
	params := [][2]string{
		{"GATEWAY_INTERFACE", "CGI/1.1"}, {"SERVER_PROTOCOL", "HTTP/1.1"}, {"SERVER_SOFTWARE", "nearnative"},
		{"REQUEST_METHOD", "GET"}, {"SCRIPT_FILENAME", script}, {"SCRIPT_NAME", "/" + lastElem(script)},
		{"REQUEST_URI", "/" + lastElem(script) + queryPart(query)}, {"QUERY_STRING", query},
		{"SERVER_NAME", host}, {"SERVER_ADDR", host}, {"SERVER_PORT", port}, {"HTTP_HOST", addr},
		{"REMOTE_ADDR", "127.0.0.1"}, {"REMOTE_PORT", "0"}, {"CONTENT_LENGTH", "0"},
	}
	var req bytes.Buffer
	begin := []byte{0, fcgiResponder, 0, 0, 0, 0, 0, 0} // role, flags (close after), reserved
	writeRecord(&req, fcgiBeginRequest, begin)
	var p []byte
	for _, kv := range params {
		p = appendLen(p, len(kv[0]))
		p = appendLen(p, len(kv[1]))
		p = append(p, kv[0]...)
		p = append(p, kv[1]...)
	}
	for len(p) > 0 { // records carry at most 65535 bytes
		n := min(len(p), 65535)
		writeRecord(&req, fcgiParams, p[:n])
		p = p[n:]
	}
	writeRecord(&req, fcgiParams, nil)
	writeRecord(&req, fcgiStdin, nil)
	if _, err := c.Write(req.Bytes()); err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	r := bufio.NewReader(c)
	for {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, fmt.Errorf("reading the FastCGI answer: %w", err)
		}
		if h[0] != fcgiVersion {
			return nil, fmt.Errorf("FastCGI answer of version %d, want 1", h[0])
		}
		n, pad := int(binary.BigEndian.Uint16(h[4:6])), int(h[6])
		body := make([]byte, n+pad)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("reading the FastCGI answer: %w", err)
		}
		body = body[:n]
		switch h[1] {
		case fcgiStdout:
			stdout.Write(body)
		case fcgiStderr:
			stderr.Write(body)
		case fcgiEndRequest:
			if len(body) >= 5 && body[4] != 0 {
				return nil, fmt.Errorf("FastCGI server refused the request (protocol status %d)", body[4])
			}
			resp, err := parseCGI(stdout.Bytes())
			if err != nil {
				return nil, err
			}
			resp.Stderr = stderr.Bytes()
			return resp, nil
		}
	}
}

func writeRecord(w *bytes.Buffer, typ byte, content []byte) {
	pad := (8 - len(content)%8) % 8
	w.Write([]byte{fcgiVersion, typ, 0, fcgiRequestID, byte(len(content) >> 8), byte(len(content)), byte(pad), 0})
	w.Write(content)
	w.Write(make([]byte, pad))
}

func appendLen(b []byte, n int) []byte {
	if n < 128 {
		return append(b, byte(n))
	}
	return binary.BigEndian.AppendUint32(b, uint32(n)|1<<31)
}

// parseCGI splits a CGI response into status, headers and body.
func parseCGI(out []byte) (*fcgiResponse, error) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(out)))
	h, err := r.ReadMIMEHeader()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("malformed CGI headers from FastCGI server: %w", err)
	}
	body, _ := io.ReadAll(r.R)
	resp := &fcgiResponse{Status: 200, Header: h, Body: body}
	if s := h.Get("Status"); s != "" {
		code, _, _ := strings.Cut(s, " ")
		if resp.Status, err = strconv.Atoi(code); err != nil {
			return nil, fmt.Errorf("malformed CGI status %q", s)
		}
	}
	return resp, nil
}

func lastElem(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func queryPart(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}
