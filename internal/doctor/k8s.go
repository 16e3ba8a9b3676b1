package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/k8s"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// kubernetesChecks report on the cluster the k8s platforms would use: its
// nodes, CNI, kube-proxy mode, CPU manager policy, whether the workload image
// reaches the nodes, and the RBAC a run needs. The k8s platforms are
// optional: problems warn, they do not fail.
func kubernetesChecks(ctx context.Context, eng *docker.Daemon, o Options) []Check {
	var cs []Check
	local := cluster.DefaultConfig(state.Home())
	if cg, err := sysinfo.CgroupVersion(); err == nil && strings.Contains(cg, "v1") {
		cs = append(cs, Check{Name: "k8s cgroup v1", Status: OK, Detail: fmt.Sprintf(
			"this host uses cgroup v1: kubelet 1.31 to 1.34 run on it as they are, from 1.35 only with failCgroupV1: false; the local cluster pins %s", cluster.KubernetesVersion)})
	}
	if _, ok, err := local.Cached(); err != nil {
		cs = append(cs, Check{Name: "k8s binaries", Status: Warn, Detail: err.Error(), Fix: "rm -r " + local.BinDir() + " && nearnative cluster up"})
	} else if !ok {
		cs = append(cs, Check{Name: "k8s binaries", Status: Warn, Detail: fmt.Sprintf("Kubernetes %s and etcd %s are not built yet (about 15 minutes of CPU on two cores, once)", cluster.KubernetesVersion, cluster.EtcdVersion), Fix: "make cluster   (or: nearnative cluster up)"})
	} else {
		cs = append(cs, Check{Name: "k8s binaries", Status: OK, Detail: fmt.Sprintf("Kubernetes %s and etcd %s built and checksummed in %s", cluster.KubernetesVersion, cluster.EtcdVersion, local.BinDir())})
	}
	if err := cluster.Prerequisites(); err != nil {
		cs = append(cs, Check{Name: "k8s node packages", Status: Warn, Detail: err.Error(), Fix: "make setup"})
	}
	path := k8s.KubeconfigPath("", local)
	conn, err := k8s.Connect(path, local, nil)
	if err != nil {
		return append(cs, Check{Name: "kubernetes", Status: Warn, Detail: err.Error() + "; the k8s platforms are unavailable", Fix: "make cluster   (or: nearnative cluster up; or --kubeconfig FILE)"})
	}
	f, err := conn.Facts(ctx)
	if err != nil {
		return append(cs, Check{Name: "kubernetes", Status: Warn, Detail: err.Error(), Fix: "nearnative cluster up   (or fix the cluster of " + path + ")"})
	}
	cs = append(cs, Check{Name: "kubernetes", Status: OK, Detail: fmt.Sprintf("%s (kubeconfig %s); nodes %s", f.String(), path, strings.Join(f.Nodes, ", "))})
	gc := Check{Name: "k8s-guaranteed", Status: OK, Detail: "node " + f.Node + " runs the static CPU manager: Guaranteed pods with integer CPUs get exclusive cores"}
	if f.CPUManager != "static" {
		gc.Status, gc.Detail = Warn, fmt.Sprintf("node %s runs CPU manager policy %q: k8s-guaranteed needs static", f.Node, f.CPUManager)
		gc.Fix = "kubelet configuration: cpuManagerPolicy: static and reservedSystemCPUs (then remove the node's cpu_manager_state and restart kubelet)"
	}
	cs = append(cs, gc)
	var denied []string
	for _, kind := range k8s.Kinds {
		if err := conn.CheckRBAC(ctx, kind, false); err != nil {
			denied = append(denied, kind+": "+err.Error())
		}
	}
	if len(denied) > 0 {
		cs = append(cs, Check{Name: "k8s rbac", Status: Warn, Detail: strings.Join(denied, "; ")})
	} else {
		cs = append(cs, Check{Name: "k8s rbac", Status: OK, Detail: "the kubeconfig's user may create and delete namespaces, and pods, Services and ConfigMaps in them, read pod logs and events; " +
			"k8s-hostnet's pods run with hostNetwork in a namespace labelled for Pod Security level privileged, k8s-guaranteed's need nothing more than Guaranteed requests"})
	}
	if eng != nil {
		cfg, err := image.DefaultConfig()
		if err == nil {
			cfg.Ref = o.Image
			if ref, present, err := image.Current(ctx, eng.API(), cfg); err == nil && present {
				cs = append(cs, kubeImageCheck(ctx, conn, local, f, ref))
			}
		}
	}
	return cs
}

func kubeImageCheck(ctx context.Context, conn *k8s.Conn, local cluster.Config, f k8s.Facts, ref string) Check {
	c := Check{Name: "k8s image"}
	switch {
	case f.LocalCluster && local.HasImage(ctx, ref):
		c.Status, c.Detail = OK, ref+" is on the local node"
	case f.LocalCluster:
		c.Status, c.Detail = OK, ref+" is not on the local node yet: the first k8s trial imports it from Docker (about a minute)"
		c.Fix = "nearnative cluster up   (imports it now)"
	default:
		if conn.NodeHasImage(ctx, f.Node, ref) {
			c.Status, c.Detail = OK, ref+" is on node "+f.Node
		} else {
			c.Status, c.Detail = Warn, ref+" is not listed on node "+f.Node+": push it to a registry the nodes can pull from and pass --image REF, or load it on the nodes"
		}
	}
	return c
}
