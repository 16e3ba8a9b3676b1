package k8s

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"

	"github.com/nearnative/nearnative/internal/tailbuf"
)

// podStreams reach into a running pod through the API server, as kubectl
// exec and kubectl port-forward do: no port of the pod or the node is
// opened to any network. Tests replace them with local processes.
type podStreams interface {
	// Exec runs argv in the pod's container with the given stdio until
	// it ends or ctx does.
	Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error
	// Forward listens on this machine's 127.0.0.1 (a port the kernel
	// picks, returned) and carries each connection to port on the pod's
	// own loopback, until stop is called or the forward breaks (done is
	// closed then).
	Forward(ctx context.Context, ns, pod string, port int) (local int, done <-chan struct{}, stop func(), err error)
}

// apiStreams are podStreams of a real cluster.
type apiStreams struct {
	rc *rest.Config
	cs kubernetes.Interface
}

// streaming is rc without the client timeout, which would cut a stream
// that lasts the run.
func streaming(rc *rest.Config) *rest.Config {
	c := rest.CopyConfig(rc)
	c.Timeout = 0
	return c
}

// Exec implements podStreams over SPDY (the pods/exec subresource).
func (s apiStreams) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := s.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv,
			Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(streaming(s.rc), http.MethodPost, req.URL())
	if err != nil {
		return fmt.Errorf("exec into pod %s/%s: %w", ns, pod, err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// Forward implements podStreams over SPDY (the pods/portforward
// subresource).
func (s apiStreams) Forward(ctx context.Context, ns, pod string, port int) (int, <-chan struct{}, func(), error) {
	rt, up, err := spdy.RoundTripperFor(streaming(s.rc))
	if err != nil {
		return 0, nil, nil, err
	}
	u := s.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	errOut := &tailbuf.Buffer{Max: 2048}
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stopCh, readyCh, io.Discard, errOut)
	if err != nil {
		return 0, nil, nil, err
	}
	var once sync.Once
	stop := func() { once.Do(func() { close(stopCh) }) }
	done := make(chan struct{})
	var ferr error
	go func() {
		ferr = pf.ForwardPorts()
		close(done)
	}()
	select {
	case <-readyCh:
	case <-done:
		return 0, nil, nil, fmt.Errorf("port-forward to pod %s/%s port %d: %v %s", ns, pod, port, ferr, errOut.String())
	case <-ctx.Done():
		stop()
		return 0, nil, nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		stop()
		return 0, nil, nil, fmt.Errorf("port-forward to pod %s/%s port %d: no local port (%v)", ns, pod, port, err)
	}
	return int(ports[0].Local), done, stop, nil
}
