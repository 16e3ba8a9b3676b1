package cleanup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// Routes sweeps the routes runs added on this machine as a driver host
// (state.RouteDir: a file RUN.NETNS per run and network namespace, a line
// "DST via GW" per route); only the records of this process's network
// namespace, whose routes it can see.
type Routes struct {
	// Dir is where the records are ("" is state.RouteDir).
	Dir string
	// NetNS is the namespace's inode ("" reads /proc/self/ns/net).
	NetNS string
	// Del removes one route (ip route del DST via GW) and says whether it
	// was there; nil runs ip.
	Del func(ctx context.Context, dst, gw string) (bool, error)
}

// netns is the inode of the network namespace whose records are swept.
func (r Routes) netns() string {
	if r.NetNS != "" {
		return r.NetNS
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

// Kind implements Sweeper.
func (Routes) Kind() string { return "routes to sut hosts' container bridges" }

func (r Routes) dir() string {
	if r.Dir != "" {
		return r.Dir
	}
	return state.RouteDir
}

// Runs implements Sweeper.
func (r Routes) Runs(context.Context) ([]runid.ID, error) {
	ents, err := os.ReadDir(r.dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []runid.ID
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), "."+r.netns())
		if !ok {
			continue
		}
		if id, err := runid.Parse(name); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// Remove implements Sweeper: every route of the run's record, then the
// record. A route already gone is no error.
func (r Routes) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	path := filepath.Join(r.dir(), string(run)+"."+r.netns())
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	del := r.Del
	if del == nil {
		del = func(ctx context.Context, dst, gw string) (bool, error) {
			_, _, err := command(ctx, "ip", "route", "del", dst, "via", gw)
			if err != nil && strings.Contains(err.Error(), "No such process") {
				return false, nil // gone already
			}
			return err == nil, err
		}
	}
	var removed []string
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "via" {
			continue
		}
		was, err := del(ctx, f[0], f[2])
		if err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", line, err))
			continue
		}
		if was {
			removed = append(removed, "route "+line)
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
