// Package testbed builds hosts on this machine for trying nearnative's
// hosts over SSH: each host a network namespace joined by a veth pair to
// one bridge on a private /24 that nothing routes off the machine, with an
// sshd of its own (Debian's openssh-server: its own host key, config, pid
// and log file, started by nearnative, not as a system service), a key pair
// to log in with, a known_hosts holding the hosts' keys, and a hosts file
// naming them (testbed: true).
//
// The hosts share this machine's cores, memory, file system and processes:
// figures from them test correctness, not performance, and every table of
// a run on them says so.
//
// With Docker, every sut host runs a dockerd of its own in its namespace
// (the first's socket /run/nntb-<tag>/docker.sock and images in
// /var/lib/nearnative/testbed/<tag>/docker; a second's /run/nntb-<tag>-2
// and .../docker-2), named in the hosts file as its docker_socket.
//
// Everything carries the label: the bridge and the namespaces are named
// nntb-<tag>..., every namespace's loopback and the bridge have the alias
// nearnative.testbed=<tag>, the iptables rule the comment of the same text.
package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nearnative/nearnative/internal/subnet"
)

// Label starts the alias and comment of everything a test bed makes.
const Label = "nearnative.testbed="

// Pool is where a test bed's /24 comes from: apart from the client hosts'
// 10.214.0.0/16 and the platforms' 10.213.0.0/16.
var Pool = netip.MustParsePrefix("10.216.0.0/16")

// Sshd is Debian's sshd.
const Sshd = "/usr/sbin/sshd"

// Config says what to build.
type Config struct {
	// Dir holds the keys, configs, known_hosts and hosts.yaml.
	Dir string
	// Tag names the test bed (at most 4 lower-case letters or digits):
	// "tb" for `nearnative testbed up`, another for tests.
	Tag string
	// Hosts is the number of hosts, 2 or 3: the first Suts are sut
	// hosts, the others drivers.
	Hosts int
	// Suts is the number of sut hosts, 1 (the default, 0) or 2; at
	// least one host is left for the drivers.
	Suts int
	// Docker starts a dockerd of each sut host's own in its namespace
	// (its own socket, data and exec roots, bridge and iptables rules),
	// for the Docker platforms on a sut host.
	Docker bool
	// Purge makes Down remove that dockerd's data root (its images) too;
	// else the next test bed of the tag finds them.
	Purge bool
}

// DockerRoot is where the first sut host's dockerd keeps its images:
// beside this machine's /var/lib/docker, on a file system dockerd's
// overlay2 works on (a test directory under /tmp may be an overlay itself).
func (c Config) DockerRoot() string { return c.dockerRootOf(0) }

// dockerRootOf is sut host k's DockerRoot.
func (c Config) dockerRootOf(k int) string {
	name := "docker"
	if k > 0 {
		name += "-" + strconv.Itoa(k+1)
	}
	return filepath.Join("/var/lib/nearnative/testbed", c.Tag, name)
}

// suts is the number of sut hosts, the default applied.
func (c Config) suts() int { return max(c.Suts, 1) }

// Dockerd is the Docker daemon a test bed's sut host runs.
const Dockerd = "dockerd"

// runDirOf holds sut host k's dockerd socket, pid file and exec root:
// short, for unix socket paths ("-" is no tag's, so no other test bed's).
func (c Config) runDirOf(k int) string {
	if k == 0 {
		return "/run/nntb-" + c.Tag
	}
	return "/run/nntb-" + c.Tag + "-" + strconv.Itoa(k+1)
}

// DockerSocket is the API socket of the first sut host's dockerd.
func (c Config) DockerSocket() string { return c.DockerSocketOf(0) }

// DockerSocketOf is the API socket of sut host k's dockerd (k from 0).
func (c Config) DockerSocketOf(k int) string { return filepath.Join(c.runDirOf(k), "docker.sock") }

// Validate checks the settings.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("testbed: no directory")
	}
	if len(c.Tag) == 0 || len(c.Tag) > 4 || strings.Trim(c.Tag, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return fmt.Errorf("testbed: tag %q: want 1 to 4 lower-case letters or digits", c.Tag)
	}
	if c.Hosts < 2 || c.Hosts > 3 {
		return fmt.Errorf("testbed: %d hosts: want 2 or 3 (one sut, the others drivers)", c.Hosts)
	}
	if c.Suts < 0 || c.Suts > 2 || c.suts() >= c.Hosts {
		return fmt.Errorf("testbed: %d sut hosts of %d: want 1, or 2 of 3 hosts (one host at least drives the load)", c.Suts, c.Hosts)
	}
	return nil
}

