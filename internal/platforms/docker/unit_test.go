package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

func TestDefaultRouteIface(t *testing.T) {
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name    string
		table   string
		want    string
		wantErr bool
	}{
		{"one default", header +
			"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "eth0", false},
		{"lowest metric wins", header +
			"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n" +
			"eth1\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth1", false},
		{"down route ignored", header +
			"eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth1\t00000000\t010200C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n", "eth1", false},
		{"no default", header +
			"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n", "", true},
		{"empty", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultRouteIface(strings.NewReader(tt.table))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("defaultRouteIface() = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	run := runid.ID("20250101-120000-abcd")
	tests := []struct {
		trial, spec, want string
	}{
		{"t1", "redis", "nn-20250101-120000-abcd-t1-redis"},
		{"r3/docker nat", "pg", "nn-20250101-120000-abcd-r3_docker_nat-pg"},
		{"w:1", "web.2", "nn-20250101-120000-abcd-w_1-web.2"},
	}
	for _, tt := range tests {
		if got := ContainerName(run, tt.trial, tt.spec); got != tt.want {
			t.Errorf("ContainerName(%q, %q) = %q, want %q", tt.trial, tt.spec, got, tt.want)
		}
	}
}

func TestUserlandProxyFromArgs(t *testing.T) {
	files := map[string]string{
		"/etc/docker/daemon.json": `{"userland-proxy": false}`,
		"/custom.json":            `{"log-level": "debug"}`,
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	noFile := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	tests := []struct {
		name string
		args []string
		read func(string) ([]byte, error)
		want string
	}{
		{"default", []string{"dockerd"}, noFile, "on"},
		{"flag off", []string{"dockerd", "--userland-proxy=false"}, noFile, "off"},
		{"flag on beats file", []string{"dockerd", "--userland-proxy=true"}, read, "on"},
		{"daemon.json off", []string{"dockerd"}, read, "off"},
		{"other config file", []string{"dockerd", "--config-file", "/custom.json"}, read, "on"},
		{"other config file =", []string{"dockerd", "--config-file=/custom.json"}, read, "on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := userlandProxyFromArgs(tt.args, tt.read); got != tt.want {
				t.Errorf("userlandProxyFromArgs(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestFilesTar(t *testing.T) {
	tests := []struct {
		name  string
		files []platform.File
		want  []string // name mode
	}{
		{"no files", nil, []string{"nearnative/ 755"}},
		{"nested dirs", []platform.File{{Path: "conf/redis/redis.conf", Content: []byte("port 1\n")}},
			[]string{"nearnative/ 755", "nearnative/conf/ 755", "nearnative/conf/redis/ 755", "nearnative/conf/redis/redis.conf 644"}},
		{"modes", []platform.File{{Path: "run.sh", Mode: 0o755}, {Path: "secret", Mode: 0o600}},
			[]string{"nearnative/ 755", "nearnative/run.sh 755", "nearnative/secret 600"}},
		{"unclean path", []platform.File{{Path: "a//b/./c.txt"}},
			[]string{"nearnative/ 755", "nearnative/a/ 755", "nearnative/a/b/ 755", "nearnative/a/b/c.txt 644"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := filesTar(tt.files, owner{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			tr := tar.NewReader(bytes.NewReader(b))
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %o", h.Name, h.Mode))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	env := platform.Env{Run: runid.New(), Image: "img"}
	eng := &Daemon{}
	tests := []struct {
		name string
		kind string
		env  platform.Env
		eng  *Daemon
		opt  platform.Options
		want string
	}{
		{"unknown kind", "docker-weird", env, eng, platform.Options{}, "unknown kind"},
		{"native is not docker", platform.Native, env, eng, platform.Options{}, "unknown kind"},
		{"no engine", platform.DockerNAT, env, nil, platform.Options{}, "no Docker engine"},
		{"no image", platform.DockerNAT, platform.Env{Run: env.Run}, eng, platform.Options{}, "no workload image"},
		{"bad options", platform.DockerHost, env, eng, platform.Options{CPUSet: "x"}, "cpuset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.kind, "p", tt.env, tt.eng, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLookupOwner(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/bash\n# comment\nredis:x:101:104::/var/lib/redis:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	group := []byte("root:x:0:\nredis:x:104:\nnogroup:x:65534:\n")
	tests := []struct {
		user    string
		want    owner
		wantErr string
	}{
		{"", owner{0, 0}, ""},
		{"redis", owner{101, 104}, ""},
		{"101", owner{101, 104}, ""},
		{"5000", owner{5000, 0}, ""},
		{"65534:65534", owner{65534, 65534}, ""},
		{"redis:nogroup", owner{101, 65534}, ""},
		{"5000:redis", owner{5000, 104}, ""},
		{"ghost", owner{}, `user "ghost" not found`},
		{"redis:ghosts", owner{}, `group "ghosts" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			got, err := lookupOwner(tt.user, passwd, group)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("lookupOwner(%q) error %v, want %q", tt.user, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("lookupOwner(%q) = %+v, %v; want %+v", tt.user, got, err, tt.want)
			}
		})
	}
}

// TestPortParts: a server on a publishing path (nat, proxy) is described as
// published only when its ports are; a topology's inner server, whose
// ports are published nowhere, says so instead of "published :PORT".
func TestPortParts(t *testing.T) {
	spec := platform.Spec{Ports: []string{"db"}}
	s := &server{bridgeIP: "172.17.0.2", name: "nn-x-db"}
	for _, tc := range []struct {
		kind, publishOn, want string
	}{
		{platform.DockerNAT, "10.214.0.1", "published 10.214.0.1:5432 -> 5432 (iptables DNAT)"},
		{platform.DockerNAT, "", "port 5432 on 172.17.0.2, not published (the run's other servers reach it)"},
		{platform.DockerProxy, "127.0.0.1", "published 127.0.0.1:5432 -> 5432 (userland docker-proxy)"},
		{platform.DockerProxy, "", "port 5432 on 172.17.0.2, not published (the run's other servers reach it)"},
		{platform.DockerBridge, "", "client to 172.17.0.2:5432 (veth, no NAT)"},
	} {
		p := &dockerPlatform{kind: tc.kind, eng: &Daemon{}}
		pl := plan{listen: platform.Listen{Ports: map[string]int{"db": 5432}}, publishOn: tc.publishOn}
		got := p.portParts(s, spec, pl)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s published on %q: %q, want %q", tc.kind, tc.publishOn, got, tc.want)
		}
	}
}

// twoDrivers is a client host of two driver hosts, its servers on 10.0.0.2.
type twoDrivers struct{ host.Host }

func (twoDrivers) ServerAddr() string { return "10.0.0.2" }
func (twoDrivers) Sources() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("10.0.0.3/32"), netip.MustParsePrefix("10.0.0.4/32")}
}

// TestFromOnSite: a server on a sut host accepts connections from every
// driver host, from its own host (probes) and from the run's other sut
// hosts (a peer there keeps its host's address), not only the first
// driver's.
func TestFromOnSite(t *testing.T) {
	p := &dockerPlatform{kind: platform.DockerHost, eng: &Daemon{},
		env:  platform.Env{Client: twoDrivers{host.LoopbackHost()}},
		site: &Site{Host: "sut1", Peers: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}}
	from, err := p.from(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"127.0.0.0/8", "10.0.0.3/32", "10.0.0.4/32", "10.0.0.2/32", "10.0.0.5/32"} {
		if !slices.Contains(from, netip.MustParsePrefix(want)) {
			t.Errorf("from = %v, lacks %s", from, want)
		}
	}
}
