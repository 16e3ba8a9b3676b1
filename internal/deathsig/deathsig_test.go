package deathsig

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentEnv turns the test binary into a parent that starts one child with
// Start (as the given user when set), prints its PID and waits to be killed.
const parentEnv = "NEARNATIVE_TEST_DEATHSIG_PARENT"

func TestMain(m *testing.M) {
	if as, ok := os.LookupEnv(parentEnv); ok {
		argv := []string{"sleep", "300"}
		if as != "" {
			u, err := user.Lookup(as)
			if err != nil {
				fmt.Println(err)
				os.Exit(2)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			argv = Setpriv(uid, gid, argv...)
		}
		p, err := Start(exec.Command(argv[0], argv[1:]...))
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		// Threads come and go: a goroutine that exits locked ends its
		// thread, which must not be the one the child depends on.
		for i := 0; i < 20; i++ {
			done := make(chan bool)
			go func() { runtime.LockOSThread(); close(done) }()
			<-done
		}
		fmt.Println(p.cmd.Process.Pid)
		p.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestChildDiesWithParent(t *testing.T) {
	users := []string{""}
	if os.Geteuid() == 0 {
		users = append(users, "nobody") // setpriv clears the signal; --pdeathsig keep restores it
	}
	for _, as := range users {
		t.Run("as "+as, func(t *testing.T) {
			parent := exec.Command(os.Args[0], "-test.run=^$")
			parent.Env = append(os.Environ(), parentEnv+"="+as)
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("parent: %v", err)
			}
			child, err := strconv.Atoi(line[:len(line)-1])
			if err != nil {
				t.Fatalf("parent said %q", line)
			}
			// The child must outlive the threads that came and went.
			time.Sleep(200 * time.Millisecond)
			if syscall.Kill(child, 0) != nil {
				t.Fatal("the child died with its parent still alive")
			}
			parent.Process.Kill()
			parent.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for syscall.Kill(child, 0) == nil {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); len(b) > 0 && zombie(string(b)) {
					break // killed; its new parent (init) reaps it
				}
				if time.Now().After(deadline) {
					syscall.Kill(child, syscall.SIGKILL)
					t.Fatalf("child %d still alive 5 s after its parent was killed", child)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func zombie(stat string) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}

func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/binary")); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	p, err := Start(exec.Command("false"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Wait() == nil || p.Err() == nil {
		t.Error("false exited without an error")
	}
}

// TestRun: Run returns the command's own outcome, and when ctx ends first
// it kills the command's whole process group, a background child included.
func TestRun(t *testing.T) {
	if started, err := Run(context.Background(), exec.Command("/nonexistent/binary")); started || err == nil {
		t.Errorf("a missing binary: started %v, error %v", started, err)
	}
	var exit *exec.ExitError
	if started, err := Run(context.Background(), exec.Command("false")); !started || !errors.As(err, &exit) {
		t.Errorf("false: started %v, error %v, want its exit status", started, err)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("sh", "-c", `sleep 300 & echo $! > "$1"; wait`, "sh", pidFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := make(chan int, 1)
	go func() {
		defer cancel()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(pidFile)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				bg <- pid
				return
			}
		}
		bg <- 0
	}()
	started, err := Run(ctx, cmd)
	if !started || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: started %v, error %v, want context.Canceled", started, err)
	}
	child := <-bg
	if child == 0 {
		t.Fatal("the shell never wrote its background child's pid")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(child, 0) == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); len(b) > 0 && zombie(string(b)) {
			break // killed; its new parent reaps it
		}
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("background child %d still alive 5 s after Run returned", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
