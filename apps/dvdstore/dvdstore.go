// Package dvdstore is nearnative's own DVD Store: the online DVD shop of
// the seed "Running Transactional Workloads Using Docker Containers on
// vSphere 6.0", rebuilt from the public description of DVD Store 2.1/3 (see
// /work/shared/specs: facts, not code). It holds:
//
//   - the PostgreSQL schema (8 tables, keys, indexes with full-text GIN
//     indexes on actor and title), the stored functions (new_customer,
//     login, browse_by_category/actor/title, purchase) and the RESTOCK
//     trigger, embedded SQL (sql/);
//   - the deterministic data generator (data.go) for DVD Store's 10 MB and
//     1 GB sizes and a scale factor, and the loader that streams it with
//     COPY (load.go);
//   - the template cache (template.go): a PostgreSQL data directory loaded
//     once per (size, scale, seed, schema and generator, server version),
//     copied for every trial;
//   - the server specs of the database (DBSpec) and of the web tier, Apache
//     with mod_php serving small PHP pages (web/, WebSpec), and their
//     readiness probes.
//
// The clients and the order loop are in internal/workload/oltp.
package dvdstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
)

//go:embed sql/*.sql
var sqlFS embed.FS

// GeneratorVersion changes whenever the generator's output changes for the
// same dataset; it is part of the template key (with the SQL files and the
// word lists) so that old templates are not reused.
const GeneratorVersion = 1

func sqlFile(name string) string {
	b, err := sqlFS.ReadFile("sql/" + name)
	if err != nil {
		panic(fmt.Sprintf("dvdstore: embedded sql/%s: %v", name, err))
	}
	return string(b)
}

// SchemaHash identifies the schema, functions, generator and word lists:
// the part of a template key that is nearnative's own code.
func SchemaHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "generator %d\n", GeneratorVersion)
	names, _ := fs.Glob(sqlFS, "sql/*.sql")
	sort.Strings(names)
	for _, n := range names {
		b, _ := sqlFS.ReadFile(n)
		fmt.Fprintf(h, "%s %d\n%s", n, len(b), b)
	}
	for _, l := range [][]string{Categories, Countries, States, titleWords, actorFirst, actorLast, cities, streets} {
		fmt.Fprintf(h, "%s\n", strings.Join(l, " "))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DBConfig describes the shop's database server for a trial.
type DBConfig struct {
	// Name is the spec's name (default "db").
	Name string
	// Memory is what the server is tuned for (pgserver.Tune): its share of
	// the machine.
	Memory int64
	// MaxConnections must cover every web server process (one persistent
	// connection each) and every direct-mode user, plus a margin.
	MaxConnections int
	// Data is the trial's copy of the template (Template.CopyTo): natively
	// used in place, in a container bind-mounted at Data.Path.
	Data platform.Volume
}

// Validate checks the configuration.
func (c DBConfig) Validate() error {
	if c.Memory < 64<<20 {
		return fmt.Errorf("dvdstore database memory %d bytes: want at least 64 MB", c.Memory)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("dvdstore database max connections %d: want at least 1", c.MaxConnections)
	}
	if c.Data.HostPath == "" || c.Data.Path == "" {
		return fmt.Errorf("dvdstore database: no data directory (copy the template with Template.CopyTo)")
	}
	return nil
}

// DataPath is where a container sees the database's data directory.
const DataPath = "/pgdata"

// Settings returns the PostgreSQL settings of a trial's database server.
func (c DBConfig) Settings() pgserver.Settings {
	return pgserver.Tune(c.Memory, c.MaxConnections)
}

// DBSpec returns the spec of the shop's PostgreSQL server, running the
// trial's copy of the template; clients reach database DBName at
// Addr(pgserver.Port).
func DBSpec(c DBConfig) (platform.Spec, error) {
	if c.Name == "" {
		c.Name = "db"
	}
	if err := c.Validate(); err != nil {
		return platform.Spec{}, err
	}
	spec, err := pgserver.Spec(pgserver.Config{Name: c.Name, Settings: c.Settings(), Data: &c.Data})
	if err != nil {
		return spec, err
	}
	spec.Env = serverEnv()
	return spec, nil
}

// serverEnv is the locale every server of the shop runs with, on every
// platform. Natively a server inherits nearnative's environment (LANG is
// whatever the user's shell has, C.UTF-8 on the development machine), in a
// container the image's (no LANG: the C locale); set here, both get the C
// locale, which is also the databases' (initdb --locale=C) and PHP 8's own.
// Other inherited variables differ still (PATH, HOME): the servers run
// binaries by absolute path and read no file from a home directory.
func serverEnv() map[string]string {
	return map[string]string{"LANG": "C", "LC_ALL": "C"}
}

// DBReady waits until the shop's database at addr answers and holds the
// loaded schema (16 categories), retrying until ctx ends (a
// topology.ReadyFunc). The error names the server; callers add the tail of
// its log.
func DBReady(ctx context.Context, addr string) error {
	const name = "DVD Store database"
	if err := pgserver.Ready(ctx, name, addr, DBName); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pgserver.DSN(addr, DBName))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM categories").Scan(&n); err != nil {
		return fmt.Errorf("%s: database %s at %s has no DVD Store schema: %w", name, DBName, addr, err)
	}
	if n != len(Categories) {
		return fmt.Errorf("%s: database %s at %s has %d categories, want %d", name, DBName, addr, n, len(Categories))
	}
	return nil
}
