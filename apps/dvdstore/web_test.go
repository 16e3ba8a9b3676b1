package dvdstore

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
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
	conf, php, err := WebConfig{DBAddr: "172.17.0.3:41234", Workers: 12}.Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "httpd.conf", conf)
	golden(t, "config.php", php)
}

func TestWebConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		c    WebConfig
		want string
	}{
		{"ok", WebConfig{DBAddr: "127.0.0.1:5432", Workers: 4}, ""},
		{"ipv6", WebConfig{DBAddr: "[::1]:5432", Workers: 4}, ""},
		{"no port", WebConfig{DBAddr: "127.0.0.1", Workers: 4}, "host:port"},
		{"bad port", WebConfig{DBAddr: "db:99999", Workers: 4}, "bad port"},
		{"no host", WebConfig{DBAddr: ":5432", Workers: 4}, "host:port"},
		{"no workers", WebConfig{DBAddr: "db:5432"}, "workers"},
		{"tiny keep-alive", WebConfig{DBAddr: "db:5432", Workers: 1, KeepAlive: time.Millisecond}, "keep-alive"},
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
	spec, err := WebSpec(WebConfig{DBAddr: "127.0.0.1:5432", Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if spec.Name != "web" || spec.User != WebUser || !reflect.DeepEqual(spec.Ports, []string{WebPort}) {
		t.Errorf("spec %q user %q ports %v", spec.Name, spec.User, spec.Ports)
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
		{platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"http": 8080}, Dir: "/tmp/nn-x-web"},
			[]string{ApacheBin, "-d", "/tmp/nn-x-web", "-f", "/tmp/nn-x-web/httpd.conf", "-C", "Define NN_DIR /tmp/nn-x-web",
				"-C", "Define NN_LISTEN 127.0.0.1:8080", "-DFOREGROUND"}},
		{platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"http": 41000}, Dir: platform.ContainerDir},
			[]string{ApacheBin, "-d", "/nearnative", "-f", "/nearnative/httpd.conf", "-C", "Define NN_DIR /nearnative",
				"-C", "Define NN_LISTEN 0.0.0.0:41000", "-DFOREGROUND"}},
	} {
		if got := spec.Command(tt.l); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Command(%+v) = %q", tt.l, got)
		}
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
