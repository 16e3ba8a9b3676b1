package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// mainEnv makes the test binary run Main with the arguments in the
// variable (space-separated) and exit with its code, and signalsEnv print
// the stop signals it would handle.
const (
	mainEnv    = "NEARNATIVE_TEST_CLI_MAIN"
	signalsEnv = "NEARNATIVE_TEST_CLI_SIGNALS"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainEnv); ok {
		os.Exit(Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	if _, ok := os.LookupEnv(signalsEnv); ok {
		for _, s := range stopSignals() {
			os.Stdout.WriteString(s.String() + "\n")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGHUPIgnoredStaysIgnored: under nohup (SIGHUP inherited as ignored)
// nearnative does not handle SIGHUP, which would turn it back on.
func TestSIGHUPIgnoredStaysIgnored(t *testing.T) {
	for _, tt := range []struct {
		name  string
		shell string
		want  string
	}{
		{"default", `exec "$0" -test.run=^$`, "interrupt\nterminated\nhangup\n"},
		{"nohup", `trap '' HUP; exec "$0" -test.run=^$`, "interrupt\nterminated\n"},
		{"background job", `trap '' INT; exec "$0" -test.run=^$`, "terminated\nhangup\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A signal ignored when this test started stays ignored in the
			// shell and its child (a non-interactive shell cannot reset it).
			for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
				if signal.Ignored(s) && strings.Contains(tt.want, s.String()) {
					t.Skipf("%v is ignored by whoever started the tests (nohup, or a background job): the child cannot be given its default", s)
				}
			}
			cmd := exec.Command("sh", "-c", tt.shell, os.Args[0])
			cmd.Env = append(os.Environ(), signalsEnv+"=1")
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("handled %q, want %q", out, tt.want)
			}
		})
	}
}

// TestBrokenStdout: a reader that goes away (`nearnative ... | head`) does
// not kill nearnative with SIGPIPE: it stops and exits ExitBrokenPipe.
func TestBrokenStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before the first line
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainEnv+"=workloads")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exit: %v", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("killed by %v: SIGPIPE must not kill nearnative", ws.Signal())
	}
	if ee.ExitCode() != ExitBrokenPipe {
		t.Errorf("exit code %d, want %d; stderr:\n%s", ee.ExitCode(), ExitBrokenPipe, stderr.String())
	}
	if !strings.Contains(stderr.String(), "output closed (broken pipe)") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
}

func TestPipeGuard(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	calls := 0
	g := &pipeGuard{w: w, fired: &atomic.Bool{}, gone: func() { calls++ }}
	if n, err := g.Write([]byte("read\n")); err != nil || n != 5 {
		t.Fatalf("write while read: %d, %v", n, err)
	}
	r.Close()
	for i := 0; i < 3; i++ {
		if n, err := g.Write([]byte("dropped\n")); err != nil || n != 8 {
			t.Errorf("write to a closed pipe: %d, %v; want it dropped", n, err)
		}
	}
	if calls != 1 {
		t.Errorf("gone called %d times, want once", calls)
	}
}

// TestCommandsTakeTheMachine: doctor, image build and cluster up/down wait
// in line for the measuring lock as runs do.
func TestCommandsTakeTheMachine(t *testing.T) {
	t.Setenv(state.EnvLockDir, t.TempDir())
	t.Setenv(state.EnvHome, t.TempDir())
	holder := state.Holder{Run: runid.New(), Study: "redis", PID: os.Getpid(), Since: time.Now()}
	l, err := state.Home().AcquireMachine(context.Background(), holder, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for _, args := range [][]string{{"doctor", "--skip-vm"}, {"cluster", "down"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v while the machine is held: %v, want it to wait until its context ends", args, err)
		}
		want := "waiting: the machine is being measured by run " + string(holder.Run)
		if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), "is next in line") {
			t.Errorf("%v said %q, want %q and its place", args, errb.String(), want)
		}
	}
}

// TestBrokenStdoutAndStderr: stdout and stderr on one pipe whose reader is
// gone (`nearnative ... 2>&1 | head -1`): the line saying why it stops
// finds stderr broken too, and nearnative still exits ExitBrokenPipe (it
// once deadlocked there, the two streams waiting on one sync.Once).
func TestBrokenStdoutAndStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainEnv+"=workloads")
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	w.Close()
	if ctx.Err() != nil {
		t.Fatal("nearnative hung after its stdout and stderr pipe broke")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitBrokenPipe {
		t.Fatalf("exit: %v, want code %d", err, ExitBrokenPipe)
	}
}
