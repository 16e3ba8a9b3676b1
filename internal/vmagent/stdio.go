package vmagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// StdioArg is the hidden nearnative command that serves the agent on a
// machine the run reaches through a stream (an SSH session on a remote
// host, an exec into a driver pod): it reads the API token from its first
// line of stdin, serves on 127.0.0.1 (port chosen by the kernel, announced
// on stderr) and stops everything it started when stdin ends.
const StdioArg = "agent"

// readyPrefix starts the line on which an agent announces where it serves.
const readyPrefix = "NEARNATIVE-AGENT-READY"

// ServeStdio is the body of StdioArg.
func ServeStdio(ctx context.Context, stdin io.Reader) error {
	r := bufio.NewReader(stdin)
	token, err := r.ReadString('\n')
	token = strings.TrimSpace(token)
	if err != nil || token == "" {
		return errors.New("agent: no token on the first line of stdin")
	}
	os.Setenv(TokenEnv, token)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, r) // until the stream ends
		cancel()
	}()
	return Supervise(ctx, "127.0.0.1:0")
}

// Handshake hands an agent just started as StdioArg (its stdin is w, its
// stderr r) a fresh token, and waits up to timeout for the address it
// serves on. The agent's other stderr lines go to logTo, also after the
// handshake (for the errors of a later failure).
func Handshake(ctx context.Context, w io.Writer, r io.Reader, logTo io.Writer, timeout time.Duration) (addr, token string, err error) {
	token = NewToken()
	// The write may wait on the stream's set-up (a pipe into an exec that
	// is still being negotiated): it is bounded by ctx and timeout too.
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(w, token+"\n")
		wrote <- err
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, readyPrefix+" "); ok && !sent {
				ready <- strings.TrimSpace(rest)
				sent = true
				continue
			}
			logTo.Write([]byte(line + "\n"))
		}
		if !sent {
			close(ready)
		}
	}()
	deadline := time.After(timeout)
	for {
		select {
		case err := <-wrote:
			if err != nil {
				return "", "", fmt.Errorf("handing the agent its token: %w", err)
			}
		case a, ok := <-ready:
			if !ok {
				return "", "", errors.New("the agent exited before serving")
			}
			return a, token, nil
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-deadline:
			return "", "", fmt.Errorf("the agent did not start within %v", timeout)
		}
	}
}

// FreePorts asks the machine of a stdio agent for n free TCP ports on
// addr there, running its nearnative binary self as `agent --free-ports`
// (chosen there as platform.FreePorts chooses them here).
func (c *Client) FreePorts(ctx context.Context, self, addr string, n int) ([]int, error) {
	if n == 0 {
		return nil, nil
	}
	out, err := c.Output(ctx, Proc{Name: "free-ports", Argv: []string{self, StdioArg, "--free-ports", strconv.Itoa(n), "--on", addr}, Dir: "/"})
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(out))
	if len(f) != n {
		return nil, fmt.Errorf("%d ports in the answer %q, want %d", len(f), out, n)
	}
	ports := make([]int, n)
	for i := range f {
		if ports[i], err = strconv.Atoi(f[i]); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// Output runs p as a job to completion and returns its stdout; a job that
// could not run, or exited non-zero, is an error with its output.
func (c *Client) Output(ctx context.Context, p Proc) ([]byte, error) {
	r, err := c.Run(ctx, p)
	switch {
	case err != nil:
		return nil, err
	case r.Error != "":
		return r.Stdout, errors.New(r.Error)
	case r.ExitCode != 0:
		return r.Stdout, fmt.Errorf("%s exited %d: %s", strings.Join(p.Argv, " "), r.ExitCode, strings.TrimSpace(string(r.Stdout)+" "+string(r.Stderr)))
	}
	return r.Stdout, nil
}
