package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/cleanup"
	"github.com/nearnative/nearnative/internal/doctor"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/image"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/study"
)

func (a *app) doctorCmd() *cobra.Command {
	var o doctor.Options
	var hostsFile string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run the built-in studies, and say how to fix what is missing",
		Long: `Check root, the Docker engine, the workload image (and that host and image run
the same package versions), the workload tools, the Kubernetes cluster, cgroups,
the CPUs and memory, and which acceleration a QEMU guest gets (it boots one:
seconds with KVM, up to a minute without). Each failed check carries the command
that fixes it; the exit code is 3 when a built-in study cannot run.`,
		Example: `  nearnative doctor
  nearnative doctor --skip-vm
  nearnative doctor --hosts testbed/hosts.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if hostsFile != "" {
				return a.doctorHosts(c.Context(), hostsFile)
			}
			// Its QEMU boot probe would disturb a run measuring now.
			release, err := a.holdMachine(c.Context(), "doctor")
			if err != nil {
				return err
			}
			defer release()
			checks := doctor.Run(c.Context(), o)
			for _, ch := range checks {
				fmt.Fprintf(a.stdout, "%-4s  %-20s %s\n", ch.Status, ch.Name, ch.Detail)
				if ch.Fix != "" {
					fmt.Fprintf(a.stdout, "      %-20s fix: %s\n", "", ch.Fix)
				}
			}
			if !doctor.Healthy(checks) {
				return withCode(ExitUnavailable, fmt.Errorf("the built-in studies cannot run here yet: apply the fixes above"))
			}
			fmt.Fprintln(a.stdout, "the built-in studies can run here")
			return nil
		},
	}
	c.Flags().StringVar(&o.Image, "image", "", "use this workload image instead of the locally built one")
	c.Flags().BoolVar(&o.SkipVM, "skip-vm", false, "skip the QEMU boot probe")
	c.Flags().StringVar(&hostsFile, "hosts", "", "check the hosts of this hosts `FILE` instead of this machine: SSH and host keys, tools and their versions across hosts, clock offset, free disk, CPU accounting")
	return c
}

func (a *app) platformsCmd() *cobra.Command {
	var imageRef, client string
	c := &cobra.Command{
		Use:   "platforms",
		Short: "List the platforms and whether each can run here",
		Example: `  nearnative platforms
  nearnative run redis --platforms native,docker-host`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			docker := &catalog.Docker{}
			defer docker.Close()
			ref, imgErr := a.imageRef(ctx, docker, imageRef)
			set := host.Setting{Client: client}
			if err := set.Validate(); err != nil {
				return withCode(ExitBadInput, fmt.Errorf("--client: %w", err))
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PLATFORM\tSTATUS\tWHAT IT IS")
			for _, info := range platform.Builtin() {
				status := "available"
				accel := ""
				err := catalog.Check(ctx, study.Platform{Name: info.Name, Base: info.Name}, set, ref, a.dir, docker, func(p platform.Platform) {
					if acc, ok := p.(platform.Accelerator); ok && (imgErr == nil || info.Name == platform.Native) {
						accel = " (" + acc.Acceleration(ctx) + ")"
					}
				})
				if err == nil && imgErr != nil && info.Name != platform.Native {
					err = imgErr
				}
				if err != nil {
					status = "unavailable: " + err.Error()
				} else {
					status += accel
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", info.Name, status, info.Description)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&imageRef, "image", "", "workload image to check for instead of the locally built one")
	c.Flags().StringVar(&client, "client", study.DefaultClient, "the client host to check the platforms for: "+strings.Join(host.Settings, " or ")+", as run's --client")
	return c
}

func (a *app) imageCmd() *cobra.Command {
	c := &cobra.Command{Use: "image", Short: "Build the workload image", Example: "  nearnative image build\n  nearnative image build --rebuild"}
	var rebuild bool
	var ref string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the workload image from Debian packages (seconds when nothing changed)",
		Example: `  nearnative image build
  nearnative image build --rebuild`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			eng, err := docker.Connect(ctx)
			if err != nil {
				return withCode(ExitUnavailable, err)
			}
			defer eng.Close()
			release, err := a.holdMachine(ctx, "image build")
			if err != nil {
				return err
			}
			defer release()
			cfg, err := image.DefaultConfig()
			if err != nil {
				return withCode(ExitUnavailable, err)
			}
			cfg.Ref = ref
			res, err := image.Build(ctx, eng.API(), cfg, image.BuildOptions{Rebuild: rebuild, Log: a.stderr, Dir: a.dir})
			if err != nil {
				return err
			}
			how := "built"
			if res.Cached {
				how = "already present"
			}
			fmt.Fprintf(a.stdout, "image %s %s in %v (%.0f MB)\n", res.Ref, how, res.Duration.Round(time.Millisecond), float64(res.Size)/1e6)
			return nil
		},
	}
	build.Flags().BoolVar(&rebuild, "rebuild", false, "build even if an image for the current inputs exists")
	build.Flags().StringVar(&ref, "image", "", "use this (pulled) image instead of building; only checks it exists")
	c.AddCommand(build)
	return c
}

func (a *app) cleanupCmd() *cobra.Command {
	var force, orphans, removeBinary bool
	var hostsFile string
	c := &cobra.Command{
		Use:   "cleanup [RUN]",
		Short: "Remove what crashed runs left behind: containers, networks, processes, cgroups, temp dirs",
		Long: `Remove what crashed runs left behind, found by the run labels everything
carries: containers, networks, Kubernetes namespaces, VMs, processes, cgroups,
network namespaces and links, temporary directories. Without RUN, only runs
known to have crashed are swept: their lock file in the lock directory is left
unlocked, or the owner record in their run directory names a process that is
gone. Runs nothing here tells about (run with another NEARNATIVE_LOCK_DIR,
resources a test made, another state directory's runs from before a reboot)
are listed and left; name one, or pass --orphans, to remove them. Labels and
names that are not run IDs are reported and never used.`,
		Example: `  nearnative cleanup
  nearnative cleanup 20261126-091200-ab12
  nearnative cleanup --orphans
  nearnative cleanup --hosts testbed/hosts.yaml 20261126-091200-ab12`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeRuns(1, false), // a full ID: cleanup takes no "last"
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if hostsFile != "" {
				if len(args) == 1 {
					if _, err := runid.Parse(args[0]); err != nil {
						return withCode(ExitBadInput, err)
					}
				}
				if err := a.cleanupHosts(ctx, hostsFile, args, force, orphans, removeBinary); err != nil {
					return err
				}
			}
			var o cleanup.Options
			o.Force, o.Orphans = force, orphans
			if len(args) == 1 {
				id, err := runid.Parse(args[0])
				if err != nil {
					return withCode(ExitBadInput, err)
				}
				o.Run = id
			}
			sweepers, closeAll := a.sweepers(ctx, a.stderr)
			defer closeAll()
			rep := cleanup.Clean(ctx, a.dir, sweepers, o)
			for _, r := range rep.Removed {
				fmt.Fprintln(a.stdout, "removed "+r)
			}
			for _, id := range rep.Alive {
				fmt.Fprintf(a.stdout, "skipped run %s: still running (stop it, or pass --force)\n", id)
			}
			for _, id := range rep.Unknown {
				fmt.Fprintf(a.stdout, "skipped run %s: nothing here says whether it still runs (no lock file in %s, no owner record in %s): if it does not, `nearnative cleanup %s` removes it\n",
					id, a.dir.LockDir(), a.dir.RunDir(id), id)
			}
			for _, inv := range rep.Invalid {
				fmt.Fprintln(a.stdout, "skipped "+inv)
			}
			if len(rep.Removed) == 0 && len(rep.Errors) == 0 {
				fmt.Fprintln(a.stdout, "nothing to clean up")
			}
			for _, e := range rep.Errors {
				fmt.Fprintln(a.stderr, "error: "+e.Error())
			}
			if len(rep.Errors) > 0 {
				return fmt.Errorf("cleanup left %d error(s) above", len(rep.Errors))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "also clean runs whose nearnative process still holds them (without RUN: every run found)")
	c.Flags().BoolVar(&orphans, "orphans", false, "without RUN, also clean the runs nothing here tells about (see above): only when none of them runs")
	c.Flags().StringVar(&hostsFile, "hosts", "", "also clean every host of this hosts `FILE` (nearnative cleanup runs there with the same arguments), then this machine")
	c.Flags().BoolVar(&removeBinary, "remove-binary", false, "with --hosts, also remove the nearnative binary pushed to each host and the VM guests' kernel, initramfs and disk copied there")
	return c
}
