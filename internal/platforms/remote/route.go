package remote

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// RouteDrivers makes every driver host of client reach dst (a sut host's
// container bridge) through gw, the sut host's address: a route there,
// recorded for cleanup (`nearnative agent --route`, package hostroute). It
// returns the addresses the driver hosts reach gw from (the sources the
// sut host sees) and how to remove the routes; on an error, the routes
// made so far are removed.
func RouteDrivers(ctx context.Context, client host.Host, run runid.ID, dst netip.Prefix, gw netip.Addr) (from []netip.Addr, undo func(context.Context) error, err error) {
	rm, ok := client.(host.Remote)
	if !ok {
		return nil, nil, fmt.Errorf("the client host (%s) is not made of driver hosts", client.Describe())
	}
	// The pushed binary does it there (package hostroute: the route and
	// its record for cleanup).
	route := func(ctx context.Context, d host.Runner, op string) (host.Job, error) {
		j, err := d.RunJob(ctx, []string{d.Self(), vmagent.StdioArg, "--route", op, "--dst", dst.String(), "--gw", gw.String(), "--run", string(run)}, nil)
		what := fmt.Sprintf("driver host %s: routing %s via sut host %s", d.Name(), dst, gw)
		if op == "del" {
			what = fmt.Sprintf("driver host %s: removing its route to %s", d.Name(), dst)
		}
		// Its error line, without the binary's name before it.
		msg := strings.TrimPrefix(strings.TrimSpace(string(j.Stderr)), "nearnative: ")
		switch {
		case err != nil:
		case j.ExitCode == 3: // a route of the host's own: a setting to change there
			err = platform.Unavailablef("%s: %s", what, msg)
		case j.ExitCode != 0:
			err = fmt.Errorf("%s: %s", what, msg)
		}
		return j, err
	}
	var routed []host.Runner
	undo = func(ctx context.Context) error {
		var errs []error
		for _, d := range routed {
			_, err := route(ctx, d, "del")
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	for _, d := range rm.Drivers() {
		j, err := route(ctx, d, "add")
		if err != nil {
			return nil, nil, errors.Join(err, undo(context.WithoutCancel(ctx)))
		}
		routed = append(routed, d)
		src, err := netip.ParseAddr(strings.TrimSpace(string(j.Stdout)))
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("driver host %s: the address it reaches %s from: %q", d.Name(), gw, j.Stdout), undo(context.WithoutCancel(ctx)))
		}
		from = append(from, src)
	}
	return from, undo, nil
}
