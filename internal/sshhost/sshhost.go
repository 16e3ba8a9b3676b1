// Package sshhost connects to the machines of a hosts file: an SSH
// connection (golang.org/x/crypto/ssh) whose host key must be in
// known_hosts, nearnative's own binary pushed when the remote copy is
// missing or differs, and nearnative's agent (package vmagent's API, the
// one VM guests and container supervisors run) started there and reached
// through a direct-tcpip channel of the SSH connection to 127.0.0.1 on the
// remote machine: no port is opened to the network. The agent's client is
// vmagent.Client; only its dialer differs from a guest's.
//
// The agent lives as long as its SSH session: when the session ends (the
// run closes it, nearnative dies, the connection drops) the agent's stdin
// reaches EOF and it stops every process it started.
package sshhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	sshagent "golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/tailbuf"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// RemoteDir is where the nearnative binary is pushed on a remote host.
const RemoteDir = "/var/tmp/nearnative"

// RemoteBinary is the pushed binary's path.
const RemoteBinary = RemoteDir + "/nearnative"

// ErrHostKey is matched by errors refusing a host's key (unknown or
// changed): bad input the user fixes in known_hosts.
var ErrHostKey = errors.New("host key refused")

// ErrUnreachable is matched by errors saying that a host cannot be reached
// or logged in to.
var ErrUnreachable = errors.New("host unreachable")

type kinded struct {
	err  error
	kind error
}

func (k kinded) Error() string   { return k.err.Error() }
func (k kinded) Unwrap() []error { return []error{k.err, k.kind} }

// Options tune Connect.
type Options struct {
	// KnownHosts is the known_hosts file ("" is ~/.ssh/known_hosts).
	KnownHosts string
	// Binary is the local nearnative binary to push ("" is this process's
	// executable).
	Binary string
	// RemoteBinary is where it goes ("" is RemoteBinary).
	RemoteBinary string
	// Dial opens the TCP connection to the SSH server (nil: net.Dialer);
	// tests wrap it to drop the connection mid-trial.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Keepalive is the interval of SSH keepalives (0: 2 s); a connection
	// that misses KeepaliveMiss in a row is closed and its host counted as
	// dropped.
	Keepalive time.Duration
	// Log receives progress lines ("pushing the binary"); nil discards.
	Log io.Writer
}

const keepaliveMiss = 3

// Conn is a connected host: its SSH client and its agent.
type Conn struct {
	Host   hostfile.Host
	bin    string // the pushed binary
	client *ssh.Client
	agent  *vmagent.Client
	sess   *ssh.Session
	stdin  io.WriteCloser
	stderr *tailbuf.Buffer
	offset vmagent.Offset
	cpus   []int

	mu      sync.Mutex
	dropped error
	closed  bool
	done    chan struct{}
}

// Connect opens the SSH connection to h, pushes the binary if needed and
// starts the agent. Errors name the host and say how to fix them.
func Connect(ctx context.Context, h hostfile.Host, o Options) (*Conn, error) {
	client, err := dial(ctx, h, o, nil)
	if err != nil {
		return nil, err
	}
	c := &Conn{Host: h, client: client, done: make(chan struct{}), stderr: &tailbuf.Buffer{Max: 4096}, bin: o.RemoteBinary}
	if c.bin == "" {
		c.bin = RemoteBinary
	}
	go c.watch(o.Keepalive)
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if err := c.push(ctx, o); err != nil {
		return nil, c.errorf("pushing nearnative to %s: %w", c.bin, err)
	}
	if err := c.startAgent(ctx); err != nil {
		return nil, err
	}
	if c.offset, err = c.agent.ClockOffset(ctx, 8); err != nil {
		return nil, c.errorf("reading its clock: %w", err)
	}
	out, err := c.Output(ctx, "cat /sys/devices/system/cpu/online", nil)
	if err == nil {
		c.cpus, err = sysinfo.ParseIDList(strings.TrimSpace(string(out)))
	}
	if err != nil || len(c.cpus) == 0 {
		return nil, c.errorf("reading its online CPUs: %v", err)
	}
	ok = true
	return c, nil
}

