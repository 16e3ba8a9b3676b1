package olio

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"text/template"

	"github.com/nearnative/nearnative/internal/platform"
)

// Port names of the three tiers' specs.
const (
	PortMySQL = "mysql" // MariaDB's client protocol
	PortFCGI  = "fcgi"  // PHP-FPM's FastCGI
	PortHTTP  = "http"  // nginx
)

// Defaults of the tiers' settings.
const (
	// DefaultChildren is the seed's PHP setting: "PHP was configured with a
	// maximum number of 16 child processes".
	DefaultChildren = 16
	// DefaultWorkers and DefaultConnections are the seed's nginx setting:
	// "4 worker processes and 4096 connections per worker".
	DefaultWorkers     = 4
	DefaultConnections = 4096
	// DefaultBufferPool holds the seed's data set in memory, as a tuned
	// MySQL would: 1500 users make about 300 MB of tables and indexes
	// (measured: 392 MB data directory with its 96 MB redo log; BENCH.md).
	// The seed's database VM had 2 GB; at the seed's 8 instances this is
	// 4 GB of this machine's 24 GB.
	DefaultBufferPool = "512m"
	// logFileSize is InnoDB's redo log size. It is not a setting: the
	// template's data directory carries a redo log of this size, and a trial
	// server with another size would rebuild it at every start.
	logFileSize = "96m"
	// DefaultMaxConnections leaves room above PHP-FPM's children for the
	// probes and the loader.
	DefaultMaxConnections = 200
)

// MariaDBSettings configure the database tier.
type MariaDBSettings struct {
	// Name of the server in the trial ("olio-db" when empty).
	Name string
	// DataDir is the data directory as the server sees it: a copy of the
	// template (Template.CopyDB) owned by User.
	DataDir string
	// Volumes are mounted into the server's file system (the host directory
	// that holds DataDir, on the platforms that need it).
	Volumes []platform.Volume
	// User runs the server ("mysql" when empty): MariaDB refuses root.
	User string
	// BufferPool is innodb_buffer_pool_size (DefaultBufferPool when empty).
	BufferPool string
	// MaxConnections is max_connections (DefaultMaxConnections when 0).
	MaxConnections int
	// FlushLogAtCommit is innodb_flush_log_at_trx_commit: 1 (the default,
	// durable at every commit), 2 or 0.
	FlushLogAtCommit int
}

func (s MariaDBSettings) withDefaults() MariaDBSettings {
	if s.Name == "" {
		s.Name = "olio-db"
	}
	if s.User == "" {
		s.User = "mysql"
	}
	if s.BufferPool == "" {
		s.BufferPool = DefaultBufferPool
	}
	if s.MaxConnections == 0 {
		s.MaxConnections = DefaultMaxConnections
	}
	return s
}

// Validate reports settings the server cannot start with.
func (s MariaDBSettings) Validate() error {
	s = s.withDefaults()
	if !path.IsAbs(s.DataDir) {
		return fmt.Errorf("olio MariaDB: data directory %q must be an absolute path (a copy of the template)", s.DataDir)
	}
	if n, err := platform.ParseBytes(s.BufferPool); err != nil {
		return fmt.Errorf("olio MariaDB: buffer pool: %w", err)
	} else if n < 16<<20 {
		return fmt.Errorf("olio MariaDB: buffer pool %s: want at least 16m", s.BufferPool)
	}
	if s.MaxConnections < 10 {
		return fmt.Errorf("olio MariaDB: max connections %d: want at least 10", s.MaxConnections)
	}
	if s.FlushLogAtCommit < 0 || s.FlushLogAtCommit > 2 {
		return fmt.Errorf("olio MariaDB: innodb_flush_log_at_trx_commit %d: want 0, 1 or 2", s.FlushLogAtCommit)
	}
	return nil
}

// MariaDBSpec builds the database server's spec. Its readiness probe is
// ReadyDB.
func MariaDBSpec(s MariaDBSettings) (platform.Spec, error) {
	if s.FlushLogAtCommit == 0 {
		s.FlushLogAtCommit = 1
	}
	return mariadbSpec(s, false, "")
}

