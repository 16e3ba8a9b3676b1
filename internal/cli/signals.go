package cli

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// ExitBrokenPipe is the exit code when the reader of stdout or stderr went
// away (`nearnative run ... | head`): the run stopped as if interrupted,
// after tearing down what it made. It is the code a shell shows for a
// process killed by SIGPIPE.
const ExitBrokenPipe = 128 + int(syscall.SIGPIPE)

// stopSignals are the signals that stop a command gracefully: SIGINT,
// SIGTERM and SIGHUP, less those this process inherited as ignored
// (`nohup` ignores SIGHUP, a shell's background job SIGINT). signal.Notify
// would turn an ignored signal back on, so that logging out would stop a
// run started with nohup.
func stopSignals() []os.Signal {
	var out []os.Signal
	for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if s != syscall.SIGTERM && signal.Ignored(s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// ignoreSIGPIPE keeps a write to a closed pipe or socket from killing the
// process: Go kills a program that writes to a broken stdout or stderr
// unless it is notified of SIGPIPE, and a run killed that way (its log's
// tee stopped by Ctrl-C first) would leave its servers behind. Writes then
// fail with EPIPE, which the output writers turn into a graceful stop.
// Notify, not Ignore: an ignored signal would stay ignored in the servers
// and tools nearnative starts.
func ignoreSIGPIPE() (stop func()) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-c:
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(c)
		close(done)
	}
}

// pipeGuard is stdout or stderr: once a write finds the reader gone
// (EPIPE), it calls gone once and drops every later write, so that the
// command stops gracefully instead of failing on its next line. stdout's
// and stderr's guards share fired: gone runs once for both, and a write
// gone makes to the other stream, which may be the same broken pipe
// (`2>&1 | head`), drops its line instead of waiting on itself (with a
// shared sync.Once it deadlocked there).
type pipeGuard struct {
	w     io.Writer
	fired *atomic.Bool
	gone  func()
	mu    sync.Mutex
	dead  bool
}

func (p *pipeGuard) Write(b []byte) (int, error) {
	p.mu.Lock()
	dead := p.dead
	p.mu.Unlock()
	if dead {
		return len(b), nil
	}
	n, err := p.w.Write(b)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		p.mu.Lock()
		p.dead = true
		p.mu.Unlock()
		if p.fired.CompareAndSwap(false, true) {
			p.gone()
		}
		return len(b), nil
	}
	return n, err
}
