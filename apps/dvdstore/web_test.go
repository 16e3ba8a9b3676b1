package dvdstore

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestWebRender(t *testing.T) {
	conf, err := WebConfig{DBAddrs: []string{"172.17.0.3:41234"}, Workers: 12}.Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "httpd.conf", conf)
	conf, err = WebConfig{DBAddrs: []string{"127.0.0.1:41234", "127.0.0.1:41235", "[::1]:41236"}, Workers: 12, KeepAlive: 5 * time.Second}.Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "httpd-3-sites.conf", conf)
}

func TestWebConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		c    WebConfig
		want string
	}{
		{"ok", WebConfig{DBAddrs: []string{"127.0.0.1:5432"}, Workers: 4}, ""},
		{"two sites", WebConfig{DBAddrs: []string{"127.0.0.1:5432", "127.0.0.1:5433"}, Workers: 4}, ""},
		{"ipv6", WebConfig{DBAddrs: []string{"[::1]:5432"}, Workers: 4}, ""},
		{"no site", WebConfig{Workers: 4}, "no database address"},
		{"no port", WebConfig{DBAddrs: []string{"127.0.0.1"}, Workers: 4}, "host:port"},
		{"bad port", WebConfig{DBAddrs: []string{"127.0.0.1:5432", "db:99999"}, Workers: 4}, "bad port"},
		{"no host", WebConfig{DBAddrs: []string{":5432"}, Workers: 4}, "host:port"},
		{"quote in host", WebConfig{DBAddrs: []string{`a"b:5432`}, Workers: 4}, "host:port"},
		{"no workers", WebConfig{DBAddrs: []string{"db:5432"}}, "workers"},
		{"tiny keep-alive", WebConfig{DBAddrs: []string{"db:5432"}, Workers: 1, KeepAlive: time.Millisecond}, "keep-alive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestWebSpec(t *testing.T) {
	spec, err := WebSpec(WebConfig{DBAddrs: []string{"127.0.0.1:5432"}, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if spec.Name != "web" || spec.User != WebUser || !reflect.DeepEqual(spec.Ports, []string{"http0"}) || WebPort != "http0" {
		t.Errorf("spec %q user %q ports %v", spec.Name, spec.User, spec.Ports)
	}
	// The same locale natively (where a server inherits nearnative's
	// environment) and in a container (the image's).
	if want := map[string]string{"LANG": "C", "LC_ALL": "C"}; !reflect.DeepEqual(spec.Env, want) {
		t.Errorf("web server environment %v, want %v", spec.Env, want)
	}
	var files []string
	for _, f := range spec.Files {
		files = append(files, f.Path)
	}
	sort.Strings(files)
	want := []string{"httpd.conf", "www/browse.php", "www/common.php", "www/config.php", "www/login.php", "www/newcustomer.php",
		"www/prices.php", "www/purchase.php", "www/ready.php"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	for _, tt := range []struct {
		l    platform.Listen
		want []string
	}{
		{platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"http0": 8080}, Dir: "/tmp/nn-x-web"},
			[]string{ApacheBin, "-d", "/tmp/nn-x-web", "-f", "/tmp/nn-x-web/httpd.conf", "-C", "Define NN_DIR /tmp/nn-x-web",
				"-C", "Define NN_LISTEN0 127.0.0.1:8080", "-C", "Define NN_PORT0 8080", "-DFOREGROUND"}},
		{platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"http0": 41000}, Dir: platform.ContainerDir},
			[]string{ApacheBin, "-d", "/nearnative", "-f", "/nearnative/httpd.conf", "-C", "Define NN_DIR /nearnative",
				"-C", "Define NN_LISTEN0 0.0.0.0:41000", "-C", "Define NN_PORT0 41000", "-DFOREGROUND"}},
	} {
		if got := spec.Command(tt.l); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Command(%+v) = %q", tt.l, got)
		}
	}
}

func TestWebSpecSites(t *testing.T) {
	spec, err := WebSpec(WebConfig{DBAddrs: []string{"127.0.0.1:5432", "127.0.0.1:5433"}, Workers: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec.Ports, []string{"http0", "http1"}) {
		t.Errorf("ports %v", spec.Ports)
	}
	got := spec.Command(platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"http0": 8080, "http1": 8081}, Dir: "/d"})
	want := []string{ApacheBin, "-d", "/d", "-f", "/d/httpd.conf", "-C", "Define NN_DIR /d",
		"-C", "Define NN_LISTEN0 127.0.0.1:8080", "-C", "Define NN_PORT0 8080",
		"-C", "Define NN_LISTEN1 127.0.0.1:8081", "-C", "Define NN_PORT1 8081", "-DFOREGROUND"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Command = %q", got)
	}
}

func TestDBSpec(t *testing.T) {
	spec, err := DBSpec(DBConfig{Memory: 1 << 30, MaxConnections: 30, Data: platform.Volume{HostPath: "/tmp/nn-x/data", Path: DataPath}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "db" || len(spec.Volumes) != 1 || spec.Volumes[0].Path != DataPath {
		t.Errorf("spec %q volumes %v", spec.Name, spec.Volumes)
	}
	if want := map[string]string{"LANG": "C", "LC_ALL": "C"}; !reflect.DeepEqual(spec.Env, want) {
		t.Errorf("database environment %v, want %v", spec.Env, want)
	}
	for _, c := range []DBConfig{
		{Memory: 1 << 30, MaxConnections: 30},
		{Memory: 1 << 20, MaxConnections: 30, Data: platform.Volume{HostPath: "/a", Path: "/b"}},
		{Memory: 1 << 30, Data: platform.Volume{HostPath: "/a", Path: "/b"}},
	} {
		if _, err := DBSpec(c); err == nil {
			t.Errorf("DBSpec(%+v): no error", c)
		}
	}
}

func TestSnippet(t *testing.T) {
	if got := snippet([]byte("<html><p class=\"error\">no\n  db</p></html>")); got != "no db" {
		t.Errorf("snippet = %q", got)
	}
	if got := snippet([]byte(strings.Repeat("x", 400))); len(got) != 303 {
		t.Errorf("long snippet: %d bytes", len(got))
	}
}

// TestReadyTimeouts checks that a probe that runs out of time names the
// server and says what it saw.
func TestReadyTimeouts(t *testing.T) {
	ports, err := platform.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	for name, probe := range map[string]func(context.Context, string) error{
		"DVD Store database: PostgreSQL at " + addr: DBReady,
		"the DVD Store web server at " + addr:       WebReady,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := probe(ctx, addr)
		cancel()
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "connect") {
			t.Errorf("probe of a closed port: %v, want it to start with %q and say why", err, name)
		}
	}
}
