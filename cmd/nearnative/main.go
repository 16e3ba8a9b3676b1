// Command nearnative measures what running a workload in a container, with a
// given network mode, in a VM or in a container inside a VM costs compared to
// running it natively.
package main

import (
	"os"

	"github.com/nearnative/nearnative/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
