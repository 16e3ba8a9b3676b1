package docker

import (
	"context"
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
	addr := p.serverAddr()
	label := runid.Label + "=" + string(p.env.Run)
	for _, port := range ports {
		match := []string{"-d", addr + "/32", "-p", "tcp", "--dport", strconv.Itoa(port), "-m", "comment", "--comment", label, "-j", "ACCEPT"}
		what := fmt.Sprintf("taking port %d past Docker's DNAT to docker-proxy (needs root there)", port)
		if _, err := p.site.Run(ctx, what, append([]string{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "1"}, match...)...); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		s.undo = append(s.undo, func(ctx context.Context) error {
			_, err := p.site.Run(ctx, fmt.Sprintf("removing the docker-proxy rule of port %d", port), append([]string{"iptables", "-w", "-t", "nat", "-D", "PREROUTING"}, match...)...)
			return err
		})
		pattern := fmt.Sprintf("docker-proxy .*-host-ip %s -host-port %d ", regexp.QuoteMeta(addr), port)
		out, err := p.site.Run(ctx, "finding docker-proxy", "sh", "-c", `pgrep -f -- "$1" || true`, "sh", pattern)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return fmt.Errorf("%s: dockerd on sut host %s serves port %d with no docker-proxy process (it runs with userland-proxy=false): remove that setting there and restart dockerd, or leave docker-proxy out of the study", p.name, p.site.Host, port)
		}
		for _, f := range pids {
			if pid, err := strconv.Atoi(f); err == nil {
				s.proxyPIDs = append(s.proxyPIDs, pid)
			}
		}
	}
	return nil
}
