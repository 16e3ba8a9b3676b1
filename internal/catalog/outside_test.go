package catalog

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/redis"
)

// outsidePaths are the platforms whose servers sit on this machine's
// network stack: native and every Docker path.
var outsidePaths = []string{platform.Native, platform.DockerNAT, platform.DockerProxy, platform.DockerBridge, platform.DockerHost}

// TestNothingReachableFromOutside runs a trial of the redis workload on
// native and every Docker path, opened as a run opens them (each with its
// client host), and meanwhile lists the listening sockets of this
// machine's network namespace (ss) and the engine's port map of the run's
// containers: none of the run's may be on a wildcard address (0.0.0.0, ::)
// or the machine's primary address, with the client in a namespace of its
// own and with --client host alike.
func TestNothingReachableFromOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("runs servers on native and every Docker path")
	}
	if err := host.Check(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("needs ss (iproute2)")
	}
	eng, ref := testenv.WorkloadImage(t)
	primary, err := docker.PrimaryAddr()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]bool{"0.0.0.0": true, "::": true, "*": true, "[::]": true, primary.String(): true}
	for _, client := range host.Settings {
		t.Run("client="+client, func(t *testing.T) {
			ctx := context.Background()
			run := runid.New()
			root := t.TempDir()
			env := platform.Env{Run: run, LogDir: filepath.Join(root, "logs"), Image: ref}
			var ps []study.Platform
			for _, name := range outsidePaths {
				ps = append(ps, study.Platform{Name: name, Base: name})
			}
			o := &Opener{Dir: state.Dir{Root: root}, Client: host.Setting{Client: client}}
			plats, closeAll, err := o.Open(ctx, env, ps)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := closeAll(); err != nil {
					t.Errorf("closing the platforms: %v", err)
				}
			}()
			vals, err := workload.Resolve(redis.Workload{}.Params(), map[string]string{"clients": "20"}, true)
			if err != nil {
				t.Fatal(err)
			}
			in, err := redis.Workload{}.New(vals)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range outsidePaths {
				w := &watch{t: t, run: run, eng: eng, bad: bad}
				stop := w.start(ctx)
				res, err := in.Run(ctx, workload.Trial{Run: run, Name: "out-" + name, Platform: plats[name], Duration: time.Second,
					RawDir: filepath.Join(root, "raw"), Client: o.Clients[name]})
				stop()
				if err != nil {
					t.Fatalf("%s: trial: %v", name, err)
				}
				// docker-bridge's server listens in its container's own
				// namespace alone: the engine's port map is its check.
				if w.seen == 0 && (name != platform.DockerBridge || w.containers == 0) {
					t.Fatalf("%s: none of the run's listening sockets or containers was seen during its trial: the test would miss a wildcard (where: %v)", name, res.Where)
				}
				for _, f := range w.found {
					t.Errorf("%s (client %s): %s", name, o.Clients[name].Describe(), f)
				}
			}
		})
	}
}

// watch samples the run's listening sockets and published ports.
type watch struct {
	t     *testing.T
	run   runid.ID
	eng   *docker.Daemon
	bad   map[string]bool
	mu    sync.Mutex
	found []string
	seen  int // samples that found one of the run's listeners
	// containers counts the samples that found one of the run's containers.
	containers int
}

func (w *watch) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w.sample(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// ssLine is one `ss -Hltnp` line: its local address and its processes.
var ssLine = regexp.MustCompile(`^LISTEN\s+\d+\s+\d+\s+(\S+)\s+\S+\s*(.*)$`)
var ssPID = regexp.MustCompile(`pid=(\d+)`)

func (w *watch) sample(ctx context.Context) {
	cs, err := w.eng.API().ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", runid.Label+"="+string(w.run)))})
	if err != nil {
		return
	}
	ours := map[int]bool{}   // pids of the run's containers
	ips := map[string]bool{} // their addresses, for docker-proxy
	if len(cs) > 0 {
		w.mu.Lock()
		w.containers++
		w.mu.Unlock()
	}
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.PublicPort != 0 && w.bad[p.IP] {
				w.add(fmt.Sprintf("container %s publishes port %d on %s", c.Names, p.PublicPort, p.IP))
			}
		}
		if c.NetworkSettings != nil {
			for _, n := range c.NetworkSettings.Networks {
				if n != nil && n.IPAddress != "" {
					ips[n.IPAddress] = true
				}
			}
		}
		top, err := w.eng.API().ContainerTop(ctx, c.ID, []string{"-o", "pid"})
		if err != nil {
			continue
		}
		for _, row := range top.Processes {
			if len(row) > 0 {
				if pid, err := strconv.Atoi(strings.TrimSpace(row[0])); err == nil {
					ours[pid] = true
				}
			}
		}
	}
	out, err := exec.CommandContext(ctx, "ss", "-Hltnp").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := ssLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		for _, pm := range ssPID.FindAllStringSubmatch(m[2], -1) {
			pid, _ := strconv.Atoi(pm[1])

			if !w.isOurs(pid, ours, ips) {
				continue
			}
			w.mu.Lock()
			w.seen++
			w.mu.Unlock()
			addr := m[1]
			if i := strings.LastIndex(addr, ":"); i >= 0 {
				addr = addr[:i]
			}
			addr = strings.Trim(strings.TrimSuffix(addr, "%lo"), "[]")
			if w.bad[addr] || w.bad["["+addr+"]"] {
				w.add(fmt.Sprintf("pid %d listens on %s: %s", pid, m[1], strings.TrimSpace(line)))
			} else if a, err := netip.ParseAddr(addr); err == nil && a.IsUnspecified() {
				w.add(fmt.Sprintf("pid %d listens on the wildcard %s", pid, m[1]))
			}
		}
	}
}

// isOurs reports whether pid belongs to the run: a process in one of the
// run's cgroups (native servers; redis-server writes its title over its
// environment) or with the run in its environment (client tools), a
// process of one of the run's containers (docker-host's servers), or a
// docker-proxy forwarding to one of them.
func (w *watch) isOurs(pid int, ours map[int]bool, ips map[string]bool) bool {
	if ours[pid] {
		return true
	}
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(cg), "/"+string(w.run)+"/") {
		return true
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && strings.Contains(string(env), runid.EnvVar+"="+string(w.run)+"\x00") {
		return true
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmd), "docker-proxy") {
		return false
	}
	args := strings.Split(string(cmd), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-container-ip" && ips[args[i+1]] {
			return true
		}
	}
	return false
}

func (w *watch) add(f string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.found {
		if g == f {
			return
		}
	}
	w.found = append(w.found, f)
}
