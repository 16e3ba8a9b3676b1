package workload

import (
	"context"

	"github.com/nearnative/nearnative/internal/driver"
)

// SeriesSink stores the per-second series of a trial's driver runs; step
// numbers the run within the trial (a find-max search runs one per step).
// Storing a step again replaces it.
type SeriesSink interface {
	PutSeries(ctx context.Context, step int, points []driver.Point) error
}
