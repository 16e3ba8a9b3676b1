// Package respc is the Redis client of nearnative's load driver: the
// behaviour "redis-mix", whose users (closed loop) or open-loop workers each
// keep one connection and send pipelines of GET and SET commands over a key
// space, as the Redis scale-out seed drove its servers (75% GET / 25% SET,
// 1-byte values, pipeline depth 30; redis-benchmark cannot mix the two in
// one run). One driver operation is one pipeline: its P commands are written
// at once and its P replies read; its latency is the pipeline's round trip.
//
// The hot path allocates nothing: commands are appended to a buffer the user
// keeps, replies are skipped in the reader's buffer (redisproto.Skip), keys
// are written digit by digit. A pipeline costs two system calls, one write
// and one read (sendRead): the reads wait for the replies rather than try
// for them first. The driver must not cost more CPU per command
// than redis-benchmark on the same load (BENCH.md has the cross-check).
package respc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/redisproto"
)

// MixBehaviour is the registered name of the GET/SET pipeline behaviour.
const MixBehaviour = "redis-mix"

// OpPipeline is the operation of MixBehaviour: one pipeline of commands.
const OpPipeline = "pipeline"

// Failure causes of MixBehaviour besides the driver's connection causes.
const (
	// CauseMiss: a GET found no value although the key space was loaded.
	CauseMiss = "get miss"
	// CauseServer: the server answered a command with an error reply (out
	// of memory, a proxy that lost its server).
	CauseServer = "error reply"
	// CauseReply: a reply of the wrong type or size.
	CauseReply = "bad reply"
)

func init() { driver.Register(MixBehaviour, NewMixFactory) }

// Parameters of MixBehaviour.
const (
	ParamAddrs     = "addrs"      // required: host:port[,host:port...]; connection i goes to addrs[i mod n]
	ParamPipeline  = "pipeline"   // commands per operation (default 1)
	ParamGetRatio  = "get_ratio"  // share of GETs, 0..1 (default 0.75)
	ParamKeyspace  = "keyspace"   // keys are Key(0) .. Key(keyspace-1), drawn uniformly (required)
	ParamValue     = "value_size" // bytes of each SET value; a GET must return this many (default 1)
	ParamTimeout   = "timeout"    // per pipeline (default 10s)
	ParamAllowMiss = "allow_miss" // "true": a GET of a missing key is no failure (default false)
)

// KeyPrefix starts every key; 12 zero-padded digits follow, as
// redis-benchmark writes its __rand_int__ keys.
const KeyPrefix = "key:"

// KeyDigits is the number of digits after KeyPrefix.
const KeyDigits = 12

// MaxKeyspace is the largest key space 12 digits can number.
const MaxKeyspace = 1_000_000_000_000

// AppendKey appends key number n (KeyPrefix and KeyDigits digits) to dst.
func AppendKey(dst []byte, n uint64) []byte {
	dst = append(dst, KeyPrefix...)
	var d [KeyDigits]byte
	for i := KeyDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, d[:]...)
}

// Key returns key number n.
func Key(n uint64) string { return string(AppendKey(nil, n)) }

// Mix is the settings of MixBehaviour, parsed from its parameters.
type Mix struct {
	Addrs     []string
	Pipeline  int
	GetRatio  float64
	Keyspace  uint64
	ValueSize int
	Timeout   time.Duration
	AllowMiss bool
}

// Params renders m as the behaviour's parameters.
func (m Mix) Params() map[string]string {
	p := map[string]string{
		ParamAddrs:    strings.Join(m.Addrs, ","),
		ParamPipeline: strconv.Itoa(m.Pipeline),
		ParamGetRatio: strconv.FormatFloat(m.GetRatio, 'g', -1, 64),
		ParamKeyspace: strconv.FormatUint(m.Keyspace, 10),
		ParamValue:    strconv.Itoa(m.ValueSize),
	}
	if m.Timeout > 0 {
		p[ParamTimeout] = m.Timeout.String()
	}
	if m.AllowMiss {
		p[ParamAllowMiss] = "true"
	}
	return p
}

