// Package pgserver describes a PostgreSQL server for the platforms: its
// settings (tuned for the memory a server gets, and stated), the
// platform.Spec that runs it (a fresh cluster made by initdb in the server's
// own directory, or a data directory prepared on the host and mounted), a
// protocol-level readiness probe, the pg_controldata check of a clean
// shutdown and the pg_stat_database figures a workload reports. The
// workloads pgbench, oltp (DVD Store) and auction use it.
package pgserver

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

// Port is the name of the spec's only port.
const Port = "pg"

// Superuser is the role initdb creates and every client uses. The servers
// listen only on loopback or on networks nearnative made, and authenticate
// with trust (see pg_hba.conf in Spec).
const Superuser = "postgres"

// SystemUser is the Debian system user PostgreSQL runs as; it refuses to run
// as root.
const SystemUser = "postgres"

// Settings are the postgresql.conf values nearnative chooses. Everything not
// listed keeps PostgreSQL's default.
type Settings struct {
	// Purpose is a few words for the header of the file ("trial", "template
	// build").
	Purpose            string
	MaxConnections     int
	SharedBuffers      int64 // bytes
	EffectiveCacheSize int64 // bytes
	WorkMem            int64 // bytes
	MaintenanceWorkMem int64 // bytes
	MaxWALSize         int64 // bytes
	MinWALSize         int64 // bytes
	CheckpointTimeout  time.Duration
	// Durable keeps fsync, synchronous_commit and full_page_writes on and
	// wal_level replica (PostgreSQL's defaults). Only a template build, which
	// is redone if it fails, turns them off (with wal_level minimal).
	Durable    bool
	Autovacuum bool
	// ParallelWorkersPerGather is 0 for OLTP trials: on a small machine
	// parallel plans compete with the other sessions, and containers' 64 MB
	// /dev/shm would bound their shared memory.
	ParallelWorkersPerGather   int
	ParallelMaintenanceWorkers int
	// Extra are further settings, name to value as written in
	// postgresql.conf (quote strings yourself).
	Extra map[string]string
}

const (
	kB = int64(1) << 10
	mB = int64(1) << 20
	gB = int64(1) << 30
)

// Tune returns durable trial settings for a server that gets memBytes of
// memory and at most maxConnections clients. The rule, stated in every
// trial's notes by Describe: shared_buffers a quarter of the memory (at least
// 128 MB, PostgreSQL's default, at most 8 GB), effective_cache_size half of
// it, maintenance_work_mem a sixteenth (64 MB..1 GB), work_mem 4 MB (the
// default), max_wal_size 4 GB and checkpoint_timeout 15 min so that a trial
// of a few minutes sees no forced checkpoint, autovacuum on (the default),
// no parallel query.
func Tune(memBytes int64, maxConnections int) Settings {
	return Settings{
		Purpose:                    "trial",
		MaxConnections:             maxConnections,
		SharedBuffers:              clamp(memBytes/4, 128*mB, 8*gB),
		EffectiveCacheSize:         clamp(memBytes/2, 128*mB, 1<<50),
		WorkMem:                    4 * mB,
		MaintenanceWorkMem:         clamp(memBytes/16, 64*mB, gB),
		MaxWALSize:                 4 * gB,
		MinWALSize:                 80 * mB,
		CheckpointTimeout:          15 * time.Minute,
		Durable:                    true,
		Autovacuum:                 true,
		ParallelWorkersPerGather:   0,
		ParallelMaintenanceWorkers: 0,
	}
}

// BuildSettings are the settings of a server that only bulk-loads a template:
// not durable (the build is redone from scratch if it fails, and its result
// is synced and checked after a clean shutdown), no autovacuum (the loader
// runs VACUUM ANALYZE itself), large maintenance memory for the index builds,
// and a small min_wal_size so that the template carries few WAL segments.
func BuildSettings(memBytes int64) Settings {
	s := Tune(memBytes, 20)
	s.Purpose = "template build"
	s.Durable = false
	s.Autovacuum = false
	s.MaintenanceWorkMem = clamp(memBytes/8, 64*mB, 2*gB)
	s.MaxWALSize = 8 * gB
	s.MinWALSize = 32 * mB
	s.CheckpointTimeout = time.Hour
	s.ParallelMaintenanceWorkers = 2
	return s
}

