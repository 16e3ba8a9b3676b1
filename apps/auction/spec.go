package auction

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
)

// DefaultItemIdle is how long an item may go without a bid before it moves
// to last call, and then to sold: Weathervane's auctionMaxIdleTime (30 s,
// LiveAuctionServiceImpl in vmware/weathervane's auctionApp).
const DefaultItemIdle = 30 * time.Second

// LongPollTimeout is how long GetNextBid waits for a change before it
// answers with the unchanged state: 1.5 times the item idle time, as
// Weathervane's BidController sets its AsyncContext timeout.
func LongPollTimeout(itemIdle time.Duration) time.Duration {
	return itemIdle * 3 / 2
}

// checkAddr reports whether a is a host:port with a valid port.
func checkAddr(what, a string) error {
	h, p, err := net.SplitHostPort(a)
	if err != nil || h == "" {
		return fmt.Errorf("%s %q: want host:port", what, a)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s %q: port must be 1 to 65535", what, a)
	}
	return nil
}

// ---- PostgreSQL ----

// PostgresMaxConnections is the server's connection limit when a caller
// gives none: every application server's pool plus a few.
const PostgresMaxConnections = 200

// postgresSharedBuffers is the auction server's shared_buffers.
const postgresSharedBuffers = 256 << 20

// PostgresConfig is the database server (internal/pgserver) on dataDir, a
// copy of the data template (Template.CopyTo) owned by the postgres user
// and mounted at the same path wherever the server runs: PostgreSQL's
// defaults but for maxConnections (PostgresMaxConnections when 0) and
// shared_buffers 256 MB, with password authentication (pg_hba.conf written
// for the platform's subnets, outside the data directory).
func PostgresConfig(name, dataDir string, maxConnections int) pgserver.Config {
	if maxConnections == 0 {
		maxConnections = PostgresMaxConnections
	}
	return pgserver.Config{
		Name:     name,
		Settings: pgserver.Defaults(maxConnections, postgresSharedBuffers),
		Data:     &platform.Volume{HostPath: dataDir, Path: dataDir, Own: true},
		Auth:     "scram-sha-256",
	}
}

// loadSettings are the template's loading server's: not durable (a crash
// means making the template again), no autovacuum, more memory for the
// index builds, checkpoints far apart; the rest PostgreSQL's defaults.
func loadSettings() pgserver.Settings {
	s := pgserver.Defaults(20, postgresSharedBuffers)
	s.Purpose = "auction template build"
	s.Durable, s.Autovacuum = false, false
	s.MaintenanceWorkMem = 256 << 20
	s.MaxWALSize = 4 << 30
	s.CheckpointTimeout = time.Hour
	return s
}

// ---- RabbitMQ ----

// BrokerSettings configure the message broker.
type BrokerSettings struct {
	// NodeName is the Erlang node name (default nn-<spec name>@localhost).
	NodeName string
	// User runs the broker (default rabbitmq).
	User string
	// Cookie is the Erlang cookie (default: random per spec).
	Cookie string
}

var nodeName = regexp.MustCompile(`^[A-Za-z0-9_-]+@[A-Za-z0-9.-]+$`)

// Validate checks the settings.
func (s BrokerSettings) Validate() error {
	if s.NodeName != "" && !nodeName.MatchString(s.NodeName) {
		return fmt.Errorf("broker: node name %q: want name@host", s.NodeName)
	}
	if strings.ContainsAny(s.Cookie, " \n\t") {
		return errors.New("broker: the Erlang cookie must not contain white space")
	}
	return nil
}

