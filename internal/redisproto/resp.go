package redisproto

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The RESP2 protocol (https://redis.io/docs/reference/protocol-spec/): a
// command is an array of bulk strings; a reply is a simple string (+OK), an
// error (-ERR ...), an integer (:1), a bulk string ($3\r\nabc, $-1 for nil)
// or an array (*2 ..., *-1 for nil). The load driver needs to write commands
// and skip replies without allocating; the loader and the probes need a
// few whole replies (INFO, DBSIZE, CONFIG SET).

// Reply types, the first byte of a reply.
const (
	TypeSimple = '+'
	TypeError  = '-'
	TypeInt    = ':'
	TypeBulk   = '$'
	TypeArray  = '*'
)

// Error is an error reply of the server ("ERR unknown command", "OOM command
// not allowed when used memory > 'maxmemory'"): the connection stays usable.
type Error string

func (e Error) Error() string { return "redis: " + string(e) }

// ErrProtocol marks a reply that is not RESP: the connection must be closed.
var ErrProtocol = errors.New("redis: protocol error")

// maxBulk bounds the bulk strings and arrays a reader accepts (Redis's own
// proto-max-bulk-len default is 512 MB).
const maxBulk = 512 << 20

// AppendCommand appends args as one command (a RESP array of bulk strings)
// to dst.
func AppendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = AppendBulk(dst, a)
	}
	return dst
}

// AppendArrayHeader appends the header of a command of n arguments; the
// arguments follow as AppendBulk or AppendBulkBytes.
func AppendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendBulk appends s as a bulk string.
func AppendBulk(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendBulkBytes appends b as a bulk string.
func AppendBulkBytes(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// line reads one reply line without its CRLF. The slice is valid until the
// next read from r.
func line(r *bufio.Reader) ([]byte, error) {
	l, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: a reply line longer than %d bytes", ErrProtocol, r.Size())
		}
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, fmt.Errorf("%w: line %q", ErrProtocol, truncate(l))
	}
	return l[:len(l)-2], nil
}

// parseInt parses a RESP integer without allocating.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty number", ErrProtocol)
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("%w: number %q", ErrProtocol, b)
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: number %q", ErrProtocol, b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// Skip reads one reply and discards it. It returns the reply's type and,
// for a bulk string, its length (-1 for nil) or, for an array, its element
// count. An error reply is returned as an Error (the connection stays
// usable); any other error means the connection is broken. Skip allocates
// only for error replies.
func Skip(r *bufio.Reader) (typ byte, n int64, err error) {
	l, err := line(r)
	if err != nil {
		return 0, 0, err
	}
	typ = l[0]
	switch typ {
	case TypeSimple:
		return typ, 0, nil
	case TypeError:
		return typ, 0, Error(l[1:])
	case TypeInt:
		n, err = parseInt(l[1:])
		return typ, n, err
	case TypeBulk:
		if n, err = parseInt(l[1:]); err != nil {
			return typ, 0, err
		}
		if n < -1 || n > maxBulk {
			return typ, 0, fmt.Errorf("%w: bulk length %d", ErrProtocol, n)
		}
		if n >= 0 {
			if _, err := r.Discard(int(n) + 2); err != nil {
				return typ, 0, err
			}
		}
		return typ, n, nil
	case TypeArray:
		if n, err = parseInt(l[1:]); err != nil {
			return typ, 0, err
		}
		if n < -1 || n > maxBulk {
			return typ, 0, fmt.Errorf("%w: array length %d", ErrProtocol, n)
		}
		var first error
		for i := int64(0); i < n; i++ {
			if _, _, err := Skip(r); err != nil {
				var re Error
				if !errors.As(err, &re) {
					return typ, 0, err
				}
				if first == nil {
					first = err
				}
			}
		}
		return typ, n, first
	}
	return 0, 0, fmt.Errorf("%w: reply %q", ErrProtocol, truncate(l))
}

// Reply is one whole reply.
type Reply struct {
	Type byte
	// Str is a simple string's or a bulk string's text; Nil marks a nil
	// bulk string or array.
	Str   string
	Nil   bool
	Int   int64
	Elems []Reply
}