func (c Config) bridge() string        { return "nntb-" + c.Tag }
func (c Config) hostName(k int) string { return c.Tag + strconv.Itoa(k+1) }
func (c Config) netns(k int) string    { return "nntb-" + c.hostName(k) }
func (c Config) vethHost(k int) string { return "nntb" + c.Tag + strconv.Itoa(k+1) }
func (c Config) label() string         { return Label + c.Tag }

// HostsFile is the hosts file of the test bed in dir.
func HostsFile(dir string) string { return filepath.Join(dir, "hosts.yaml") }

// Check says whether this machine can build a test bed.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("testbed: needs root (network namespaces, a bridge, sshd)")
	}
	if _, err := os.Stat(Sshd); err != nil {
		return fmt.Errorf("testbed: %s missing: install openssh-server (apt-get install --no-install-recommends openssh-server; `make setup` does)", Sshd)
	}
	for _, t := range []string{"ip", "iptables", "ssh-keygen", "nsenter"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("testbed: %s missing: install iproute2, iptables and openssh-client", t)
		}
	}
	return nil
}

func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up builds the test bed and writes its hosts file; on error it removes
// what it made. A test bed already up under the same tag is an error.
func Up(ctx context.Context, c Config) (hostsFile string, err error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	if err := Check(); err != nil {
		return "", err
	}
	if _, err := os.Stat("/sys/class/net/" + c.bridge()); err == nil {
		return "", fmt.Errorf("testbed %s is up already (bridge %s): take it down with `nearnative testbed down` first", c.Tag, c.bridge())
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return "", err
	}
	c.Dir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	sub, err := subnet.Pick(ctx, Pool, 24)
	if err != nil {
		return "", fmt.Errorf("testbed: %w", err)
	}
	defer subnet.Release(sub)
	defer func() {
		if err != nil {
			if derr := Down(context.WithoutCancel(ctx), c); derr != nil {
				err = errors.Join(err, fmt.Errorf("removing the half-built test bed: %w", derr))
			}
		}
	}()
	gw := sub.Addr().Next()
	if err := os.WriteFile(filepath.Join(dir, "subnet"), []byte(sub.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	steps := [][]string{
		{"ip", "link", "add", c.bridge(), "type", "bridge"},
		{"ip", "link", "set", c.bridge(), "alias", c.label()},
		{"ip", "addr", "add", netip.PrefixFrom(gw, 24).String(), "dev", c.bridge()},
		{"ip", "link", "set", c.bridge(), "up"},
		// Docker's FORWARD policy is DROP and br_netfilter sends bridged
		// packets through it: let the test bed's hosts talk to each other.
		{"iptables", "-I", "FORWARD", "-i", c.bridge(), "-o", c.bridge(), "-j", "ACCEPT", "-m", "comment", "--comment", c.label()},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return "", err
		}
	}
	// The client key every host accepts.
	key := filepath.Join(dir, "id_ed25519")
	if _, err := os.Stat(key); err != nil {
		if err := run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "nearnative-testbed", "-f", key); err != nil {
			return "", err
		}
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return "", err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation directory
		return "", err
	}
	var known, hosts strings.Builder
	addr := gw
	for k := 0; k < c.Hosts; k++ {
		addr = addr.Next()
		hk, err := c.upHost(ctx, k, addr)
		if err != nil {
			return "", fmt.Errorf("testbed host %s: %w", c.hostName(k), err)
		}
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(addr.String())}, hk) + "\n")
		role := "driver"
		if k < c.suts() {
			role = "sut"
		}
		fmt.Fprintf(&hosts, "  - name: %s\n    address: %s\n    user: root\n    key: id_ed25519\n    roles: [%s]\n", c.hostName(k), addr, role)
		if k < c.suts() && c.Docker {
			if err := c.upDocker(ctx, k); err != nil {
				return "", fmt.Errorf("testbed host %s: %w", c.hostName(k), err)
			}
			fmt.Fprintf(&hosts, "    docker_socket: %s\n", c.DockerSocketOf(k))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(known.String()), 0o644); err != nil {
		return "", err
	}
	text := "# Written by `nearnative testbed up`: hosts made of network namespaces on\n" +
		"# this machine, on the private bridge " + c.bridge() + " (" + sub.String() + ").\n" +
		"# They share this machine's cores and memory: their figures test\n" +
		"# correctness, not performance (testbed: true labels every table).\n" +
		"testbed: true\nknown_hosts: known_hosts\nhosts:\n" + hosts.String()
	hostsFile = HostsFile(dir)
	if err := os.WriteFile(hostsFile, []byte(text), 0o644); err != nil {
		return "", err
	}
	return hostsFile, nil
}

