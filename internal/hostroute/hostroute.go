// Package hostroute adds and removes the routes a run makes on a machine
// (a driver host's route to a sut host's container bridge, platform
// docker-bridge there), each recorded first under a directory
// (state.RouteDir) so that `nearnative cleanup` removes it after a crash:
// routes carry no label of their own. The record is a file RUN.NETNS, the
// run and the inode of the network namespace the route is in (the hosts of
// a test bed share one /run), a line "DST via GW" per route. Everything
// that reads or writes a record is here.
package hostroute

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// ErrRouted is wrapped by Add's refusal of a prefix the machine already
// routes otherwise (its own docker0, a LAN): a setting to change there,
// never a route nearnative replaces.
var ErrRouted = errors.New("already routed otherwise")

// Table is the machine's main routing table in this network namespace,
// and the records of what runs added to it.
type Table struct {
	// Dir holds the records ("" is state.RouteDir).
	Dir string
	// NetNS is the namespace's inode ("" reads /proc/self/ns/net).
	NetNS string
	// IP runs ip with args and returns its output (nil runs ip; tests
	// give a table of their own).
	IP func(ctx context.Context, args ...string) (string, error)
}

func (t Table) dir() string {
	if t.Dir != "" {
		return t.Dir
	}
	return state.RouteDir
}

func (t Table) netns() string {
	if t.NetNS != "" {
		return t.NetNS
	}
	l, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return "unknown"
	}
	return strings.Map(func(c rune) rune {
		if c >= '0' && c <= '9' {
			return c
		}
		return -1
	}, l)
}

// Record is the path of run's record in this namespace.
func (t Table) Record(run runid.ID) string {
	return filepath.Join(t.dir(), string(run)+"."+t.netns())
}

func (t Table) ip(ctx context.Context, args ...string) (string, error) {
	if t.IP != nil {
		return t.IP(ctx, args...)
	}
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Add routes dst via gw for run, recorded before it is made, and returns
// the source address the machine reaches gw from (the one gw sees). A
// prefix routed otherwise is refused (ErrRouted); one routed via gw
// already (an earlier run's) is taken over.
func (t Table) Add(ctx context.Context, run runid.ID, dst netip.Prefix, gw netip.Addr) (netip.Addr, error) {
	dst = dst.Masked()
	out, err := t.ip(ctx, "-4", "-o", "route", "show", "to", "match", dst.Addr().String())
	if err != nil {
		return netip.Addr{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "default ") && field(line, "via") != gw.String() {
			return netip.Addr{}, fmt.Errorf("%s is %w here (%s): nearnative does not change that route; give the sut host's dockerd a bridge subnet the driver hosts do not use (dockerd --bip), or use docker-nat", dst, ErrRouted, strings.TrimSpace(line))
		}
	}
	if err := t.record(run, func(lines []string) []string { return append(lines, dst.String()+" via "+gw.String()) }); err != nil {
		return netip.Addr{}, err
	}
	if _, err := t.ip(ctx, "route", "replace", dst.String(), "via", gw.String()); err != nil {
		return netip.Addr{}, errors.Join(err, t.forget(run, dst, gw))
	}
	out, err = t.ip(ctx, "-4", "-o", "route", "get", gw.String())
	src, perr := netip.ParseAddr(field(out, "src"))
	if err == nil && perr != nil {
		err = fmt.Errorf("no source address toward %s in %q", gw, strings.TrimSpace(out))
	}
	if err != nil {
		_, rerr := t.Remove(ctx, run, dst, gw)
		return netip.Addr{}, errors.Join(err, rerr)
	}
	return src, nil
}

// field is the word after key in ip's one-line output ("" without one).
func field(line, key string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == key {
			return f[i+1]
		}
	}
	return ""
}

// Remove deletes the route dst via gw of run and then its record line; a
// route already gone is no error (was false). A route that could not be
// deleted keeps its line, for the next cleanup.
func (t Table) Remove(ctx context.Context, run runid.ID, dst netip.Prefix, gw netip.Addr) (was bool, err error) {
	if _, err := t.ip(ctx, "route", "del", dst.Masked().String(), "via", gw.String()); err != nil {
		if !strings.Contains(err.Error(), "No such process") {
			return false, err
		}
	} else {
		was = true
	}
	return was, t.forget(run, dst, gw)
}

// Runs are the runs with a record in this namespace.
func (t Table) Runs() ([]runid.ID, error) {
	ents, err := os.ReadDir(t.dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []runid.ID
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), "."+t.netns())
		if !ok {
			continue
		}
		if id, err := runid.Parse(name); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// RemoveRun removes every route of run's record (Remove each) and says
// which were there.
func (t Table) RemoveRun(ctx context.Context, run runid.ID) ([]string, error) {
	lines, err := t.lines(run)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "via" {
			continue
		}
		dst, derr := netip.ParsePrefix(f[0])
		gw, gerr := netip.ParseAddr(f[2])
		if derr != nil || gerr != nil {
			continue
		}
		was, err := t.Remove(ctx, run, dst, gw)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", line, err))
			continue
		}
		if was {
			removed = append(removed, "route "+line)
		}
	}
	if len(errs) == 0 {
		// Lines that are no route (a damaged record) go with it.
		if err := os.Remove(t.Record(run)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// lines are run's record, none when it has none.
func (t Table) lines(run runid.ID) ([]string, error) {
	b, err := os.ReadFile(t.Record(run))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// forget removes the line of dst via gw from run's record, and the record
// once it is empty.
func (t Table) forget(run runid.ID, dst netip.Prefix, gw netip.Addr) error {
	line := dst.Masked().String() + " via " + gw.String()
	return t.record(run, func(lines []string) []string {
		out := lines[:0]
		for _, l := range lines {
			if l != line {
				out = append(out, l)
			}
		}
		return out
	})
}

// record rewrites run's record with edit (synced, renamed into place); an
// empty result removes it.
func (t Table) record(run runid.ID, edit func([]string) []string) error {
	lines, err := t.lines(run)
	if err != nil {
		return err
	}
	lines = edit(lines)
	path := t.Record(run)
	if len(lines) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(t.dir(), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(strings.Join(lines, "\n") + "\n")
	serr := f.Sync()
	if cerr := f.Close(); werr != nil || serr != nil || cerr != nil {
		os.Remove(tmp)
		return errors.Join(werr, serr, cerr)
	}
	return os.Rename(tmp, path)
}
