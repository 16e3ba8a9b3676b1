package redisproto

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestCancelEndsACall: a server that never answers holds a call only until
// its context is cancelled (Ctrl-C during a data load), not for the
// call's 30 or 60 s deadline.
func TestCancelEndsACall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent: reads nothing, answers nothing
		}
	}()
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c *Conn) error
	}{
		{"Do", func(ctx context.Context, c *Conn) error { _, err := c.Do(ctx, "PING"); return err }},
		{"Pipeline", func(ctx context.Context, c *Conn) error {
			return c.Pipeline(ctx, AppendCommand(nil, "SET", "k", "v"), 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(context.Background(), ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			start := time.Now()
			err = tc.call(ctx, c)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the call took %v after its context was cancelled at 100ms", d)
			}
		})
	}
}
