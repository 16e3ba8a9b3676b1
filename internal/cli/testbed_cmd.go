package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/testbed"
)

// testbedCmd builds and removes hosts on this machine for trying runs over
// SSH (package testbed).
func (a *app) testbedCmd() *cobra.Command {
	var dir string
	var hosts, suts int
	var withDocker, purge bool
	defDir := filepath.Join(a.dir.Root, "testbed")
	c := &cobra.Command{
		Use:   "testbed",
		Short: "Build or remove a test bed of hosts over SSH on this machine (network namespaces, an sshd each)",
		Long: `testbed up makes 2 or 3 hosts out of network namespaces on one private bridge,
each with an sshd of its own (its own host key and config, started by nearnative,
not as a system service), a key pair, a known_hosts and a hosts file for
--hosts. The first host is the sut (the first two with --suts 2), the others
drivers. The hosts share this machine's cores and memory: their figures test
correctness, not performance, and every table of a run on them says so. Each
sut host runs a dockerd of its own in its namespace (--docker, the default), so
that Docker's paths run there; its images stay under
/var/lib/nearnative/testbed/tb for the next test bed (testbed down --purge
removes them). testbed down stops
the dockerd and the sshds and removes the namespaces, links and bridge.`,
		Example: `  nearnative testbed up --dir testbed
  nearnative run redis --quick --hosts testbed/hosts.yaml
  nearnative run redis --quick --hosts testbed/hosts.yaml --platforms native,docker-nat,docker-host
  nearnative testbed up --dir testbed --suts 2   # then place roles on tb1 and tb2 (docs/hosts.md)
  nearnative testbed down --dir testbed`,
	}
	c.PersistentFlags().StringVar(&dir, "dir", defDir, "`DIR` for the keys, known_hosts and hosts.yaml")
	up := &cobra.Command{
		Use:     "up",
		Short:   "Build the test bed and write DIR/hosts.yaml",
		Example: "  nearnative testbed up --dir testbed --hosts 3",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := testbed.Config{Dir: dir, Tag: "tb", Hosts: hosts, Suts: suts, Docker: withDocker}
			if err := cfg.Validate(); err != nil {
				return withCode(ExitBadInput, err)
			}
			if err := testbed.Check(); err != nil {
				return withCode(ExitUnavailable, err)
			}
			file, err := testbed.Up(c.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "test bed up: %d hosts (%d sut) on a private bridge; hosts file %s\n", hosts, max(suts, 1), file)
			fmt.Fprintf(a.stdout, "try: nearnative run redis --quick --hosts %s\n", file)
			if withDocker {
				fmt.Fprintf(a.stdout, "     nearnative run redis --quick --hosts %s --platforms native,docker-nat,docker-host\n", file)
			}
			return nil
		},
	}
	up.Flags().IntVar(&hosts, "hosts", 3, "number of hosts, 2 or 3 (--suts sut hosts, the others drivers)")
	up.Flags().IntVar(&suts, "suts", 1, "number of sut hosts, 1 or 2 (2 needs --hosts 3)")
	up.Flags().BoolVar(&withDocker, "docker", true, "start a dockerd of each sut host's own in its namespace, for Docker's paths there (its images kept under /var/lib/nearnative/testbed/tb)")
	down := &cobra.Command{
		Use:     "down",
		Short:   "Stop the test bed's dockerd and sshds and remove its namespaces, links and bridge",
		Example: "  nearnative testbed down --dir testbed",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if err := testbed.Down(c.Context(), testbed.Config{Dir: abs, Tag: "tb", Hosts: 3, Purge: purge}); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "test bed down")
			return nil
		},
	}
	down.Flags().BoolVar(&purge, "purge", false, "also remove the sut hosts' Docker images (/var/lib/nearnative/testbed/tb)")
	c.AddCommand(up, down)
	return c
}
