// Package hostfile reads a hosts file: the machines a run may use beside
// this one, how nearnative reaches each over SSH, what each is for (the
// system under test, the load driver, or both) and where each role of a
// workload runs. It is data only: Parse rejects unknown keys and values of
// the wrong type with file:line, as study files do; Validate checks the
// values (a role placed on a host that does not exist, a driver placed on a
// host without the driver role); nothing here connects anywhere (package
// sshhost does).
//
//	hosts:
//	  - name: sut1
//	    address: 192.0.2.10
//	    user: root
//	    port: 22
//	    key: ~/.ssh/id_ed25519     # or agent: true (SSH_AUTH_SOCK)
//	    roles: [sut]
//	  - name: client1
//	    address: 192.0.2.11
//	    user: root
//	    agent: true
//	    roles: [driver]
//	known_hosts: ~/.ssh/known_hosts
//	place: {driver: client1, redis: sut1}
//	clock_offset_max: 50ms
//	testbed: false
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nearnative/nearnative/internal/yamlnode"
)

// Roles a host may have.
const (
	RoleSUT    = "sut"
	RoleDriver = "driver"
)

// Driver is the role name of the load driver in place:.
const Driver = "driver"

// DefaultDockerSocket is where dockerd's API socket is on a host whose
// entry names none.
const DefaultDockerSocket = "/var/run/docker.sock"

// DefaultPort is SSH's port.
const DefaultPort = 22

// DefaultClockOffsetMax is the clock offset above which a run refuses a
// host before its first trial.
const DefaultClockOffsetMax = 50 * time.Millisecond

// Keys accepted in each part of a hosts file, in documentation order.
var (
	fileKeys = []string{"hosts", "known_hosts", "place", "clock_offset_max", "testbed"}
	hostKeys = []string{"name", "address", "user", "port", "key", "agent", "roles", "docker_socket"}
)

// Host is one machine of a hosts file.
type Host struct {
	Name    string
	Address string // an IP address (or a DNS name) the SSH server listens on
	User    string
	Port    int
	Key     string // private key file, resolved against the file's directory
	Agent   bool   // authenticate through the SSH agent at SSH_AUTH_SOCK
	Roles   []string
	// DockerSocket is the path of dockerd's API socket on the host, which
	// Docker platforms on a sut host reach through the SSH connection.
	DockerSocket string
	Line         int // where the entry starts
}

// Has reports whether h has role.
func (h Host) Has(role string) bool { return slices.Contains(h.Roles, role) }

// Target is "user@address:port", for messages.
func (h Host) Target() string {
	return h.User + "@" + h.Address + ":" + strconv.Itoa(h.Port)
}

// File is a parsed hosts file.
type File struct {
	Source     string // the file's path, for messages
	Hosts      []Host
	KnownHosts string            // resolved; "" is ~/.ssh/known_hosts
	Place      map[string]string // role -> host name
	// ClockOffsetMax is the largest clock offset accepted (0: the default).
	ClockOffsetMax time.Duration
	// Testbed marks hosts that share this machine's cores and memory
	// (`nearnative testbed up`): figures test correctness, not speed.
	Testbed bool

	lines map[string]int // "place.<role>", "known_hosts", ... -> line
}

// Error is a problem at a place in a hosts file.
type Error struct {
	File string
	Line int // 0 when unknown
	Err  error
}

// Error returns "file:line: message".
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the problem without its place.
func (e *Error) Unwrap() error { return e.Err }

// Load reads and parses path, then validates it.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	f, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	return f, f.Validate()
}

type decoder struct{ file string }

func (d decoder) errf(line int, format string, args ...any) error {
	return &Error{File: d.file, Line: line, Err: fmt.Errorf(format, args...)}
}

