package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/platforms/k8s"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/topology"
)

// liveConn connects to the local cluster, or skips: the cluster tests run
// only when `nearnative cluster up` (make cluster) has brought one up.
func liveConn(t *testing.T) (*k8s.Conn, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local Kubernetes cluster")
	}
	local := cluster.DefaultConfig(state.Home())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if st := local.Status(ctx); !st.Up() {
		t.Skipf("the local Kubernetes cluster is not up (make cluster): %v", st.NodeReady)
	}
	eng, ref := testenv.WorkloadImage(t)
	conn, err := k8s.Connect(local.Kubeconfig(), local, func(ctx context.Context, r string) (io.ReadCloser, error) {
		return eng.API().ImageSave(ctx, []string{r})
	})
	if err != nil {
		t.Fatal(err)
	}
	return conn, ref
}

func redisSpec() platform.Spec {
	return platform.Spec{Name: "redis", Ports: []string{"redis"}, Command: func(l platform.Listen) []string {
		return []string{"redis-server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("redis")),
			"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", l.Dir}
	}}
}

// noNamespaces fails the test if run left a namespace behind.
func noNamespaces(t *testing.T, conn *k8s.Conn, run runid.ID) {
	t.Helper()
	l, err := conn.Client().CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelRun + "=" + string(run)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range l.Items {
		t.Errorf("namespace %s left behind", ns.Name)
		k8s.DeleteNamespace(context.Background(), conn.Client(), ns.Name)
	}
}

