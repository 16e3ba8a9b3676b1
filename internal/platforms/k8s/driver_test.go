package k8s

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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
// machine: the binary copy is read and checked, the agent is this test
// binary, and a port-forward is the port itself.
type localStreams struct {
	mu     sync.Mutex
	pushed int64 // bytes of the binary the pod received
	execs  []string
}

func (s *localStreams) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s.mu.Lock()
	s.execs = append(s.execs, ns+"/"+pod+"/"+container+": "+strings.Join(argv, " "))
	s.mu.Unlock()
	switch {
	case argv[0] == "sh": // the binary's copy, gzip'd
		zr, err := gzip.NewReader(stdin)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, zr)
		s.mu.Lock()
		s.pushed = n
		s.mu.Unlock()
		return err
	case argv[0] == driverBinary:
		cmd := exec.CommandContext(ctx, os.Args[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		return cmd.Run()
	}
	return fmt.Errorf("unexpected exec %v", argv)
}

func (s *localStreams) Forward(ns, pod string, port int) (int, func(), error) {
	return port, func() {}, nil
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
	if st, _ := os.Stat(self); streams.pushed != st.Size() {
		t.Errorf("pushed %d bytes of the binary, it has %d", streams.pushed, st.Size())
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
