// Package podman runs servers in Podman containers, rootful (netavark's
// bridge, the port published through netavark's iptables DNAT) and
// rootless (a dedicated unprivileged user made by setup, slirp4netns, the
// port published by rootlessport), each reached from the run's client host
// on the published port of the client link's host-side address, as
// docker-nat is.
//
// nearnative drives Podman through the Docker-compatible API of a `podman
// system service` it starts for the run on a socket of its own (as root, or
// as the rootless user) and stops when the run ends, with the same Docker
// Go SDK calls as the Docker platforms (package platforms/docker, whose
// Flavor says where Podman differs): one code path makes, starts, stops and
// removes a container on every engine, and no client library of Podman's
// (which needs cgo libraries and build tags of its own) joins the build.
// The workload image is copied from Docker into Podman's storage (docker
// save, Podman's compatible image load) once per image ID.
//
// Everything a run makes is labelled with it: containers carry
// nearnative.run=<id> (cleanup's Podman sweeper removes them), the service
// and the processes it forks carry NEARNATIVE_RUN in their environment
// (cleanup's process sweeper ends them), the service's directory is a temp
// dir of the run, and the rootless containers' cgroups sit under
// nearnative/<run>.
package podman

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/ready"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// RootlessUser is the unprivileged user rootless Podman runs as; setup
// makes it, with subordinate uid and gid ranges (/etc/subuid, /etc/subgid).
// NEARNATIVE_ROOTLESS_USER names another.
const RootlessUser = "nearnative-rootless"

// EnvRootlessUser overrides RootlessUser.
const EnvRootlessUser = "NEARNATIVE_ROOTLESS_USER"

// RootlessUserName is the rootless user of this machine's runs.
func RootlessUserName() string {
	if u := os.Getenv(EnvRootlessUser); u != "" {
		return u
	}
	return RootlessUser
}

// startTimeout bounds how long the service takes to answer.
const startTimeout = 30 * time.Second

// Service is a `podman system service` started for one run, answering
// Docker's API on a socket in a temp dir of the run.
type Service struct {
	run      runid.ID
	rootless bool
	user     *user.User // the rootless user; nil when rootful
	uid, gid int
	// subUID and subGID are the user's first subordinate ranges (start,
	// count).
	subUID, subGID [2]int
	dir            string // the run's temp dir: the socket and the service's log
	xdg            string // the rootless user's XDG_RUNTIME_DIR
	cmd            *exec.Cmd
	done           chan struct{}
	log            string // the service's output
	eng            *docker.Daemon
	version        string
	// backend is the rootful service's network backend as it reports it
	// ("netavark", "cni"; "" when it does not say).
	backend string

	closeOnce sync.Once
	closeErr  error
}

// StartService starts Podman's service for run, rootful or as the rootless
// user, and connects to it. The flavor's hooks that need the service (the
// rootless user's ids) are filled in here.
func StartService(ctx context.Context, run runid.ID, rootless bool) (_ *Service, err error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil, platform.Unavailablef("podman is not installed: apt-get install podman (make setup does)")
	}
	s := &Service{run: run, rootless: rootless, done: make(chan struct{})}
	purpose := "podman"
	if rootless {
		purpose = "podman-rootless"
		if s.user, s.uid, s.gid, err = rootlessUser(); err != nil {
			return nil, err
		}
		s.subUID[0], s.subUID[1], _ = subRange("/etc/subuid", s.user)
		s.subGID[0], s.subGID[1], _ = subRange("/etc/subgid", s.user)
	}
	if s.dir, err = state.TempDir(run, purpose); err != nil {
		return nil, fmt.Errorf("podman service: %w", err)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if rootless {
		// The service makes its socket here as the rootless user.
		if err := os.Chown(s.dir, s.uid, s.gid); err != nil {
			return nil, fmt.Errorf("podman service: %w", err)
		}
		if err := os.Chmod(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("podman service: %w", err)
		}
		if s.xdg, err = runtimeDir(s.uid, s.gid); err != nil {
			return nil, err
		}
	}
	sock := filepath.Join(s.dir, "podman.sock")
	s.log = filepath.Join(s.dir, "service.log")
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, fmt.Errorf("podman service: %w", err)
	}
	defer logf.Close()
	if rootless {
		os.Chown(s.log, s.uid, s.gid)
	}
	s.cmd = exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = s.environ()
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if rootless {
		s.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting podman system service: %w", err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitSocket(ctx, sock); err != nil {
		return nil, err
	}
	if !rootless {
		s.backend = s.networkBackend(ctx, sock)
	}
	if s.eng, err = docker.ConnectFlavor(ctx, "unix://"+sock, s.flavor()); err != nil {
		return nil, err
	}
	if v, err := s.eng.API().ServerVersion(ctx); err == nil {
		s.version = v.Version
	}
	return s, nil
}

// environ is the service's environment: PATH, the run's label (cleanup's
// process sweeper finds the service and everything it forks by it: conmon,
// slirp4netns, rootlessport, the rootless pause process) and, rootless, the
// user's HOME and XDG_RUNTIME_DIR.
func (s *Service) environ() []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		runid.EnvVar + "=" + string(s.run),
	}
	if s.rootless {
		env = append(env, "HOME="+s.user.HomeDir, "USER="+s.user.Username, "LOGNAME="+s.user.Username,
			"XDG_RUNTIME_DIR="+s.xdg)
	} else {
		env = append(env, "HOME=/root")
	}
	return env
}