// BrokerSpec is RabbitMQ as a server of its own: its node name, AMQP port,
// distribution port and data directory in the server's private directory,
// and its own Erlang port mapper (epmd) on a private loopback port, so it
// never meets another broker's epmd and goes with the server's process
// group (or container).
func BrokerSpec(name string, s BrokerSettings) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	if s.NodeName == "" {
		s.NodeName = "nn-" + name + "@localhost"
	}
	if s.User == "" {
		s.User = "rabbitmq"
	}
	if s.Cookie == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return platform.Spec{}, fmt.Errorf("broker cookie: %w", err)
		}
		s.Cookie = strings.ToUpper(hex.EncodeToString(b))
	}
	return platform.Spec{
		Name:  name,
		Ports: []string{PortAMQP, PortDist, PortEPMD},
		User:  s.User,
		Files: []platform.File{
			{Path: "rabbitmq.conf", Content: readFile("rabbitmq/rabbitmq.conf")},
			{Path: ".erlang.cookie", Content: []byte(s.Cookie), Mode: 0o400},
			{Path: "enabled_plugins", Content: []byte("[].\n")},
			{Path: "advanced.config", Content: []byte("[].\n")},
			{Path: "rabbitmq-env.conf", Content: []byte("# settings come from the environment nearnative sets\n")},
			{Path: "log/.keep"},
		},
		// The broker's ports and directories are known only here, so they
		// are set through env(1) rather than Spec.Env.
		Command: func(l platform.Listen) []string {
			d := l.Dir
			return []string{"env",
				"HOME=" + d,
				"RABBITMQ_NODENAME=" + s.NodeName,
				"RABBITMQ_USE_LONGNAME=false",
				"RABBITMQ_NODE_IP_ADDRESS=" + l.Host,
				"RABBITMQ_NODE_PORT=" + strconv.Itoa(l.Port(PortAMQP)),
				"RABBITMQ_DIST_PORT=" + strconv.Itoa(l.Port(PortDist)),
				"ERL_EPMD_PORT=" + strconv.Itoa(l.Port(PortEPMD)),
				"ERL_EPMD_ADDRESS=127.0.0.1",
				"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
				"RABBITMQ_CONF_ENV_FILE=" + path.Join(d, "rabbitmq-env.conf"),
				"RABBITMQ_CONFIG_FILE=" + path.Join(d, "rabbitmq.conf"),
				"RABBITMQ_ADVANCED_CONFIG_FILE=" + path.Join(d, "advanced.config"),
				"RABBITMQ_ENABLED_PLUGINS_FILE=" + path.Join(d, "enabled_plugins"),
				"RABBITMQ_MNESIA_BASE=" + path.Join(d, "mnesia"),
				"RABBITMQ_LOG_BASE=" + path.Join(d, "log"),
				"RABBITMQ_LOGS=-",
				"RABBITMQ_PID_FILE=" + path.Join(d, "rabbitmq.pid"),
				"/usr/lib/rabbitmq/bin/rabbitmq-server",
			}
		},
	}, nil
}

// ---- application servers ----

// CatalinaHome is where Debian's tomcat10 package installs Tomcat.
const CatalinaHome = "/usr/share/tomcat10"

// AppServerSettings configure one application server.
type AppServerSettings struct {
	// Node names the server in its log and health answer (default: the
	// spec's name).
	Node string
	// DB is PostgreSQL's host:port as this server sees it.
	DB string
	// Broker is RabbitMQ's AMQP host:port as this server sees it.
	Broker string
	// WAR is the application (ReadWAR).
	WAR []byte
	// Heap is the JVM's heap, -Xms and -Xmx (default 512m).
	Heap string
	// Threads is Tomcat's maxThreads (default 200, Tomcat's default).
	Threads int
	// DBPool is the size of the server's connection pool (default 20).
	DBPool int
	// ItemIdle is the time without a bid after which an item goes to last
	// call, and then to sold (default DefaultItemIdle).
	ItemIdle time.Duration
	// User runs the server (default tomcat, Debian's tomcat10 user).
	User string
}

var jvmSize = regexp.MustCompile(`^[0-9]+[kKmMgG]?$`)

