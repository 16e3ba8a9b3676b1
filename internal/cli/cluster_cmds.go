package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/cluster"
	"github.com/nearnative/nearnative/internal/platforms/k8s"
)

// applyKubeconfig makes --kubeconfig the KUBECONFIG every k8s platform and
// cleanup reads, as kubectl's flag overrides the variable.
func (a *app) applyKubeconfig(*cobra.Command, []string) error {
	if a.kubeconfig == "" {
		return nil
	}
	if _, err := os.Stat(a.kubeconfig); err != nil {
		return withCode(ExitBadInput, fmt.Errorf("--kubeconfig %s: %w", a.kubeconfig, err))
	}
	return os.Setenv(k8s.EnvKubeconfig, a.kubeconfig)
}

// clusterCmd is `nearnative cluster up|down|status`: the one-node
// Kubernetes cluster the k8s platforms use when no kubeconfig names another.
func (a *app) clusterCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Bring up, inspect or remove the local one-node Kubernetes cluster the k8s platforms run on",
		Long: `The local cluster: etcd, kube-apiserver, controller-manager, scheduler, a private
containerd with CRI, a bridge CNI, kubelet and kube-proxy, all on loopback or on a
bridge of its own. The first 'up' builds Kubernetes ` + cluster.KubernetesVersion + ` and etcd ` + cluster.EtcdVersion + ` from the
Go module proxy (about 15 minutes of CPU on two cores) and caches them under the
state directory; 'down' removes everything the cluster made on the host.`,
		Example: `  nearnative cluster up
  nearnative run redis --platforms native,k8s-pod,k8s-service
  nearnative cluster down`,
	}
	c.AddCommand(a.clusterUpCmd(), a.clusterDownCmd(), a.clusterStatusCmd())
	return c
}

// clusterUpCmd is `nearnative cluster up`.
func (a *app) clusterUpCmd() *cobra.Command {
	var noImage bool
	var imageRef string
	up := &cobra.Command{
		Use:   "up",
		Short: "Build the binaries once, start the cluster, import the workload image, wait for the node",
		Example: `  nearnative cluster up
  nearnative cluster up --no-image`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			cfg := cluster.DefaultConfig(a.dir)
			if err := cluster.Prerequisites(); err != nil {
				return withCode(ExitUnavailable, err)
			}
			release, err := a.holdMachine(ctx, "cluster up")
			if err != nil {
				return err
			}
			defer release()
			o := cluster.UpOptions{Log: a.stderr}
			if !noImage {
				docker := &catalog.Docker{}
				defer docker.Close()
				ref, err := a.imageRef(ctx, docker, imageRef)
				if err != nil {
					return withCode(ExitUnavailable, fmt.Errorf("%w (or pass --no-image)", err))
				}
				eng, _ := docker.Get(ctx)
				o.Images = []string{ref}
				o.Save = func(ctx context.Context, ref string) (io.ReadCloser, error) {
					return eng.API().ImageSave(ctx, []string{ref})
				}
			}
			if err := cfg.Up(ctx, o); err != nil {
				return err
			}
			fmt.Fprint(a.stdout, cfg.Status(ctx).String())
			fmt.Fprintf(a.stdout, "kubeconfig               %s\n", cfg.Kubeconfig())
			return nil
		},
	}
	up.Flags().BoolVar(&noImage, "no-image", false, "do not import the workload image (the k8s platforms import it when they need it)")
	up.Flags().StringVar(&imageRef, "image", "", "workload image to import instead of the locally built one")
	return up
}

// clusterDownCmd is `nearnative cluster down`.
func (a *app) clusterDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "down",
		Short:   "Stop the cluster and remove its pods, processes, mounts, bridge, iptables chains and cgroups; restore sysctls",
		Example: "  nearnative cluster down",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := cluster.DefaultConfig(a.dir)
			release, err := a.holdMachine(c.Context(), "cluster down")
			if err != nil {
				return err
			}
			defer release()
			done, err := cfg.Down(c.Context(), a.stderr)
			for _, d := range done {
				fmt.Fprintln(a.stdout, "removed "+d)
			}
			if len(done) == 0 && err == nil {
				fmt.Fprintln(a.stdout, "the cluster is not running; nothing to remove")
			}
			return err
		},
	}
}

// clusterStatusCmd is `nearnative cluster status`.
func (a *app) clusterStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Show the cluster's processes and whether its node is Ready",
		Example: "  nearnative cluster status",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := cluster.DefaultConfig(a.dir)
			st := cfg.Status(c.Context())
			fmt.Fprint(a.stdout, st.String())
			if !st.Up() {
				return withCode(ExitUnavailable, fmt.Errorf("the cluster is not up: `nearnative cluster up`"))
			}
			fmt.Fprintf(a.stdout, "kubeconfig               %s\n", cfg.Kubeconfig())
			return nil
		},
	}
}