// mariadbSpec builds the serving spec, or with load the loader's (fast,
// non-durable writes, a clean slow shutdown, init.sql creating the
// application's database and user, the pid file at pidFile).
func mariadbSpec(s MariaDBSettings, load bool, pidFile string) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	s = s.withDefaults()
	spec := platform.Spec{
		Name:    s.Name,
		Ports:   []string{PortMySQL},
		Volumes: s.Volumes,
		User:    s.User,
	}
	if load {
		spec.Files = append(spec.Files, platform.File{Path: "init.sql", Content: []byte(initSQL)})
	}
	spec.Render = func(l platform.Listen) []platform.File {
		files := []platform.File{{Path: "my.cnf", Content: mustRender("conf/my.cnf.tmpl", map[string]any{
			"DataDir": s.DataDir, "Host": l.Host, "Port": l.Port(PortMySQL), "Dir": l.Dir,
			"MaxConnections": s.MaxConnections, "BufferPool": s.BufferPool, "LogFileSize": logFileSize,
			"FlushLogAtCommit": s.FlushLogAtCommit, "Load": load,
		})}}
		if !load {
			files = append(files, platform.File{Path: "grants.sql", Content: []byte(GrantsSQL(l.AllowedFrom()))})
		}
		return files
	}
	spec.Command = func(l platform.Listen) []string {
		argv := []string{"mariadbd", "--defaults-file=" + path.Join(l.Dir, "my.cnf")}
		if pidFile != "" {
			argv = append(argv, "--pid-file="+pidFile)
		}
		return argv
	}
	return spec, nil
}

// GrantsSQL grants the application's user its database from the given
// subnets only (MariaDB's address/netmask host form), and drops the
// any-host account the template was loaded with: a serving server runs it
// at every start (init_file), with the subnets its platform says its
// clients and peers come from.
func GrantsSQL(from []netip.Prefix) string {
	var b strings.Builder
	for _, p := range from {
		if !p.Addr().Is4() {
			continue
		}
		m := net.CIDRMask(p.Bits(), 32)
		h := fmt.Sprintf("%s/%d.%d.%d.%d", p.Masked().Addr(), m[0], m[1], m[2], m[3])
		fmt.Fprintf(&b, "CREATE USER IF NOT EXISTS '%[1]s'@'%[2]s' IDENTIFIED BY '%[3]s';\nGRANT ALL PRIVILEGES ON %[4]s.* TO '%[1]s'@'%[2]s';\n",
			DBUser, h, DBPassword, DBName)
	}
	fmt.Fprintf(&b, "DROP USER IF EXISTS '%s'@'%%';\n", DBUser)
	return b.String()
}

// initSQL creates the application's database and user when the loader's
// server starts (init_file), to any host: the loader runs natively, the
// template is copied to every platform, and each serving server narrows the
// grant to its platform's subnets (GrantsSQL).
var initSQL = fmt.Sprintf(`CREATE DATABASE IF NOT EXISTS %[1]s CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS '%[2]s'@'%%' IDENTIFIED BY '%[3]s';
GRANT ALL PRIVILEGES ON %[1]s.* TO '%[2]s'@'%%';
`, DBName, DBUser, DBPassword)

// FPMSettings configure the PHP tier.
type FPMSettings struct {
	// Name of the server in the trial ("olio-fpm" when empty).
	Name string
	// SiteDir is the site as the server sees it (Template.CopySite made it);
	// nginx must see it at the same path, since it names scripts by path.
	SiteDir string
	// DBAddr is the database's host:port as this server sees it.
	DBAddr string
	// Children is pm.max_children (DefaultChildren when 0); the pool is
	// static, so that is also the number of PHP processes.
	Children int
	// User runs PHP-FPM, master and children (www-data when empty): the
	// children write the file store and the sessions. It is the spec's
	// User, so that a site volume marked Own is this user's wherever the
	// server runs (a guest's copy of a volume is root's until then). A
	// master that is not root runs its children as itself.
	User string
	// Volumes are mounted into the server's file system (the site).
	Volumes []platform.Volume
	// Binary is the PHP-FPM executable ("php-fpm8.2" when empty).
	Binary string
}

func (s FPMSettings) withDefaults() FPMSettings {
	if s.Name == "" {
		s.Name = "olio-fpm"
	}
	if s.Children == 0 {
		s.Children = DefaultChildren
	}
	if s.User == "" {
		s.User = "www-data"
	}
	if s.Binary == "" {
		s.Binary = "php-fpm8.2"
	}
	return s
}

// Validate reports settings the server cannot start with.
func (s FPMSettings) Validate() error {
	s = s.withDefaults()
	if !path.IsAbs(s.SiteDir) {
		return fmt.Errorf("olio PHP-FPM: site directory %q must be an absolute path", s.SiteDir)
	}
	if _, _, err := splitAddr(s.DBAddr); err != nil {
		return fmt.Errorf("olio PHP-FPM: database address: %w", err)
	}
	if s.Children < 1 || s.Children > 1024 {
		return fmt.Errorf("olio PHP-FPM: %d children: want 1 to 1024", s.Children)
	}
	return nil
}

