package sysinfo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ToolSpec names a program nearnative may run and the Debian package that
// provides it.
type ToolSpec struct {
	// Name is how nearnative refers to the tool.
	Name string `json:"name"`
	// Binary is a command name looked up in PATH (and the sbin
	// directories), or an absolute path that may contain a glob such as
	// /usr/lib/postgresql/*/bin/postgres (the highest version wins).
	Binary string `json:"binary"`
	// Package is what to apt-get install to get the tool.
	Package string `json:"package"`
	// VersionArgs make the binary print its version and exit; empty means
	// the binary is never run (for tools that would start working).
	VersionArgs []string `json:"version_args,omitempty"`
}

// InstallCommand returns the command that installs the tool.
func (s ToolSpec) InstallCommand() string {
	return "apt-get install -y " + s.Package
}

// KnownTools lists the workload and infrastructure tools nearnative uses.
var KnownTools = []ToolSpec{
	{Name: "redis-server", Binary: "redis-server", Package: "redis-server", VersionArgs: []string{"--version"}},
	{Name: "redis-benchmark", Binary: "redis-benchmark", Package: "redis-tools", VersionArgs: []string{"--version"}},
	{Name: "postgres", Binary: "/usr/lib/postgresql/*/bin/postgres", Package: "postgresql", VersionArgs: []string{"--version"}},
	{Name: "pgbench", Binary: "/usr/lib/postgresql/*/bin/pgbench", Package: "postgresql-client", VersionArgs: []string{"--version"}},
	{Name: "fio", Binary: "fio", Package: "fio", VersionArgs: []string{"--version"}},
	{Name: "iperf3", Binary: "iperf3", Package: "iperf3", VersionArgs: []string{"--version"}},
	{Name: "sockperf", Binary: "sockperf", Package: "sockperf", VersionArgs: []string{"--version"}},
	{Name: "gcc", Binary: "gcc", Package: "gcc", VersionArgs: []string{"--version"}}, // compiles nearnative's STREAM, LINPACK and round-trip programs
	{Name: "nginx", Binary: "nginx", Package: "nginx", VersionArgs: []string{"-v"}},
	{Name: "haproxy", Binary: "haproxy", Package: "haproxy", VersionArgs: []string{"-v"}},
	{Name: "nutcracker", Binary: "nutcracker", Package: "nutcracker", VersionArgs: []string{"--version"}},
	{Name: "qemu-system-x86_64", Binary: "qemu-system-x86_64", Package: "qemu-system-x86", VersionArgs: []string{"--version"}},
	{Name: "qemu-img", Binary: "qemu-img", Package: "qemu-utils", VersionArgs: []string{"--version"}},
	{Name: "debootstrap", Binary: "debootstrap", Package: "debootstrap", VersionArgs: []string{"--version"}},
	{Name: "ip", Binary: "ip", Package: "iproute2", VersionArgs: []string{"-V"}},
	{Name: "iptables", Binary: "iptables", Package: "iptables", VersionArgs: []string{"--version"}},
	{Name: "ovs-vsctl", Binary: "ovs-vsctl", Package: "openvswitch-switch", VersionArgs: []string{"--version"}},
	{Name: "dockerd", Binary: "dockerd", Package: "docker.io", VersionArgs: []string{"--version"}},
}

// Tool is what was found for one ToolSpec.
type Tool struct {
	Name string `json:"name"`
	// Binary is the resolved path, or the spec's binary when not found.
	Binary string `json:"binary"`
	// Package is the Debian package that owns the binary according to dpkg
	// (e.g. postgresql-15 for the postgresql spec), or the spec's package
	// when dpkg does not know the file.
	Package string `json:"package"`
	// Version is the Debian version of Package (dpkg-query): the one to
	// compare with the workload image's.
	Version string `json:"version"`
	// BinaryVersion is the first line the binary printed when asked for its
	// version, if it can be asked cheaply.
	BinaryVersion string `json:"binary_version,omitempty"`
	// Err is set when the tool is missing ("not installed: apt-get install
	// -y PKG") or its version could not be found.
	Err string `json:"err,omitempty"`
}

// Installed reports whether the binary was found.
func (t Tool) Installed() bool { return !strings.HasPrefix(t.Err, "not installed") }

// Timeouts for tool lookups.
const (
	// ToolsTimeout bounds a whole ToolVersions call.
	ToolsTimeout = 15 * time.Second
	// commandTimeout bounds each command run for a lookup.
	commandTimeout = 5 * time.Second
	// toolWorkers bounds how many lookups run at once.
	toolWorkers = 6
)

// ToolVersions looks up every tool in KnownTools; see LookupTools.
func ToolVersions(ctx context.Context) []Tool {
	return LookupTools(ctx, KnownTools)
}

