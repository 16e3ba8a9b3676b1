package docker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/runid"
)

// viaProxy makes the drivers' connections to server s's published ports on
// a sut host take docker-proxy (platform docker-proxy there).
//
// Docker publishes a port twice: an iptables DNAT rule, which takes every
// connection arriving from another machine, and (dockerd's default
// userland-proxy) a docker-proxy process listening on the published
// address, which here serves 127.0.0.1, whose packets no DNAT rule takes.
// On a sut host the platform publishes on the host's address, and a nat
// PREROUTING rule of the run, first in its chain, accepts the connections
// to each published port unchanged: they reach docker-proxy's socket, as a
// local client's on 127.0.0.1 do. The rule goes when the server stops
// (and `cleanup --hosts` finds it by its comment); docker-proxy's
// processes are found there, their CPU counted with the server's.
func (p *dockerPlatform) viaProxy(ctx context.Context, s *server, ports []int) error {
	pids, undo, err := p.proxyPorts(ctx, ports)
	if err != nil {
		return err
	}
	s.undo = append(s.undo, undo)
	for _, port := range ports {
		s.proxyPIDs = append(s.proxyPIDs, pids[port]...)
	}
	return nil
}

// proxyPorts adds the run's nat rule of each port (viaProxy) and finds the
// docker-proxy processes that serve it there: their pids by port, and how
// to remove the rules. On an error the rules made are removed.
func (p *dockerPlatform) proxyPorts(ctx context.Context, ports []int) (map[int][]int, func(context.Context) error, error) {
	addr := p.serverAddr()
	var made undos
	fail := func(err error) (map[int][]int, func(context.Context) error, error) {
		return nil, nil, errors.Join(fmt.Errorf("%s: %w", p.name, err), made.run(context.WithoutCancel(ctx)))
	}
	pids := map[int][]int{}
	for _, port := range ports {
		undo, err := p.siteAccept(ctx, fmt.Sprintf("taking port %d past Docker's DNAT to docker-proxy", port),
			"nat", "PREROUTING", "-d", addr+"/32", "-p", "tcp", "--dport", strconv.Itoa(port))
		if err != nil {
			return fail(err)
		}
		made = append(made, undo)
		pattern := fmt.Sprintf("docker-proxy .*-host-ip %s -host-port %d ", regexp.QuoteMeta(addr), port)
		out, err := p.site.Run(ctx, "finding docker-proxy", "sh", "-c", `pgrep -f -- "$1" || true`, "sh", pattern)
		if err != nil {
			return fail(err)
		}
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids[port] = append(pids[port], pid)
			}
		}
		if len(pids[port]) == 0 {
			return fail(fmt.Errorf("dockerd on sut host %s serves port %d with no docker-proxy process (it runs with userland-proxy=false): remove that setting there and restart dockerd, or leave docker-proxy out of the study", p.site.Host, port))
		}
	}
	return pids, made.run, nil
}

// siteAccept inserts an iptables rule of the run that accepts what match
// matches, first in chain of table on the site's host (the SSH user must
// be root there), and returns its removal. what says what it is for.
func (p *dockerPlatform) siteAccept(ctx context.Context, what, table, chain string, match ...string) (func(context.Context) error, error) {
	rule := append(append([]string{}, match...), "-m", "comment", "--comment", runid.Label+"="+string(p.env.Run), "-j", "ACCEPT")
	if _, err := p.site.Run(ctx, what+" (needs root there)", append([]string{"iptables", "-w", "-t", table, "-I", chain, "1"}, rule...)...); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := p.site.Run(ctx, "removing the rule "+what, append([]string{"iptables", "-w", "-t", table, "-D", chain}, rule...)...)
		return err
	}, nil
}

// undos remove what was made beside the containers (rules, routes), the
// last made first.
type undos []func(context.Context) error

// run runs every removal, all of them whatever fails.
func (u undos) run(ctx context.Context) error {
	var errs []error
	for i := len(u) - 1; i >= 0; i-- {
		errs = append(errs, u[i](ctx))
	}
	return errors.Join(errs...)
}
