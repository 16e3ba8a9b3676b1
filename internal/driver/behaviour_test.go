package driver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestDialWithin: a client host's dial gets the connect timeout as its
// context's deadline; without one, a net.Dialer connects.
func TestDialWithin(t *testing.T) {
	var deadline time.Time
	var has bool
	errDial := errors.New("not dialed")
	dial := DialWithin(func(ctx context.Context, _, _ string) (net.Conn, error) {
		deadline, has = ctx.Deadline()
		return nil, errDial
	}, time.Minute)
	before := time.Now()
	if _, err := dial(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, errDial) {
		t.Fatalf("error %v, want the dial's own", err)
	}
	if !has || deadline.Before(before.Add(time.Minute)) || deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("deadline %v (set %v), want a minute after the call", deadline, has)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := DialWithin(nil, time.Minute)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