// dial opens and authenticates the SSH connection, checking the host key.
func dial(ctx context.Context, h hostfile.Host, o Options, algos []string) (*ssh.Client, error) {
	known := o.KnownHosts
	if known == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("host %s: no known_hosts: %w", h.Name, err)
		}
		known = home + "/.ssh/known_hosts"
	}
	check, err := knownhosts.New(known)
	if err != nil {
		return nil, kinded{fmt.Errorf("host %s: known_hosts %s: %w (create it: ssh-keyscan -p %d %s >> %s, after checking the key)", h.Name, known, err, h.Port, h.Address, known), ErrHostKey}
	}
	auth, err := authFor(h)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
	var refused error
	var wantTypes []string
	cfg := &ssh.ClientConfig{
		User:              h.User,
		Auth:              auth,
		HostKeyAlgorithms: algos,
		Timeout:           10 * time.Second,
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := check(hostname, remote, key)
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) {
				refused, wantTypes = hostKeyError(h, known, addr, key, ke)
				return refused
			}
			return err
		},
	}
	dialFn := o.Dial
	if dialFn == nil {
		var d net.Dialer
		dialFn = d.DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	conn, err := dialFn(dctx, "tcp", addr)
	if err != nil {
		return nil, kinded{fmt.Errorf("host %s: cannot reach %s: %w (is its SSH server running? is the address in the hosts file right?)", h.Name, addr, err), ErrUnreachable}
	}
	if dl, ok := dctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		if refused != nil {
			if wantTypes != nil && algos == nil {
				// The file knows the host under other key types:
				// ask for those (OpenSSH does the same).
				return dial(ctx, h, o, wantTypes)
			}
			return nil, refused
		}
		return nil, kinded{fmt.Errorf("host %s: SSH login as %s at %s: %w (check user, key and the server's authorized_keys)", h.Name, h.User, addr, err), ErrUnreachable}
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// hostKeyError says why key was refused and which line to add; when the
// file holds keys of the host of other types only, it also returns those
// types so that the dial asks for them instead.
func hostKeyError(h hostfile.Host, known, addr string, key ssh.PublicKey, ke *knownhosts.KeyError) (error, []string) {
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
	fp := ssh.FingerprintSHA256(key)
	if len(ke.Want) == 0 {
		return kinded{fmt.Errorf("host %s (%s): unknown host key %s %s, refused: if that is the host's key (check on the host: ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub), add this line to %s: %s",
			h.Name, addr, key.Type(), fp, keyFileType(key), known, line), ErrHostKey}, nil
	}
	var types []string
	for _, w := range ke.Want {
		if w.Key.Type() == key.Type() {
			return kinded{fmt.Errorf("host %s (%s): host key CHANGED: it offered %s %s, but %s:%d holds another; someone may be in the middle, or the host was reinstalled: if you trust the new key, replace line %d of %s with: %s",
				h.Name, addr, key.Type(), fp, w.Filename, w.Line, w.Line, w.Filename, line), ErrHostKey}, nil
		}
		types = append(types, w.Key.Type())
	}
	return kinded{fmt.Errorf("host %s (%s): known_hosts %s knows it by %s keys only, and it offered %s %s", h.Name, addr, known, strings.Join(types, ", "), key.Type(), fp), ErrHostKey}, types
}

func keyFileType(k ssh.PublicKey) string {
	switch k.Type() {
	case ssh.KeyAlgoED25519:
		return "ed25519"
	case ssh.KeyAlgoRSA:
		return "rsa"
	}
	return "ecdsa"
}

// authFor returns the host's authentication: its key file, or the agent.
func authFor(h hostfile.Host) ([]ssh.AuthMethod, error) {
	if h.Key != "" {
		pem, err := os.ReadFile(h.Key)
		if err != nil {
			return nil, kinded{fmt.Errorf("host %s: key %s: %w", h.Name, h.Key, err), ErrUnreachable}
		}
		signer, err := ssh.ParsePrivateKey(pem)
		if err != nil {
			return nil, kinded{fmt.Errorf("host %s: key %s: %w (a passphrase-protected key needs agent: true and ssh-add)", h.Name, h.Key, err), ErrUnreachable}
		}
		return []ssh.AuthMethod{ssh.PublicKeys(signer)}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, kinded{fmt.Errorf("host %s: agent: true but SSH_AUTH_SOCK is not set: start ssh-agent and ssh-add the key, or give key: FILE", h.Name), ErrUnreachable}
	}
	ac, err := net.Dial("unix", sock)
	if err != nil {
		return nil, kinded{fmt.Errorf("host %s: SSH agent at %s: %w", h.Name, sock, err), ErrUnreachable}
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(sshagent.NewClient(ac).Signers)}, nil
}

// watch sends keepalives and marks the connection dropped when they go
// unanswered or the connection ends.
func (c *Conn) watch(every time.Duration) {
	if every <= 0 {
		every = 2 * time.Second
	}
	ended := make(chan error, 1)
	go func() { ended <- c.client.Wait() }()
	missed := 0
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case err := <-ended:
			c.drop(fmt.Errorf("the SSH connection ended: %v", err))
			return
		case <-t.C:
			if c.keepalive(every) != nil {
				missed++
			} else {
				missed = 0
			}
			if missed >= keepaliveMiss {
				c.drop(fmt.Errorf("%d keepalives in a row went unanswered", missed))
				c.client.Close()
				<-ended
				return
			}
		}
	}
}