// Parse decodes a hosts file (file names it in messages and anchors the
// relative paths in it). It rejects unknown keys and wrong types; Validate
// checks the values.
func Parse(data []byte, file string) (*File, error) {
	d := decoder{file: file}
	var doc yaml.Node
	if err := yaml.NewDecoder(strings.NewReader(string(data))).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, d.errf(1, "the hosts file is empty: want hosts: with at least one host")
		}
		line, msg := yamlnode.Syntax(err)
		return nil, d.errf(line, "invalid YAML: %s", msg)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.errf(root.Line, "want a mapping with keys %s", strings.Join(fileKeys, ", "))
	}
	dir := filepath.Dir(file)
	f := &File{Source: file, Place: map[string]string{}, lines: map[string]int{}}
	err := d.fields(root, "hosts file", fileKeys, func(key string, k, v *yaml.Node) error {
		f.lines[key] = k.Line
		switch key {
		case "hosts":
			if v.Kind != yaml.SequenceNode {
				return d.errf(v.Line, "hosts: want a list of hosts, got %s", yamlnode.KindName(v))
			}
			for i, item := range v.Content {
				h, err := d.host(item, fmt.Sprintf("hosts[%d]", i), dir)
				if err != nil {
					return err
				}
				f.Hosts = append(f.Hosts, h)
			}
		case "known_hosts":
			s, err := d.str(key, v)
			f.KnownHosts = resolve(dir, s)
			return err
		case "place":
			if v.Kind != yaml.MappingNode {
				return d.errf(v.Line, "place: want a mapping of role to host name, e.g. {driver: client1, redis: sut1}, got %s", yamlnode.KindName(v))
			}
			return d.fields(v, "place", nil, func(role string, k, v *yaml.Node) error {
				name, err := d.str("place."+role, v)
				f.Place[role] = name
				f.lines["place."+role] = k.Line
				return err
			})
		case "clock_offset_max":
			s, err := d.str(key, v)
			if err != nil {
				return err
			}
			f.ClockOffsetMax, err = time.ParseDuration(s)
			if err != nil {
				return d.errf(v.Line, "clock_offset_max %q: want a duration such as 50ms", s)
			}
		case "testbed":
			return d.boolean(key, v, &f.Testbed)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (d decoder) host(n *yaml.Node, where, dir string) (Host, error) {
	h := Host{Port: DefaultPort, DockerSocket: DefaultDockerSocket, Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return h, d.errf(n.Line, "%s: want a mapping with keys %s, got %s", where, strings.Join(hostKeys, ", "), yamlnode.KindName(n))
	}
	err := d.fields(n, where, hostKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			h.Name, err = d.str(where+".name", v)
		case "address":
			h.Address, err = d.str(where+".address", v)
		case "user":
			h.User, err = d.str(where+".user", v)
		case "port":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
				return d.errf(v.Line, "%s.port: want a number, got %s", where, yamlnode.KindName(v))
			}
			h.Port, err = strconv.Atoi(v.Value)
			if err != nil || h.Port < 1 || h.Port > 65535 {
				return d.errf(v.Line, "%s.port %s: want 1 to 65535", where, v.Value)
			}
		case "key":
			var s string
			s, err = d.str(where+".key", v)
			h.Key = resolve(dir, s)
		case "agent":
			err = d.boolean(where+".agent", v, &h.Agent)
		case "docker_socket":
			h.DockerSocket, err = d.str(where+".docker_socket", v)
		case "roles":
			if v.Kind != yaml.SequenceNode {
				return d.errf(v.Line, "%s.roles: want a list such as [sut] or [sut, driver], got %s", where, yamlnode.KindName(v))
			}
			for _, r := range v.Content {
				s, err := d.str(where+".roles", r)
				if err != nil {
					return err
				}
				h.Roles = append(h.Roles, s)
			}
		}
		return err
	})
	return h, err
}

// resolve expands ~/ and anchors a relative path at dir.
func resolve(dir, p string) string {
	if p == "" {
		return ""
	}
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// fields calls set for each key of mapping n in order, refusing unknown
// (known nil allows any) and duplicate keys; a null value is passed to set,
// which refuses it.
func (d decoder) fields(n *yaml.Node, where string, known []string, set func(key string, k, v *yaml.Node) error) error {
	return yamlnode.Fields(n, where, known, false, d.errf, set)
}

func (d decoder) str(where string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return "", d.errf(v.Line, "%s: want a string, got %s", where, yamlnode.KindName(v))
	}
	return v.Value, nil
}

func (d decoder) boolean(where string, v *yaml.Node, dst *bool) error {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		return d.errf(v.Line, "%s: want true or false, got %s", where, yamlnode.KindName(v))
	}
	*dst = v.Value == "true"
	return nil
}