// Defaults are PostgreSQL 15's own defaults but for max_connections and
// shared_buffers: durable, autovacuum on, work_mem 4 MB,
// maintenance_work_mem 64 MB, effective_cache_size 4 GB, max_wal_size 1 GB,
// min_wal_size 80 MB, checkpoint_timeout 5 min, two parallel workers per
// gather and per maintenance command. The auction runs on them, as the
// seed's Weathervane deployment ran PostgreSQL with few settings changed.
func Defaults(maxConnections int, sharedBuffers int64) Settings {
	return Settings{
		Purpose:                    "trial, PostgreSQL's defaults",
		MaxConnections:             maxConnections,
		SharedBuffers:              sharedBuffers,
		EffectiveCacheSize:         4 * gB,
		WorkMem:                    4 * mB,
		MaintenanceWorkMem:         64 * mB,
		MaxWALSize:                 gB,
		MinWALSize:                 80 * mB,
		CheckpointTimeout:          5 * time.Minute,
		Durable:                    true,
		Autovacuum:                 true,
		ParallelWorkersPerGather:   2,
		ParallelMaintenanceWorkers: 2,
	}
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// Validate reports settings PostgreSQL would refuse or that make no sense.
func (s Settings) Validate() error {
	switch {
	case s.MaxConnections < 1 || s.MaxConnections > 10000:
		return fmt.Errorf("postgresql max_connections %d: want 1 to 10000", s.MaxConnections)
	case s.SharedBuffers < 128*kB:
		return fmt.Errorf("postgresql shared_buffers %d bytes: want at least 128kB", s.SharedBuffers)
	case s.WorkMem < 64*kB:
		return fmt.Errorf("postgresql work_mem %d bytes: want at least 64kB", s.WorkMem)
	case s.MaintenanceWorkMem < mB:
		return fmt.Errorf("postgresql maintenance_work_mem %d bytes: want at least 1MB", s.MaintenanceWorkMem)
	case s.EffectiveCacheSize < 8*kB:
		return fmt.Errorf("postgresql effective_cache_size %d bytes: want at least 8kB", s.EffectiveCacheSize)
	case s.MinWALSize < 2*16*mB || s.MaxWALSize < s.MinWALSize:
		return fmt.Errorf("postgresql min_wal_size %d / max_wal_size %d: want 32MB <= min <= max", s.MinWALSize, s.MaxWALSize)
	case s.CheckpointTimeout < 30*time.Second || s.CheckpointTimeout > 24*time.Hour:
		return fmt.Errorf("postgresql checkpoint_timeout %v: want 30s to 1d", s.CheckpointTimeout)
	case s.ParallelWorkersPerGather < 0 || s.ParallelMaintenanceWorkers < 0:
		return fmt.Errorf("postgresql parallel workers must not be negative")
	}
	for k, v := range s.Extra {
		if k == "" || strings.ContainsAny(k, " =\n#'") || strings.Contains(v, "\n") {
			return fmt.Errorf("postgresql extra setting %q = %q: want a plain name and a one-line value", k, v)
		}
	}
	return nil
}

// Describe states the settings in one line, for a trial's notes.
func (s Settings) Describe() string {
	d := fmt.Sprintf("PostgreSQL settings (%s): max_connections=%d shared_buffers=%s effective_cache_size=%s work_mem=%s maintenance_work_mem=%s max_wal_size=%s checkpoint_timeout=%v",
		s.Purpose, s.MaxConnections, size(s.SharedBuffers), size(s.EffectiveCacheSize), size(s.WorkMem), size(s.MaintenanceWorkMem), size(s.MaxWALSize), s.CheckpointTimeout)
	if s.Durable {
		d += " fsync=on synchronous_commit=on"
	} else {
		d += " fsync=off synchronous_commit=off wal_level=minimal"
	}
	d += fmt.Sprintf(" autovacuum=%v max_parallel_workers_per_gather=%d", onOff(s.Autovacuum), s.ParallelWorkersPerGather)
	for _, k := range sortedKeys(s.Extra) {
		d += " " + k + "=" + s.Extra[k]
	}
	return d
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func size(b int64) string {
	switch {
	case b%gB == 0:
		return fmt.Sprintf("%dGB", b/gB)
	case b%mB == 0:
		return fmt.Sprintf("%dMB", b/mB)
	default:
		return fmt.Sprintf("%dkB", b/kB)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

//go:embed postgresql.conf.tmpl
var confTemplate string

var confTmpl = template.Must(template.New("postgresql.conf").Funcs(template.FuncMap{
	"kb":   func(b int64) string { return fmt.Sprintf("%dkB", b/kB) },
	"secs": func(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) },
}).Parse(confTemplate))

// Render returns the postgresql.conf of s.
func (s Settings) Render() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var extra []string
	for _, k := range sortedKeys(s.Extra) {
		extra = append(extra, k+" = "+s.Extra[k])
	}
	var b bytes.Buffer
	err := confTmpl.Execute(&b, struct {
		Settings
		Extra []string
	}{s, extra})
	if err != nil {
		return nil, fmt.Errorf("rendering postgresql.conf: %w", err)
	}
	return b.Bytes(), nil
}

// HBA renders a pg_hba.conf letting in, with method (trust here: the
// benchmark must not measure password hashing; scram-sha-256 for an
// application's own), the subnets connections come from on the server's
// platform (l.AllowedFrom: the run's client link, loopback, the containers'
// or guests' network) and nothing else; the server also listens only on
// loopback or on a network nearnative made.
func HBA(l platform.Listen, method string) []byte {
	var b strings.Builder
	b.WriteString("# pg_hba.conf written by nearnative: " + method + " from the subnets this run's\n# clients and peers come from on the server's platform, nothing else.\n")
	for _, p := range l.AllowedFrom() {
		fmt.Fprintf(&b, "host all all %s %s\n", p, method)
	}
	return []byte(b.String())
}

// Config describes one PostgreSQL server.
type Config struct {
	// Name is the spec's name (default "pg").
	Name     string
	Settings Settings
	// Data is nil for a fresh, empty cluster that initdb makes in the
	// server's own directory when it starts (every platform, VMs included).
	// Otherwise HostPath is a data directory prepared on the host (a copy of
	// a template, owned by the uid the server runs as); natively the server
	// uses it in place, in a container it is bind-mounted at Path.
	Data *platform.Volume
	// BinDir holds postgres and initdb as the server sees them (default:
	// the host's, found by BinDir; the workload image carries the same
	// Debian packages).
	BinDir string
	// User runs the server (default SystemUser).
	User string
	// Auth is pg_hba.conf's method (default "trust", which the benchmarks
	// use; an application with passwords of its own sets scram-sha-256).
	Auth string
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if c.Data != nil {
		if !filepath.IsAbs(c.Data.HostPath) || !path.IsAbs(c.Data.Path) {
			return fmt.Errorf("postgresql data directory %q mounted at %q: both must be absolute paths", c.Data.HostPath, c.Data.Path)
		}
	}
	if c.Auth != "" && c.Auth != "trust" && c.Auth != "scram-sha-256" {
		return fmt.Errorf("postgresql authentication %q: want trust or scram-sha-256", c.Auth)
	}
	if c.BinDir != "" && !path.IsAbs(c.BinDir) {
		return fmt.Errorf("postgresql bin dir %q: want an absolute path", c.BinDir)
	}
	return nil
}

// startScript makes a cluster when the data directory has none yet, then
// execs postgres (which stays the process the platform stops). Arguments:
// $1 data directory, $2 bin dir, $3 config file, $4 listen address, $5 port,
// $6 the server's own directory (hba and ident files).
const startScript = `set -e
if [ ! -s "$1/PG_VERSION" ]; then
  "$2/initdb" -D "$1" -U ` + Superuser + ` --auth=trust -E UTF8 --locale=C --no-sync --no-instructions >&2
fi
exec "$2/postgres" -D "$1" -c config_file="$3" -c listen_addresses="$4" -c port="$5" -c hba_file="$6/pg_hba.conf" -c ident_file="$6/pg_ident.conf"`

// Spec returns the platform spec of the server. Its files are
// postgresql.conf (from Settings), pg_hba.conf and an empty pg_ident.conf in
// the server's own directory; the command runs initdb first when the data
// directory is empty. Clients connect as Superuser to Addr("pg").
func Spec(c Config) (platform.Spec, error) {
	if c.Name == "" {
		c.Name = "pg"
	}
	if c.User == "" {
		c.User = SystemUser
	}
	if c.Auth == "" {
		c.Auth = "trust"
	}
	if c.BinDir == "" {
		d, err := BinDir()
		if err != nil {
			return platform.Spec{}, err
		}
		c.BinDir = d
	}
	if err := c.Validate(); err != nil {
		return platform.Spec{}, err
	}
	conf, err := c.Settings.Render()
	if err != nil {
		return platform.Spec{}, err
	}
	spec := platform.Spec{
		Name:  c.Name,
		Ports: []string{Port},
		User:  c.User,
		Files: []platform.File{
			{Path: "postgresql.conf", Content: conf},
			{Path: "pg_ident.conf", Content: []byte{}},
		},
		Render: func(l platform.Listen) []platform.File {
			return []platform.File{{Path: "pg_hba.conf", Content: HBA(l, c.Auth)}}
		},
		Command: func(l platform.Listen) []string {
			data := path.Join(l.Dir, "data")
			if c.Data != nil {
				data = c.Data.HostPath
				if Inside(l) {
					data = c.Data.Path
				}
			}
			return []string{"/bin/sh", "-c", startScript, "postgres-start", data, c.BinDir,
				path.Join(l.Dir, "postgresql.conf"), l.Host, strconv.Itoa(l.Port(Port)), l.Dir}
		},
	}
	if c.Data != nil {
		spec.Volumes = []platform.Volume{*c.Data}
	}
	return spec, nil
}

// Inside reports whether a server started with l runs in a container or a
// guest (its directory is platform.ContainerDir or below), where a volume is
// seen at its Path rather than its HostPath.
func Inside(l platform.Listen) bool {
	return l.Dir == platform.ContainerDir || strings.HasPrefix(l.Dir, platform.ContainerDir+"/")
}

// binGlob is where Debian installs each major version's server binaries.
var binGlob = "/usr/lib/postgresql/*/bin/postgres"

// BinDir returns the bin directory of the newest PostgreSQL installed on the
// host (Debian's /usr/lib/postgresql/MAJOR/bin).
func BinDir() (string, error) {
	matches, _ := filepath.Glob(binGlob)
	best, bestMajor := "", -1
	for _, m := range matches {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if err == nil && major > bestMajor {
			best, bestMajor = filepath.Dir(m), major
		}
	}
	if best == "" {
		return "", fmt.Errorf("PostgreSQL server not installed (no %s): install the postgresql package with `make setup`", binGlob)
	}
	return best, nil
}

// Version returns what `postgres --version` prints for the server in binDir,
// e.g. "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)".
func Version(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("asking %s/postgres for its version: %w", binDir, err)
	}
	v := strings.TrimSpace(string(out))
	if !strings.Contains(v, "PostgreSQL") {
		return "", fmt.Errorf("%s/postgres --version printed %q", binDir, v)
	}
	return v, nil
}

// CheckShutDown fails unless pg_controldata (from binDir) says the cluster
// in data was shut down cleanly, so that a copy of it starts without crash
// recovery.
func CheckShutDown(ctx context.Context, binDir, data string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "pg_controldata"), data).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_controldata %s: %w: %s", data, err, strings.TrimSpace(string(out)))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Database cluster state" {
			if s := strings.TrimSpace(v); s != "shut down" {
				return fmt.Errorf("the cluster state of %s is %q, not \"shut down\": PostgreSQL did not stop cleanly", data, s)
			}
			return nil
		}
	}
	return fmt.Errorf("pg_controldata %s printed no cluster state", data)
}

