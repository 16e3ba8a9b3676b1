package hostfile

import (
	"strings"
	"testing"
)

const good = `hosts:
  - name: sut1
    address: 10.215.0.2
    user: root
    key: id_ed25519
    roles: [sut]
  - name: client1
    address: 10.215.0.3
    user: root
    agent: true
    port: 2222
    roles: [driver]
    docker_socket: /run/nn/docker.sock
known_hosts: known_hosts
place: {driver: client1, redis: sut1}
testbed: true
`

func TestParseGood(t *testing.T) {
	f, err := Parse([]byte(good), "/etc/nn/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(f.Hosts) != 2 || f.Hosts[1].Port != 2222 || f.Hosts[0].Port != DefaultPort {
		t.Fatalf("hosts: %+v", f.Hosts)
	}
	if f.Hosts[0].Key != "/etc/nn/id_ed25519" || f.KnownHosts != "/etc/nn/known_hosts" {
		t.Fatalf("paths not anchored at the file's directory: %q %q", f.Hosts[0].Key, f.KnownHosts)
	}
	if f.SUTFor("redis").Name != "sut1" || len(f.Drivers()) != 1 || f.Drivers()[0].Name != "client1" || !f.Testbed {
		t.Fatalf("placement: %+v", f)
	}
	if f.Hosts[0].DockerSocket != DefaultDockerSocket || f.Hosts[1].DockerSocket != "/run/nn/docker.sock" {
		t.Fatalf("docker sockets: %q %q", f.Hosts[0].DockerSocket, f.Hosts[1].DockerSocket)
	}
	if f.OffsetMax() != DefaultClockOffsetMax {
		t.Fatalf("offset max %v", f.OffsetMax())
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown top key", "hosts: []\nplaces: {}\n", "h.yaml:2: unknown key \"places\" in hosts file"},
		{"unknown host key", "hosts:\n  - name: a\n    adress: 1.2.3.4\n", "h.yaml:3: unknown key \"adress\" in hosts[0]"},
		{"port type", "hosts:\n  - name: a\n    port: ssh\n", "h.yaml:3: hosts[0].port: want a number, got \"ssh\""},
		{"roles type", "hosts:\n  - name: a\n    roles: sut\n", "h.yaml:3: hosts[0].roles: want a list"},
		{"agent type", "hosts:\n  - name: a\n\n    agent: yes please\n", "h.yaml:4: hosts[0].agent: want true or false"},
		{"docker_socket type", "hosts:\n  - name: a\n    docker_socket: [a]\n", "h.yaml:3: hosts[0].docker_socket: want"},
		{"hosts type", "hosts: a\n", "h.yaml:1: hosts: want a list of hosts"},
		{"syntax", "hosts:\n  - name: [a\n", "h.yaml:2: invalid YAML: did not find expected ',' or ']'"},
		{"place type", "hosts: []\nplace: [a]\n", "h.yaml:2: place: want a mapping"},
		{"duplicate", "hosts: []\nhosts: []\n", "h.yaml:2: duplicate key \"hosts\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), "h.yaml")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"placed on a missing host", "redis: sut1}", "redis: sut9}", `h.yaml:15: place: redis on "sut9": no such host (hosts: sut1, client1)`},
		{"driver on a sut-only host", "driver: client1", "driver: sut1", `h.yaml:15: place: driver on "sut1": that host's roles are [sut]`},
		{"no key nor agent", "    key: id_ed25519\n", "", `h.yaml:2: host "sut1": no way to log in`},
		{"bad role", "roles: [sut]", "roles: [server]", `h.yaml:2: host "sut1": role "server"`},
		{"duplicate name", "name: client1", "name: sut1", `h.yaml:7: host "sut1": named twice (first at line 2)`},
		{"no driver", "roles: [driver]", "roles: [sut]", "want at least one host with role sut and one with role driver"},
		{"no address", "    address: 10.215.0.2\n", "", `host "sut1": no address`},
		{"relative docker socket", "docker_socket: /run/nn/docker.sock", "docker_socket: docker.sock", `h.yaml:7: host "client1": docker_socket "docker.sock": want the absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(good, tc.from, tc.to, 1)
			if text == good {
				t.Fatalf("replacement %q not found", tc.from)
			}
			f, err := Parse([]byte(text), "h.yaml")
			if err != nil {
				t.Fatal(err)
			}
			err = f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
