package respc

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSendRead: the pending bytes reach the peer before the reply is
// read, however many of them; a silent peer ends in the deadline; a peer
// that hangs up ends in io.EOF. The peer is a loopback socket of the test.
func TestSendRead(t *testing.T) {
	tests := []struct {
		name string
		size int // bytes sent
		// peer reads size bytes and then does this.
		peer    func(c net.Conn)
		want    string
		wantErr error
	}{
		{"reply", 100, func(c net.Conn) { c.Write([]byte("got 100")) }, "got 100", nil},
		// More than a socket takes at once: the rest goes by the
		// connection's own Write.
		{"beyond the send buffer", 32 << 20, func(c net.Conn) { c.Write([]byte("got 33554432")) }, "got 33554432", nil},
		{"silent peer", 10, func(c net.Conn) { time.Sleep(1200 * time.Millisecond) }, "", os.ErrDeadlineExceeded},
		{"peer hangs up", 10, func(c net.Conn) {}, "", io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				if _, err := io.ReadFull(c, make([]byte, tt.size)); err != nil {
					done <- err
					return
				}
				tt.peer(c)
				done <- nil
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Second))
			s, err := newSendRead(c)
			if err != nil {
				t.Fatal(err)
			}
			s.pending = make([]byte, tt.size)
			buf := make([]byte, 64)
			var got []byte
			for len(got) < len(tt.want) || tt.want == "" {
				n, err := s.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					if tt.wantErr == nil || !errors.Is(err, tt.wantErr) {
						t.Fatalf("error %v, want %v", err, tt.wantErr)
					}
					break
				}
			}
			if string(got) != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
			if len(s.pending) != 0 {
				t.Errorf("%d bytes still pending", len(s.pending))
			}
			c.Close()
			if err := <-done; err != nil {
				t.Errorf("peer: %v", err)
			}
		})
	}
}

// TestSendReadError: a connection that cannot send (its write side shut)
// fails with a sendError, which the pipeline reports as a failure to send.
func TestSendReadError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	s, err := newSendRead(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	s.pending = []byte("PING\r\n")
	_, err = s.Read(make([]byte, 16))
	if err == nil || !isSendError(err) || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("error %v, want a send error of EPIPE", err)
	}
}
