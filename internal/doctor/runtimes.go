package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/lxc"
	"github.com/nearnative/nearnative/internal/platforms/podman"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/study"
)

// runtimeKinds are the platforms of the container runtimes beside
// Docker's runc, one per runtime: what the runtimes study needs.
var runtimeKinds = []struct{ kind, name string }{
	{platform.DockerRunscBridge, "runtime gVisor"},
	{platform.DockerCrunBridge, "runtime crun"},
	{platform.Podman, "podman"},
	{platform.PodmanRootless, "podman rootless"},
	{platform.LXC, "lxc"},
}

// runtimeChecks checks each container runtime beside runc as its platform
// checks itself before a run (gVisor's runsc and crun registered with
// dockerd and able to start here, Podman's service rootful and as the
// rootless user, LXC), and says which settings it runs with. The runtimes
// are optional: only the runtimes study needs them, so problems warn.
func runtimeChecks(ctx context.Context, eng *docker.Daemon, o Options) []Check {
	var cs []Check
	ref := o.Image
	if ref == "" && eng != nil {
		if cfg, err := image.DefaultConfig(); err == nil {
			ref, _, _ = image.Current(ctx, eng.API(), cfg)
		}
	}
	engine := &catalog.Docker{}
	defer engine.Close()
	for _, rk := range runtimeKinds {
		c := Check{Name: rk.name, Status: OK}
		err := catalog.Check(ctx, study.Platform{Name: rk.kind, Base: rk.kind}, host.Setting{Client: host.SettingNetns}, ref, state.Home(), engine,
			func(p platform.Platform) { c.Detail = runtimeDetail(rk.kind, p) })
		if err != nil {
			c.Status, c.Detail, c.Fix = Warn, err.Error()+"; platform "+rk.kind+" cannot run here", "make setup"
			if !errors.Is(err, platform.ErrUnavailable) {
				c.Fix = ""
			}
		}
		cs = append(cs, c)
	}
	return cs
}

// runtimeDetail says what a platform that can run here runs with.
func runtimeDetail(kind string, p platform.Platform) string {
	switch platform.Family(kind) {
	case platform.FamilyGVisor:
		if d, ok := p.(platform.Degrader); ok && len(d.Degradations()) > 0 {
			return strings.TrimPrefix(d.Degradations()[0], "runs under ")
		}
	case platform.FamilyDockerCrun:
		return "crun is registered with dockerd, its binary is there, and the cgroup layout is one crun accepts (not hybrid with controllers on the v2 mount)"
	case platform.FamilyPodman:
		pp, ok := p.(*podman.Platform)
		if !ok || pp.Network() == "" {
			break
		}
		if kind == platform.PodmanRootless {
			return fmt.Sprintf("rootless as %s (subordinate ids set up), %s", podman.RootlessUserName(), pp.Network())
		}
		return "rootful, " + pp.Network()
	case platform.FamilyLXC:
		if v := lxc.Version(); v != "" {
			return "LXC " + v + ": system containers from the workload image's root file system on a bridge of the run"
		}
	}
	return "can run here"
}
