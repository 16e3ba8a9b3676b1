package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/driver"
	_ "github.com/nearnative/nearnative/internal/driver/httpc" // registers the http-get behaviour
)

// driverChildCmd is the hidden command a driver run with `drivers: N`
// re-executes nearnative as: it reads its plan on stdin and writes its
// result on stdout (see internal/driver).
func (a *app) driverChildCmd() *cobra.Command {
	return &cobra.Command{
		Use:    driver.ChildArg,
		Short:  "Run a child load-driver process (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return driver.ChildMain(c.Context(), os.Stdin, a.stdout)
		},
	}
}
