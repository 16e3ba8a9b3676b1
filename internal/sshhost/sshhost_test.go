package sshhost_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/sshhost"
	"github.com/nearnative/nearnative/internal/testbed"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// The test binary is the binary pushed to the test-bed hosts: run as
// `agent` there, it serves the agent as nearnative's hidden command does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == vmagent.StdioArg {
		if err := vmagent.ServeStdio(context.Background(), os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bed builds a two-host test bed of its own (a tag apart from the user's
// "tb") and returns its hosts file.
func bed(t *testing.T) *hostfile.File {
	t.Helper()
	if err := testbed.Check(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	cfg := testbed.Config{Dir: dir, Tag: fmt.Sprintf("t%02d", rand.IntN(100)), Hosts: 2}
	ctx := context.Background()
	file, err := testbed.Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testbed.Down(context.Background(), cfg); err != nil {
			t.Error(err)
		}
		for _, ns := range []string{"nntb-" + cfg.Tag + "1", "nntb-" + cfg.Tag + "2"} {
			if _, err := os.Stat("/run/netns/" + ns); err == nil {
				t.Errorf("namespace %s left behind", ns)
			}
		}
	})
	f, err := hostfile.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Testbed {
		t.Fatal("the test bed's hosts file does not say testbed: true")
	}
	return f
}

func opts(t *testing.T, f *hostfile.File) sshhost.Options {
	return sshhost.Options{KnownHosts: f.KnownHosts, RemoteBinary: filepath.Join(t.TempDir(), "nearnative"), Keepalive: 300 * time.Millisecond}
}

func TestHostKeys(t *testing.T) {
	f := bed(t)
	h := f.Hosts[0]
	good, err := os.ReadFile(f.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(string(good), "\n", 2)[0] // tb1's
	ctx := context.Background()

	t.Run("unknown key refused with the line to add", func(t *testing.T) {
		o := opts(t, f)
		o.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
		os.WriteFile(o.KnownHosts, nil, 0o644)
		_, err := sshhost.Connect(ctx, h, o)
		if !errors.Is(err, sshhost.ErrHostKey) {
			t.Fatalf("got %v, want a refused host key", err)
		}
		if !strings.Contains(err.Error(), "unknown host key") || !strings.Contains(err.Error(), "add this line to "+o.KnownHosts+": "+line) {
			t.Fatalf("%v\nwant the line %q", err, line)
		}
	})
	t.Run("changed key refused naming the line", func(t *testing.T) {
		o := opts(t, f)
		o.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
		// tb2's key under tb1's address: what a changed key looks like.
		other := strings.SplitN(strings.SplitN(string(good), "\n", 3)[1], " ", 2)[1]
		os.WriteFile(o.KnownHosts, []byte("# first\n"+h.Address+" "+other+"\n"), 0o644)
		_, err := sshhost.Connect(ctx, h, o)
		if !errors.Is(err, sshhost.ErrHostKey) || !strings.Contains(err.Error(), "host key CHANGED") || !strings.Contains(err.Error(), "replace line 2 of "+o.KnownHosts+" with: "+line) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("known key accepted, binary pushed once, clock read", func(t *testing.T) {
		o := opts(t, f)
		c, err := sshhost.Connect(ctx, h, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if off := c.Offset(); off.RTT <= 0 || off.Offset > time.Second || off.Offset < -time.Second {
			t.Fatalf("clock reading %+v on a host sharing this clock", off)
		}
		j, err := c.RunJob(ctx, []string{"sh", "-c", "cat; ip -4 -o addr show dev eth0"}, []byte("hello "))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(j.Stdout), "hello ") || !strings.Contains(string(j.Stdout), h.Address+"/24") {
			t.Fatalf("job ran elsewhere or lost its stdin: %q", j.Stdout)
		}
		var log strings.Builder
		o.Log = &log
		c2, err := sshhost.Connect(ctx, h, o)
		if err != nil {
			t.Fatal(err)
		}
		c2.Close()
		if strings.Contains(log.String(), "pushing") {
			t.Fatalf("pushed again though the checksum matches: %s", log.String())
		}
	})
}

// dropConn is a TCP connection the test can cut.
type dropConn struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *dropConn) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *dropConn) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}

// TestDroppedConnectionFailsTheJobNamingTheHost: a driver host whose SSH
// connection drops mid-trial fails the running job with its name, fast,
// and the agent there stops what it ran.
func TestDroppedConnectionFailsTheJobNamingTheHost(t *testing.T) {
	f := bed(t)
	h := f.Hosts[1]
	var d dropConn
	o := opts(t, f)
	o.Dial = d.dial
	ctx := context.Background()
	c, err := sshhost.Connect(ctx, h, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	marker := fmt.Sprintf("%d", 100000+rand.IntN(800000))
	// The connection is cut once the job runs there, so that the check
	// below that the agent killed it cannot pass for a job that never
	// started; it is cut after 10 s in any case, so that a job that never
	// shows fails the test rather than leaving RunJob waiting on a sleep
	// of days.
	started := make(chan time.Time, 1)
	go func() {
		defer close(started)
		defer d.cut()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if sleeping(marker) {
				started <- time.Now()
				return
			}
		}
	}()
	_, err = c.RunJob(ctx, []string{"sleep", marker}, nil)
	if err == nil {
		t.Fatal("the job survived its host's dropped connection")
	}
	start, ok := <-started
	if !ok {
		t.Fatalf("sleep %s never ran on %s: %v", marker, h.Name, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the drop was noticed after %v", took)
	}
	if !strings.Contains(err.Error(), "host "+h.Name) || !errors.Is(err, sshhost.ErrUnreachable) {
		t.Fatalf("error %q does not name host %s as dropped", err, h.Name)
	}
	// The agent saw its session end and killed the job.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !sleeping(marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep %s still runs on %s after the drop", marker, h.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sleeping(marker string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "sleep\x00"+marker) {
			return true
		}
	}
	return false
}
