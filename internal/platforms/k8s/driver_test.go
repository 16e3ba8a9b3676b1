package k8s

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// TestMain lets this test binary be the agent a driver pod runs (the fake
// streams exec it here).
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

// localStreams are podStreams that run the pod's commands on this
// machine (the copy script and the copied binary, this test binary, as the
// agent), and forward with a TCP proxy of their own.
type localStreams struct {
	mu       sync.Mutex
	execs    []string
	forwards []net.Listener
}

func (s *localStreams) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s.mu.Lock()
	s.execs = append(s.execs, ns+"/"+pod+"/"+container+": "+strings.Join(argv, " "))
	s.mu.Unlock()
	if argv[0] != "sh" && argv[0] != driverBinary {
		return fmt.Errorf("unexpected exec %v", argv)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	return cmd.Run()
}

func (s *localStreams) Forward(ctx context.Context, ns, pod string, port int) (int, <-chan struct{}, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				t, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					c.Close()
					return
				}
				go func() { io.Copy(t, c); t.Close() }()
				io.Copy(c, t)
				c.Close()
			}()
		}
	}()
	s.mu.Lock()
	s.forwards = append(s.forwards, l)
	s.mu.Unlock()
	return l.Addr().(*net.TCPAddr).Port, done, func() { l.Close() }, nil
}

// TestDriverPod: place: {driver: node-b} makes a driver pod on node-b in
// the platform's namespace, copies this binary into it, and the run's
// client host is that pod: jobs run there through its agent, connections
// open from there, its clock is read; Close ends the agent and the pod
// goes with the namespace.
func TestDriverPod(t *testing.T) {
	f := threeNodes(t)
	streams := &localStreams{}
	f.conn.streams = streams
	old := driverBinary
	driverBinary = filepath.Join(t.TempDir(), "var", "tmp", "nearnative")
	defer func() { driverBinary = old }()
	p := f.platform(t, Pod, placeOpt(map[string]string{platform.Driver: "node-b", "redis": "node-c"}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.(platform.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	h, err := p.(platform.ClientMaker).MakeClient(ctx)
	if err != nil {
		t.Fatalf("MakeClient: %v", err)
	}
	defer p.(platform.Closer).Close()
	if h.Kind() != host.Pod || h.Describe() != "driver pod on node node-b" {
		t.Errorf("client host %s %q", h.Kind(), h.Describe())
	}
	ns := NamespaceName(testRun, Pod)
	po, err := f.cs.CoreV1().Pods(ns).Get(ctx, driverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if po.Spec.NodeName != "node-b" || po.Labels[LabelRun] != string(testRun) || len(po.Spec.Containers[0].Resources.Requests) != 0 {
		t.Errorf("driver pod on %s, labels %v, requests %v", po.Spec.NodeName, po.Labels, po.Spec.Containers[0].Resources.Requests)
	}
	self, _ := os.Executable()
	if a, b := fileSum(t, self), fileSum(t, driverBinary); a != b {
		t.Errorf("the pod's binary differs from this one (sha256 %s, want %s)", b, a)
	}

	r, ok := h.(host.Remote)
	if !ok || len(r.Drivers()) != 1 {
		t.Fatalf("client host %T is not remote with one driver", h)
	}
	job, err := r.Drivers()[0].RunJob(ctx, []string{"sh", "-c", "cat; echo err >&2; exit 3"}, []byte("in"))
	if err != nil || string(job.Stdout) != "in" || strings.TrimSpace(string(job.Stderr)) != "err" || job.ExitCode != 3 {
		t.Errorf("RunJob = %+v, %v", job, err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			io.WriteString(c, "hello from the server\n")
			c.Close()
		}
	}()
	c, err := h.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != "hello from the server\n" {
		t.Errorf("read %q through the pod's agent", line)
	}
	d := h.(*driverPod)
	if d.Dropped() != nil || len(d.CPUs()) == 0 || d.offset.RTT <= 0 {
		t.Errorf("dropped %v, CPUs %v, clock %+v", d.Dropped(), d.CPUs(), d.offset)
	}

	// The port-forward breaks: the next call makes it again.
	streams.mu.Lock()
	streams.forwards[0].Close()
	streams.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	if job, err := r.Drivers()[0].RunJob(ctx, []string{"true"}, nil); err != nil || job.ExitCode != 0 {
		t.Errorf("RunJob after the forward broke: %+v, %v", job, err)
	}
	if n := len(streams.forwards); n != 2 {
		t.Errorf("%d port-forwards made, want 2 (one again after the break)", n)
	}

	if err := p.(platform.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if d.Dropped() == nil {
		t.Error("the agent still runs after Close")
	}
	if _, err := f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s left", ns)
	}
}

// TestDriverPodRefused: a driver placed on a node the cluster lacks is
// refused by Check, before any pod is made; the driver alone on a node
// asks nothing of its CPU manager; without streams the pod cannot run.
func TestDriverPodRefused(t *testing.T) {
	f := threeNodes(t)
	p := f.platform(t, Pod, placeOpt(map[string]string{platform.Driver: "node-x"}))
	err := p.(platform.Checker).Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "place: driver on node node-x: the cluster has no such node") {
		t.Fatalf("Check = %v", err)
	}

	f.nodeCPUManager["node-b"] = "none"
	g := f.platform(t, Guaranteed, placeOpt(map[string]string{platform.Driver: "node-b"}))
	if err := g.(platform.Checker).Check(context.Background()); err != nil {
		t.Errorf("k8s-guaranteed with its driver on a node without the static CPU manager: %v", err)
	}
	_, err = g.(platform.ClientMaker).MakeClient(context.Background())
	if !errors.Is(err, platform.ErrUnavailable) {
		t.Errorf("MakeClient without streams = %v, want unavailable", err)
	}
	g.(platform.Closer).Close()

	if _, err := New(HostNet, HostNet, platform.Env{Run: testRun, Image: "x"}, f.conn, placeOpt(map[string]string{platform.Driver: "node-b"})); err == nil {
		t.Error("k8s-hostnet took a driver pod")
	}
}

// fileSum is the sha256 of a file's content.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
