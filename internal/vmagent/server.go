package vmagent

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/deathsig"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// LogDir is where the agent keeps the output of started processes.
const LogDir = "/run/nearnative"

type agent struct {
	token  string
	logDir string
	mu     sync.Mutex
	procs  map[int]*proc
	// jobs are the process groups of the /run jobs running now: killed
	// with the started processes when the agent stops (a remote host's
	// agent whose SSH session ended).
	jobs map[int]bool
	// limited are the runs whose processes it gave cgroups (Proc's
	// limits): their cgroup trees go when the agent stops.
	limited map[runid.ID]bool
}

type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // how it ended, once done is closed
}

func serve(params map[string]string) error {
	token := params[ParamToken]
	if token == "" {
		return fmt.Errorf("no token: neither the firmware file %s nor %s on the kernel command line", TokenFwCfg, ParamToken)
	}
	ip, _, _ := net.ParseCIDR(params[ParamIP])
	a := newAgent(token)
	go reapOrphans()
	if err := os.MkdirAll(LogDir, 0o755); err != nil {
		return err
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(Port))
	log("serving on %s", addr)
	fmt.Fprintln(os.Stderr, readyPrefix)
	return http.ListenAndServe(addr, a.handler(powerOff))
}

func newAgent(token string) *agent {
	return &agent{token: token, procs: map[int]*proc{}, jobs: map[int]bool{}, logDir: LogDir}
}

// handler serves the API; poweroff is called (after the answer is sent)
// on /poweroff.
func (a *agent) handler(poweroff func()) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", a.auth(func(r *http.Request) (any, error) { return struct{}{}, nil }))
	mux.HandleFunc("/start", a.auth(a.start))
	mux.HandleFunc("/stop", a.auth(a.stop))
	mux.HandleFunc("/run", a.auth(a.run))
	mux.HandleFunc("/cpu", a.auth(a.cpu))
	mux.HandleFunc("/machine", a.auth(machine))
	mux.HandleFunc("/status", a.auth(a.status))
	mux.HandleFunc("/put", a.auth(a.put))
	mux.HandleFunc("/sched", a.auth(a.sched))
	mux.HandleFunc("/time", a.auth(clock))
	mux.HandleFunc("/dial", a.dial)
	mux.HandleFunc("/poweroff", a.auth(func(r *http.Request) (any, error) {
		go func() {
			time.Sleep(100 * time.Millisecond)
			a.killAll()
			poweroff()
		}()
		return struct{}{}, nil
	}))
	return mux
}

func (a *agent) auth(h func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) != 1 {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		out, err := h(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}
}

func decode(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}

// groupSeq numbers the limited processes' cgroups.
var groupSeq atomic.Int64

