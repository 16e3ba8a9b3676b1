package httpmax

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Load-balancer settings (parameter lb).
const (
	// LBNone drives one nginx directly.
	LBNone = "none"
	// LBHAProxy puts HAProxy (HTTP mode, round robin, keep-alive on both
	// sides) in front of the backends nginx servers, all on the platform,
	// deployed as a topology: the driver talks to HAProxy only.
	LBHAProxy = "haproxy"
)

// Roles and ports of the load-balanced topology.
const (
	RoleWeb   = "web"
	RoleLB    = "lb"
	PortHTTP  = "http"
	PortStats = "stats"
	// StatsPath is HAProxy's statistics page on its stats port; with
	// ";csv" appended it is the CSV the trial reads each backend's
	// responses from.
	StatsPath = "/stats"
)

// lbMaxConn bounds HAProxy's connections; the driver opens at most
// connections of them, and HAProxy as many to the backends. HAProxy wants
// about twice as many file descriptors, within the 20000 a container or
// nearnative's processes may have.
const lbMaxConn = 4000

// haproxyConf is HAProxy in HTTP mode spreading requests round robin over
// the nginx backends, reusing its server-side connections (keep-alive on
// both sides, as a web tier's load balancer runs), with its statistics on a
// port of their own. No health checks: a backend that dies shows as failed
// requests and fails the step, and the trial then names the dead server.
func haproxyConf(l platform.Listen, backends []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn %d\n  log stderr format raw local0 warning\n", lbMaxConn)
	b.WriteString("defaults\n  mode http\n  log global\n  option http-keep-alive\n  http-reuse always\n" +
		"  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\n")
	fmt.Fprintf(&b, "frontend web\n  bind %s\n  maxconn %d\n  default_backend nginx\n",
		net.JoinHostPort(l.Host, strconv.Itoa(l.Port(PortHTTP))), lbMaxConn)
	b.WriteString("backend nginx\n  balance roundrobin\n")
	for i, a := range backends {
		fmt.Fprintf(&b, "  server %s%d %s\n", RoleWeb, i, a)
	}
	fmt.Fprintf(&b, "listen stats\n  bind %s\n  stats enable\n  stats uri %s\n",
		net.JoinHostPort(l.Host, strconv.Itoa(l.Port(PortStats))), StatsPath)
	return b.String()
}

// haproxySpec is the HAProxy in front of backends (host:port each).
func haproxySpec(backends []string) platform.Spec {
	return platform.Spec{
		Name:  "haproxy",
		Ports: []string{PortHTTP, PortStats},
		Command: func(l platform.Listen) []string {
			return []string{"haproxy", "-db", "-f", path.Join(l.Dir, "haproxy.cfg")}
		},
		Render: func(l platform.Listen) []platform.File {
			return []platform.File{{Path: "haproxy.cfg", Content: []byte(haproxyConf(l, backends))}}
		},
	}
}

// topology is the load-balanced variant: backends nginx servers, then
// HAProxy in front of them, the only entry point.
func (in *Instance) topology() topology.Topology {
	ready := func(ctx context.Context, addr string) error {
		return getOnce(ctx, "http://"+addr+PagePath, in.pageBytes)
	}
	return topology.Topology{
		Roles: []topology.Role{
			{Name: RoleWeb, Count: in.backends, Ports: []string{PortHTTP}, Ready: ready, ReadyTimeout: readyTimeout,
				Spec: func(topology.ServerID, topology.Peers) (platform.Spec, error) { return in.spec(), nil }},
			{Name: RoleLB, Ports: []string{PortHTTP, PortStats}, After: []string{RoleWeb}, Entry: true, Ready: ready, ReadyTimeout: readyTimeout,
				Spec: func(_ topology.ServerID, peers topology.Peers) (platform.Spec, error) {
					return haproxySpec(peers.All(RoleWeb, PortHTTP)), nil
				}},
		},
	}
}