// Validate checks the settings.
func (s AppServerSettings) Validate() error {
	if err := checkAddr("app server: database address", s.DB); err != nil {
		return err
	}
	if err := checkAddr("app server: broker address", s.Broker); err != nil {
		return err
	}
	if len(s.WAR) == 0 {
		return errors.New("app server: no application (WAR): build it with `make setup`")
	}
	if s.Heap != "" && !jvmSize.MatchString(s.Heap) {
		return fmt.Errorf("app server: heap %q: want a size such as 512m or 2g", s.Heap)
	}
	if s.Threads < 0 || s.DBPool < 0 {
		return fmt.Errorf("app server: threads %d and pool size %d must be positive", s.Threads, s.DBPool)
	}
	if s.ItemIdle < 0 || (s.ItemIdle > 0 && s.ItemIdle < 100*time.Millisecond) {
		return fmt.Errorf("app server: item idle time %v: want at least 100ms", s.ItemIdle)
	}
	if strings.ContainsAny(s.Node, " \n") {
		return fmt.Errorf("app server: node name %q must not contain white space", s.Node)
	}
	return nil
}

func (s AppServerSettings) withDefaults(name string) AppServerSettings {
	if s.Node == "" {
		s.Node = name
	}
	if s.Heap == "" {
		s.Heap = "512m"
	}
	if s.Threads == 0 {
		s.Threads = 200
	}
	if s.DBPool == 0 {
		s.DBPool = 20
	}
	if s.ItemIdle == 0 {
		s.ItemIdle = DefaultItemIdle
	}
	if s.User == "" {
		s.User = "tomcat"
	}
	return s
}

// AppServerSpec is one application server: Debian's Tomcat 10.1 (run from
// its jars with a private CATALINA_BASE) serving the auction WAR as its
// root application, with the database and broker addresses in its
// environment.
func AppServerSpec(name string, s AppServerSettings) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	s = s.withDefaults(name)
	server, err := render("tomcat/server.xml.tmpl", map[string]any{
		"Threads":            s.Threads,
		"MinSpareThreads":    min(25, s.Threads),
		"AsyncTimeoutMillis": LongPollTimeout(s.ItemIdle).Milliseconds() + 10_000,
	})
	if err != nil {
		return platform.Spec{}, err
	}
	return platform.Spec{
		Name:  name,
		Ports: []string{PortHTTP},
		User:  s.User,
		Env: map[string]string{
			"AUCTION_NODE":            s.Node,
			"AUCTION_DB":              s.DB,
			"AUCTION_DB_NAME":         DBName,
			"AUCTION_DB_USER":         DBUser,
			"AUCTION_DB_PASSWORD":     DBPassword,
			"AUCTION_DB_POOL":         strconv.Itoa(s.DBPool),
			"AUCTION_BROKER":          s.Broker,
			"AUCTION_BROKER_USER":     BrokerUser,
			"AUCTION_BROKER_PASSWORD": BrokerPassword,
			"AUCTION_ITEM_IDLE_MS":    strconv.FormatInt(s.ItemIdle.Milliseconds(), 10),
		},
		Files: []platform.File{
			{Path: "conf/server.xml", Content: server},
			{Path: "conf/logging.properties", Content: readFile("tomcat/logging.properties")},
			{Path: "webapps/ROOT.war", Content: s.WAR},
			{Path: "temp/.keep"},
			{Path: "logs/.keep"},
			{Path: "work/.keep"},
		},
		Command: func(l platform.Listen) []string {
			d := l.Dir
			return []string{"java",
				"-Xms" + s.Heap, "-Xmx" + s.Heap,
				"-Djava.awt.headless=true",
				// A port lost to another process between its choice and the
				// bind ends the server, rather than leaving it running
				// without its connector.
				"-Dorg.apache.catalina.startup.EXIT_ON_INIT_FAILURE=true",
				// What Debian's catalina.sh passes on Java 9 and later.
				"--add-opens=java.base/java.lang=ALL-UNNAMED",
				"--add-opens=java.base/java.io=ALL-UNNAMED",
				"--add-opens=java.base/java.util=ALL-UNNAMED",
				"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
				"--add-opens=java.rmi/sun.rmi.transport=ALL-UNNAMED",
				"-Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager",
				"-Djava.util.logging.config.file=" + path.Join(d, "conf/logging.properties"),
				"-Dcatalina.home=" + CatalinaHome,
				"-Dcatalina.base=" + d,
				"-Djava.io.tmpdir=" + path.Join(d, "temp"),
				"-Dauction.http.address=" + l.Host,
				"-Dauction.http.port=" + strconv.Itoa(l.Port(PortHTTP)),
				"-Dorg.slf4j.simpleLogger.showDateTime=true",
				"-classpath", CatalinaHome + "/bin/bootstrap.jar:" + CatalinaHome + "/bin/tomcat-juli.jar",
				"org.apache.catalina.startup.Bootstrap", "start",
			}
		},
	}, nil
}

