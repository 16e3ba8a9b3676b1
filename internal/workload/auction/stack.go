package auction

import (
	"context"
	"time"

	app "github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/topology"
)

// Roles of the auction's topology.
const (
	RoleDB     = "db"     // PostgreSQL
	RoleBroker = "broker" // RabbitMQ
	RoleApp    = "app"    // the application servers (Tomcat)
	RoleWeb    = "web"    // nginx, the load balancer the driver talks to
)

// Roles lists the roles in start order, for per-tier figures.
var Roles = []string{RoleWeb, RoleApp, RoleDB, RoleBroker}

// Readiness bounds: Tomcat deploying the WAR on a loaded 2-core machine has
// taken over a minute.
const (
	dbReady     = 2 * time.Minute
	brokerReady = 2 * time.Minute
	appReady    = 4 * time.Minute
	webReady    = time.Minute
)

// stack is what the servers of one trial are built from.
type stack struct {
	appServers int
	heap       string
	threads    int
	dbPool     int
	itemIdle   time.Duration
	webWorkers int
	war        []byte
	// dataDir is this trial's copy of the data template on the host. It is
	// a volume at the same path wherever PostgreSQL runs (bind-mounted into
	// a container, copied into a guest), so the server names one path on
	// every platform.
	dataDir string
}

// maxConnections is PostgreSQL's connection limit: every application
// server's pool plus a few for probes.
func (s stack) maxConnections() int { return s.appServers*s.dbPool + 10 }

// topology is the auction as a topology: PostgreSQL and RabbitMQ first, then
// the application servers, which name both, then nginx in front of them, the
// one role the driver reaches. Under the container-per-server layout each
// server has a container of its own (the seed's Docker layout).
func (s stack) topology() topology.Topology {
	probe := func(f func(context.Context, string) error) topology.ReadyFunc { return f }
	return topology.Topology{Roles: []topology.Role{
		{
			Name: RoleDB, Ports: []string{app.PortPostgres}, Ready: probe(app.PostgresReady), ReadyTimeout: dbReady,
			Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
				return pgserver.Spec(app.PostgresConfig(id.Name(), s.dataDir, s.maxConnections()))
			},
		},
		{
			Name: RoleBroker, Ports: []string{app.PortAMQP, app.PortDist, app.PortEPMD}, ReadyPort: app.PortAMQP,
			Ready: probe(app.BrokerReady), ReadyTimeout: brokerReady,
			Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
				return app.BrokerSpec(id.Name(), app.BrokerSettings{})
			},
		},
		{
			Name: RoleApp, Count: s.appServers, Ports: []string{app.PortHTTP}, After: []string{RoleDB, RoleBroker},
			Ready: probe(app.AppReady), ReadyTimeout: appReady,
			Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
				return app.AppServerSpec(id.Name(), app.AppServerSettings{
					DB:       peers.Addr(RoleDB, 0, app.PortPostgres),
					Broker:   peers.Addr(RoleBroker, 0, app.PortAMQP),
					WAR:      s.war,
					Heap:     s.heap,
					Threads:  s.threads,
					DBPool:   s.dbPool,
					ItemIdle: s.itemIdle,
				})
			},
		},
		{
			Name: RoleWeb, Ports: []string{app.PortHTTP}, After: []string{RoleApp}, Entry: true,
			Ready: probe(app.WebReady), ReadyTimeout: webReady,
			Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
				return app.WebSpec(id.Name(), app.WebSettings{
					AppServers: peers.All(RoleApp, app.PortHTTP),
					Workers:    s.webWorkers,
					ItemIdle:   s.itemIdle,
				})
			},
		},
	}}
}
