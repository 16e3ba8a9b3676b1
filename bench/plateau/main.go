// Command plateau captures what TCP does to http-max's page when its client
// leaves loopback: nginx (http-max's configuration, 4 KB page) on 127.0.0.1
// and on the host side of a client host's veth, hey paced at one rate from
// this machine and from the client's namespace, tcpdump on lo and on the
// veth, and per response: how many segments it took, whether its last
// packet left only after the client had acknowledged the ones before, the
// gap before that last packet (how many gaps of 35-50 ms), and how often an
// acknowledgement it could have waited for came 30 ms or more late (the
// client's delayed ACK); the server sockets' congestion control and pacing
// rate mid-run (ss). BENCH.md, "The 40 ms plateau":
//
//	go run ./bench/plateau -rate 1000 -duration 6s
//	go run ./bench/plateau -rate 1000 -duration 6s -congctl cubic
//	go run ./bench/plateau -rate 1000 -duration 6s -nopush=false
//
// -congctl sets the congestion control of the route to the client's link
// only (ip route ... congctl), never the machine's.
//
// Run as root on a quiet machine; everything it makes is labelled with a
// run ID of its own (`nearnative cleanup RUN` after a crash).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/httpmax"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "plateau:", err)
		os.Exit(1)
	}
}

func run() error {
	rate := flag.Float64("rate", 1000, "requests per second, all connections together")
	dur := flag.Duration("duration", 6*time.Second, "length of each paced run")
	conns := flag.Int("connections", 64, "keep-alive connections (hey -c)")
	mtu := flag.Int("mtu", host.DefaultMTU, "the client link's MTU")
	nopush := flag.Bool("nopush", true, "nginx tcp_nopush (http-max's setting: on)")
	page := flag.Int("page", 4096, "bytes of the page")
	keep := flag.String("keep", "", "directory to keep the captures in (default: removed)")
	congctl := flag.String("congctl", "", "congestion control of the route to the client's link (default: the machine's, "+sysctl("net/ipv4/tcp_congestion_control")+")")
	flag.Parse()
	for _, t := range []string{"nginx", "hey", "tcpdump"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found: make setup installs it", t)
		}
	}
	// Ctrl-C stops the run and removes what it made (the deferred calls).
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	id := runid.New()
	c, err := host.NewNS(ctx, id, host.Setting{Client: host.SettingNetns, MTU: *mtu})
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if *congctl != "" {
		// Only the route of the client's own link: the servers' sockets
		// towards the client use it, nothing else of the machine does.
		out, err := exec.Command("ip", "route", "replace", c.Subnet().String(), "dev", c.HostLink(), "proto", "kernel", "scope", "link",
			"src", c.ServerAddr(), "congctl", *congctl).CombinedOutput()
		if err != nil {
			return fmt.Errorf("congctl %s on the client's route: %v: %s", *congctl, err, out)
		}
	}
	dir, err := state.TempDir(id, "plateau")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	onoff := map[bool]string{true: "on", false: "off"}[*nopush]
	fmt.Printf("run %s: nginx (sendfile on, tcp_nopush %s, tcp_nodelay on), %d-byte page; hey -c %d at %g req/s for %v; %s; "+
		"machine: tcp_congestion_control %s, default_qdisc %s; client route congctl %q\n\n",
		id, onoff, *page, *conns, *rate, *dur, c.Detail(), sysctl("net/ipv4/tcp_congestion_control"), sysctl("net/core/default_qdisc"), *congctl)
	fmt.Println("| client | hey p50 / p90 / p99 ms | responses | in 2+ packets | last packet after the client's ACK of the rest | gap before the last packet p50 / p99 ms | gaps of 35-50 ms | an ACK >= 30 ms late | request to last packet p99 ms | server sockets mid-run (ss) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, target := range []struct {
		name, addr, dev string
		client          host.Host
	}{
		{"host loopback", "127.0.0.1", "lo", host.LoopbackHost()},
		{c.Describe(), c.ServerAddr(), c.HostLink(), c},
	} {
		ports, err := platform.FreePorts(target.addr, 1)
		if err != nil {
			return err
		}
		stop, err := startNginx(id, filepath.Join(dir, target.dev), target.addr, ports[0], *nopush, *page)
		if err != nil {
			return err
		}
		pcap := filepath.Join(dir, target.dev+".pcap")
		hey, a, sock, err := measure(ctx, id, dir, target.client, target.dev, pcap, target.addr, ports[0], *rate, *dur, *conns)
		stop()
		if err != nil {
			return err
		}
		if *keep != "" {
			os.MkdirAll(*keep, 0o755)
			os.Rename(pcap, filepath.Join(*keep, fmt.Sprintf("%s-nopush-%s.pcap", target.dev, onoff)))
		}
		fmt.Printf("| %s | %s | %d | %d | %d (%.1f%%) | %.3f / %.3f | %d | %d | %.3f | %s |\n", target.name, hey, a.responses, a.multi,
			a.afterACK, pct(a.afterACK, a.multi), quantile(a.gaps, .5), quantile(a.gaps, .99), a.gap40, a.lateACK, quantile(a.latency, .99), sock)
	}
	return nil
}