var hostName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Validate checks the values: names unique and well formed, an address,
// user and a way to authenticate on every host, known roles, at least one
// sut and one driver host, and every placement naming a host with the
// role it needs.
func (f *File) Validate() error {
	if len(f.Hosts) == 0 {
		return &Error{File: f.Source, Line: f.lines["hosts"], Err: errors.New("no hosts: list at least one sut and one driver host under hosts:")}
	}
	seen := map[string]int{}
	sut, driver := false, false
	for _, h := range f.Hosts {
		at := func(format string, args ...any) error {
			return &Error{File: f.Source, Line: h.Line, Err: fmt.Errorf("host %q: "+format, append([]any{h.Name}, args...)...)}
		}
		if !hostName.MatchString(h.Name) {
			return at("name: want lower-case letters, digits and '-' (at most 31), e.g. sut1")
		}
		if first, dup := seen[h.Name]; dup {
			return at("named twice (first at line %d)", first)
		}
		seen[h.Name] = h.Line
		if h.Address == "" {
			return at("no address: give the IP address (or DNS name) its SSH server listens on")
		}
		if a, err := netip.ParseAddr(h.Address); err == nil && (a.IsUnspecified() || a.IsMulticast()) {
			return at("address %s cannot be connected to", h.Address)
		}
		if h.User == "" {
			return at("no user: give the SSH user (root, or a user that may run sudo-less what nearnative starts)")
		}
		if h.Key == "" && !h.Agent {
			return at("no way to log in: give key: FILE (a private key) or agent: true (the SSH agent at SSH_AUTH_SOCK)")
		}
		if !strings.HasPrefix(h.DockerSocket, "/") {
			return at("docker_socket %q: want the absolute path of dockerd's socket on the host, e.g. %s", h.DockerSocket, DefaultDockerSocket)
		}
		if len(h.Roles) == 0 {
			return at("no roles: give roles: [sut], [driver] or [sut, driver]")
		}
		for _, r := range h.Roles {
			if r != RoleSUT && r != RoleDriver {
				return at("role %q: want %s or %s", r, RoleSUT, RoleDriver)
			}
		}
		sut = sut || h.Has(RoleSUT)
		driver = driver || h.Has(RoleDriver)
	}
	if !sut || !driver {
		return &Error{File: f.Source, Line: f.lines["hosts"], Err: errors.New("want at least one host with role sut and one with role driver (one host may have both)")}
	}
	if f.ClockOffsetMax < 0 {
		return &Error{File: f.Source, Line: f.lines["clock_offset_max"], Err: errors.New("clock_offset_max: must not be negative")}
	}
	roles := make([]string, 0, len(f.Place))
	for r := range f.Place {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		name := f.Place[r]
		h, ok := f.Host(name)
		line := f.lines["place."+r]
		if !ok {
			return &Error{File: f.Source, Line: line, Err: fmt.Errorf("place: %s on %q: no such host (hosts: %s)", r, name, strings.Join(f.Names(), ", "))}
		}
		need := RoleSUT
		if r == Driver {
			need = RoleDriver
		}
		if !h.Has(need) {
			return &Error{File: f.Source, Line: line, Err: fmt.Errorf("place: %s on %q: that host's roles are [%s]; add %s to them or place %s elsewhere", r, name, strings.Join(h.Roles, ", "), need, r)}
		}
	}
	return nil
}

// Host returns the host named name.
func (f *File) Host(name string) (Host, bool) {
	for _, h := range f.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// Names lists the hosts' names in file order.
func (f *File) Names() []string {
	var out []string
	for _, h := range f.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// With lists the hosts that have role, in file order.
func (f *File) With(role string) []Host {
	var out []Host
	for _, h := range f.Hosts {
		if h.Has(role) {
			out = append(out, h)
		}
	}
	return out
}

// SUTFor is the host that runs server role: its place, else the first sut
// host.
func (f *File) SUTFor(role string) Host {
	if name, ok := f.Place[role]; ok {
		h, _ := f.Host(name)
		return h
	}
	return f.With(RoleSUT)[0]
}

// Drivers are the hosts the load driver runs on: the placed one, else every
// driver host (the load is spread over them).
func (f *File) Drivers() []Host {
	if name, ok := f.Place[Driver]; ok {
		h, _ := f.Host(name)
		return []Host{h}
	}
	return f.With(RoleDriver)
}

// OffsetMax is the clock offset threshold.
func (f *File) OffsetMax() time.Duration {
	if f.ClockOffsetMax == 0 {
		return DefaultClockOffsetMax
	}
	return f.ClockOffsetMax
}
