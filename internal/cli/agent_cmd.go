package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/hostroute"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/vmagent"
	"github.com/nearnative/nearnative/internal/vmprobe"
)

// agentCmd is the hidden command nearnative runs on a remote host over
// SSH (package sshhost): it reads the API token from the first line of its
// stdin, serves the agent (the API VM guests serve) on 127.0.0.1, which the
// run reaches through its SSH connection, and stops every process it
// started when stdin ends (the session closed or the connection dropped).
// With --free-ports it prints free ports on an address instead; with
// --vm-probe, how QEMU guests boot there (package vmprobe); with --route
// add|del, it adds (printing the source address toward --gw) or removes a
// run's recorded route there (package hostroute; exit 3 when the machine
// routes --dst otherwise).
func (a *app) agentCmd() *cobra.Command {
	var freePorts int
	var on string
	var probe bool
	var kernel string
	var route, dst, gw, run string
	c := &cobra.Command{
		Use:    vmagent.StdioArg,
		Short:  "Serve nearnative's agent on a remote host (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if probe {
				r, err := vmprobe.Probe(c.Context())
				if kernel != "" {
					r, err = vmprobe.ProbeKernel(c.Context(), vmprobe.Kernel{Image: kernel})
				}
				if err != nil {
					return err
				}
				return json.NewEncoder(a.stdout).Encode(r)
			}
			if route != "" {
				return a.agentRoute(c.Context(), route, dst, gw, run)
			}
			if freePorts > 0 {
				ports, err := platform.FreePorts(on, freePorts)
				if err != nil {
					return err
				}
				var s []string
				for _, p := range ports {
					s = append(s, strconv.Itoa(p))
				}
				fmt.Fprintln(a.stdout, strings.Join(s, " "))
				return nil
			}
			return vmagent.ServeStdio(c.Context(), os.Stdin)
		},
	}
	c.Flags().IntVar(&freePorts, "free-ports", 0, "print this many free TCP ports on --on and exit")
	c.Flags().StringVar(&on, "on", "127.0.0.1", "address for --free-ports")
	c.Flags().BoolVar(&probe, "vm-probe", false, "boot a probe guest (KVM, else TCG), print what it found as JSON and exit")
	c.Flags().StringVar(&kernel, "kernel", "", "the kernel image --vm-probe boots (default: this machine's)")
	c.Flags().StringVar(&route, "route", "", "add or del: the route to --dst via --gw of run --run, recorded for cleanup")
	c.Flags().StringVar(&dst, "dst", "", "the prefix --route routes")
	c.Flags().StringVar(&gw, "gw", "", "the gateway --route routes through")
	c.Flags().StringVar(&run, "run", "", "the run --route's route belongs to")
	return c
}

// agentRoute adds or removes a run's route on this machine (agent --route).
func (a *app) agentRoute(ctx context.Context, op, dst, gw, run string) error {
	id, err := runid.Parse(run)
	if err != nil {
		return withCode(ExitBadInput, fmt.Errorf("--run: %w", err))
	}
	p, err := netip.ParsePrefix(dst)
	if err != nil {
		return withCode(ExitBadInput, fmt.Errorf("--dst: %w", err))
	}
	g, err := netip.ParseAddr(gw)
	if err != nil {
		return withCode(ExitBadInput, fmt.Errorf("--gw: %w", err))
	}
	var t hostroute.Table
	switch op {
	case "add":
		src, err := t.Add(ctx, id, p, g)
		if errors.Is(err, hostroute.ErrRouted) {
			return withCode(ExitUnavailable, err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, src)
		return nil
	case "del":
		_, err := t.Remove(ctx, id, p, g)
		return err
	}
	return withCode(ExitBadInput, fmt.Errorf("--route %q: want add or del", op))
}
