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
	"github.com/nearnative/nearnative/internal/state"
)

// routeScript adds, on a driver host, the route to dst via gw (the sut
// host), recorded for `nearnative cleanup` there (the record named by the
// run and the network namespace: hosts of a test bed share one /run), and
// prints the source
// address the host reaches gw from. A prefix the host already routes
// otherwise (its own docker0, a LAN) is refused, never replaced.
const routeScript = `set -e
dst=$1 gw=$2 rec=$3.$(readlink /proc/self/ns/net | tr -dc 0-9)
other=$(ip -4 -o route show to match "${dst%/*}" | grep -v '^default ' | grep -v " via $gw " | head -n 1)
if [ -n "$other" ]; then
	echo "it routes $dst already ($other): nearnative does not change that route; give the sut host's dockerd a bridge subnet the driver hosts do not use (dockerd --bip), or use docker-nat" >&2
	exit 3
fi
mkdir -p -m 0700 "$(dirname "$rec")"
echo "$dst via $gw" >> "$rec"
ip route replace "$dst" via "$gw"
ip -4 -o route get "$gw" | sed -n 's/.* src \([0-9.]*\).*/\1/p'
`

// unrouteScript removes the route and its record line.
const unrouteScript = `dst=$1 gw=$2 rec=$3.$(readlink /proc/self/ns/net | tr -dc 0-9)
ip route del "$dst" via "$gw" 2>/dev/null
if [ -f "$rec" ]; then
	grep -vxF "$dst via $gw" "$rec" > "$rec.tmp" || true
	if [ -s "$rec.tmp" ]; then mv "$rec.tmp" "$rec"; else rm -f "$rec.tmp" "$rec"; fi
fi
exit 0
`

// RouteDrivers makes every driver host of client reach dst (a sut host's
// container bridge) through gw, the sut host's address: a route there,
// recorded under state.RouteDir by run and network namespace. It returns the addresses the
// driver hosts reach gw from (the sources the sut host sees) and how to
// remove the routes; on an error, the routes made so far are removed.
func RouteDrivers(ctx context.Context, client host.Host, run runid.ID, dst netip.Prefix, gw netip.Addr) (from []netip.Addr, undo func(context.Context) error, err error) {
	rm, ok := client.(host.Remote)
	if !ok {
		return nil, nil, fmt.Errorf("the client host (%s) is not made of driver hosts", client.Describe())
	}
	rec := state.RouteDir + "/" + string(run)
	var undos []func(context.Context) error
	undo = func(ctx context.Context) error {
		var errs []error
		for _, u := range undos {
			errs = append(errs, u(ctx))
		}
		return errors.Join(errs...)
	}
	for _, d := range rm.Drivers() {
		j, err := d.RunJob(ctx, []string{"sh", "-c", routeScript, "sh", dst.String(), gw.String(), rec}, nil)
		switch {
		case err == nil && j.ExitCode == 3: // a route of the host's own: a setting to change there
			err = platform.Unavailablef("driver host %s: routing %s via sut host %s: %s", d.Name(), dst, gw, strings.TrimSpace(string(j.Stderr)))
		case err == nil && j.ExitCode != 0:
			err = fmt.Errorf("driver host %s: routing %s via sut host %s: %s", d.Name(), dst, gw, strings.TrimSpace(string(j.Stderr)))
		}
		if err != nil {
			return nil, nil, errors.Join(err, undo(context.WithoutCancel(ctx)))
		}
		undos = append(undos, func(ctx context.Context) error {
			j, err := d.RunJob(ctx, []string{"sh", "-c", unrouteScript, "sh", dst.String(), gw.String(), rec}, nil)
			if err == nil && j.ExitCode != 0 {
				err = fmt.Errorf("driver host %s: removing the route to %s: %s", d.Name(), dst, strings.TrimSpace(string(j.Stderr)))
			}
			return err
		})
		src, err := netip.ParseAddr(strings.TrimSpace(string(j.Stdout)))
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("driver host %s: the address it reaches %s from: %q", d.Name(), gw, j.Stdout), undo(context.WithoutCancel(ctx)))
		}
		from = append(from, src)
	}
	return from, undo, nil
}
