// Package native runs servers as plain host processes: each in its own
// process group, reaped, its output captured to the run's log directory, with
// the platform's CPU set, CPU quota and memory limit applied through cgroups.
// A state file per server records its process group so that `nearnative
// cleanup` can find it after a crash; every process also carries the run ID
// in its environment (runid.EnvVar).
package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 5 * time.Second

// Platform is the native platform (or a variant of it with options).
type Platform struct {
	name  string
	env   platform.Env
	opt   platform.Options
	state state.Dir
	// listen is the address servers bind and clients reach them at: the
	// client host's ServerAddr (127.0.0.1, or the host side of the
	// client's link), or its ClientAddr beside the driver.
	listen string
	// wrap runs a server on the client host (beside the driver); nil
	// runs it on this machine.
	wrap func([]string) []string
	// beside: the platform of the roles that run beside the driver.
	beside bool
	// assign picks a server's ports (platform.AssignPorts; tests replace
	// it).
	assign func(spec platform.Spec, host string) (map[string]int, error)
}

// errPortTaken marks a start that failed because a port picked free was
// taken before the server bound it.
var errPortTaken = errors.New("port taken since it was picked")

// portTries is how many times Start picks a single server's ports: the
// kernel's free port can be taken by another process (a connection's
// ephemeral port) before the server binds it.
const portTries = 3

// New returns a native platform called name (a study may call a variant
// "native-pinned") with the given options. Its servers listen on the
// client host's ServerAddr, never on a wildcard.
func New(name string, env platform.Env, dir state.Dir, opt platform.Options) (*Platform, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("platform %s: %w", name, err)
	}
	addr := env.ClientHost().ServerAddr()
	return &Platform{name: name, env: env, opt: opt, state: dir, listen: addr}, nil
}

// Beside returns the native platform of the topology roles that run beside
// the load driver (a proxy on the driver's side, as the seeds ran theirs on
// the client machine): its servers run on env's client host, listening on
// its ClientAddr, so that the driver reaches them as a neighbour and they
// reach the platform's servers by the path the driver takes. On a netns
// client they run in its namespace (nsenter), listening on the
// namespace's side of the link, which this machine reaches for readiness
// probes and statistics and nothing outside does.
func Beside(name string, env platform.Env, dir state.Dir) (*Platform, error) {
	c := env.ClientHost()
	p := &Platform{name: name, env: env, state: dir, listen: c.ClientAddr(), beside: true}
	if c.Kind() == host.Netns {
		p.wrap = c.Wrap
	}
	return p, nil
}

// pickOn is where free port numbers are looked for: the address servers
// listen on, unless they run in the client's namespace (wrap), whose
// address is not this machine's: numbers free on this machine's loopback
// are free in the namespace, which holds nothing else.
func (p *Platform) pickOn() string {
	if p.wrap != nil {
		return "127.0.0.1"
	}
	return p.listen
}

// Name implements platform.Platform.
func (p *Platform) Name() string { return p.name }

// Check implements platform.Checker: limits need root (cgroups).
func (p *Platform) Check(ctx context.Context) error {
	if (p.opt.CPUSet != "" || p.opt.CPUs > 0 || p.opt.Memory != "") && os.Geteuid() != 0 {
		return platform.Unavailablef("%s sets CPU or memory limits, which need root: run nearnative as root", p.name)
	}
	return nil
}