// Validate checks the settings.
func (m Mix) Validate() error {
	if len(m.Addrs) == 0 {
		return fmt.Errorf("parameter %s: no address", ParamAddrs)
	}
	for _, a := range m.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("parameter %s: %q is not host:port", ParamAddrs, a)
		}
	}
	if m.Pipeline < 1 {
		return fmt.Errorf("parameter %s %d: a pipeline holds at least 1 command", ParamPipeline, m.Pipeline)
	}
	if !(m.GetRatio >= 0 && m.GetRatio <= 1) {
		return fmt.Errorf("parameter %s %v: want a share from 0 to 1", ParamGetRatio, m.GetRatio)
	}
	if m.Keyspace < 1 || m.Keyspace > MaxKeyspace {
		return fmt.Errorf("parameter %s %d: want 1 to %d keys", ParamKeyspace, m.Keyspace, uint64(MaxKeyspace))
	}
	if m.ValueSize < 0 || m.ValueSize > 512<<20 {
		return fmt.Errorf("parameter %s %d: want 0 to 512 MB", ParamValue, m.ValueSize)
	}
	if m.Timeout < 0 {
		return fmt.Errorf("parameter %s %v: must be positive", ParamTimeout, m.Timeout)
	}
	return nil
}

// ParseMix reads the behaviour's parameters.
func ParseMix(p map[string]string) (Mix, error) {
	m := Mix{Pipeline: 1, GetRatio: 0.75, ValueSize: 1, Timeout: 10 * time.Second}
	if s := p[ParamAddrs]; s != "" {
		for _, a := range strings.Split(s, ",") {
			m.Addrs = append(m.Addrs, strings.TrimSpace(a))
		}
	}
	var err error
	num := func(name string, set func(string) error) {
		if s, ok := p[name]; ok && err == nil {
			if e := set(s); e != nil {
				err = fmt.Errorf("parameter %s %q: %w", name, s, e)
			}
		}
	}
	num(ParamPipeline, func(s string) (e error) { m.Pipeline, e = strconv.Atoi(s); return })
	num(ParamGetRatio, func(s string) (e error) { m.GetRatio, e = strconv.ParseFloat(s, 64); return })
	num(ParamKeyspace, func(s string) (e error) { m.Keyspace, e = strconv.ParseUint(s, 10, 64); return })
	num(ParamValue, func(s string) (e error) { m.ValueSize, e = strconv.Atoi(s); return })
	num(ParamTimeout, func(s string) (e error) { m.Timeout, e = time.ParseDuration(s); return })
	num(ParamAllowMiss, func(s string) (e error) { m.AllowMiss, e = strconv.ParseBool(s); return })
	if err != nil {
		return m, err
	}
	if _, ok := p[ParamKeyspace]; !ok {
		return m, fmt.Errorf("parameter %s is required", ParamKeyspace)
	}
	if m.Timeout == 0 {
		m.Timeout = 10 * time.Second
	}
	return m, m.Validate()
}

// NewMixFactory is MixBehaviour; its users connect with dial (the run's
// client host).
func NewMixFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	m, err := ParseMix(p)
	if err != nil {
		return nil, err
	}
	return &factory{m: m, value: strings.Repeat("x", m.ValueSize), dial: dial}, nil
}

type factory struct {
	m     Mix
	value string
	dial  driver.DialFunc
}

func (f *factory) Ops() []string { return []string{OpPipeline} }
func (f *factory) Close() error  { return nil }

// NewUser returns user id: its connection (to Addrs[id mod n]) is made at
// its first operation, so that a refused connection counts as a failure of
// that operation rather than of the user's setup.
func (f *factory) NewUser(ctx context.Context, id int, rng *rand.Rand) (driver.User, error) {
	u := &user{f: f, addr: f.m.Addrs[id%len(f.m.Addrs)], rng: rng,
		buf: make([]byte, 0, f.m.Pipeline*(40+f.m.ValueSize)), gets: make([]bool, f.m.Pipeline)}
	// A SET's tail after its key (the value as a bulk string), written once.
	u.setTail = redisproto.AppendBulk(nil, f.value)
	u.op = u.pipeline
	return u, nil
}

// user is one connection sending pipelines.
type user struct {
	f       *factory
	addr    string
	rng     *rand.Rand
	conn    net.Conn
	sr      *sendRead
	r       *bufio.Reader
	stop    func() bool
	buf     []byte
	setTail []byte
	gets    []bool
	// deadline is the connection's current deadline; it is pushed forward
	// only when less than half the timeout is left, not per pipeline.
	deadline time.Time
	op       driver.Operation
}

func (u *user) Next() (string, driver.Operation) { return OpPipeline, u.op }