// LookupTools finds the binary, owning Debian package and versions of each
// spec within ToolsTimeout. dpkg is asked twice for all tools at once (which
// package owns each binary, then those packages' versions) while the
// binaries' version commands run concurrently. The result is in spec order;
// failures are reported in each Tool's Err, never as a whole.
func LookupTools(ctx context.Context, specs []ToolSpec) []Tool {
	ctx, cancel := context.WithTimeout(ctx, ToolsTimeout)
	defer cancel()
	out := make([]Tool, len(specs))
	var paths []string
	for i, s := range specs {
		out[i] = Tool{Name: s.Name, Binary: s.Binary, Package: s.Package}
		path, err := findBinary(s.Binary)
		if err != nil {
			out[i].Err = "not installed: " + s.InstallCommand()
			continue
		}
		out[i].Binary = path
		paths = append(paths, path)
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, toolWorkers)
	binVersions := make([]string, len(specs))
	for i, s := range specs {
		if out[i].Err != "" || len(s.VersionArgs) == 0 {
			continue
		}
		path := out[i].Binary
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			binVersions[i] = binaryVersion(ctx, path, s.VersionArgs)
		}()
	}

	owners, ownerErr := dpkgOwners(ctx, paths)
	var pkgs []string
	for i := range out {
		if out[i].Err != "" {
			continue
		}
		if pkg, ok := owners[out[i].Binary]; ok {
			out[i].Package = pkg
			if !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	versions, versionErr := dpkgVersions(ctx, pkgs)
	wg.Wait()

	for i := range out {
		t := &out[i]
		t.BinaryVersion = binVersions[i]
		if t.Err != "" {
			continue
		}
		if _, owned := owners[t.Binary]; !owned {
			if ownerErr != nil {
				t.Err = "package version unknown: " + ownerErr.Error()
			} else {
				t.Err = "package version unknown: no Debian package owns " + t.Binary + " (installed by hand?)"
			}
			continue
		}
		if t.Version = versions[t.Package]; t.Version == "" {
			if versionErr == nil {
				versionErr = errors.New("dpkg-query reported no version")
			}
			t.Err = fmt.Sprintf("package version unknown: %s: %v", t.Package, versionErr)
		}
	}
	return out
}

// LookupTool looks up a single tool; see LookupTools.
func LookupTool(ctx context.Context, s ToolSpec) Tool {
	return LookupTools(ctx, []ToolSpec{s})[0]
}

// binaryVersion runs the binary with its version arguments and returns the
// first line it printed. Some tools exit non-zero after printing their
// version and some print it on stderr (nginx -v); any output counts unless
// the command was cut short.
func binaryVersion(ctx context.Context, path string, args []string) string {
	stdout, stderr, err := runCommand(ctx, commandTimeout, path, args...)
	if err != nil && !isExitError(err) {
		return ""
	}
	if v := firstLine(stdout); v != "" {
		return v
	}
	return firstLine(stderr)
}

// findBinary resolves a ToolSpec binary to an executable path.
func findBinary(bin string) (string, error) {
	if strings.ContainsRune(bin, '/') {
		matches, err := filepath.Glob(bin)
		if err != nil {
			return "", fmt.Errorf("bad pattern %q: %w", bin, err)
		}
		var exe []string
		for _, m := range matches {
			if isExecutable(m) {
				exe = append(exe, m)
			}
		}
		if len(exe) == 0 {
			// Fall back to the command name in PATH (e.g. pg_wrapper).
			if p, err := exec.LookPath(filepath.Base(bin)); err == nil {
				return p, nil
			}
			return "", fmt.Errorf("%s: %w", bin, os.ErrNotExist)
		}
		sort.Slice(exe, func(i, j int) bool { return versionLess(exe[i], exe[j]) })
		return exe[len(exe)-1], nil
	}
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	// Non-root PATHs often lack the sbin directories.
	for _, dir := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, bin)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", bin, exec.ErrNotFound)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// versionLess orders paths comparing runs of digits numerically, so
// /usr/lib/postgresql/9/... sorts before /usr/lib/postgresql/15/....
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			na, _ := strconv.Atoi(da)
			nb, _ := strconv.Atoi(db)
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// dpkgOwners maps each path to the Debian package that owns it, asking
// dpkg-query once. Each path is tried as found and with symlinks resolved
// (alternatives, redis-server -> redis-check-rdb), each also under the other
// half of the /usr merge, since dpkg records files where the package put
// them (/bin/ip, not /usr/sbin/ip). Paths no package owns are absent.
func dpkgOwners(ctx context.Context, paths []string) (map[string]string, error) {
	cands := make(map[string][]string, len(paths))
	var all []string
	seen := map[string]bool{}
	for _, path := range paths {
		list := ownerCandidates(path)
		cands[path] = list
		for _, c := range list {
			if !seen[c] {
				seen[c] = true
				all = append(all, c)
			}
		}
	}
	if len(all) == 0 {
		return map[string]string{}, nil
	}
	stdout, _, err := runCommand(ctx, commandTimeout, "dpkg-query", append([]string{"-S", "--"}, all...)...)
	// dpkg-query exits 1 when some paths are unknown but still prints the
	// rest, so an exit status alone is no failure.
	if err != nil && !isExitError(err) {
		return map[string]string{}, err
	}
	found := ParseDpkgSearch(stdout)
	owners := make(map[string]string, len(paths))
	for _, path := range paths {
		for _, c := range cands[path] {
			if pkg, ok := found[c]; ok {
				owners[path] = pkg
				break
			}
		}
	}
	return owners, nil
}

// ownerCandidates lists the paths under which dpkg may know path, in order
// of preference.
func ownerCandidates(path string) []string {
	var out []string
	add := func(p string) {
		for _, c := range out {
			if c == p {
				return
			}
		}
		out = append(out, p)
	}
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real)
	}
	for _, p := range paths {
		add(p)
		dir, base := filepath.Dir(p), filepath.Base(p)
		switch dir {
		case "/bin", "/sbin", "/usr/bin", "/usr/sbin":
			for _, d := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
				add(filepath.Join(d, base))
			}
		}
	}
	return out
}

