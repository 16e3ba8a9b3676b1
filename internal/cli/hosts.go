package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nearnative/nearnative/internal/doctor"
	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/sshhost"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/workload"
)

// loadHosts reads and validates a hosts file: bad input (exit 2) when it
// is malformed or places a role on a host that does not exist.
func loadHosts(path string) (*hostfile.File, error) {
	f, err := hostfile.Load(path)
	if err != nil {
		return nil, withCode(ExitBadInput, err)
	}
	return f, nil
}

// connectHosts connects to every host of the hosts file at path before
// the first trial: a refused host key is bad input (exit 2); an
// unreachable host or a clock too far off is unavailable (exit 3). It
// returns the run's notes on the hosts and prints where each role runs.
// The study, when given, records the file's absolute path (so that
// --resume finds it).
func (a *app) connectHosts(ctx context.Context, path string, st *study.Study) (*sshhost.Set, []store.RunNote, error) {
	f, err := loadHosts(path)
	if err != nil {
		return nil, nil, err
	}
	if st != nil {
		if abs, err := filepath.Abs(path); err == nil {
			st.Hosts = abs
		}
	}
	set, err := sshhost.ConnectAll(ctx, f, sshhost.Options{Log: a.stderr})
	switch {
	case errors.Is(err, sshhost.ErrHostKey):
		return nil, nil, withCode(ExitBadInput, err)
	case err != nil:
		return nil, nil, withCode(ExitUnavailable, err)
	}
	var notes []store.RunNote
	where := whereRolesRun(f)
	fmt.Fprintln(a.stderr, "hosts: "+where)
	notes = append(notes, store.RunNote{Kind: store.NoteHosts, Subject: "roles", Text: where})
	for _, c := range set.Clocks() {
		notes = append(notes, store.RunNote{Kind: store.NoteHosts, Subject: "clock", Text: c})
	}
	if f.Testbed {
		notes = append(notes, store.RunNote{Kind: store.NoteHosts, Subject: "test bed",
			Text: "the hosts are network namespaces of one machine (nearnative testbed): they share its cores and memory, so these figures test correctness, not performance"})
	}
	return set, notes, nil
}

// whereRolesRun says in one line where each role runs.
func whereRolesRun(f *hostfile.File) string {
	sut := f.With(hostfile.RoleSUT)[0]
	parts := []string{fmt.Sprintf("servers on sut host %s (%s)", sut.Name, sut.Address)}
	// Sorted by role name, not in the map's order: the line is a stored
	// note, the same for the same file.
	for _, role := range slices.Sorted(maps.Keys(f.Place)) {
		if role != hostfile.Driver {
			h, _ := f.Host(f.Place[role])
			parts = append(parts, fmt.Sprintf("%s on %s (%s)", role, h.Name, h.Address))
		}
	}
	var ds []string
	for _, h := range f.Drivers() {
		ds = append(ds, fmt.Sprintf("%s (%s)", h.Name, h.Address))
	}
	d := "load driver on driver host " + ds[0]
	if len(ds) > 1 {
		d = "load driver on driver hosts " + strings.Join(ds, ", ") + " (nearnative's own driver spreads its processes over them; an external tool such as redis-benchmark runs on the first)"
	}
	return strings.Join(append(parts, d), "; ")
}

// connectEach connects to every host of f, one at a time, without the clock
// check: doctor and cleanup report each host's problem and go on.
func (a *app) connectEach(ctx context.Context, f *hostfile.File) ([]*sshhost.Conn, map[string]error) {
	var conns []*sshhost.Conn
	errs := map[string]error{}
	for _, h := range f.Hosts {
		c, err := sshhost.Connect(ctx, h, sshhost.Options{KnownHosts: f.KnownHosts, Log: a.stderr})
		if err != nil {
			errs[h.Name] = err
			continue
		}
		conns = append(conns, c)
	}
	return conns, errs
}

// doctorHost is a connected host as the doctor's checks see it.
type doctorHost struct{ c *sshhost.Conn }