// sysctl reads a sysctl of this machine ("?" when unreadable).
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// sockets summarises the congestion control and pacing rates of the
// server's connections on port (ss -tin).
func sockets(addr string, port int) string {
	out, err := exec.Command("ss", "-tin", "src", fmt.Sprintf("%s:%d", addr, port)).Output()
	if err != nil {
		return "?"
	}
	cc := map[string]int{}
	var rates []float64
	for _, f := range strings.Fields(string(out)) {
		switch f {
		case "bbr", "cubic", "reno", "dctcp", "bic", "htcp", "vegas", "westwood":
			cc[f]++
		}
	}
	for _, m := range regexp.MustCompile(`pacing_rate ([0-9.]+)([KMG]?)bps`).FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		v *= map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m[2]]
		rates = append(rates, v)
	}
	sort.Float64s(rates)
	var parts []string
	for k, n := range cc {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	s := strings.Join(parts, ", ")
	if len(rates) > 0 {
		s += fmt.Sprintf("; pacing rate min %s, median %s", bps(rates[0]), bps(quantile(rates, .5)))
	}
	return s
}

func bps(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1f Gbit/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1f Mbit/s", v/1e6)
	}
	return fmt.Sprintf("%.0f kbit/s", v/1e3)
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// startNginx starts nginx with http-max's configuration (tcp_nopush as
// nopush says) on addr:port, serving http-max's page of page bytes; stop
// kills it.
func startNginx(id runid.ID, dir, addr string, port int, nopush bool, page int) (stop func(), err error) {
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "index.html"), httpmax.Page(page), 0o644); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(httpmax.NginxConf("auto", dir, addr, port, nopush)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", conf, "-e", "stderr")
	cmd.Env = append(os.Environ(), runid.EnvVar+"="+string(id))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	stop = func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }
	if err := platform.WaitTCP(context.Background(), fmt.Sprintf("%s:%d", addr, port), 10*time.Second); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// measure runs hey from client c with tcpdump capturing dev, reads the
