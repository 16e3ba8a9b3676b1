package cleanup

import (
	"context"

	"github.com/nearnative/nearnative/internal/hostroute"
	"github.com/nearnative/nearnative/internal/runid"
)

// Routes sweeps the routes runs added on this machine as a driver host,
// by their records (package hostroute), in this network namespace.
type Routes struct{ Table hostroute.Table }

// Kind implements Sweeper.
func (Routes) Kind() string { return "routes to sut hosts' container bridges" }

// Runs implements Sweeper.
func (r Routes) Runs(context.Context) ([]runid.ID, error) { return r.Table.Runs() }

// Remove implements Sweeper: every route of the run's record, then the
// record; a route already gone is no error.
func (r Routes) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	return r.Table.RemoveRun(ctx, run)
}
