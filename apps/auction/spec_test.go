package auction

import (
	"bytes"
	"encoding/xml"
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
)

var update = flag.Bool("update", false, "rewrite golden files")

func listen(spec platform.Spec, host, dir string) platform.Listen {
	ports := map[string]int{}
	for i, p := range spec.Ports {
		ports[p] = 40000 + i
	}
	return platform.Listen{Host: host, Ports: ports, Dir: dir}
}

func file(t *testing.T, spec platform.Spec, path string) platform.File {
	t.Helper()
	l := platform.Listen{Ports: map[string]int{}, Dir: platform.ContainerDir, From: []netip.Prefix{netip.MustParsePrefix("10.214.3.0/30")}}
	for _, p := range spec.Ports {
		l.Ports[p] = 1
	}
	for _, f := range spec.FilesFor(l) {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("spec %s has no file %s", spec.Name, path)
	return platform.File{}
}

func TestSettingsValidate(t *testing.T) {
	war := []byte("war")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"broker bad node name", BrokerSettings{NodeName: "rabbit"}.Validate(), "name@host"},
		{"broker cookie with space", BrokerSettings{Cookie: "a b"}.Validate(), "cookie"},
		{"app without database", AppServerSettings{Broker: "b:1", WAR: war}.Validate(), "database address"},
		{"app with bad broker port", AppServerSettings{DB: "d:1", Broker: "b:0", WAR: war}.Validate(), "port must be"},
		{"app without WAR", AppServerSettings{DB: "d:1", Broker: "b:1"}.Validate(), "make setup"},
		{"app bad heap", AppServerSettings{DB: "d:1", Broker: "b:1", WAR: war, Heap: "huge"}.Validate(), "heap"},
		{"app idle too short", AppServerSettings{DB: "d:1", Broker: "b:1", WAR: war, ItemIdle: time.Millisecond}.Validate(), "at least 100ms"},
		{"web without app servers", WebSettings{}.Validate(), "no application servers"},
		{"web bad app server", WebSettings{AppServers: []string{"app"}}.Validate(), "host:port"},
		{"web bad cache size", WebSettings{AppServers: []string{"a:1"}, ImageCache: "big"}.Validate(), "image cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", tt.err, tt.want)
			}
		})
	}
	good := []error{
		BrokerSettings{NodeName: "nn-broker@localhost"}.Validate(),
		AppServerSettings{DB: "10.0.0.2:5432", Broker: "[::1]:5672", WAR: war, Heap: "2g", ItemIdle: time.Second}.Validate(),
		WebSettings{AppServers: []string{"127.0.0.1:8080", "app2:8080"}, ImageCache: "1g"}.Validate(),
	}
	for i, err := range good {
		if err != nil {
			t.Errorf("good settings %d: %v", i, err)
		}
	}
}

// TestPostgresSpec: the auction's server is internal/pgserver's with
// PostgreSQL's defaults but max_connections and shared_buffers, and
// password authentication.
func TestPostgresSpec(t *testing.T) {
	c := PostgresConfig("pg", "/data/pg", 0)
	c.BinDir = "/usr/lib/postgresql/15/bin"
	spec, err := pgserver.Spec(c)
	if err != nil {
		t.Fatal(err)
	}
	if spec.User != "postgres" || !slices.Equal(spec.Ports, []string{PortPostgres}) {
		t.Errorf("user %q ports %v", spec.User, spec.Ports)
	}
	argv := strings.Join(spec.Command(listen(spec, "0.0.0.0", "/nearnative")), " ")
	for _, want := range []string{"/usr/lib/postgresql/15/bin", "/data/pg", "0.0.0.0", "40000"} {
		if !strings.Contains(argv, want) {
			t.Errorf("command %q lacks %q", argv, want)
		}
	}
	conf := string(file(t, spec, "postgresql.conf").Content)
	for _, want := range []string{"max_connections = 200\n", "shared_buffers = 262144kB\n", "work_mem = 4096kB\n",
		"maintenance_work_mem = 65536kB\n", "max_wal_size = 1048576kB\n", "checkpoint_timeout = 300s\n", "fsync = on\n",
		"autovacuum = on\n", "max_parallel_workers_per_gather = 2\n", "unix_socket_directories = ''\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("postgresql.conf lacks %q:\n%s", want, conf)
		}
	}
	if hba := string(file(t, spec, "pg_hba.conf").Content); !strings.Contains(hba, "host all all 10.214.3.0/30 scram-sha-256") ||
		strings.Contains(hba, "trust") || strings.Contains(hba, "0.0.0.0/0") {
		t.Errorf("pg_hba.conf:\n%s", hba)
	}
}

