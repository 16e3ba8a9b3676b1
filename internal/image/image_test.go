package image

import (
	"context"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParseStatusGolden(t *testing.T) {
	f, err := os.Open("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseStatus(f)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "status.golden.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseStatus:\n got %v\nwant %v", got, want)
	}
}

func TestParseStatusHost(t *testing.T) {
	f, err := os.Open("/var/lib/dpkg/status")
	if err != nil {
		t.Skip("no dpkg status on this host")
	}
	defer f.Close()
	got, err := ParseStatus(f)
	if err != nil {
		t.Fatal(err)
	}
	if got["dpkg"] == "" {
		t.Errorf("host status: dpkg not found among %d packages", len(got))
	}
}

func TestParseSources(t *testing.T) {
	host, err := os.ReadFile("testdata/host-debian.sources")
	if err != nil {
		t.Fatal(err)
	}
	const sec = "http://deb.debian.org/debian-security"
	tests := []struct {
		name    string
		deb822  bool
		text    string
		want    Mirrors
		wantErr bool
	}{
		{name: "host file (snapshot of this machine's debian.sources)", deb822: true, text: string(host),
			want: Mirrors{Mirror: "http://deb.debian.org/debian", Security: sec}},
		{name: "deb822 continuation, case, disabled stanza and deb-src", deb822: true, text: `
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

# a comment between stanzas
types: deb-src deb
uris: cdrom:/media/ https://mirror.example/debian/
suites:
 bookworm
 bookworm-updates
components: main contrib

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main
`, want: Mirrors{Mirror: "https://mirror.example/debian", Security: "http://security.example/debian-security"}},
		{name: "deb822 only deb-src", deb822: true, text: "Types: deb-src\nURIs: http://x/debian\nSuites: bookworm\n", want: Mirrors{}},
		{name: "deb822 other suite", deb822: true, text: "Types: deb\nURIs: http://x/debian\nSuites: trixie\n", want: Mirrors{}},
		{name: "deb822 malformed line", deb822: true, text: "Types deb\n", wantErr: true},
		{name: "deb822 stanza without URIs", deb822: true, text: "Types: deb\nSuites: bookworm\n", wantErr: true},
		{name: "one-line with options and old security suite", text: `
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.example/debian bookworm main
deb-src http://ftp.example/debian bookworm main
deb [ trusted=yes ] http://sec.example/debian-security bookworm/updates main # trailing comment
`, want: Mirrors{Mirror: "http://ftp.example/debian", Security: "http://sec.example/debian-security"}},
		{name: "one-line unterminated options", text: "deb [arch=amd64 http://x/debian bookworm main\n", wantErr: true},
		{name: "one-line too short", text: "deb http://x/debian\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := parseOneLineSources
			if tt.deb822 {
				parse = parseDeb822Sources
			}
			s, err := parse(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := pickMirrors(s, "bookworm"); got != tt.want {
				t.Errorf("mirrors = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMirrorsInDir(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "sources.list"), []byte("deb http://list.example/debian bookworm main\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sources.list.d", "sec.sources"),
		[]byte("Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n"), 0o644)
	m, err := mirrorsIn(dir, "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Mirrors{Mirror: "http://list.example/debian", Security: "http://sec.example/debian-security"}); m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if _, err := mirrorsIn(t.TempDir(), "bookworm"); err == nil {
		t.Error("empty apt dir: want an error")
	}
}

func TestHostMirrors(t *testing.T) {
	if _, err := os.Stat(HostAptDir); err != nil {
		t.Skip("no apt on this host")
	}
	m, err := HostMirrors(DefaultSuite)
	if err != nil {
		t.Skipf("host has no %s sources: %v", DefaultSuite, err)
	}
	t.Logf("host mirrors: %+v", m)
	if !strings.HasPrefix(m.Mirror, "http") {
		t.Errorf("mirror %q", m.Mirror)
	}
}

func testConfig() Config {
	return Config{
		Packages:       []string{"redis-server", "fio", "iperf3"},
		Suite:          "bookworm",
		Mirror:         "http://deb.debian.org/debian",
		SecurityMirror: "http://deb.debian.org/debian-security",
	}
}

const testPrograms = "compiler gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nprogram nn-stream 00112233445566ff\n"

func TestInputsHash(t *testing.T) {
	c := testConfig()
	host := map[string]string{"redis-server": "5:7.0.15-1~deb12u10", "fio": "3.33-3", "iperf3": "3.12-1+deb12u2"}
	base := inputsHash(c, host, testPrograms)
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", base)
	}
	if again := inputsHash(c, maps.Clone(host), testPrograms); again != base {
		t.Errorf("hash not stable: %s vs %s", again, base)
	}
	perm := c
	perm.Packages = []string{"iperf3", "redis-server", "fio", "fio"}
	if h := inputsHash(perm, host, testPrograms); h != base {
		t.Errorf("package order or duplicates changed the hash")
	}
	perm.Ref = "ignored/by:hash"
	if h := inputsHash(perm, host, testPrograms); h != base {
		t.Errorf("Ref changed the hash")
	}

	if h := inputsHash(c, host, testPrograms+"program nn-rr 0123456789abcdef\n"); h == base {
		t.Errorf("another benchmark program build did not change the hash")
	}
	if h := inputsHash(c, host, strings.Replace(testPrograms, "12.2.0", "12.3.0", 1)); h == base {
		t.Errorf("another compiler did not change the hash")
	}

	changes := map[string]func(*Config, map[string]string){
		"package added":    func(c *Config, _ map[string]string) { c.Packages = append(c.Packages, "nginx") },
		"package replaced": func(c *Config, _ map[string]string) { c.Packages = []string{"redis-server", "fio", "sockperf"} },
		"host version":     func(_ *Config, h map[string]string) { h["redis-server"] = "5:7.0.15-1~deb12u11" },
		"not installed":    func(_ *Config, h map[string]string) { h["fio"] = "" },
		"suite":            func(c *Config, _ map[string]string) { c.Suite = "trixie" },
		"mirror":           func(c *Config, _ map[string]string) { c.Mirror = "http://ftp.de.debian.org/debian" },
		"security mirror":  func(c *Config, _ map[string]string) { c.SecurityMirror = "" },
	}
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		c2, h2 := testConfig(), maps.Clone(host)
		change(&c2, h2)
		h := inputsHash(c2, h2, testPrograms)
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: hash equals that of %s", name, prev)
		}
		seen[h] = name
	}
	if tag := TagOf(base); tag != "nearnative/workload:"+base[:12] {
		t.Errorf("TagOf = %s", tag)
	}
}

func TestValidate(t *testing.T) {
	ok := testConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := map[string]func(*Config){
		"no packages":      func(c *Config) { c.Packages = nil },
		"bad package":      func(c *Config) { c.Packages = []string{"redis-server", "rm -rf"} },
		"option package":   func(c *Config) { c.Packages = []string{"--foo"} },
		"no suite":         func(c *Config) { c.Suite = "" },
		"no mirror":        func(c *Config) { c.Mirror = "" },
		"file mirror":      func(c *Config) { c.Mirror = "file:///srv/debian" },
		"bad security":     func(c *Config) { c.SecurityMirror = "ftp://x" },
		"ref with a space": func(c *Config) { c.Ref = "a b" },
	}
	for name, f := range bad {
		c := testConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	if err := (Config{Ref: "registry.example/workload:1"}).Validate(); err != nil {
		t.Errorf("ref-only config: %v", err)
	}
	if err := (Config{Packages: []string{"fio"}, Suite: "bookworm", Mirror: "http://x/debian"}).Validate(); err != nil {
		t.Errorf("config without security mirror: %v", err)
	}
}

func TestCompare(t *testing.T) {
	host := map[string]string{"a": "1", "b": "2", "c": "", "d": "4"}
	img := map[string]string{"a": "1", "b": "2.1", "c": "3", "e": "5"}
	got := Compare(host, img)
	want := []Mismatch{{"b", "2", "2.1"}, {"c", "", "3"}, {"d", "4", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compare = %v, want %v", got, want)
	}
	if s := want[1].String(); s != "c: host not installed, image 3" {
		t.Errorf("String = %q", s)
	}
	if Compare(img, img) != nil {
		t.Error("equal maps: want no mismatches")
	}
}

func TestHostVersions(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query")
	}
	v, err := HostVersions(context.Background(), []string{"dpkg", "nearnative-no-such-package"})
	if err != nil {
		t.Fatal(err)
	}
	if v["dpkg"] == "" {
		t.Errorf("dpkg has no version: %v", v)
	}
	if got, ok := v["nearnative-no-such-package"]; !ok || got != "" {
		t.Errorf("missing package: got %q, %v; want \"\", true", got, ok)
	}
}

func TestReadImportStream(t *testing.T) {
	id, err := readImportStream(strings.NewReader(`{"status":"sha256:abc"}` + "\r\n"))
	if err != nil || id != "sha256:abc" {
		t.Errorf("got %q, %v", id, err)
	}
	if _, err := readImportStream(strings.NewReader(`{"errorDetail":{"message":"bad tar"},"error":"bad tar"}`)); err == nil {
		t.Error("error message: want an error")
	}
	if _, err := readImportStream(strings.NewReader(``)); err == nil {
		t.Error("no ID: want an error")
	}
}
