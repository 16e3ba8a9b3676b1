package respc

import (
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendRead is the reader under a user's bufio.Reader. Set pending to a
// pipeline's commands and the next Read writes them and then waits for
// the replies without first trying to read them: a plain net.Conn Write
// and Read would try a read at once, which finds nothing (the server has
// not answered yet) and costs a system call per pipeline that
// redis-benchmark, driven by epoll, does not make (BENCH.md, issue 14).
//
// The write is made inside syscall.RawConn's Read, after the runtime has
// cleared the connection's read readiness: the replies can only arrive
// after that, so the readiness they raise is not lost and the wait ends
// when they come. Deadlines apply as to any read (SetDeadline on the
// connection). A write that the socket cannot take at once (a full send
// buffer, not seen with pipelines of a few kilobytes) falls back to the
// connection's own blocking Write.
type sendRead struct {
	conn    net.Conn
	raw     syscall.RawConn
	pending []byte
	// The state of one Read, in fields so that the function RawConn.Read
	// calls (step, bound once) allocates nothing per call.
	p          []byte
	n          int
	werr, rerr error
	step       func(fd uintptr) bool
}

func newSendRead(c net.Conn) (*sendRead, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("connection %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &sendRead{conn: c, raw: raw}
	s.step = s.sendThenRead
	return s, nil
}

// sendError marks a failure to send, so that the pipeline reports it as
// such rather than as a failure to read.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// Read implements io.Reader: it sends what is pending, if anything, and
// reads into p once data is there.
func (s *sendRead) Read(p []byte) (int, error) {
	if len(s.pending) == 0 {
		return s.conn.Read(p)
	}
	s.p, s.n, s.werr, s.rerr = p, 0, nil, nil
	err := s.raw.Read(s.step)
	n, werr, rerr := s.n, s.werr, s.rerr
	s.p = nil
	switch {
	case werr == unix.EAGAIN:
		// The socket took part or none of it: send the rest the usual way.
		rest := s.pending
		s.pending = nil
		if _, err := s.conn.Write(rest); err != nil {
			return 0, &sendError{err}
		}
		return s.conn.Read(p)
	case werr != nil:
		s.pending = nil
		return 0, &sendError{os.NewSyscallError("write", werr)}
	case err != nil:
		s.pending = nil
		return 0, err
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// sendThenRead is called by RawConn.Read until it returns true: first it
// writes what is pending and returns false (wait for the replies), then it
// reads into s.p.
func (s *sendRead) sendThenRead(fd uintptr) bool {
	if len(s.pending) > 0 {
		for len(s.pending) > 0 {
			w, e := unix.Write(int(fd), s.pending)
			if e == unix.EINTR {
				continue
			}
			if e != nil {
				s.werr = e
				return true
			}
			s.pending = s.pending[w:]
		}
		return false // the replies come later: wait for them
	}
	for {
		s.n, s.rerr = unix.Read(int(fd), s.p)
		if s.rerr != unix.EINTR {
			break
		}
	}
	return s.rerr != unix.EAGAIN
}