// Close removes the run's cgroup parent directories.
func (p *Platform) Close() error {
	var errs []error
	for _, l := range cgroup.Leftovers(p.env.Run) {
		if err := cgroup.RemoveTree(l.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ProcState is the state file written for each native server.
type ProcState struct {
	Run       runid.ID `json:"run"`
	Name      string   `json:"name"`
	PID       int      `json:"pid"` // also the process group ID
	StartTick uint64   `json:"start_tick"`
	Cgroups   []string `json:"cgroups,omitempty"`
	Dir       string   `json:"dir"`
	Command   []string `json:"command"`
}

// ProcDir is where a run's native state files live.
func ProcDir(d state.Dir, run runid.ID) string {
	return filepath.Join(d.RunDir(run), "procs")
}

// Start implements platform.Platform.
func (p *Platform) Start(ctx context.Context, trial string, spec platform.Spec) (platform.Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	assign := p.assign
	if assign == nil {
		assign = platform.AssignPorts
	}
	for try := 1; ; try++ {
		ports, err := assign(spec, p.pickOn())
		if err != nil {
			return nil, err
		}
		srv, err := p.start(ctx, trial, spec, ports, p.opt.CPUSet, nil)
		if err == nil || !errors.Is(err, errPortTaken) || try == portTries {
			return srv, err
		}
	}
}

// start starts spec on the given ports, confined to cpuset ("" for none),
// in the cgroup of its topology group when shared is not nil (group.go),
// else in a cgroup of its own.
func (p *Platform) start(ctx context.Context, trial string, spec platform.Spec, ports map[string]int, cpuset string, shared *sharedGroup) (platform.Server, error) {
	dir, err := state.TempDir(p.env.Run, trial+"-"+spec.Name)
	if err != nil {
		return nil, err
	}
	s := &server{p: p, name: trial + "-" + spec.Name, dir: dir, ports: ports, cpuset: cpuset, shared: shared}
	if err := s.start(ctx, spec); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

type server struct {
	p      *Platform
	name   string
	dir    string
	ports  map[string]int
	cpuset string
	// shared is the cgroup of the server's topology group when it shares
	// one (group.go); group is then that cgroup, which the site removes.
	shared *sharedGroup
	argv   []string
	cmd    *exec.Cmd
	group  *cgroup.Group
	log    *os.File
	proc   *deathsig.Proc
	done   <-chan struct{}
	state  string
}

func (s *server) start(ctx context.Context, spec platform.Spec) error {
	listen := platform.Listen{Host: s.p.listen, Ports: s.ports, Dir: s.dir,
		From: platform.Nets(platform.Loopback, s.p.env.ClientHost().Subnet())}
	if err := writeFiles(s.dir, spec.FilesFor(listen)); err != nil {
		return err
	}
	s.argv = spec.Command(listen)
	if len(s.argv) == 0 {
		return fmt.Errorf("server %s: empty command", spec.Name)
	}
	bin, err := exec.LookPath(s.argv[0])
	if err != nil {
		return fmt.Errorf("server %s: %s not found: install it with `make setup`: %w", spec.Name, s.argv[0], err)
	}
	// A port taken between AssignPorts and now is reported clearly here
	// (in a client's namespace nothing else listens).
	if s.p.wrap == nil {
		for name, port := range s.ports {
			l, err := net.Listen("tcp", net.JoinHostPort(s.p.listen, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("server %s: port %s (%s:%d) is in use: %w (%w)", spec.Name, name, s.p.listen, port, err, errPortTaken)
			}
			l.Close()
		}
	}
	argv, err := s.wrapArgv(spec, append([]string{bin}, s.argv[1:]...))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.p.env.LogDir, 0o755); err != nil {
		return fmt.Errorf("creating log dir: %w", err)
	}
	if s.log, err = os.Create(filepath.Join(s.p.env.LogDir, s.name+".log")); err != nil {
		return fmt.Errorf("creating server log: %w", err)
	}
	// Not exec.CommandContext: the server must outlive a cancelled ctx until
	// Stop tears it down in order. It dies with nearnative (deathsig), so a
	// crashed run leaves no server running.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(s.p.env.Run))
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	proc, err := deathsig.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	s.cmd, s.proc = cmd, proc
	s.done = proc.Done()
	if err := s.writeState(); err != nil {
		return err
	}
	return s.waitStarted(ctx, cmd, bin, spec.Name)
}

// wrapArgv wraps the server's argv (its binary resolved): privileges
// dropped to spec.User after it joins its cgroup (the shared group of a
// topology's group, or one of its own when root or limited), then the
// platform's own wrapper (a client host's namespace).
func (s *server) wrapArgv(spec platform.Spec, argv []string) ([]string, error) {
	var err error
	lim := cgroup.Limits{CPUSet: s.cpuset, CPUs: s.p.opt.CPUs, MemoryBytes: s.p.opt.MemoryBytes()}
	if spec.User != "" {
		// Drop privileges after joining the cgroup (which needs root), with
		// setpriv, which execs without forking.
		uid, gid, err := lookupUser(spec.User)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", spec.Name, err)
		}
		if err := chownTree(s.dir, uid, gid); err != nil {
			return nil, err
		}
		for _, v := range spec.Volumes {
			if v.Own {
				if err := chownTree(v.HostPath, uid, gid); err != nil {
					return nil, err
				}
			}
		}
		argv = deathsig.Setpriv(uid, gid, argv...)
	}
	// Always a group when root, limits or not: Stop and cleanup then reach
	// every descendant, even one that left the process group (setsid).
	if s.shared != nil {
		if argv, err = s.shared.pin(argv, s.cpuset); err != nil {
			return nil, fmt.Errorf("server %s: %w", spec.Name, err)
		}
		s.group = s.shared.g
		argv = s.group.Wrap(argv)
	} else if !lim.Empty() || os.Geteuid() == 0 {
		if s.group, err = cgroup.New(s.p.env.Run, s.name, lim); err != nil {
			return nil, err
		}
		argv = s.group.Wrap(argv)
	}
	if s.p.wrap != nil {
		argv = s.p.wrap(argv)
	}
	return argv, nil
}

// waitStarted returns once the server runs: its wrappers (the cgroup
// shell, setpriv) have exec'd bin and it has not exited within earlyExit.
func (s *server) waitStarted(ctx context.Context, cmd *exec.Cmd, bin, name string) error {
	// A server that dies at once (bad flag, port taken) is reported now with
	// the tail of its log, not as a timeout later: wait until the wrappers
	// (the cgroup shell, setpriv) have exec'd the server, which takes long
	// on a busy machine, then give it earlyExit to fail.
	execd := time.NewTicker(5 * time.Millisecond)
	defer execd.Stop()
	wrapped := time.After(execTimeout)
	var settle <-chan time.Time
	for {
		select {
		case <-s.done:
			return fmt.Errorf("server %s exited at once (%v); last output:\n%s", name, s.proc.Err(), tail(s.log.Name(), 10))
		case <-execd.C:
			if settle == nil && runs(cmd.Process.Pid, bin) {
				if platform.IsQuickStart(ctx) {
					return nil // the caller times the start and watches the server itself
				}
				settle = time.After(earlyExit)
			}
		case <-wrapped:
			if settle == nil {
				settle = time.After(earlyExit)
			}
		case <-settle:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// earlyExit is how long a server that has just exec'd may take to fail on
// its arguments and still be reported at once; execTimeout bounds the wait
// for the exec itself.
const (
	earlyExit   = 150 * time.Millisecond
	execTimeout = 2 * time.Second
)

// runs reports whether process pid runs the binary bin yet (not a wrapper);
// bin may be a symbolic link (Debian's redis-server is one).
func runs(pid int, bin string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	return exe == bin
}

func lookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("unknown user %q: %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("giving %s to uid %d: %w", p, uid, err)
		}
		return nil
	})
}

func (s *server) writeState() error {
	dir := ProcDir(s.p.state, s.p.env.Run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating process state dir: %w", err)
	}
	st := ProcState{Run: s.p.env.Run, Name: s.name, PID: s.cmd.Process.Pid, Dir: s.dir, Command: s.argv}
	st.StartTick, _ = StartTick(st.PID)
	if s.group != nil {
		st.Cgroups = s.group.Dirs
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	s.state = filepath.Join(dir, s.name+".json")
	if err := os.WriteFile(s.state, b, 0o644); err != nil {
		return fmt.Errorf("writing process state: %w", err)
	}
	return nil
}

// StartTick returns the start time of pid in clock ticks since boot (field 22
// of /proc/PID/stat), which tells a process apart from a later one that got
// the same PID.
func StartTick(pid int) (uint64, error) {
	st, err := sysinfo.ReadProcStat(pid)
	if err != nil {
		return 0, err
	}
	return st.StartTime, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func (s *server) Addr(port string) string {
	p, ok := s.ports[port]
	if !ok {
		panic(fmt.Sprintf("native: port %q not declared", port))
	}
	return net.JoinHostPort(s.p.listen, strconv.Itoa(p))
}

func (s *server) Command() []string { return s.argv }

func (s *server) Describe() string {
	d := "host process"
	if s.cmd != nil && s.cmd.Process != nil {
		d += fmt.Sprintf(" pid %d", s.cmd.Process.Pid)
	}
	o := s.p.opt
	o.CPUSet = s.cpuset
	if o := o.String(); o != "" {
		d += " (" + o + " via cgroup)"
	}
	if s.shared != nil {
		d += ", in cgroup " + s.shared.name + " with the other servers of its group"
	}
	if s.p.beside {
		return d + ", beside the driver (" + s.p.env.ClientHost().Describe() + ") on " + s.p.listen
	}
	return d + ", client via " + s.p.listen
}

// Stop sends SIGTERM to the process group, waits up to StopTimeout, then
// SIGKILLs it; removes the cgroup, the private dir and the state file.
func (s *server) Stop(ctx context.Context) error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		pgid := s.cmd.Process.Pid
		select {
		case <-s.done:
		default:
			syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(StopTimeout):
				syscall.Kill(-pgid, syscall.SIGKILL)
				<-s.done
			}
		}
		// Children that left the leader behind still share its group.
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if s.shared == nil { // a shared group goes with the site (Close)
		if err := s.group.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", s.dir, err))
		}
	}
	if s.state != "" {
		os.Remove(s.state)
	}
	return errors.Join(errs...)
}

// CPUTime implements platform.CPUReporter: the CPU time of the server's
// cgroup, every process in it (as Docker's engine counts a container); for a
// server sharing its group's cgroup, its process tree (as the supervisor of
// a container-per-instance container counts it); without a group (not
// root), the user and system time of the server process and its reaped
// children from /proc/PID/stat.
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0, errors.New("server not started")
	}
	if s.shared != nil {
		return treeCPU(s.cmd.Process.Pid)
	}
	if s.group != nil {
		return s.group.CPUUsage()
	}
	st, err := sysinfo.ReadProcStat(s.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("reading server CPU time: %w", err)
	}
	return st.CPUWithChildren(), nil
}

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string {
	if s.shared != nil {
		return s.shared.treeSource()
	}
	if s.group != nil {
		return s.group.CPUSource()
	}
	return noGroupCPU
}

// noGroupCPU says how a server without a cgroup is measured.
const noGroupCPU = "/proc/PID/stat of the server process and its reaped children (no cgroup: nearnative is not root)"

// Degradations implements platform.Degrader: natively without root no
// server gets a cgroup, so it has no CPU scheduling group of its own (as a
// container has) and its CPU is read from /proc, missing children that have
// not been reaped.
func (p *Platform) Degradations() []string {
	if os.Geteuid() == 0 {
		return nil
	}
	return []string{"no CPU cgroup for native servers (not root): no scheduling group of their own as containers have; server CPU from " + noGroupCPU}
}

// writeFiles writes a spec's files into the server's private dir.
func writeFiles(dir string, files []platform.File) error {
	for _, f := range files {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		path := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
		if err := os.WriteFile(path, f.Content, mode); err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
	}
	return nil
}