// ---- nginx ----

// WebSettings configure the load balancer.
type WebSettings struct {
	// AppServers are the application servers' host:port as nginx sees them.
	AppServers []string
	// Workers is worker_processes (default 0: auto, one per CPU).
	Workers int
	// Connections is worker_connections (default 8192).
	Connections int
	// ImageCache is the size of the image cache on disk (default 512m).
	ImageCache string
	// ItemIdle is the application servers' item idle time; the long poll's
	// proxy timeout follows from it (default DefaultItemIdle).
	ItemIdle time.Duration
	// User runs nginx (default www-data).
	User string
}

var nginxSize = regexp.MustCompile(`^[0-9]+[kKmMgG]?$`)

// Validate checks the settings.
func (s WebSettings) Validate() error {
	if len(s.AppServers) == 0 {
		return errors.New("web: no application servers")
	}
	for _, a := range s.AppServers {
		if err := checkAddr("web: application server", a); err != nil {
			return err
		}
	}
	if s.Workers < 0 || s.Connections < 0 {
		return fmt.Errorf("web: workers %d and connections %d must be positive", s.Workers, s.Connections)
	}
	if s.ImageCache != "" && !nginxSize.MatchString(s.ImageCache) {
		return fmt.Errorf("web: image cache %q: want a size such as 512m", s.ImageCache)
	}
	if s.ItemIdle < 0 {
		return fmt.Errorf("web: item idle time %v must be positive", s.ItemIdle)
	}
	return nil
}

// WebSpec is nginx in front of the application servers: round-robin load
// balancing with keep-alive upstream connections, the home page's static
// files, an on-disk cache of item images, and a proxy timeout that lets
// GetNextBid's long poll finish.
func WebSpec(name string, s WebSettings) (platform.Spec, error) {
	if err := s.Validate(); err != nil {
		return platform.Spec{}, err
	}
	workers := "auto"
	if s.Workers > 0 {
		workers = strconv.Itoa(s.Workers)
	}
	if s.Connections == 0 {
		s.Connections = 8192
	}
	if s.ImageCache == "" {
		s.ImageCache = "512m"
	}
	if s.ItemIdle == 0 {
		s.ItemIdle = DefaultItemIdle
	}
	if s.User == "" {
		s.User = "www-data"
	}
	conf, err := render("nginx/nginx.conf.tmpl", map[string]any{
		"Workers":           workers,
		"Connections":       s.Connections,
		"ImageCache":        s.ImageCache,
		"AppServers":        s.AppServers,
		"UpstreamKeepalive": 64,
		"LongPollSeconds":   int(math.Ceil(LongPollTimeout(s.ItemIdle).Seconds())) + 10,
	})
	if err != nil {
		return platform.Spec{}, err
	}
	fs := []platform.File{
		{Path: "nginx.conf", Content: conf},
		{Path: "tmp/.keep"},
	}
	for _, f := range []string{"index.html", "static/auction.css", "static/auction.js"} {
		fs = append(fs, platform.File{Path: "www/" + f, Content: readFile("www/" + f)})
	}
	return platform.Spec{
		Name:  name,
		Ports: []string{PortHTTP},
		User:  s.User,
		Files: fs,
		Command: func(l platform.Listen) []string {
			return []string{"nginx", "-p", l.Dir + "/", "-c", path.Join(l.Dir, "nginx.conf"), "-e", "stderr"}
		},
		// The listen address is known once the platform has chosen it:
		// nginx.conf includes this one-line file.
		Render: func(l platform.Listen) []platform.File {
			listen := net.JoinHostPort(l.Host, strconv.Itoa(l.Port(PortHTTP)))
			return []platform.File{{Path: "listen.conf", Content: []byte("listen " + listen + " reuseport backlog=4096;\n")}}
		},
	}, nil
}
