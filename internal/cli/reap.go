package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/podman"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
)

// sweepers returns every sweeper `cleanup` and the reaping of `run` use,
// and a function that releases their connections. An engine that cannot be
// reached is said on note and left out.
func (a *app) sweepers(ctx context.Context, note io.Writer) ([]cleanup.Sweeper, func()) {
	closers := []func(){}
	sweepers := []cleanup.Sweeper{cleanup.Processes{Dir: a.dir}}
	if eng, err := docker.Connect(ctx); err == nil {
		closers = append(closers, func() { eng.Close() })
		sweepers = append(sweepers, cleanup.Containers{Engine: eng})
	} else {
		fmt.Fprintf(note, "note: %v: containers are not checked\n", err)
	}
	if kube, err := (&catalog.Docker{}).Kube(ctx, a.dir); err == nil && kube.Reachable(ctx) == nil {
		sweepers = append(sweepers, cleanup.KubeNamespaces{Client: kube.Client(), Where: kube.Kubeconfig})
	}
	// Podman's containers after the processes (a crashed run's service
	// and conmons) and before the cgroups and temp dirs.
	sweepers = append(sweepers, podman.Sweeper{}, podman.Sweeper{Rootless: true})
	sweepers = append(sweepers, vm.Sweeper{}, cleanup.Cgroups{}, cleanup.TempDirs{})
	sweepers = append(sweepers, cleanup.NetworkSweepers()...)
	return sweepers, func() {
		for _, c := range closers {
			c()
		}
	}
}

// reaper is the engine's Reap for `run`: it removes what crashed runs left
// (runs whose nearnative process is known to be gone: state.Liveness), one
// line per run, before the first trial; with noReap it only says which
// crashed runs left things and that trials may be disturbed.
func (a *app) reaper(noReap bool) func(ctx context.Context, self runid.ID, resumed bool, logf func(string, ...any)) ([]string, error) {
	return func(ctx context.Context, self runid.ID, resumed bool, logf func(string, ...any)) ([]string, error) {
		var notes strings.Builder
		sweepers, closeAll := a.sweepers(ctx, &notes)
		defer closeAll()
		if s := strings.TrimSpace(notes.String()); s != "" {
			logf("reaping: %s", strings.TrimPrefix(s, "note: "))
		}
		if noReap {
			crashed := cleanup.Crashed(ctx, a.dir, sweepers)
			if len(crashed) == 0 {
				return nil, ctx.Err()
			}
			w := fmt.Sprintf("--no-reap: what crashed run(s) %s left is still on the machine, so trials may be disturbed (`nearnative cleanup` removes it)", joinIDs(crashed))
			logf("%s", w)
			return []string{w}, ctx.Err()
		}
		rep := cleanup.Clean(ctx, a.dir, sweepers, cleanup.Options{})
		if resumed {
			// This process holds the run now and has started nothing: what
			// carries its ID was left by its earlier, crashed process.
			own := cleanup.Clean(ctx, a.dir, sweepers, cleanup.Options{Run: self, Force: true})
			rep.Runs = append(rep.Runs, own.Runs...)
		}
		var warnings []string
		for _, rr := range rep.Runs {
			if len(rr.Removed) > 0 {
				logf("reaped crashed run %s: removed %s", rr.Run, strings.Join(rr.Removed, "; "))
			}
			for _, err := range rr.Errors {
				w := fmt.Sprintf("reaping crashed run %s: %v (trials may be disturbed; `nearnative cleanup %s` tries again)", rr.Run, err, rr.Run)
				logf("%s", w)
				warnings = append(warnings, w)
			}
		}
		for _, inv := range rep.Invalid {
			logf("reaping: %s", inv)
		}
		return warnings, ctx.Err()
	}
}

func joinIDs(ids []runid.ID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}
