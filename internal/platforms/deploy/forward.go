package deploy

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/nearnative/nearnative/internal/topology"
)

// probeVia wraps probe so that it reaches the server through dial (the
// server's host, platform.ProbeDialer): each attempt gets a forwarder on
// this machine's loopback whose connections dial addr there, and the
// probe, whatever protocol it speaks, is given the forwarder's address.
func probeVia(probe topology.ReadyFunc, dial func(ctx context.Context, network, addr string) (net.Conn, error)) topology.ReadyFunc {
	return func(ctx context.Context, addr string) error {
		// The first connection is made before the probe's: a server not
		// yet listening fails the attempt with the host's own error,
		// instead of a forwarded connection the probe sees cut (and its
		// client library logs).
		first, err := dial(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		local, stop, err := forward(ctx, addr, first, dial)
		if err != nil {
			first.Close()
			return err
		}
		defer stop()
		return probe(ctx, local)
	}
}

// forward listens on a free loopback port and relays every connection
// to addr, the first over first, the others through dial, until stop (or
// ctx's end) closes the listener and every relayed connection.
func forward(ctx context.Context, addr string, first net.Conn, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (local string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	conns := []net.Conn{first}
	next := func(ctx context.Context) (net.Conn, error) {
		mu.Lock()
		c := first
		first = nil
		mu.Unlock()
		if c != nil {
			return c, nil
		}
		return dial(ctx, "tcp", addr)
	}
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(in) {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := next(ctx)
				if err != nil {
					in.Close()
					return
				}
				if !track(out) {
					in.Close()
					return
				}
				go func() { io.Copy(out, in); out.Close() }()
				io.Copy(in, out)
				in.Close()
			}()
		}
	}()
	stop = func() {
		cancel()
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	go func() { <-ctx.Done(); ln.Close() }()
	return ln.Addr().String(), stop, nil
}