// upHost makes host k's namespace, link and sshd, and returns its host key.
func (c Config) upHost(ctx context.Context, k int, addr netip.Addr) (ssh.PublicKey, error) {
	ns, vh, hd := c.netns(k), c.vethHost(k), filepath.Join(c.Dir, c.hostName(k))
	if err := os.MkdirAll(hd, 0o700); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "set", "lo", "alias", c.label()},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "link", "add", vh, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", vh, "alias", c.label()},
		{"ip", "link", "set", vh, "master", c.bridge()},
		{"ip", "link", "set", vh, "up"},
		{"ip", "-n", ns, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return nil, err
		}
	}
	hostKey := filepath.Join(hd, "ssh_host_ed25519_key")
	os.Remove(hostKey)
	os.Remove(hostKey + ".pub")
	if err := run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", c.hostName(k), "-f", hostKey); err != nil {
		return nil, err
	}
	cfg := filepath.Join(hd, "sshd_config")
	conf := fmt.Sprintf(`# sshd of test-bed host %s, started by nearnative testbed up
ListenAddress %s
Port 22
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding local
AllowStreamLocalForwarding local
X11Forwarding no
PrintMotd no
ClientAliveInterval 5
Subsystem sftp internal-sftp
`, c.hostName(k), addr, hostKey, filepath.Join(hd, "sshd.pid"), filepath.Join(c.Dir, "authorized_keys"))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// nsenter, not `ip netns exec`: that one remounts /sys in a mount
	// namespace of its own, hiding the cgroup file systems from the host.
	if err := run(ctx, "nsenter", "--net=/run/netns/"+ns, Sshd, "-f", cfg, "-E", filepath.Join(hd, "sshd.log")); err != nil {
		return nil, err
	}
	if err := waitListening(ctx, netip.AddrPortFrom(addr, 22).String(), 10*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(hd, "sshd.log"))
		return nil, fmt.Errorf("sshd does not listen on %s:22: %w: %s", addr, err, strings.TrimSpace(string(log)))
	}
	b, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, err
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey(b)
	return pk, err
}

// HostDaemonJSON is this machine's dockerd configuration.
const HostDaemonJSON = "/etc/docker/daemon.json"

// runtimesOnly is a dockerd configuration holding only the "runtimes" of
// the configuration file at path ({} when it has none or is unreadable).
func runtimesOnly(path string) []byte {
	var cfg struct {
		Runtimes json.RawMessage `json:"runtimes,omitempty"`
	}
	if b, err := os.ReadFile(path); err == nil {
		if json.Unmarshal(b, &cfg) != nil {
			cfg.Runtimes = nil
		}
	}
	out, _ := json.Marshal(cfg)
	return append(out, '\n')
}