// Precomputed command headers: *2 $3 GET and *3 $3 SET, then the key's
// length (KeyPrefix and its digits).
var (
	getHead = []byte("*2\r\n$3\r\nGET\r\n$" + strconv.Itoa(len(KeyPrefix)+KeyDigits) + "\r\n")
	setHead = []byte("*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(KeyPrefix)+KeyDigits) + "\r\n")
)

func (u *user) dial(ctx context.Context) error {
	c, err := u.f.dial(ctx, "tcp", u.addr)
	if err != nil {
		return err
	}
	sr, err := newSendRead(c)
	if err != nil {
		c.Close()
		return err
	}
	u.conn, u.sr, u.r = c, sr, bufio.NewReaderSize(sr, 32<<10)
	u.deadline = time.Time{}
	// The driver cancels ctx when it stops: a read in flight then ends at
	// once rather than at its deadline.
	u.stop = context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return nil
}

func (u *user) drop() {
	if u.conn != nil {
		u.stop()
		u.conn.Close()
		u.conn, u.sr, u.r = nil, nil, nil
	}
}

// pipeline sends one pipeline and reads its replies.
func (u *user) pipeline(ctx context.Context) error {
	if u.conn == nil {
		if err := u.dial(ctx); err != nil {
			return fmt.Errorf("connecting to %s: %w", u.addr, err)
		}
	}
	m := u.f.m
	b := u.buf[:0]
	for i := 0; i < m.Pipeline; i++ {
		key := u.rng.Uint64N(m.Keyspace)
		get := u.rng.Float64() < m.GetRatio
		u.gets[i] = get
		if get {
			b = append(b, getHead...)
			b = appendKeyCRLF(b, key)
		} else {
			b = append(b, setHead...)
			b = appendKeyCRLF(b, key)
			b = append(b, u.setTail...)
		}
	}
	u.buf = b
	now := time.Now()
	if u.deadline.Sub(now) < m.Timeout/2 {
		u.deadline = now.Add(m.Timeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(u.deadline) {
			u.deadline = dl
		}
		u.conn.SetDeadline(u.deadline)
	}
	if n := u.r.Buffered(); n > 0 {
		u.drop()
		return driver.Failure(CauseReply, fmt.Errorf("%s sent %d bytes nobody asked for", u.addr, n))
	}
	// The commands go out with the first read of their replies (sendRead).
	u.sr.pending = b
	var first error
	for i := 0; i < m.Pipeline; i++ {
		typ, n, err := redisproto.Skip(u.r)
		switch {
		case err != nil && isErrorReply(err):
			if first == nil {
				first = driver.Failure(CauseServer, fmt.Errorf("%s answered %w", u.addr, err))
			}
		case err != nil && isSendError(err):
			u.drop()
			return fmt.Errorf("sending to %s: %w", u.addr, err)
		case err != nil:
			u.drop()
			return fmt.Errorf("reading from %s: %w", u.addr, err)
		case u.gets[i] && typ == redisproto.TypeBulk && n == int64(m.ValueSize):
		case u.gets[i] && typ == redisproto.TypeBulk && n == -1:
			if !m.AllowMiss && first == nil {
				first = driver.Failure(CauseMiss, fmt.Errorf("GET at %s found no value: the key space was not loaded (or lost)", u.addr))
			}
		case !u.gets[i] && typ == redisproto.TypeSimple:
		default:
			if first == nil {
				cmd := "SET"
				if u.gets[i] {
					cmd = "GET"
				}
				first = driver.Failure(CauseReply, fmt.Errorf("%s at %s: reply type %q length %d, want %s", cmd, u.addr, typ, n, want(u.gets[i], m.ValueSize)))
			}
		}
	}
	return first
}

// isErrorReply reports whether err is a server's error reply. It is a
// function of its own, called only for a non-nil error, because the target
// errors.As writes to escapes to the heap: declared in the reply loop it
// cost one allocation per reply.
func isErrorReply(err error) bool {
	var re redisproto.Error
	return errors.As(err, &re)
}

// isSendError reports whether err is a failure to send the pipeline
// (sendRead's), kept out of the reply loop like isErrorReply.
func isSendError(err error) bool {
	var se *sendError
	return errors.As(err, &se)
}

func want(get bool, size int) string {
	if get {
		return fmt.Sprintf("a %d-byte bulk string", size)
	}
	return "+OK"
}

// appendKeyCRLF appends a key's text and the CRLF that ends its bulk.
func appendKeyCRLF(b []byte, n uint64) []byte {
	b = AppendKey(b, n)
	return append(b, '\r', '\n')
}

func (u *user) Close() error {
	u.drop()
	return nil
}