// server's sockets half-way, and analyses the capture.
func measure(ctx context.Context, id runid.ID, dir string, c host.Host, dev, pcap, addr string, port int, rate float64, dur time.Duration, conns int) (string, analysis, string, error) {
	td := exec.Command("tcpdump", "-i", dev, "-nn", "-s", "96", "-w", pcap, fmt.Sprintf("tcp port %d", port))
	if err := td.Start(); err != nil {
		return "", analysis{}, "", err
	}
	sock := make(chan string, 1)
	go func() {
		time.Sleep(time.Second + dur/2)
		sock <- sockets(addr, port)
	}()
	time.Sleep(time.Second) // tcpdump opens the device
	url := fmt.Sprintf("http://%s:%d/index.html", addr, port)
	argv := []string{"hey", "-z", dur.String(), "-c", strconv.Itoa(conns), "-q", strconv.FormatFloat(rate/float64(conns), 'f', 3, 64), url}
	res, err := workload.RunClientOn(ctx, c, id, dir, "hey-"+dev+".txt", argv, nil)
	time.Sleep(500 * time.Millisecond)
	td.Process.Signal(syscall.SIGINT)
	td.Wait()
	s := <-sock
	if err != nil {
		return "", analysis{}, "", err
	}
	p := func(q string) string {
		m := regexp.MustCompile(q + `% in ([0-9.]+) secs`).FindSubmatch(res.Output)
		if m == nil {
			return "?"
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return strconv.FormatFloat(v*1000, 'f', 1, 64)
	}
	text, err := exec.Command("tcpdump", "-nn", "-tt", "-r", pcap).Output()
	if err != nil {
		return "", analysis{}, "", fmt.Errorf("reading %s: %w", pcap, err)
	}
	return p("50") + " / " + p("90") + " / " + p("99"), analyse(string(text), fmt.Sprintf("%s.%d", addr, port)), s, nil
}

// analysis is what a capture says about the responses.
type analysis struct {
	responses, multi, afterACK, lateACK int
	gap40                               int       // gaps before the last packet of 35-50 ms
	gaps, latency                       []float64 // ms
}

var pktLine = regexp.MustCompile(`^(\d+\.\d+) IP (\S+) > (\S+): Flags \[[^\]]*\](?:, seq (\d+):(\d+))?(?:, ack (\d+))?.*length (\d+)`)

type pkt struct {
	t          float64
	fromServer bool
	end, ack   int64
	len        int
}

// analyse reads `tcpdump -nn -tt` text: per connection, each request (the
// client's data) and the server's data segments until the next request.
func analyse(text, server string) analysis {
	conns := map[string][]pkt{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		m := pktLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, _ := strconv.ParseFloat(m[1], 64)
		p := pkt{t: t, fromServer: m[2] == server}
		p.end, _ = strconv.ParseInt(m[5], 10, 64)
		p.ack, _ = strconv.ParseInt(m[6], 10, 64)
		p.len, _ = strconv.Atoi(m[7])
		key := m[2]
		if p.fromServer {
			key = strings.TrimSuffix(m[3], ":")
		}
		conns[key] = append(conns[key], p)
	}
	var a analysis
	for _, ps := range conns {
		for i := 0; i < len(ps); i++ {
			if ps[i].fromServer || ps[i].len == 0 {
				continue
			}
			req := ps[i]
			var data, acks []pkt
			j := i + 1
			for ; j < len(ps) && (ps[j].fromServer || ps[j].len == 0); j++ {
				if ps[j].fromServer && ps[j].len > 0 {
					data = append(data, ps[j])
				} else if !ps[j].fromServer {
					acks = append(acks, ps[j])
				}
			}
			i = j - 1
			if len(data) == 0 {
				continue
			}
			a.responses++
			last := data[len(data)-1]
			a.latency = append(a.latency, (last.t-req.t)*1000)
			if len(data) < 2 {
				continue
			}
			a.multi++
			head := data[len(data)-2]
			gap := (last.t - head.t) * 1000
			a.gaps = append(a.gaps, gap)
			if gap >= 35 && gap <= 50 {
				a.gap40++
			}
			for _, k := range acks {
				if k.ack >= head.end && k.t >= head.t && k.t <= last.t {
					a.afterACK++
					if k.t-head.t >= 0.030 {
						a.lateACK++
					}
					break
				}
			}
		}
	}
	sort.Float64s(a.gaps)
	sort.Float64s(a.latency)
	return a
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(float64(len(xs))*q))]
}
