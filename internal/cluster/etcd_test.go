package cluster

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/state"
)

// etcdBinary is the etcd the test runs: NEARNATIVE_TEST_ETCD, or the one
// `cluster up` built under the default state directory.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NEARNATIVE_TEST_ETCD"); p != "" {
		return p
	}
	bins, ok, err := DefaultConfig(state.Home()).Cached()
	if err != nil || !ok {
		t.Skip("no etcd built (`nearnative cluster up` builds it; or set NEARNATIVE_TEST_ETCD to an etcd binary)")
	}
	return bins["etcd"]
}

// TestEtcdRequiresClientCerts starts etcd as the cluster does and checks
// that it answers only a client presenting a certificate of the cluster's
// CA: not plain HTTP, not TLS without a certificate, not another CA's.
func TestEtcdRequiresClientCerts(t *testing.T) {
	bin := etcdBinary(t)
	for _, port := range []int{EtcdClientPort, EtcdPeerPort} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Skipf("port %d is taken (a cluster is up?): %v", port, err)
		}
		l.Close()
	}
	c := DefaultConfig(state.Dir{Root: t.TempDir()})
	if _, err := NewPKI(c.path("pki"), c.Identities()); err != nil {
		t.Fatal(err)
	}
	var argv []string
	for _, comp := range c.components(Binaries{"etcd": bin}) {
		if comp.name == "etcd" {
			argv = comp.argv
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	log, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	good, err := c.etcdClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	get := func(url string, cfg *tls.Config) (string, error) {
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := client.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", &httpError{resp.Status + ": " + string(b)}
		}
		return string(b), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var body string
	for ctx.Err() == nil {
		if body, err = get(c.EtcdURL()+"/health", good); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || !strings.Contains(body, `"health":"true"`) {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("etcd with the cluster's client certificate: %q, %v\netcd log:\n%s", body, err, b)
	}

	// Another CA's certificate, and none at all.
	other := DefaultConfig(state.Dir{Root: t.TempDir()})
	if _, err := NewPKI(other.path("pki"), other.Identities()); err != nil {
		t.Fatal(err)
	}
	stranger, err := other.etcdClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	stranger.RootCAs = good.RootCAs // it trusts the server; the server must not trust it
	noCert := &tls.Config{RootCAs: good.RootCAs, MinVersion: tls.VersionTLS12}
	for name, cfg := range map[string]*tls.Config{"no client certificate": noCert, "another CA's certificate": stranger} {
		if body, err := get(c.EtcdURL()+"/v2/keys", cfg); err == nil {
			t.Errorf("%s: etcd answered %q", name, body)
		}
		if body, err := get(c.EtcdURL()+"/version", cfg); err == nil {
			t.Errorf("%s: etcd answered /version: %q", name, body)
		}
	}
	if body, err := get(strings.Replace(c.EtcdURL(), "https://", "http://", 1)+"/version", nil); err == nil {
		t.Errorf("plain HTTP: etcd answered %q", body)
	}
	peer := "https://127.0.0.1:" + strconv.Itoa(EtcdPeerPort) + "/members"
	if body, err := get(peer, noCert); err == nil {
		t.Errorf("peer port without a certificate: etcd answered %q", body)
	}
}

type httpError struct{ s string }

func (e *httpError) Error() string { return e.s }
