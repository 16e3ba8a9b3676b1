package pgserver

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestTune(t *testing.T) {
	tests := []struct {
		name                       string
		mem                        int64
		shared, cache, maintenance int64
	}{
		{"tiny share: floors", 256 * mB, 128 * mB, 128 * mB, 64 * mB},
		{"2 GB", 2 * gB, 512 * mB, gB, 128 * mB},
		{"24 GB", 24 * gB, 6 * gB, 12 * gB, gB},
		{"64 GB: shared_buffers capped", 64 * gB, 8 * gB, 32 * gB, gB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Tune(tt.mem, 50)
			if s.SharedBuffers != tt.shared || s.EffectiveCacheSize != tt.cache || s.MaintenanceWorkMem != tt.maintenance {
				t.Errorf("Tune(%d) = shared %d cache %d maintenance %d, want %d %d %d", tt.mem,
					s.SharedBuffers, s.EffectiveCacheSize, s.MaintenanceWorkMem, tt.shared, tt.cache, tt.maintenance)
			}
			if !s.Durable || !s.Autovacuum || s.MaxConnections != 50 || s.ParallelWorkersPerGather != 0 {
				t.Errorf("Tune: %+v, want durable, autovacuum, 50 connections, no parallel query", s)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Tune's settings fail Validate: %v", err)
			}
		})
	}
	b := BuildSettings(24 * gB)
	if b.Durable || b.Autovacuum || b.Validate() != nil {
		t.Errorf("BuildSettings = %+v (valid: %v), want not durable, no autovacuum", b, b.Validate())
	}
}

func TestValidate(t *testing.T) {
	ok := Tune(gB, 10)
	tests := []struct {
		name string
		mod  func(*Settings)
		want string
	}{
		{"no connections", func(s *Settings) { s.MaxConnections = 0 }, "max_connections"},
		{"tiny shared_buffers", func(s *Settings) { s.SharedBuffers = 1000 }, "shared_buffers"},
		{"tiny work_mem", func(s *Settings) { s.WorkMem = 1 }, "work_mem"},
		{"tiny maintenance", func(s *Settings) { s.MaintenanceWorkMem = kB }, "maintenance_work_mem"},
		{"wal sizes reversed", func(s *Settings) { s.MaxWALSize = s.MinWALSize - 1 }, "max_wal_size"},
		{"checkpoint too short", func(s *Settings) { s.CheckpointTimeout = time.Second }, "checkpoint_timeout"},
		{"negative workers", func(s *Settings) { s.ParallelWorkersPerGather = -1 }, "parallel"},
		{"extra with newline", func(s *Settings) { s.Extra = map[string]string{"a": "1\nfsync = off"} }, "extra setting"},
		{"extra bad name", func(s *Settings) { s.Extra = map[string]string{"a b": "1"} }, "extra setting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.mod(&s)
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error about %s", err, tt.want)
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("Tune's settings: %v", err)
	}
}

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
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestRender(t *testing.T) {
	s := Tune(2*gB, 40)
	s.Extra = map[string]string{"random_page_cost": "1.1", "jit": "off"}
	b, err := s.Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "trial.conf", b)
	b, err = BuildSettings(2 * gB).Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "build.conf", b)
	if _, err := (Settings{}).Render(); err == nil {
		t.Error("Render of zero settings: no error")
	}
}

func TestDescribe(t *testing.T) {
	got := Tune(2*gB, 40).Describe()
	want := "PostgreSQL settings (trial): max_connections=40 shared_buffers=512MB effective_cache_size=1GB work_mem=4MB maintenance_work_mem=128MB max_wal_size=4GB checkpoint_timeout=15m0s fsync=on synchronous_commit=on autovacuum=on max_parallel_workers_per_gather=0"
	if got != want {
		t.Errorf("Describe =\n  %s\nwant\n  %s", got, want)
	}
}

