package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// buildEnv is the environment of every build command: no questions asked,
// no locale warnings, a PATH that works inside the chroot.
var buildEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"DEBIAN_FRONTEND=noninteractive",
	"DEBCONF_NONINTERACTIVE_SEEN=true",
	"LC_ALL=C",
	"HOME=/root",
}

// command prepares a build command that runs in its own process group and its
// own private mount namespace: cancelling ctx kills the whole group, and the
// mounts debootstrap or apt make (/proc, /sys) vanish with the namespace even
// if the process is killed before it can unmount them.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = buildEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:      true,
		Unshareflags: syscall.CLONE_NEWNS, // Go makes / private (MS_REC|MS_PRIVATE) first
		Pdeathsig:    syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// killGroup kills the process group of a started command; a group that is
// already gone is not an error.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// run runs a build command, streaming its output to log line by line with a
// prefix. The error includes the last lines of output.
func run(ctx context.Context, log io.Writer, prefix, name string, args ...string) error {
	cmd := command(ctx, name, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	tail := &tailLines{max: 15}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintf(log, "%s%s\n", prefix, sc.Text())
			tail.add(sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		killGroup(cmd) // stragglers that outlived the leader
	}
	pw.Close()
	<-done
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(shortArgs(args), " "), err, tail)
	}
	return nil
}

// shortArgs abbreviates long arguments (the --include list) for messages.
func shortArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 60 {
			a = a[:57] + "..."
		}
		out[i] = a
	}
	return out
}

// tailLines keeps the last lines of a command's output for error messages.
type tailLines struct {
	max   int
	lines []string
}

func (t *tailLines) add(s string) {
	t.lines = append(t.lines, s)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailLines) String() string { return strings.Join(t.lines, "\n") }