var errNoAnswer = errors.New("no answer")

// keepalive sends one keepalive request and waits for its answer at most
// timeout (errNoAnswer then).
func (c *Conn) keepalive(timeout time.Duration) error {
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		return err
	case <-time.After(timeout):
		return errNoAnswer
	}
}

func (c *Conn) drop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == nil && !c.closed {
		c.dropped = err
	}
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// probe checks, after an error, whether the connection still answers:
// an agent call may fail on the dropped connection before the keepalives
// notice.
func (c *Conn) probe() {
	if c.client == nil || c.droppedErr() != nil {
		return
	}
	switch err := c.keepalive(3 * time.Second); {
	case errors.Is(err, errNoAnswer):
		c.drop(errors.New("a keepalive went unanswered for 3 s"))
		c.client.Close()
	case err != nil:
		c.drop(fmt.Errorf("the SSH connection ended: %v", err))
	}
}

// Dropped returns why the connection dropped, or nil while it stands (or
// after Close). Called after an error, it first checks that the
// connection still answers (within 3 s).
func (c *Conn) Dropped() error {
	c.probe()
	return c.droppedErr()
}

func (c *Conn) droppedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// errorf names the host in an error; when the connection has dropped, it
// says so, since that is what the user must fix.
func (c *Conn) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if d := c.Dropped(); d != nil {
		return kinded{fmt.Errorf("host %s (%s) dropped its SSH connection (%v): %w", c.Host.Name, c.Host.Address, d, err), ErrUnreachable}
	}
	return fmt.Errorf("host %s (%s): %w", c.Host.Name, c.Host.Address, err)
}

// Output runs a shell command on the host and returns its stdout.
func (c *Conn) Output(ctx context.Context, cmd string, stdin io.Reader) ([]byte, error) {
	s, err := c.client.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out, errb strings.Builder
	s.Stdout, s.Stderr, s.Stdin = &out, &errb, stdin
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		return []byte(out.String()), fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(errb.String()))
	}
	return []byte(out.String()), nil
}

