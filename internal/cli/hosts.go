package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/sshhost"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
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
	where := Placement(f)
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

// Placement says in one line where each role runs.
func Placement(f *hostfile.File) string {
	sut := f.With(hostfile.RoleSUT)[0]
	parts := []string{fmt.Sprintf("servers on sut host %s (%s)", sut.Name, sut.Address)}
	for role, name := range f.Place {
		if role != hostfile.Driver {
			h, _ := f.Host(name)
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