func TestSpec(t *testing.T) {
	vol := &platform.Volume{HostPath: "/tmp/nn-x/data", Path: "/pgdata"}
	tests := []struct {
		name   string
		data   *platform.Volume
		listen platform.Listen
		want   []string // data dir, config, host, port, dir
	}{
		{"native, fresh cluster", nil, platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"pg": 5999}, Dir: "/tmp/nn-a"},
			[]string{"/tmp/nn-a/data", "/usr/lib/postgresql/15/bin", "/tmp/nn-a/postgresql.conf", "127.0.0.1", "5999", "/tmp/nn-a"}},
		{"container, fresh cluster", nil, platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"pg": 41000}, Dir: platform.ContainerDir},
			[]string{"/nearnative/data", "/usr/lib/postgresql/15/bin", "/nearnative/postgresql.conf", "0.0.0.0", "41000", "/nearnative"}},
		{"native, template copy used in place", vol, platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"pg": 5999}, Dir: "/tmp/nn-a"},
			[]string{"/tmp/nn-x/data", "/usr/lib/postgresql/15/bin", "/tmp/nn-a/postgresql.conf", "127.0.0.1", "5999", "/tmp/nn-a"}},
		{"container, template copy mounted", vol, platform.Listen{Host: "0.0.0.0", Ports: map[string]int{"pg": 41000}, Dir: platform.ContainerDir},
			[]string{"/pgdata", "/usr/lib/postgresql/15/bin", "/nearnative/postgresql.conf", "0.0.0.0", "41000", "/nearnative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := Spec(Config{Settings: Tune(gB, 10), Data: tt.data, BinDir: "/usr/lib/postgresql/15/bin"})
			if err != nil {
				t.Fatal(err)
			}
			if err := spec.Validate(); err != nil {
				t.Fatal(err)
			}
			if spec.Name != "pg" || spec.User != SystemUser || !reflect.DeepEqual(spec.Ports, []string{Port}) {
				t.Errorf("spec name %q user %q ports %v", spec.Name, spec.User, spec.Ports)
			}
			argv := spec.Command(tt.listen)
			if len(argv) != 10 || argv[0] != "/bin/sh" || argv[1] != "-c" || argv[3] != "postgres-start" {
				t.Fatalf("argv %q", argv)
			}
			if !reflect.DeepEqual(argv[4:], tt.want) {
				t.Errorf("arguments %q, want %q", argv[4:], tt.want)
			}
			if (tt.data != nil) != (len(spec.Volumes) == 1) {
				t.Errorf("volumes %v for data %v", spec.Volumes, tt.data)
			}
			var names []string
			var hba string
			for _, f := range spec.FilesFor(tt.listen) {
				names = append(names, f.Path)
				if f.Path == "pg_hba.conf" {
					hba = string(f.Content)
				}
			}
			if !reflect.DeepEqual(names, []string{"postgresql.conf", "pg_ident.conf", "pg_hba.conf"}) {
				t.Errorf("files %v", names)
			}
			// Without subnets from the platform: loopback and the private
			// ranges, never everyone.
			if !strings.Contains(hba, "host all all 127.0.0.0/8 trust") || !strings.Contains(hba, "host all all 10.0.0.0/8 trust") ||
				strings.Contains(hba, "0.0.0.0/0") || strings.Contains(hba, "::/0") {
				t.Errorf("pg_hba.conf:\n%s", hba)
			}
		})
	}
	if _, err := Spec(Config{Settings: Tune(gB, 10), Data: &platform.Volume{HostPath: "rel", Path: "/x"}, BinDir: "/b"}); err == nil {
		t.Error("relative data dir: no error")
	}
	if _, err := Spec(Config{Settings: Settings{}, BinDir: "/b"}); err == nil {
		t.Error("zero settings: no error")
	}
}

func TestHBANamesThePlatformsSubnets(t *testing.T) {
	l := platform.Listen{From: platform.Nets(platform.Loopback, netip.MustParsePrefix("10.214.3.0/30"), netip.MustParsePrefix("172.17.0.0/16"))}
	got := string(HBA(l, "trust"))
	for _, want := range []string{"host all all 127.0.0.0/8 trust\n", "host all all 10.214.3.0/30 trust\n", "host all all 172.17.0.0/16 trust\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("pg_hba.conf lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "host ") != 3 {
		t.Errorf("pg_hba.conf has other entries:\n%s", got)
	}
}