// Read reads one whole reply. An error reply is returned as an Error.
func Read(r *bufio.Reader) (Reply, error) {
	l, err := line(r)
	if err != nil {
		return Reply{}, err
	}
	rep := Reply{Type: l[0]}
	switch rep.Type {
	case TypeSimple:
		rep.Str = string(l[1:])
	case TypeError:
		return rep, Error(l[1:])
	case TypeInt:
		rep.Int, err = parseInt(l[1:])
	case TypeBulk:
		var n int64
		if n, err = parseInt(l[1:]); err != nil {
			return rep, err
		}
		if n < -1 || n > maxBulk {
			return rep, fmt.Errorf("%w: bulk length %d", ErrProtocol, n)
		}
		if n == -1 {
			rep.Nil = true
			return rep, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return rep, err
		}
		rep.Str = string(b[:n])
	case TypeArray:
		var n int64
		if n, err = parseInt(l[1:]); err != nil {
			return rep, err
		}
		if n < -1 || n > maxBulk {
			return rep, fmt.Errorf("%w: array length %d", ErrProtocol, n)
		}
		if n == -1 {
			rep.Nil = true
			return rep, nil
		}
		for i := int64(0); i < n; i++ {
			e, err := Read(r)
			var re Error
			if err != nil && !errors.As(err, &re) {
				return rep, err
			}
			if err != nil {
				e = Reply{Type: TypeError, Str: string(re)}
			}
			rep.Elems = append(rep.Elems, e)
		}
	default:
		return rep, fmt.Errorf("%w: reply %q", ErrProtocol, truncate(l))
	}
	return rep, err
}

func truncate(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}

// Conn is a plain connection for a few commands at a time: probes, INFO,
// the data loader. The load driver writes and reads its pipelines itself.
type Conn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

// Dial connects to the Redis (or Redis proxy) at addr.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	return &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// deadline applies ctx's deadline, or def from now without one, and ends
// a read or write at once when ctx is cancelled (Ctrl-C during a data load
// of millions of keys); stop undoes the latter when the call is done.
func (c *Conn) deadline(ctx context.Context, def time.Duration) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	} else {
		c.c.SetDeadline(time.Now().Add(def))
	}
	return context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
}

// failed wraps err, or ctx's error when ctx ended the call.
func failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, context.Cause(ctx))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Do sends one command and reads its reply (within ctx's deadline, or 30
// seconds).
func (c *Conn) Do(ctx context.Context, args ...string) (Reply, error) {
	defer c.deadline(ctx, 30*time.Second)()
	c.buf = AppendCommand(c.buf[:0], args...)
	if _, err := c.c.Write(c.buf); err != nil {
		return Reply{}, failed(ctx, "redis "+args[0], err)
	}
	rep, err := Read(c.r)
	if err != nil {
		return rep, failed(ctx, "redis "+args[0], err)
	}
	return rep, nil
}

// Pipeline sends the commands in buf (made with AppendCommand) at once and
// reads n replies, discarding them; it returns the first error reply, if
// any, after reading all n (within ctx's deadline, or 60 seconds).
func (c *Conn) Pipeline(ctx context.Context, buf []byte, n int) error {
	defer c.deadline(ctx, 60*time.Second)()
	if _, err := c.c.Write(buf); err != nil {
		return failed(ctx, "redis pipeline", err)
	}
	var first error
	for i := 0; i < n; i++ {
		if _, _, err := Skip(c.r); err != nil {
			var re Error
			if !errors.As(err, &re) {
				return failed(ctx, "redis pipeline", err)
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Info runs INFO section and returns its fields ("used_memory" -> "123").
func (c *Conn) Info(ctx context.Context, section string) (map[string]string, error) {
	rep, err := c.Do(ctx, "INFO", section)
	if err != nil {
		return nil, err
	}
	return ParseInfo(rep.Str), nil
}

// ParseInfo reads the "field:value" lines of an INFO reply.
func ParseInfo(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "" || l[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// Int runs a command whose reply is an integer (DBSIZE).
func (c *Conn) Int(ctx context.Context, args ...string) (int64, error) {
	rep, err := c.Do(ctx, args...)
	if err != nil {
		return 0, err
	}
	if rep.Type != TypeInt {
		return 0, fmt.Errorf("redis %s: want an integer reply, got %q", args[0], bytes.TrimSpace([]byte(rep.Str)))
	}
	return rep.Int, nil
}