// TestRedisOnEachKind starts a real redis-server on every k8s platform,
// talks RESP to it through the platform's path and reads its CPU time.
func TestRedisOnEachKind(t *testing.T) {
	conn, ref := liveConn(t)
	run := runid.New()
	defer noNamespaces(t, conn, run)
	for _, kind := range k8s.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			p, err := k8s.New(kind, kind, platform.Env{Run: run, Image: ref, LogDir: t.TempDir(), Log: testenv.Log{T: t}}, conn, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.(platform.Closer).Close()
			if err := p.(platform.Checker).Check(ctx); err != nil {
				t.Fatalf("Check: %v", err)
			}
			start := time.Now()
			srv, err := p.Start(ctx, "it-"+kind, redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(ctx)
			addr := srv.Addr("redis")
			if err := redisproto.WaitReady(ctx, addr, 30*time.Second); err != nil {
				t.Fatalf("redis at %s: %v (%s)", addr, err, srv.Describe())
			}
			t.Logf("%s: ready %v after Start began; %s", kind, time.Since(start).Round(time.Millisecond), srv.Describe())
			before, err := srv.(platform.CPUReporter).CPUTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2000; i++ {
				fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
			}
			buf := make([]byte, 5*2000)
			n := 0
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			for n < len(buf) {
				m, err := c.Read(buf[n:])
				if err != nil {
					t.Fatalf("reading replies: %v", err)
				}
				n += m
			}
			c.Close()
			if !strings.HasPrefix(string(buf), "+OK\r\n") {
				t.Fatalf("reply %q", buf[:10])
			}
			after, err := srv.(platform.CPUReporter).CPUTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after <= before {
				t.Errorf("server CPU time did not grow over 2000 SETs: %v -> %v", before, after)
			}
			d := srv.Describe()
			for _, want := range []string{"Kubernetes " + cluster.KubernetesVersion, "kube-proxy iptables", "CNI bridge"} {
				if !strings.Contains(d, want) {
					t.Errorf("Describe lacks %q: %s", want, d)
				}
			}
			if kind == k8s.Guaranteed && (!strings.Contains(d, "QoS Guaranteed") || !strings.Contains(d, "exclusive CPUs")) {
				t.Errorf("guaranteed pod: %s", d)
			}
			if err := srv.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHAProxyInFrontOfTwoRedis deploys a topology on the real cluster: the
// load balancer reaches its backends by pod IP or through their Services.
func TestHAProxyInFrontOfTwoRedis(t *testing.T) {
	conn, ref := liveConn(t)
	run := runid.New()
	defer noNamespaces(t, conn, run)
	for _, kind := range []string{k8s.Pod, k8s.Service} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			p, err := k8s.New(kind, kind, platform.Env{Run: run, Image: ref, LogDir: t.TempDir()}, conn, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.(platform.Closer).Close()
			top := topology.Topology{Roles: []topology.Role{
				{Name: "redis", Count: 2, Ports: []string{"redis"},
					Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
					Spec: func(topology.ServerID, topology.Peers) (platform.Spec, error) {
						s := redisSpec()
						return platform.Spec{Ports: s.Ports, Command: s.Command}, nil
					}},
				{Name: "lb", Ports: []string{"lb"}, After: []string{"redis"}, Entry: true,
					Ready: func(ctx context.Context, addr string) error { return redisproto.Ping(ctx, addr) },
					Spec: func(_ topology.ServerID, peers topology.Peers) (platform.Spec, error) {
						backends := peers.All("redis", "redis")
						return platform.Spec{Ports: []string{"lb"},
							Command: func(l platform.Listen) []string { return []string{"haproxy", "-db", "-f", l.Dir + "/haproxy.cfg"} },
							Render: func(l platform.Listen) []platform.File {
								var b strings.Builder
								b.WriteString("global\n  maxconn 4096\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n")
								fmt.Fprintf(&b, "frontend fe\n  bind %s\n  default_backend redis\nbackend redis\n  balance roundrobin\n", net.JoinHostPort(l.Host, strconv.Itoa(l.Port("lb"))))
								for i, a := range backends {
									fmt.Fprintf(&b, "  server r%d %s\n", i, a)
								}
								return []platform.File{{Path: "haproxy.cfg", Content: []byte(b.String())}}
							}}, nil
					}},
			}}
			d, err := deploy.Deploy(ctx, p, "it-lb", top, deploy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Stop(ctx)
			entry := d.Entries("lb", "lb")[0]
			for i := 0; i < 4; i++ {
				if err := redisproto.Ping(ctx, entry); err != nil {
					t.Fatalf("PING through the lb at %s: %v", entry, err)
				}
			}
			for _, line := range d.Where() {
				t.Log(line)
			}
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestIperf3ThroughNewService runs iperf3 through the ClusterIP of a Service
// as soon as Start returns, as the tcp-stream workload does (its client is
// its own readiness probe). Before Start waited for the EndpointSlice and
// kube-proxy's rule, a client that connected while the rules arrived stalled
// after about 207 KB and was cut off by its timeout; every attempt here must
// carry real traffic. Each attempt gets a fresh pod and Service.
func TestIperf3ThroughNewService(t *testing.T) {
	conn, ref := liveConn(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 on the host")
	}
	run := runid.New()
	defer noNamespaces(t, conn, run)
	p, err := k8s.New(k8s.Service, k8s.Service, platform.Env{Run: run, Image: ref, LogDir: t.TempDir(), Log: testenv.Log{T: t}}, conn, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.(platform.Closer).Close()
	spec := platform.Spec{Name: "iperf3", Ports: []string{"iperf3"}, Command: func(l platform.Listen) []string {
		return []string{"iperf3", "--server", "--bind", l.Host, "--port", strconv.Itoa(l.Port("iperf3"))}
	}}
	// With the wait taken out, 1 of 4 and then 3 of 6 attempts stalled.
	for i := 0; i < 6; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		srv, err := p.Start(ctx, fmt.Sprintf("it-iperf3-%d", i), spec)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(srv.Addr("iperf3"))
		var out []byte
		for attempt := 0; ; attempt++ {
			// A stalled test would run until iperf3's own idle timeouts
			// (about 40 s): cut it off well before.
			actx, acancel := context.WithTimeout(ctx, 15*time.Second)
			out, err = exec.CommandContext(actx, "iperf3", "--client", host, "--port", port, "--time", "1", "--json").Output()
			acancel()
			// iperf3 3.12 may exit 0 with "unable to connect" in its JSON.
			if !strings.Contains(string(out), "unable to connect") || attempt == 20 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		var rep struct {
			End struct {
				SumReceived struct {
					Bytes float64 `json:"bytes"`
				} `json:"sum_received"`
			} `json:"end"`
			Error string `json:"error"`
		}
		jerr := json.Unmarshal(out, &rep)
		if err != nil || jerr != nil || rep.Error != "" || rep.End.SumReceived.Bytes < 10e6 {
			t.Errorf("attempt %d to %s: iperf3 %v, JSON %v, error %q, %.0f bytes received in 1 s (a stalled client is killed before it reports)",
				i, srv.Addr("iperf3"), err, jerr, rep.Error, rep.End.SumReceived.Bytes)
		} else {
			t.Logf("attempt %d: %.2f GB through %s", i, rep.End.SumReceived.Bytes/1e9, srv.Describe())
		}
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
		cancel()
	}
}

// TestClientHostOnEachKind is the k8s client-host test: every k8s platform
// is reached from a client in a network namespace of its own, routed
// through this machine to the pod IP, the ClusterIP or the node port, and
// to a hostNetwork pod on the client link's host side.
func TestClientHostOnEachKind(t *testing.T) {
	conn, ref := liveConn(t)
	if err := host.Check(); err != nil {
		t.Skip(err)
	}
	run := runid.New()
	defer noNamespaces(t, conn, run)
	c, err := host.NewNS(context.Background(), run, host.Setting{Client: host.SettingNetns})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, kind := range k8s.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			env := platform.Env{Run: run, Image: ref, LogDir: t.TempDir(), Log: testenv.Log{T: t}, Client: c}
			p, err := k8s.New(kind, kind, env, conn, platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.(platform.Closer).Close()
			if err := p.(platform.Checker).Check(ctx); err != nil {
				t.Fatalf("Check: %v", err)
			}
			srv, err := p.Start(ctx, "ch-"+kind, redisSpec())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(ctx)
			addr := srv.Addr("redis")
			if err := redisproto.WaitReady(ctx, addr, 30*time.Second); err != nil {
				t.Fatalf("redis at %s: %v (%s)", addr, err, srv.Describe())
			}
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			defer dcancel()
			cc, err := c.DialContext(dctx, "tcp", addr)
			if err != nil {
				t.Fatalf("from the client host to %s: %v (%s)", addr, err, srv.Describe())
			}
			defer cc.Close()
			cc.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(cc, "PING\r\n")
			b := make([]byte, 7)
			if _, err := io.ReadFull(cc, b); err != nil || string(b) != "+PONG\r\n" {
				t.Fatalf("PING %s from the client host: %q %v", addr, b, err)
			}
		})
	}
}

// TestDriverPodLive: with the driver placed on the node, the platform makes
// a driver pod there from the workload image, with this binary copied in
// and its agent reached through a port-forward; redis-benchmark runs in
// it against a Redis pod, a connection opened from it reaches the pod,
// and Close leaves no namespace.
func TestDriverPodLive(t *testing.T) {
	conn, ref := liveConn(t)
	run := runid.New()
	defer noNamespaces(t, conn, run)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := conn.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := k8s.New(k8s.Pod, "k8s-pod-drv", platform.Env{Run: run, Image: ref, LogDir: t.TempDir(), Log: testenv.Log{T: t}}, conn,
		platform.Options{Place: platform.FormatPlace(map[string]string{platform.Driver: f.Node})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.(platform.Closer).Close()
	if err := p.(platform.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	start := time.Now()
	h, err := p.(platform.ClientMaker).MakeClient(ctx)
	if err != nil {
		t.Fatalf("MakeClient: %v", err)
	}
	t.Logf("driver pod ready in %v: %s", time.Since(start).Round(time.Millisecond), h.Detail())
	srv, err := p.Start(ctx, "it-drv", redisSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	addr := srv.Addr("redis")
	if err := redisproto.WaitReadyDial(ctx, h.DialContext, addr, 30*time.Second); err != nil {
		t.Fatalf("redis at %s from the driver pod: %v", addr, err)
	}
	hostPart, port, _ := net.SplitHostPort(addr)
	job, err := h.(host.Remote).Drivers()[0].RunJob(ctx, []string{"redis-benchmark", "-h", hostPart, "-p", port, "-t", "set", "-n", "2000", "-q"}, nil)
	if err != nil || job.ExitCode != 0 || !strings.Contains(string(job.Stdout), "SET") {
		t.Fatalf("redis-benchmark in the driver pod: %+v, %v", job, err)
	}
	if job.CPU <= 0 {
		t.Errorf("the job's CPU time was not measured: %+v", job)
	}
	if err := p.(platform.Closer).Close(); err != nil {
		t.Fatal(err)
	}
}
