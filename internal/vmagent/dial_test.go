package vmagent

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDial: a connection opened through the agent carries bytes both ways
// to the target; a refused target, a bad address and a wrong token each
// fail with the reason.
func TestDial(t *testing.T) {
	c, _ := testAgent(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			s, err := l.Accept()
			if err != nil {
				return
			}
			go func() { // echo, upper-cased
				defer s.Close()
				sc := bufio.NewScanner(s)
				for sc.Scan() {
					io.WriteString(s, strings.ToUpper(sc.Text())+"\n")
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	r := bufio.NewReader(conn)
	for _, w := range []string{"ping", "second line"} {
		if _, err := io.WriteString(conn, w+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != strings.ToUpper(w)+"\n" {
			t.Fatalf("read %q, %v; want %q", got, err, strings.ToUpper(w))
		}
	}
	conn.Close()

	free, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := free.Addr().String()
	free.Close()
	bad := *c
	bad.Token = "wrong"
	for _, tc := range []struct {
		name, addr, want string
		c                *Client
	}{
		{"refused", refused, "refused", c},
		{"no port", "127.0.0.1", "want HOST:PORT", c},
		{"bad token", l.Addr().String(), "bad token", &bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Dial(ctx, tc.addr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dial(%s) = %v, want an error saying %q", tc.addr, err, tc.want)
			}
		})
	}
}

// TestHandshake: the agent's first stdin line is a fresh token, the ready
// line's address comes back, other lines are logged; an agent that ends
// before serving fails the handshake.
func TestHandshake(t *testing.T) {
	ctx := context.Background()
	inR, inW := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		tok, _ := bufio.NewReader(inR).ReadString('\n')
		io.WriteString(errW, "starting\n"+readyPrefix+" 127.0.0.1:4242\n")
		io.WriteString(errW, "later: "+strings.TrimSpace(tok)+"\n")
		errW.Close()
	}()
	var log lockedBuf
	addr, token, err := Handshake(ctx, inW, errR, &log, 5*time.Second)
	if err != nil || addr != "127.0.0.1:4242" || len(token) < 32 {
		t.Fatalf("Handshake = %q, %q, %v", addr, token, err)
	}
	time.Sleep(50 * time.Millisecond)
	if !strings.Contains(log.String(), "starting") {
		t.Errorf("log %q lacks the agent's other lines", log.String())
	}

	inR2, inW2 := io.Pipe()
	go io.Copy(io.Discard, inR2)
	errR2, errW2 := io.Pipe()
	errW2.Close()
	if _, _, err := Handshake(ctx, inW2, errR2, io.Discard, 5*time.Second); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("Handshake with an agent that ended = %v", err)
	}
}

// lockedBuf is a strings.Builder safe for the handshake's logging goroutine.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
