package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nearnative/nearnative/internal/state"
)

// holdMachine takes the machine-wide measuring lock for a command that
// would disturb a run's measurements (a QEMU boot probe, an image build,
// a cluster coming up or down), waiting in line behind runs and saying so
// on stderr. Ctrl-C stops the wait.
func (a *app) holdMachine(ctx context.Context, command string) (release func(), err error) {
	me := state.Holder{Command: command, PID: os.Getpid(), Since: time.Now()}
	l, err := a.dir.AcquireMachine(ctx, me, true, func(p state.Place) {
		fmt.Fprintf(a.stderr, "waiting: the machine is being measured by %s; `nearnative %s` is %s (Ctrl-C stops waiting)\n", p.Holder, command, p)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the measuring lock: %w", err)
	}
	return func() { l.Release() }, nil
}