// FPMSpec builds the PHP-FPM server's spec. Its readiness probe is
// ReadyFPM.
func FPMSpec(s FPMSettings) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	s = s.withDefaults()
	dbHost, dbPort, _ := splitAddr(s.DBAddr)
	spec := platform.Spec{Name: s.Name, Ports: []string{PortFCGI}, Volumes: s.Volumes, User: s.User}
	spec.Render = func(l platform.Listen) []platform.File {
		return []platform.File{{Path: "php-fpm.conf", Content: mustRender("conf/php-fpm.conf.tmpl", map[string]any{
			"Dir": l.Dir, "Host": l.Host, "Port": l.Port(PortFCGI),
			"Children": s.Children, "DBHost": dbHost, "DBPort": dbPort, "DBName": DBName, "DBUser": DBUser,
			"DBPassword": DBPassword, "SiteDir": s.SiteDir, "Today": Epoch.Format("2006-01-02"),
		})}}
	}
	spec.Command = func(l platform.Listen) []string {
		return []string{s.Binary, "--nodaemonize", "--force-stderr", "--fpm-config", path.Join(l.Dir, "php-fpm.conf")}
	}
	return spec, nil
}

// NginxSettings configure the web tier.
type NginxSettings struct {
	// Name of the server in the trial ("olio-web" when empty).
	Name string
	// SiteDir is the site as the server sees it, at the same path as
	// PHP-FPM sees it.
	SiteDir string
	// FPMAddr is PHP-FPM's host:port as this server sees it.
	FPMAddr string
	// FileStore is the template's file store as this server sees it
	// (Template.FilesDir, mounted read-only): /files/NAME is the site's
	// own files/NAME (this trial's uploads) or else FileStore/NAME.
	FileStore string
	// Workers is worker_processes, Connections worker_connections
	// (DefaultWorkers, DefaultConnections when 0).
	Workers, Connections int
	// User and Group run the workers (www-data when empty).
	User, Group string
	// Volumes are mounted into the server's file system (the site).
	Volumes []platform.Volume
}

func (s NginxSettings) withDefaults() NginxSettings {
	if s.Name == "" {
		s.Name = "olio-web"
	}
	if s.Workers == 0 {
		s.Workers = DefaultWorkers
	}
	if s.Connections == 0 {
		s.Connections = DefaultConnections
	}
	if s.User == "" {
		s.User = "www-data"
	}
	if s.Group == "" {
		s.Group = s.User
	}
	return s
}

// Validate reports settings the server cannot start with.
func (s NginxSettings) Validate() error {
	s = s.withDefaults()
	if !path.IsAbs(s.SiteDir) {
		return fmt.Errorf("olio nginx: site directory %q must be an absolute path", s.SiteDir)
	}
	if _, _, err := splitAddr(s.FPMAddr); err != nil {
		return fmt.Errorf("olio nginx: PHP-FPM address: %w", err)
	}
	if !path.IsAbs(s.FileStore) {
		return fmt.Errorf("olio nginx: file store %q must be an absolute path (the template's)", s.FileStore)
	}
	if s.Workers < 1 || s.Workers > 256 {
		return fmt.Errorf("olio nginx: %d workers: want 1 to 256", s.Workers)
	}
	if s.Connections < 16 || s.Connections > 1<<20 {
		return fmt.Errorf("olio nginx: %d connections per worker: want 16 to 1048576", s.Connections)
	}
	return nil
}

// NginxSpec builds the nginx server's spec: statics and the file store
// served by nginx, PHP passed to PHP-FPM over TCP. Its readiness probe is
// ReadyWeb.
func NginxSpec(s NginxSettings) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	s = s.withDefaults()
	spec := platform.Spec{Name: s.Name, Ports: []string{PortHTTP}, Volumes: s.Volumes}
	spec.Render = func(l platform.Listen) []platform.File {
		return []platform.File{{Path: "nginx.conf", Content: mustRender("conf/nginx.conf.tmpl", map[string]any{
			"Dir": l.Dir, "Host": l.Host, "Port": l.Port(PortHTTP), "User": s.User, "Group": s.Group,
			"Workers": s.Workers, "Connections": s.Connections, "SiteDir": s.SiteDir, "FPMAddr": s.FPMAddr,
			"FileStore": s.FileStore,
		})}}
	}
	spec.Command = func(l platform.Listen) []string {
		return []string{"nginx", "-e", "stderr", "-p", l.Dir, "-c", path.Join(l.Dir, "nginx.conf")}
	}
	return spec, nil
}

// mustRender renders an embedded configuration template, which the tests
// render for every setting: a failure is a programming error.
func mustRender(name string, data any) []byte {
	b, err := render(name, data)
	if err != nil {
		panic(err)
	}
	return []byte(b)
}

// render executes one of the embedded configuration templates.
func render(name string, data any) (string, error) {
	t, err := template.New(path.Base(name)).Option("missingkey=error").ParseFS(sources, name)
	if err != nil {
		return "", fmt.Errorf("olio: parsing %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("olio: rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// splitAddr splits a peer's host:port.
func splitAddr(addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || h == "" || strings.ContainsAny(h, " \t\n\"") {
		return "", 0, fmt.Errorf("%q is not host:port", addr)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port must be 1 to 65535", addr)
	}
	return h, port, nil
}