// Tool returns the path of a client program (pgbench, pg_controldata, ...)
// from the host's server installation.
func Tool(name string) (string, error) {
	d, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(d, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found next to the PostgreSQL server (%s): install the postgresql package with `make setup`", name, d)
	}
	return p, nil
}

// SystemUserIDs returns the uid and gid of SystemUser as the platform sees
// it, by running `id` there (inside a container image or a guest they may
// differ from the host's): a data directory prepared on the host must
// belong to them.
func SystemUserIDs(ctx context.Context, jr platform.JobRunner, trial string) (uid, gid int, err error) {
	res, err := jr.RunJob(ctx, trial, platform.Spec{Name: "pg-ids", Command: func(platform.Listen) []string {
		return []string{"/bin/sh", "-c", `id -u "$1" && id -g "$1"`, "pg-ids", SystemUser}
	}})
	if err != nil {
		return 0, 0, fmt.Errorf("asking the platform for the %s user's ids: %w: %s", SystemUser, err, strings.TrimSpace(string(res.Stderr)))
	}
	return ParseIDs(res.Stdout)
}

// ParseIDs reads the two lines `id -u` and `id -g` print.
func ParseIDs(out []byte) (uid, gid int, err error) {
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("id printed %q, want a uid and a gid", out)
	}
	if uid, err = strconv.Atoi(f[0]); err == nil {
		gid, err = strconv.Atoi(f[1])
	}
	if err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("id printed %q, want a uid and a gid", out)
	}
	return uid, gid, nil
}
