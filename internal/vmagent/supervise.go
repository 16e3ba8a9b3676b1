package vmagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Supervisor mode: the nearnative binary, bind-mounted into a container at
// SupervisorPath and started as the container's command, serves the agent
// API on the address in ListenEnv with the token in TokenEnv.
const (
	SupervisorPath = "/.nearnative/supervise"
	TokenEnv       = "NEARNATIVE_AGENT_TOKEN"
	ListenEnv      = "NEARNATIVE_AGENT_LISTEN"
)

// Entry runs the agent when this process is one: the guest's PID 1 (/init)
// or a container's supervisor. It returns the exit code and true then, and
// false for an ordinary nearnative process; main (and test binaries that
// double as agents) call it first.
func Entry() (int, bool) {
	switch {
	case IsInit():
		return Main(), true
	case os.Args[0] == SupervisorPath:
		if err := Supervise(context.Background(), os.Getenv(ListenEnv)); err != nil {
			log("supervisor: %v", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Supervise runs the agent's API inside a container: the container-per-
// instance layout starts several servers in one container through it, as the
// vm platform does in a guest, and the lxc platform's containers run it as
// their init. It listens on addr until SIGTERM or SIGINT,
// then stops every process it started. It does not power anything off.
func Supervise(ctx context.Context, addr string) error {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return fmt.Errorf("no %s in the environment", TokenEnv)
	}
	os.Unsetenv(TokenEnv) // not inherited by the servers
	if os.Getpid() == 1 {
		// The init of an LXC container (package platforms/lxc), as the
		// guest's agent is: orphans are reaped here.
		go reapOrphans()
	}
	if err := os.MkdirAll(LogDir, 0o755); err != nil {
		return err
	}
	a := newAgent(token)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.handler(func() {})}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		a.killAll()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	fmt.Fprintln(os.Stderr, readyPrefix, l.Addr())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
