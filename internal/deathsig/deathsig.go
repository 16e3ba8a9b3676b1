// Package deathsig starts child processes that the kernel kills when
// nearnative dies, even by SIGKILL: native servers, load generators and QEMU
// guests then never outlive a crashed run.
//
// The parent-death signal (prctl PR_SET_PDEATHSIG) fires when the *thread*
// that started the child exits, not the process. The Go runtime ends a
// thread when a goroutine locked to it returns without unlocking (code that
// switches network namespaces does that on purpose), and any thread may have
// started a child. So Start starts the child from a goroutine locked to its
// thread and keeps that goroutine, and so the thread, until the child has
// been waited for.
//
// The signal is also cleared when the child changes its user or group
// (setuid, setgid): a child that drops privileges with setpriv must restore
// it, which Setpriv's arguments do.
package deathsig

import (
	"context"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// Proc is a started child.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd with SIGKILL as its parent-death signal and waits for it
// in the background: Done is closed and Wait returns once it has exited.
// The caller must not call cmd.Wait itself. cmd.SysProcAttr is kept (and
// made when nil).
func Start(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Run starts cmd as Start does and waits for it; when ctx ends first it
// kills cmd's process group (cmd must lead one: SysProcAttr.Setpgid), waits
// for cmd and returns ctx.Err(). Otherwise it returns what cmd.Wait
// returned. started is false when cmd could not start (err says why).
func Run(ctx context.Context, cmd *exec.Cmd) (started bool, err error) {
	p, err := Start(cmd)
	if err != nil {
		return false, err
	}
	select {
	case <-p.done:
		return true, p.err
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return true, ctx.Err()
	}
}

// Done is closed when the child has exited and been waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the child to exit and returns what cmd.Wait returned.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Err is what cmd.Wait returned; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Setpriv returns the setpriv(1) command that runs argv as uid and gid
// (with their supplementary groups) and restores the parent-death signal
// that changing the user clears.
func Setpriv(uid, gid int, argv ...string) []string {
	return append([]string{"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--init-groups",
		"--pdeathsig", "keep", "--"}, argv...)
}