// prepare writes the files and builds the command of p; release removes
// what it made for the command (its cgroup) once the command has ended.
func prepare(p Proc) (cmd *exec.Cmd, release func(), err error) {
	release = func() {}
	if p.CPUs <= 0 && p.MemoryBytes <= 0 {
		cmd, err = prepareCmd(p, nil)
		return cmd, release, err
	}
	run, err := runid.Parse(p.Env[runid.EnvVar])
	if err != nil {
		return nil, nil, fmt.Errorf("limits of %s: the process has no valid %s in its environment, which names its cgroup", p.Name, runid.EnvVar)
	}
	if p.Name == "" || strings.ContainsAny(p.Name, "/") || strings.Contains(p.Name, "..") {
		return nil, nil, fmt.Errorf("limits of %q: a process with limits needs a name without '/' or '..' (its cgroup's)", p.Name)
	}
	// A group of its own even when another process of that name runs.
	g, err := cgroup.New(run, fmt.Sprintf("%s-%d", p.Name, groupSeq.Add(1)), cgroup.Limits{CPUs: p.CPUs, MemoryBytes: p.MemoryBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("limits of %s (cpus %v, memory %d bytes): %w", p.Name, p.CPUs, p.MemoryBytes, err)
	}
	if cmd, err = prepareCmd(p, g.Wrap); err != nil {
		g.Remove()
		return nil, nil, err
	}
	return cmd, func() { g.Remove() }, nil
}

// prepareCmd writes the files and builds the command of p, its argv passed
// through wrap (a cgroup's) when wrap is not nil.
func prepareCmd(p Proc, wrap func([]string) []string) (*exec.Cmd, error) {
	if len(p.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	if p.Dir == "" {
		p.Dir = "/"
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, err
	}
	userUID := -1
	if p.User != "" {
		if u, err := user.Lookup(p.User); err == nil {
			userUID, _ = strconv.Atoi(u.Uid)
		}
	}
	if err := ownDir(p.Dir, userUID); err != nil {
		return nil, err
	}
	for _, f := range p.Files {
		if strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") {
			return nil, fmt.Errorf("file path %q must be relative", f.Path)
		}
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		path := filepath.Join(p.Dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := writeNoFollow(path, f.Content, mode); err != nil {
			return nil, err
		}
	}
	bin, err := exec.LookPath(p.Argv[0])
	if err != nil {
		return nil, fmt.Errorf("%s not found in the guest: %w", p.Argv[0], err)
	}
	argv := append([]string{bin}, p.Argv[1:]...)
	if p.CPUSet != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("pinning %s to CPUs %s: %w", p.Argv[0], p.CPUSet, err)
		}
		argv = append([]string{ts, "-c", p.CPUSet}, argv...)
	}
	var cred *syscall.Credential
	if p.User != "" {
		u, err := user.Lookup(p.User)
		if err != nil {
			return nil, fmt.Errorf("unknown user %q: %w", p.User, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, dir := range append([]string{p.Dir}, p.Own...) {
			filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
				if err == nil {
					os.Lchown(path, uid, gid)
				}
				return nil
			})
		}
		if wrap != nil {
			// Join the cgroup as root, then drop to the user (setpriv
			// execs without forking).
			argv = deathsig.Setpriv(uid, gid, argv...)
		} else {
			cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		}
	}
	if wrap != nil {
		argv = wrap(argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = os.Environ()
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.Stdin != nil {
		cmd.Stdin = bytes.NewReader(p.Stdin)
	}
	cmd.SysProcAttr.Credential = cred
	return cmd, nil
}

func (a *agent) start(r *http.Request) (any, error) {
	var p Proc
	if err := decode(r, &p); err != nil {
		return nil, err
	}
	cmd, release, err := prepare(p)
	if err != nil {
		return nil, err
	}
	a.noteLimits(p)
	name := p.Name
	if name == "" {
		name = filepath.Base(p.Argv[0])
	}
	logPath := filepath.Join(a.logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		release()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := startTracked(cmd); err != nil {
		f.Close()
		release()
		return nil, fmt.Errorf("starting %s: %w", p.Argv[0], err)
	}
	pr := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		untrack(cmd.Process.Pid)
		release()
		f.Close()
		close(pr.done)
	}()
	// A process that dies at once is reported now.
	select {
	case <-pr.done:
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s exited at once (%v): %s", p.Argv[0], cmd.ProcessState, tail(out))
	case <-time.After(50 * time.Millisecond):
	}
	a.mu.Lock()
	a.procs[cmd.Process.Pid] = pr
	a.mu.Unlock()
	log("started %s pid %d", strings.Join(p.Argv, " "), cmd.Process.Pid)
	return Started{PID: cmd.Process.Pid}, nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

func (a *agent) stop(r *http.Request) (any, error) {
	var req StopRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	a.mu.Lock()
	pr := a.procs[req.PID]
	delete(a.procs, req.PID)
	a.mu.Unlock()
	if pr == nil {
		return Stopped{}, nil // already gone
	}
	if req.Timeout <= 0 {
		req.Timeout = 5 * time.Second
	}
	pr.terminate(req.Timeout)
	out, _ := os.ReadFile(pr.log)
	os.Remove(pr.log)
	return Stopped{Log: out}, nil
}

func (pr *proc) terminate(timeout time.Duration) {
	pgid := pr.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(timeout):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-pr.done
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

func (a *agent) killAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for pid, pr := range a.procs {
		pr.terminate(3 * time.Second)
		delete(a.procs, pid)
	}
	for pgid := range a.jobs {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for run := range a.limited {
		for _, l := range cgroup.Leftovers(run) {
			if err := cgroup.RemoveTree(l.Dir); err != nil {
				log("removing %s: %v", l.Dir, err)
			}
		}
		delete(a.limited, run)
	}
}

// noteLimits remembers p's run when p has limits (a cgroup under it).
func (a *agent) noteLimits(p Proc) {
	if p.CPUs <= 0 && p.MemoryBytes <= 0 {
		return
	}
	if run, err := runid.Parse(p.Env[runid.EnvVar]); err == nil {
		a.mu.Lock()
		if a.limited == nil {
			a.limited = map[runid.ID]bool{}
		}
		a.limited[run] = true
		a.mu.Unlock()
	}
}

func (a *agent) run(r *http.Request) (any, error) {
	var p Proc
	if err := decode(r, &p); err != nil {
		return nil, err
	}
	cmd, release, err := prepare(p)
	if err != nil {
		return nil, err
	}
	a.noteLimits(p)
	defer release()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := startTracked(cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", p.Argv[0], err)
	}
	a.mu.Lock()
	a.jobs[cmd.Process.Pid] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.jobs, cmd.Process.Pid)
		a.mu.Unlock()
	}()
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		untrack(cmd.Process.Pid)
		done <- err
	}()
	var res JobResult
	select {
	case err = <-done:
	case <-r.Context().Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		res.Error = "cancelled"
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res.Wall = time.Since(start)
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.ExitCode = cmd.ProcessState.ExitCode()
	res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		res.Error = err.Error()
	}
	return res, nil
}

func (a *agent) status(r *http.Request) (any, error) {
	pid, err := strconv.Atoi(r.URL.Query().Get("pid"))
	if err != nil {
		return nil, fmt.Errorf("pid: %w", err)
	}
	a.mu.Lock()
	pr := a.procs[pid]
	a.mu.Unlock()
	if pr == nil {
		return nil, fmt.Errorf("no process %d was started here", pid)
	}
	var st Status
	out, _ := os.ReadFile(pr.log)
	st.Tail = tail(out)
	select {
	case <-pr.done:
		st.Exit = fmt.Sprintf("exited: %v", pr.cmd.ProcessState)
		if pr.err != nil {
			st.Exit = fmt.Sprintf("exited: %v", pr.err)
		}
	default:
		st.Running = true
	}
	return st, nil
}

func (a *agent) sched(r *http.Request) (any, error) {
	pid, err := strconv.Atoi(r.URL.Query().Get("pid"))
	if err != nil {
		return nil, fmt.Errorf("pid: %w", err)
	}
	// The whole process tree, as for its CPU time: a prefork server's
	// migrations are its workers'.
	st, err := sysinfo.TreeSched(pid)
	return Sched{Migrations: st.Migrations}, err
}

func (a *agent) cpu(r *http.Request) (any, error) {
	pid, err := strconv.Atoi(r.URL.Query().Get("pid"))
	if err != nil {
		return nil, fmt.Errorf("pid: %w", err)
	}
	d, err := ProcCPU("/proc", pid)
	return CPU{Time: d}, err
}

// ProcCPU is the CPU time of pid and of every living descendant under
// procRoot (sysinfo.TreeCPU): a server that forks long-lived workers
// (PostgreSQL's backends, Apache's prefork children) spends most of its time
// in them, and a child's time reaches its parent's cutime only once it has
// been reaped; summing the tree counts the living ones too, and each reaped
// one once (in its reaper). Processes that leave the tree (a daemon's double
// fork) are not counted.
func ProcCPU(procRoot string, pid int) (time.Duration, error) {
	return sysinfo.TreeCPU(procRoot, pid)
}

// machine answers /machine: the machine's /proc/stat as it is, when it was
// read, and the kernel's boot ID.
func machine(*http.Request) (any, error) {
	b, err := os.ReadFile("/proc/stat")
	at := time.Now()
	if err != nil {
		return nil, err
	}
	id, err := sysinfo.BootID()
	if err != nil {
		return nil, err
	}
	return Machine{BootID: id, Stat: string(b), At: at}, nil
}

// ownDir refuses a process directory another user could have prepared (on
// a shared host, a predictable name under /tmp): a symlink; and, in a
// directory every user may write to (/tmp, /var/tmp), one that belongs to
// someone other than root, the agent's user or the process's (uid
// userUID, -1 for none), or that others may write to (unless sticky).
func ownDir(dir string, userUID int) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink?): remove it", dir)
	}
	parent, err := os.Stat(filepath.Dir(dir))
	if err != nil || parent.Mode().Perm()&0o002 == 0 || dir == "/" {
		return nil // only its owners could have made it
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		uid := int(sys.Uid)
		if uid != 0 && uid != os.Geteuid() && uid != userUID {
			return fmt.Errorf("%s belongs to uid %d, not to the agent's user: remove it", dir, uid)
		}
	}
	if st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by other users: remove it", dir)
	}
	return nil
}

// writeNoFollow writes a file as os.WriteFile does, but never through a
// symlink, and with mode even when the file was there.
func writeNoFollow(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