func (d doctorHost) Name() string { return d.c.Host.Name }
func (d doctorHost) Output(ctx context.Context, cmd string) ([]byte, error) {
	return d.c.Output(ctx, cmd, nil)
}
func (d doctorHost) Offset() vmagent.Offset { return d.c.Offset() }

// doctorHosts checks every host of the hosts file at path.
func (a *app) doctorHosts(ctx context.Context, path string) error {
	f, err := loadHosts(path)
	if err != nil {
		return err
	}
	conns, errs := a.connectEach(ctx, f)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var checks []doctor.Check
	for _, h := range f.Hosts {
		if err := errs[h.Name]; err != nil {
			checks = append(checks, doctor.Check{Name: "host " + h.Name, Status: doctor.Fail, Detail: err.Error()})
		} else {
			checks = append(checks, doctor.Check{Name: "host " + h.Name, Status: doctor.OK, Detail: "SSH " + h.Target() + ": host key known, agent answers"})
		}
	}
	var rs []doctor.Remote
	for _, c := range conns {
		rs = append(rs, doctorHost{c})
	}
	checks = append(checks, doctor.Hosts(ctx, rs, f.OffsetMax())...)
	var suts []doctor.DockerRemote
	for _, c := range conns {
		if c.Host.Has(hostfile.RoleSUT) {
			suts = append(suts, c)
		}
	}
	checks = append(checks, doctor.HostDocker(ctx, suts)...)
	for _, ch := range checks {
		fmt.Fprintf(a.stdout, "%-4s  %-20s %s\n", ch.Status, ch.Name, ch.Detail)
		if ch.Fix != "" {
			fmt.Fprintf(a.stdout, "      %-20s fix: %s\n", "", ch.Fix)
		}
	}
	if !doctor.Healthy(checks) {
		return withCode(ExitUnavailable, fmt.Errorf("the hosts of %s cannot run a study yet: apply the fixes above", path))
	}
	fmt.Fprintf(a.stdout, "the hosts of %s can run the redis studies\n", path)
	return nil
}

// cleanupHosts runs `nearnative cleanup` with the same arguments on every
// host of the hosts file (the labels are the same there as here) and, when
// asked, removes the pushed binary.
func (a *app) cleanupHosts(ctx context.Context, path string, args []string, force, orphans, removeBinary bool) error {
	f, err := loadHosts(path)
	if err != nil {
		return err
	}
	conns, errs := a.connectEach(ctx, f)
	var failed []error
	for _, h := range f.Hosts {
		if err := errs[h.Name]; err != nil {
			failed = append(failed, err)
		}
	}
	for _, c := range conns {
		cmd := c.Self() + " cleanup"
		if c.DockerSocket() != hostfile.DefaultDockerSocket {
			// The containers of Docker platforms there are on this engine.
			cmd = "DOCKER_HOST='unix://" + strings.ReplaceAll(c.DockerSocket(), "'", `'\''`) + "' " + cmd
		}
		if len(args) == 1 {
			cmd += " " + args[0]
		}
		if force {
			cmd += " --force"
		}
		if orphans {
			cmd += " --orphans"
		}
		out, err := c.Output(ctx, cmd, nil)
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				fmt.Fprintf(a.stdout, "host %s: %s\n", c.Host.Name, l)
			}
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("host %s: %w", c.Host.Name, err))
		}
	}
	// Binaries go after every host's cleanup: hosts may share a file
	// system (the test bed's), and the running agents keep their inodes.
	for _, c := range conns {
		if removeBinary {
			if _, err := c.Output(ctx, "rm -rf "+c.Self()+" "+vm.StageDir, nil); err != nil {
				failed = append(failed, fmt.Errorf("host %s: removing %s and %s: %w", c.Host.Name, c.Self(), vm.StageDir, err))
			} else {
				fmt.Fprintf(a.stdout, "host %s: removed %s and the VM guest files in %s\n", c.Host.Name, c.Self(), vm.StageDir)
			}
		}
		c.Close()
	}
	return errors.Join(failed...)
}

// The roles beside the driver run on a driver host through the remote
// platform, which must do all the host platform does.
var _ workload.HostPlatform = (*remote.Platform)(nil)
