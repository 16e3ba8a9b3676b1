package deploy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProbeVia: a probe wrapped with a dialer reaches the server only
// through it (by a loopback forwarder, whatever the protocol), and the
// forwarder is gone after each attempt.
func TestProbeVia(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte("echo " + line))
			c.Close()
		}
	}()
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	var probed string
	probe := func(ctx context.Context, addr string) error {
		probed = addr
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte("ping\n"))
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || got != "echo ping\n" {
			t.Errorf("through the forwarder: %q, %v", got, err)
		}
		return nil
	}
	const far = "192.0.2.7:5432" // the server's address, as the host sees it
	target := srv.Addr().String()
	wrapped := probeVia(probe, func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != far {
			t.Errorf("dialed %s, want the server's address %s", addr, far)
		}
		return dial(ctx, network, target)
	})
	if err := wrapped(context.Background(), far); err != nil {
		t.Fatal(err)
	}
	if len(dialed) != 1 || !strings.HasPrefix(probed, "127.0.0.1:") {
		t.Fatalf("dialed %v, probe given %s: want one dial through the host and the probe on a loopback forwarder", dialed, probed)
	}
	if c, err := net.DialTimeout("tcp", probed, time.Second); err == nil {
		c.Close()
		t.Fatalf("the forwarder %s still listens after the attempt", probed)
	}
}

// TestProbeViaNotListening: while the host cannot reach the server, the
// attempt fails with the host's error and the probe is not called (its
// client library would see a forwarded connection cut).
func TestProbeViaNotListening(t *testing.T) {
	called := false
	probe := func(context.Context, string) error { called = true; return nil }
	refused := errors.New("connect: connection refused")
	err := probeVia(probe, func(context.Context, string, string) (net.Conn, error) { return nil, refused })(context.Background(), "192.0.2.7:5432")
	if !errors.Is(err, refused) || called {
		t.Fatalf("err %v, probe called %v: want the host's error and no probe", err, called)
	}
}
