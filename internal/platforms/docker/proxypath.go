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
	label := runid.Label + "=" + string(p.env.Run)
	var undos []func(context.Context) error
	undo := func(ctx context.Context) error {
		var errs []error
		for _, u := range undos {
			errs = append(errs, u(ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (map[int][]int, func(context.Context) error, error) {
		return nil, nil, errors.Join(err, undo(context.WithoutCancel(ctx)))
	}
	pids := map[int][]int{}
	for _, port := range ports {
		match := []string{"-d", addr + "/32", "-p", "tcp", "--dport", strconv.Itoa(port), "-m", "comment", "--comment", label, "-j", "ACCEPT"}
		what := fmt.Sprintf("taking port %d past Docker's DNAT to docker-proxy (needs root there)", port)
		if _, err := p.site.Run(ctx, what, append([]string{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "1"}, match...)...); err != nil {
			return fail(fmt.Errorf("%s: %w", p.name, err))
		}
		undos = append(undos, func(ctx context.Context) error {
			_, err := p.site.Run(ctx, fmt.Sprintf("removing the docker-proxy rule of port %d", port), append([]string{"iptables", "-w", "-t", "nat", "-D", "PREROUTING"}, match...)...)
			return err
		})
		pattern := fmt.Sprintf("docker-proxy .*-host-ip %s -host-port %d ", regexp.QuoteMeta(addr), port)
		out, err := p.site.Run(ctx, "finding docker-proxy", "sh", "-c", `pgrep -f -- "$1" || true`, "sh", pattern)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", p.name, err))
		}
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids[port] = append(pids[port], pid)
			}
		}
		if len(pids[port]) == 0 {
			return fail(fmt.Errorf("%s: dockerd on sut host %s serves port %d with no docker-proxy process (it runs with userland-proxy=false): remove that setting there and restart dockerd, or leave docker-proxy out of the study", p.name, p.site.Host, port))
		}
	}
	return pids, undo, nil
}