// waitSocket waits until the service's socket takes a connection, or for
// the service to exit. The socket's file appears when the service binds
// it, before it listens: a connection in between is refused (seen under
// load in make test), so its existence is not enough.
func (s *Service) waitSocket(ctx context.Context, sock string) error {
	err := platform.WaitReady(ctx, startTimeout, 20*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-s.done:
			return ready.Final(errExited) // waiting will not bring it back
		default:
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return fmt.Errorf("podman system service did not make its socket %s (%w); its log says:\n%s", sock, err, s.logTail())
	}
	return nil
}

// networkBackend asks the service on sock which network backend it runs
// its bridge with ("netavark", "cni"); "" when it does not say.
func (s *Service) networkBackend(ctx context.Context, sock string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "--url", "unix://"+sock, "info", "--format", "{{.Host.NetworkBackend}}")
	cmd.Env = s.environ()
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

var errExited = errors.New("the service exited")

// logTail is the end of the service's log.
func (s *Service) logTail() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Engine is the connection to the service.
func (s *Service) Engine() *docker.Daemon { return s.eng }

// Version is Podman's version as the service reports it.
func (s *Service) Version() string { return s.version }

// Rootless reports whether the service runs as the rootless user.
func (s *Service) Rootless() bool { return s.rootless }

// Close stops the service (SIGTERM to its process group, SIGKILL after a
// grace), the rootless user's pause process that holds its user namespace,
// and removes the service's directory. Containers are the platform's: they
// are removed before.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.eng != nil {
			if err := s.eng.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if s.cmd != nil && s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
				<-s.done
			}
		}
		if s.rootless && s.xdg != "" {
			s.killPause()
		}
		if s.dir != "" {
			if err := os.RemoveAll(s.dir); err != nil {
				errs = append(errs, fmt.Errorf("removing the podman service's directory: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// runtimeDir is the rootless user's XDG_RUNTIME_DIR, /run/user/UID, made
// when missing (no login session makes it for a user that never logs in).
// It is the same for every run: Podman keeps the runtime state of the
// user's containers there (crun's included), which a later service must
// find to remove a container a crashed run left.
func runtimeDir(uid, gid int) (string, error) {
	dir := filepath.Join("/run/user", strconv.Itoa(uid))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("rootless Podman's runtime directory: %w", err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return "", fmt.Errorf("rootless Podman's runtime directory: %w", err)
	}
	return dir, os.Chmod(dir, 0o700)
}

// killPause ends the rootless user's pause process (it holds the user
// namespace Podman's rootless containers share) once nothing else of the
// user runs: nothing of the run stays behind, and nothing another service
// of the user still uses is taken away. A container's conmon runs Podman's
// cleanup command as it goes, which may start a pause process again: the
// user must stay quiet for half a second before the pause counts as gone.
func (s *Service) killPause() {
	pidFile := filepath.Join(s.xdg, "libpod", "tmp", "pause.pid")
	var quiet time.Time
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pause := 0
		if b, err := os.ReadFile(pidFile); err == nil {
			pause, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		procs := userProcs(s.uid)
		others := 0
		for _, p := range procs {
			if p != pause {
				others++
			}
		}
		switch {
		case others > 0:
			quiet = time.Time{}
		case len(procs) > 0: // the pause process alone
			syscall.Kill(pause, syscall.SIGKILL)
			quiet = time.Now()
		case quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > 500*time.Millisecond:
			return
		}
	}
}

// userProcs lists the living (not zombie) processes of user uid.
func userProcs(uid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name()), &st) != nil || int(st.Uid) != uid {
			continue
		}
		if ps, err := sysinfo.ReadProcStat(pid); err == nil && ps.State != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// rootlessUser looks the rootless user up and checks what rootless Podman
// needs of it: a uid other than 0 and subordinate uid and gid ranges.
func rootlessUser() (*user.User, int, int, error) {
	name := RootlessUserName()
	u, err := user.Lookup(name)
	if err != nil {
		return nil, 0, 0, platform.Unavailablef("rootless Podman runs as the user %s, which does not exist: run `make setup` (it makes the user with subordinate uid and gid ranges), or name another user in %s", name, EnvRootlessUser)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, 0, 0, platform.Unavailablef("rootless Podman's user %s is root", name)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if _, _, ok := subRange(f, u); !ok {
			return nil, 0, 0, platform.Unavailablef("rootless Podman: the user %s has no subordinate range in %s: run `make setup`, or `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s`", name, f, name)
		}
	}
	return u, uid, gid, nil
}

// subRange reads the first subordinate range of u in file (/etc/subuid or
// /etc/subgid: "name:start:count" or "uid:start:count").
func subRange(file string, u *user.User) (start, count int, ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	return parseSubRange(f, u.Username, u.Uid)
}

// parseSubRange finds the first range of name (or uid) in r.
func parseSubRange(r io.Reader, name, uid string) (start, count int, ok bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 || (f[0] != name && f[0] != uid) {
			continue
		}
		s, err1 := strconv.Atoi(f[1])
		c, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && c > 0 {
			return s, c, true
		}
	}
	return 0, 0, false
}