func TestBinDir(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"13", "15", "9.6", "x"} {
		if err := os.MkdirAll(filepath.Join(dir, v, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "bin", "postgres"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := binGlob
	t.Cleanup(func() { binGlob = old })
	binGlob = filepath.Join(dir, "*", "bin", "postgres")
	got, err := BinDir()
	if err != nil || got != filepath.Join(dir, "15", "bin") {
		t.Errorf("BinDir = %q, %v; want the newest major version, 15", got, err)
	}
	binGlob = filepath.Join(dir, "none", "*", "bin", "postgres")
	if _, err := BinDir(); err == nil || !strings.Contains(err.Error(), "make setup") {
		t.Errorf("BinDir without PostgreSQL: %v", err)
	}
}

func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := DBStats{At: t0, Commits: 100, Rollbacks: 1, BlocksRead: 10, BlocksHit: 90, Deadlocks: 0}
	b := DBStats{At: t0.Add(10 * time.Second), Commits: 1100, Rollbacks: 21, BlocksRead: 20, BlocksHit: 1080, Deadlocks: 2}
	r, err := a.Rates(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Rates{Seconds: 10, CommitsPerSec: 100, RollbacksPerSec: 2, HitRatio: 990.0 / 1000, Deadlocks: 2}
	if r != want {
		t.Errorf("Rates = %+v, want %+v", r, want)
	}
	// No block touched: the ratio is 1, not NaN.
	if r, err := a.Rates(DBStats{At: t0.Add(time.Second), Commits: 100, Rollbacks: 1, BlocksRead: 10, BlocksHit: 90}); err != nil || r.HitRatio != 1 {
		t.Errorf("idle interval: %+v, %v", r, err)
	}
	if _, err := b.Rates(a); err == nil {
		t.Error("readings in the wrong order: no error")
	}
	if _, err := a.Rates(DBStats{At: t0.Add(time.Second)}); err == nil || !strings.Contains(err.Error(), "backwards") {
		t.Errorf("reset counters: %v", err)
	}
}

func TestDSN(t *testing.T) {
	if got := DSN("127.0.0.1:5432", "ds2"); got != "postgres://postgres@127.0.0.1:5432/ds2?connect_timeout=5&sslmode=disable" {
		t.Errorf("DSN = %s", got)
	}
	if got := DSN("[::1]:5432", "postgres"); !strings.HasPrefix(got, "postgres://postgres@[::1]:5432/postgres?") {
		t.Errorf("DSN = %s", got)
	}
}

func TestParseIDs(t *testing.T) {
	for _, tt := range []struct {
		out      string
		uid, gid int
		ok       bool
	}{{"106\n111\n", 106, 111, true}, {"101\n104", 101, 104, true}, {"", 0, 0, false}, {"id: 'postgres': no such user\n", 0, 0, false}, {"1\n-2\n", 0, 0, false}} {
		uid, gid, err := ParseIDs([]byte(tt.out))
		if (err == nil) != tt.ok || uid != tt.uid || gid != tt.gid {
			t.Errorf("ParseIDs(%q) = %d %d %v", tt.out, uid, gid, err)
		}
	}
}

// TestDefaults: PostgreSQL's own settings but the two given, valid, and
// written out so that the server's settings do not depend on the data
// directory's postgresql.conf.
func TestDefaults(t *testing.T) {
	s := Defaults(55, 256*mB)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	conf, err := s.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max_connections = 55\n", "shared_buffers = 262144kB\n", "effective_cache_size = 4194304kB\n",
		"work_mem = 4096kB\n", "maintenance_work_mem = 65536kB\n", "max_wal_size = 1048576kB\n", "min_wal_size = 81920kB\n",
		"checkpoint_timeout = 300s\n", "fsync = on\n", "wal_level = replica\n", "autovacuum = on\n",
		"max_parallel_workers_per_gather = 2\n", "max_parallel_maintenance_workers = 2\n"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("postgresql.conf lacks %q:\n%s", want, conf)
		}
	}
}

func TestAuth(t *testing.T) {
	l := platform.Listen{Host: "127.0.0.1", Ports: map[string]int{"pg": 5999}, Dir: "/tmp/nn-a"}
	for _, tt := range []struct {
		auth, want string
		ok         bool
	}{{"", "trust", true}, {"scram-sha-256", "scram-sha-256", true}, {"md5", "", false}} {
		spec, err := Spec(Config{Settings: Tune(gB, 10), BinDir: "/b", Auth: tt.auth})
		if (err == nil) != tt.ok {
			t.Errorf("auth %q: %v", tt.auth, err)
			continue
		}
		if !tt.ok {
			continue
		}
		for _, f := range spec.FilesFor(l) {
			if f.Path == "pg_hba.conf" && !strings.Contains(string(f.Content), "127.0.0.0/8 "+tt.want+"\n") {
				t.Errorf("auth %q: pg_hba.conf\n%s", tt.auth, f.Content)
			}
		}
	}
}