// upDocker starts sut host k's dockerd in its namespace and waits until
// it answers. Its images stay in its data root for the next test bed of
// the tag (unless Down purges them).
func (c Config) upDocker(ctx context.Context, k int) error {
	bin, err := exec.LookPath(Dockerd)
	if err != nil {
		return fmt.Errorf("dockerd missing: install docker.io (`make setup` does), or build the test bed without Docker (--docker=false)")
	}
	hd := filepath.Join(c.Dir, c.hostName(k))
	runDir, sock := c.runDirOf(k), c.DockerSocketOf(k)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return err
	}
	conf := filepath.Join(hd, "dockerd.json")
	// Its own configuration, not this machine's daemon.json: only the OCI
	// runtimes that one registers (setup's runsc and crun), so that the
	// docker-runsc-* and docker-crun-* kinds run on the test bed too.
	if err := os.WriteFile(conf, runtimesOnly(HostDaemonJSON), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(hd, "dockerd.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	// nsenter, as for sshd: the cgroup file systems stay in view.
	cmd := exec.Command("nsenter", "--net=/run/netns/"+c.netns(k), bin,
		"--config-file", conf, "--data-root", c.dockerRootOf(k), "--exec-root", filepath.Join(runDir, "exec"),
		"--pidfile", filepath.Join(runDir, "dockerd.pid"), "-H", "unix://"+sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting dockerd: %w", err)
	}
	go cmd.Wait() // reaped when it ends, at `testbed down`
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			conn.Close()
			if _, err := os.Stat(filepath.Join(runDir, "dockerd.pid")); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(hd, "dockerd.log"))
			return fmt.Errorf("dockerd does not answer on %s: %v: %s", sock, err, lastLines(string(log), 3))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// downDocker stops sut host k's dockerd (it stops its containers first)
// and removes its run directory.
func (c Config) downDocker(k int) error {
	runDir := c.runDirOf(k)
	if b, err := os.ReadFile(filepath.Join(runDir, "dockerd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && isComm(pid, "dockerd") {
			syscall.Kill(pid, syscall.SIGTERM)
			waitGone(pid, 30*time.Second)
		}
	}
	// dockerd leaves its default namespace's bind mount in its exec root.
	unmountUnder(runDir)
	unmountUnder(c.dockerRootOf(k))
	if err := os.RemoveAll(runDir); err != nil {
		return fmt.Errorf("removing %s: %w", runDir, err)
	}
	return nil
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil || dir == "" || dir == "/" {
		return
	}
	var ms []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			ms = append(ms, f[1])
		}
	}
	for i := len(ms) - 1; i >= 0; i-- {
		syscall.Unmount(ms[i], syscall.MNT_DETACH)
	}
}

// lastLines is the last n lines of s, joined by " | ".
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// Down stops the sshds and removes the namespaces, the links, the bridge
// and the rule of the test bed c.Tag; what is already gone is not an
// error. The key pair and the files in c.Dir stay.
func Down(ctx context.Context, c Config) error {
	var errs []error
	for k := 0; k < 3; k++ { // whatever Suts it was built with
		if err := c.downDocker(k); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Purge {
		if err := os.RemoveAll(filepath.Dir(c.DockerRoot())); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", filepath.Dir(c.DockerRoot()), err))
		}
	}
	for k := 0; k < 3; k++ {
		hd := filepath.Join(c.Dir, c.hostName(k))
		if b, err := os.ReadFile(filepath.Join(hd, "sshd.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && isSshd(pid) {
				syscall.Kill(pid, syscall.SIGTERM)
				waitGone(pid, 3*time.Second)
			}
		}
		killIn(c.netns(k))
		if _, err := os.Stat("/run/netns/" + c.netns(k)); err == nil {
			if err := run(ctx, "ip", "netns", "del", c.netns(k)); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := os.Stat("/sys/class/net/" + c.vethHost(k)); err == nil {
			// Deleting the namespace takes its veth pair with it, a
			// moment later: a link gone meanwhile is not an error.
			if err := run(ctx, "ip", "link", "del", c.vethHost(k)); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
		}
	}
	for exec.CommandContext(ctx, "iptables", "-D", "FORWARD", "-i", c.bridge(), "-o", c.bridge(), "-j", "ACCEPT", "-m", "comment", "--comment", c.label()).Run() == nil {
	}
	if _, err := os.Stat("/sys/class/net/" + c.bridge()); err == nil {
		if err := run(ctx, "ip", "link", "del", c.bridge()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func isSshd(pid int) bool { return isComm(pid, "sshd") }

// isComm reports whether process pid's name starts with name.
func isComm(pid int, name string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), name)
}

func waitGone(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// killIn kills what still runs in the namespace ns (sshd's sessions, the
// agents and what they started), found by the namespace's inode.
func killIn(ns string) {
	var want syscall.Stat_t
	if syscall.Stat("/run/netns/"+ns, &want) != nil {
		return
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitListening dials addr until it accepts or timeout passes.
func waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
