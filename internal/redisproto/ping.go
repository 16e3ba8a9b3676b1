// Package redisproto holds the few Redis protocol exchanges nearnative needs
// outside its load drivers: checking that a server answers.
package redisproto

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

// Ping sends PING to addr and expects +PONG. The command goes as a RESP
// array, not inline: proxies such as twemproxy close connections that send
// inline commands.
func Ping(ctx context.Context, addr string) error {
	var d net.Dialer
	return PingDial(ctx, d.DialContext, addr)
}

// PingDial is Ping over connections dial opens (a client host's).
func PingDial(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) error {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("redis at %s: no answer to PING: %w", addr, err)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redis at %s: PING answered %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// WaitReady pings addr until it answers or timeout passes. A loading Redis
// answers -LOADING, a proxy may accept and close: both are retried.
func WaitReady(ctx context.Context, addr string, timeout time.Duration) error {
	var d net.Dialer
	return WaitReadyDial(ctx, d.DialContext, addr, timeout)
}

// WaitReadyDial is WaitReady over connections dial opens: from the client
// host, so that a server this machine reaches but the load's side does not
// (a path without a route back) fails here, within timeout, rather than
// leaving the load generator waiting for connections that never open.
func WaitReadyDial(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, timeout time.Duration) error {
	err := platform.WaitReady(ctx, timeout, 25*time.Millisecond, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return PingDial(pctx, dial, addr)
	})
	if err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	return nil
}
