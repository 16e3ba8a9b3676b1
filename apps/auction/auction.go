// Package auction is nearnative's Weathervane-style live auction: an nginx
// load balancer and image cache in front of J Java application servers
// (Debian's Tomcat 10.1, the WAR built from java/ with Maven), PostgreSQL for
// users, auctions, items, bids, images and history, and RabbitMQ carrying
// bid events between the application servers.
//
// The package builds each tier as a platform.Spec from plain settings and
// the addresses of its peers as that server sees them (PostgresSpec,
// BrokerSpec, AppServerSpec, WebSpec), probes readiness at the protocol
// level (PostgresReady, BrokerReady, AppReady, WebReady), generates the data
// deterministically for a maximum number of users (Generate), loads it once
// into a PostgreSQL data directory kept under nearnative's state directory
// (EnsureTemplate) and copies it for every trial (Template.CopyTo).
package auction

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"text/template"
)

// files holds the configuration templates, SQL and static web files.
//
//go:embed files
var files embed.FS

// javaSource is the application server's Maven project.
//
//go:embed java/pom.xml java/src
var javaSource embed.FS

// Port names of the tiers' specs.
const (
	PortPostgres = "pg"   // PostgreSQL
	PortAMQP     = "amqp" // RabbitMQ's AMQP listener
	PortDist     = "dist" // RabbitMQ's Erlang distribution (loopback only)
	PortEPMD     = "epmd" // the broker's private Erlang port mapper (loopback only)
	PortHTTP     = "http" // nginx and the application servers
)

// Database and broker credentials the tiers share. The servers listen only on
// loopback or on networks nearnative made; the passwords keep the
// authentication path of a real deployment, not secrets.
const (
	DBName         = "auction"
	DBUser         = "auction"
	DBPassword     = "auction"
	DBSuperuser    = "postgres"
	DBSuperPass    = "nearnative"
	BrokerUser     = "auction"
	BrokerPassword = "auction"
)

// UserPassword is the password of every generated user (Weathervane's
// AuctionConstants.USER_PASSWORD).
const UserPassword = "password"

// UserEmail is the login of generated user id.
func UserEmail(id int64) string { return fmt.Sprintf("user%d@auction.example", id) }

func readFile(name string) []byte {
	b, err := fs.ReadFile(files, "files/"+name)
	if err != nil {
		panic(fmt.Sprintf("auction: embedded file %s: %v", name, err))
	}
	return b
}

// render executes the embedded template name with data.
func render(name string, data any) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(string(readFile(name)))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.Bytes(), nil
}