// target is what a trial drives: the page's URL, the servers behind it
// whose CPU time each step measures, a check that they are all alive, and
// what the trial adds to its result at the end.
type target struct {
	url      string
	measured []platform.Server
	servers  string // "nginx", "HAProxy and its 2 nginx servers"
	// check returns an error naming each server that has exited (nil
	// when it cannot tell).
	check func(ctx context.Context) error
	// finish reads what the servers counted at the trial's end.
	finish func(ctx context.Context, res *workload.Result) error
}

// deployLB starts the load-balanced topology on the trial's platform.
func (in *Instance) deployLB(ctx context.Context, t workload.Trial, res *workload.Result) (*target, func(*error), error) {
	if _, ok := t.Platform.(deploy.Backend); !ok {
		return nil, nil, fmt.Errorf("platform %s cannot deploy HAProxy in front of nginx servers (lb: %s); use lb: %s there", t.Platform.Name(), LBHAProxy, LBNone)
	}
	d, stop, err := workload.Deploy(ctx, t, in.topology(), res)
	if err != nil {
		return nil, nil, err
	}
	var measured []platform.Server
	for _, r := range d.Servers() {
		measured = append(measured, r.Srv)
	}
	entry := d.Entries(RoleLB, PortHTTP)[0]
	stats := "http://" + d.Entries(RoleLB, PortStats)[0] + StatsPath + ";csv"
	tg := &target{
		url:      "http://" + entry + PagePath,
		measured: measured,
		servers:  fmt.Sprintf("HAProxy and its %d nginx servers", in.backends),
		check:    d.Check,
		finish: func(ctx context.Context, res *workload.Result) error {
			served, err := backendResponses(ctx, stats)
			if err != nil {
				return err
			}
			var parts []string
			for i := 0; i < in.backends; i++ {
				name := RoleWeb + strconv.Itoa(i)
				n, ok := served[name]
				if !ok || n == 0 {
					return fmt.Errorf("HAProxy sent no request to backend %s (its statistics: %v): the load was not spread", name, served)
				}
				parts = append(parts, fmt.Sprintf("%s %d", name, n))
			}
			res.Notes = append(res.Notes, "HAProxy's 2xx responses per nginx backend over the trial: "+strings.Join(parts, ", "))
			return nil
		},
	}
	res.Notes = append(res.Notes, fmt.Sprintf("lb %s: the driver sends to HAProxy (HTTP mode, round robin, keep-alive to the clients and to the backends) in front of %d nginx servers, all on the platform; the CPU figures count all of them", LBHAProxy, in.backends))
	return tg, stop, nil
}

// backendResponses reads HAProxy's statistics CSV at url and returns each
// server's count of 2xx responses (hrsp_2xx) in the nginx backend.
func backendResponses(ctx context.Context, url string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading HAProxy's statistics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading HAProxy's statistics at %s: HTTP %d", url, resp.StatusCode)
	}
	return parseStats(resp.Body)
}

// parseStats reads the 2xx responses of the nginx backend's servers from
// HAProxy's statistics CSV (a header line "# pxname,svname,...").
func parseStats(r io.Reader) (map[string]int64, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("HAProxy's statistics: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("HAProxy's statistics: empty")
	}
	head := rows[0]
	if len(head) > 0 {
		head[0] = strings.TrimPrefix(head[0], "# ")
	}
	px, sv, rsp := slices.Index(head, "pxname"), slices.Index(head, "svname"), slices.Index(head, "hrsp_2xx")
	if px < 0 || sv < 0 || rsp < 0 {
		return nil, fmt.Errorf("HAProxy's statistics: no pxname, svname or hrsp_2xx column in %q", strings.Join(head, ","))
	}
	out := map[string]int64{}
	for _, row := range rows[1:] {
		if len(row) <= max(px, sv, rsp) || row[px] != "nginx" || row[sv] == "BACKEND" {
			continue
		}
		n, err := strconv.ParseInt(row[rsp], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("HAProxy's statistics: server %s: hrsp_2xx %q", row[sv], row[rsp])
		}
		out[row[sv]] = n
	}
	return out, nil
}