// ParseDpkgSearch parses `dpkg-query -S` output into path -> package. For
// files shared by several packages the first is kept; diversion lines and
// architecture qualifiers (libc6:amd64) are dropped.
func ParseDpkgSearch(out []byte) map[string]string {
	owners := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "diversion by ") {
			continue
		}
		i := strings.Index(line, ": /")
		if i < 0 {
			continue
		}
		pkgs, path := line[:i], strings.TrimSpace(line[i+2:])
		pkg, _, _ := strings.Cut(pkgs, ",")
		pkg, _, _ = strings.Cut(strings.TrimSpace(pkg), ":")
		if _, dup := owners[path]; !dup && pkg != "" {
			owners[path] = pkg
		}
	}
	return owners
}

// dpkgVersions returns the installed versions of Debian packages, asking
// dpkg-query once. Packages it does not know are absent.
func dpkgVersions(ctx context.Context, pkgs []string) (map[string]string, error) {
	versions := map[string]string{}
	if len(pkgs) == 0 {
		return versions, nil
	}
	args := append([]string{"-W", "-f=${Package}\t${Version}\n", "--"}, pkgs...)
	stdout, _, err := runCommand(ctx, commandTimeout, "dpkg-query", args...)
	if err != nil && !isExitError(err) {
		return versions, err
	}
	for _, line := range strings.Split(string(stdout), "\n") {
		pkg, v, ok := strings.Cut(line, "\t")
		if ok && v != "" {
			versions[pkg] = v
		}
	}
	if len(versions) < len(pkgs) && err != nil {
		return versions, err
	}
	return versions, nil
}

// runCommand runs a short command under its own timeout with a C locale and
// no stdin. A failure carries the first line of stderr.
func runCommand(ctx context.Context, timeout time.Duration, name string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.WaitDelay = time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return out.Bytes(), errOut.Bytes(), fmt.Errorf("%s: %w", name, ctx.Err())
		}
		if msg := firstLine(errOut.Bytes()); msg != "" {
			return out.Bytes(), errOut.Bytes(), fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

func isExitError(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// firstLine returns the first non-blank line, trimmed and capped at 200
// bytes.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200]
			}
			return l
		}
	}
	return ""
}

// VersionText is the version the tool's binary printed, with its Debian
// package's version when that is known: for a trial's notes.
func (t Tool) VersionText() string {
	if t.Version == "" {
		return t.BinaryVersion
	}
	return t.BinaryVersion + " (Debian " + t.Package + " " + t.Version + ")"
}

// ToolVersion is a tool's version looked up once, on first use, for the
// notes of every trial that runs the tool (sockperf's, iperf3's).
type ToolVersion struct {
	Spec ToolSpec
	mu   sync.Mutex
	done bool
	text string
}

// Note is "BINARY VERSIONARGS: version" for a trial's notes: the host's
// binary and Debian package (Tool.VersionText), or, when the host gives
// none, fromOutput, what the tool's own output said.
func (v *ToolVersion) Note(ctx context.Context, fromOutput string) string {
	v.mu.Lock()
	if !v.done {
		v.text, v.done = LookupTool(ctx, v.Spec).VersionText(), true
	}
	text := v.text
	v.mu.Unlock()
	if text == "" {
		text = fromOutput
	}
	return strings.TrimSpace(v.Spec.Binary+" "+strings.Join(v.Spec.VersionArgs, " ")) + ": " + text
}
