// Command auction-build builds the auction application server (the WAR,
// with Maven) into nearnative's state directory unless it is there already,
// and prints its path. scripts/setup.sh runs it; NEARNATIVE_HOME chooses
// the state directory as for nearnative itself.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/state"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	path, err := auction.BuildWAR(ctx, state.Home(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "auction-build:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
