// Command nearnative measures what running a workload in a container, with a
// given network mode, in a VM or in a container inside a VM costs compared to
// running it natively.
package main

import (
	"os"

	"github.com/nearnative/nearnative/internal/cli"
	"github.com/nearnative/nearnative/internal/vmagent"
)

func main() {
	// In a vm platform's guest this binary is PID 1 (/init); in a container
	// of the container-per-instance layout it is the supervisor.
	if code, ok := vmagent.Entry(); ok {
		os.Exit(code)
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
