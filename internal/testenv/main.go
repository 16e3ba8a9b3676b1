package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// childDriverEnv switches a test binary started by UseTestDrivers into a
// child driver process.
const childDriverEnv = "NEARNATIVE_TEST_CHILD_DRIVER"

// Main is TestMain for a package whose test binary doubles as the
// supervisor of a container or guest that holds several servers (it is
// bind-mounted or copied in: vmagent.Entry) and as a child driver process
// (UseTestDrivers). Otherwise it runs the tests, then each of after, and
// exits with the tests' code.
func Main(m *testing.M, after ...func()) {
	if code, ok := vmagent.Entry(); ok {
		os.Exit(code)
	}
	if os.Getenv(childDriverEnv) == "1" {
		if err := driver.ChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// UseTestDrivers makes the child driver processes of t this test binary
// (whose TestMain must be Main), so that trials with drivers >= 1 need no
// nearnative binary.
func UseTestDrivers(t *testing.T) {
	t.Helper()
	old := driver.ChildCommand
	driver.ChildCommand = func() ([]string, error) { return []string{os.Args[0], "-test.run=^$"}, nil }
	t.Setenv(childDriverEnv, "1")
	t.Cleanup(func() { driver.ChildCommand = old })
}