// push copies the local binary to RemoteBinary unless the copy there has
// the same SHA-256.
func (c *Conn) push(ctx context.Context, o Options) error {
	local := o.Binary
	if local == "" {
		var err error
		if local, err = os.Executable(); err != nil {
			return err
		}
	}
	sum, err := fileSHA256(local)
	if err != nil {
		return err
	}
	out, _ := c.Output(ctx, "sha256sum "+c.bin+" 2>/dev/null", nil)
	if f := strings.Fields(string(out)); len(f) > 0 && f[0] == sum {
		return nil
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "host %s: pushing nearnative to %s (missing or different)\n", c.Host.Name, c.bin)
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	// A name of its own per push: hosts sharing a file system (the test
	// bed's) may push at once; mv replaces the binary atomically.
	tmp := c.bin + ".tmp." + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := c.Output(ctx, fmt.Sprintf("mkdir -p %s && cat > %s && chmod 755 %s && mv -f %s %s", path.Dir(c.bin), tmp, tmp, tmp, c.bin), f); err != nil {
		return err
	}
	out, err = c.Output(ctx, "sha256sum "+c.bin, nil)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(out)); len(f) == 0 || f[0] != sum {
		return fmt.Errorf("the pushed copy's SHA-256 is %q, want %s", strings.TrimSpace(string(out)), sum)
	}
	return nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// startAgent starts `nearnative agent` in a session, hands it a fresh
// token on stdin and waits for the address it serves on.
func (c *Conn) startAgent(ctx context.Context) error {
	s, err := c.client.NewSession()
	if err != nil {
		return c.errorf("opening a session: %w", err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		return err
	}
	stderr, err := s.StderrPipe()
	if err != nil {
		return err
	}
	if err := s.Start(c.bin + " " + vmagent.StdioArg); err != nil {
		return c.errorf("starting the agent: %w", err)
	}
	c.sess, c.stdin = s, stdin
	addr, token, err := vmagent.Handshake(ctx, stdin, stderr, c.stderr, 30*time.Second)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.errorf("%w: %s", err, c.stderr.String())
	}
	c.agent = vmagent.NewClientDial(addr, token, func(ctx context.Context, network, a string) (net.Conn, error) {
		return c.client.DialContext(ctx, "tcp", a)
	})
	if err := c.agent.Ping(ctx); err != nil {
		return c.errorf("the agent does not answer through the SSH connection: %w", err)
	}
	return nil
}

// CPUs are the host's online CPUs.
func (c *Conn) CPUs() []int { return c.cpus }

// Agent is the client of the host's agent.
func (c *Conn) Agent() *vmagent.Client { return c.agent }

// Offset is the host's clock offset as measured at Connect.
func (c *Conn) Offset() vmagent.Offset { return c.offset }

// DialContext opens a TCP connection from the host (a direct-tcpip
// channel): nearnative's own load, sent from the driver host.
func (c *Conn) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.client.DialContext(ctx, network, addr)
	if err != nil {
		return nil, c.errorf("connecting to %s from there: %w", addr, err)
	}
	return conn, nil
}

// DialUnix opens a connection to the unix socket at path on the host (a
// direct-streamlocal channel of the SSH connection, which the host's sshd
// allows unless AllowStreamLocalForwarding says no): its dockerd's API,
// with no port opened on any network.
func (c *Conn) DialUnix(ctx context.Context, path string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		conn, err := c.client.Dial("unix", path)
		ch <- result{conn, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, c.errorf("opening its socket %s through SSH: %w (no such socket there, or its sshd forbids AllowStreamLocalForwarding)", path, r.err)
		}
		return r.conn, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// DockerSocket is the path of dockerd's socket on the host.
func (c *Conn) DockerSocket() string { return c.Host.DockerSocket }

// Close stops the agent (its stdin ends, it stops what it started) and
// closes the connection. Closing twice is not an error.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
		// Give the agent time to stop its processes before the
		// connection goes (it stops them on EOF either way).
		waited := make(chan struct{})
		go func() { c.sess.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
		}
	}
	return c.client.Close()
}