func TestBrokerSpec(t *testing.T) {
	spec, err := BrokerSpec("broker", BrokerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	argv := spec.Command(listen(spec, "0.0.0.0", "/nearnative"))
	for _, want := range []string{"HOME=/nearnative", "RABBITMQ_NODENAME=nn-broker@localhost", "RABBITMQ_NODE_IP_ADDRESS=0.0.0.0",
		"RABBITMQ_NODE_PORT=40000", "RABBITMQ_DIST_PORT=40001", "ERL_EPMD_PORT=40002", "ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_MNESIA_BASE=/nearnative/mnesia", "RABBITMQ_LOGS=-"} {
		if !slices.Contains(argv, want) {
			t.Errorf("command %q lacks %q", argv, want)
		}
	}
	if argv[0] != "env" || argv[len(argv)-1] != "/usr/lib/rabbitmq/bin/rabbitmq-server" {
		t.Errorf("command %q", argv)
	}
	c := file(t, spec, ".erlang.cookie")
	if c.Mode != 0o400 || len(c.Content) < 20 {
		t.Errorf("cookie %q mode %o", c.Content, c.Mode)
	}
	other, _ := BrokerSpec("broker", BrokerSettings{})
	if bytes.Equal(file(t, other, ".erlang.cookie").Content, c.Content) {
		t.Error("two brokers got the same cookie")
	}
}

func TestAppServerSpec(t *testing.T) {
	spec, err := AppServerSpec("app1", AppServerSettings{DB: "10.0.0.2:5432", Broker: "10.0.0.3:5672", WAR: []byte("war"), ItemIdle: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"AUCTION_NODE": "app1", "AUCTION_DB": "10.0.0.2:5432", "AUCTION_BROKER": "10.0.0.3:5672",
		"AUCTION_ITEM_IDLE_MS": "4000", "AUCTION_DB_POOL": "20"}
	for k, v := range wantEnv {
		if spec.Env[k] != v {
			t.Errorf("env %s=%q, want %q", k, spec.Env[k], v)
		}
	}
	if string(file(t, spec, "webapps/ROOT.war").Content) != "war" {
		t.Error("the WAR is not the root application")
	}
	var server struct {
		Service struct {
			Connector struct {
				Address      string `xml:"address,attr"`
				Port         string `xml:"port,attr"`
				MaxThreads   string `xml:"maxThreads,attr"`
				AsyncTimeout string `xml:"asyncTimeout,attr"`
			}
		}
	}
	if err := xml.Unmarshal(file(t, spec, "conf/server.xml").Content, &server); err != nil {
		t.Fatalf("server.xml: %v", err)
	}
	c := server.Service.Connector
	if c.Address != "${auction.http.address}" || c.Port != "${auction.http.port}" || c.MaxThreads != "200" || c.AsyncTimeout != "16000" {
		t.Errorf("connector %+v", c)
	}
	argv := spec.Command(listen(spec, "0.0.0.0", "/nearnative"))
	for _, want := range []string{"java", "-Xmx512m", "-Dcatalina.base=/nearnative", "-Dcatalina.home=" + CatalinaHome,
		"-Dauction.http.address=0.0.0.0", "-Dauction.http.port=40000", "org.apache.catalina.startup.Bootstrap"} {
		if !slices.Contains(argv, want) {
			t.Errorf("command %q lacks %q", argv, want)
		}
	}
	if spec.User != "tomcat" {
		t.Errorf("user %q", spec.User)
	}
}

// TestWebSpec compares the rendered nginx.conf with its golden file and has
// nginx itself check it (nginx -t).
func TestWebSpec(t *testing.T) {
	spec, err := WebSpec("web", WebSettings{AppServers: []string{"127.0.0.1:8081", "127.0.0.1:8082"}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	conf := file(t, spec, "nginx.conf").Content
	golden := filepath.Join("testdata", "nginx.conf")
	if *update {
		if err := os.WriteFile(golden, conf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(conf, want) {
		t.Errorf("nginx.conf differs from %s (go test -update rewrites it):\n%s", golden, conf)
	}
	if testing.Short() {
		return
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Fatalf("nginx not installed (make setup): %v", err)
	}
	dir := t.TempDir()
	l := listen(spec, "127.0.0.1", dir)
	if got := string(file(t, platform.Spec{Name: spec.Name, Files: spec.FilesFor(l)}, "listen.conf").Content); got != "listen 127.0.0.1:40000 reuseport backlog=4096;\n" {
		t.Errorf("listen.conf %q", got)
	}
	if argv := strings.Join(spec.Command(l), " "); argv != "nginx -p "+dir+"/ -c "+dir+"/nginx.conf -e stderr" {
		t.Errorf("command %q", argv)
	}
	for _, f := range spec.FilesFor(l) {
		p := filepath.Join(dir, f.Path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("nginx", "-t", "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr").CombinedOutput()
	if err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}

func TestLongPollTimeout(t *testing.T) {
	if got := LongPollTimeout(DefaultItemIdle); got != 45*time.Second {
		t.Errorf("long poll timeout %v, want 45s (1.5 x 30s)", got)
	}
}
