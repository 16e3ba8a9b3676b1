// Package cli holds nearnative's commands: flag parsing and wiring only; the
// work is done by the packages they call.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/version"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/fio"
	"github.com/nearnative/nearnative/internal/workload/icc"
	"github.com/nearnative/nearnative/internal/workload/linpack"
	"github.com/nearnative/nearnative/internal/workload/redis"
	"github.com/nearnative/nearnative/internal/workload/stream"
	"github.com/nearnative/nearnative/internal/workload/tcprr"
	"github.com/nearnative/nearnative/internal/workload/tcpstream"
)

// Exit codes.
const (
	ExitOK          = 0
	ExitFailure     = 1 // a run or check failed
	ExitBadInput    = 2 // bad flags, study file or reference
	ExitUnavailable = 3 // something the command needs is missing here
	ExitInterrupted = 130
)

// ExitError attaches an exit code to an error.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: code, Err: err}
}

// Registry returns the built-in workloads.
func Registry() *workload.Registry {
	return workload.NewRegistry(redis.Workload{}, fio.Workload{}, tcpstream.Workload{}, tcprr.Workload{}, icc.Workload{}, linpack.Workload{}, stream.Workload{})
}

type app struct {
	stdout, stderr io.Writer
	dir            state.Dir
	db             string
	kubeconfig     string
	reg            *workload.Registry
}

func (a *app) openStore(ctx context.Context) (store.Store, error) {
	st, err := store.Open(ctx, a.db)
	if err != nil {
		return nil, withCode(ExitUnavailable, err)
	}
	return st, nil
}

// Main runs nearnative with args and returns the process exit code. The first
// SIGINT or SIGTERM cancels the command's context so it stops gracefully and
// tears down what it made; a second one exits at once.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(stderr, "\n%v: stopping gracefully and removing what this run made (send it again to exit at once)\n", s)
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(stderr, "second signal: exiting now; `nearnative cleanup` removes what is left")
			os.Exit(ExitInterrupted)
		}
	}()
	err := Run(ctx, args, stdout, stderr)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "nearnative: "+err.Error())
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if ctx.Err() != nil {
		return ExitInterrupted
	}
	return ExitFailure
}

// Run executes the command line args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := &app{stdout: stdout, stderr: stderr, dir: state.Home(), reg: Registry()}
	root := &cobra.Command{
		Use:   "nearnative",
		Short: "What does a container, a network mode, a VM cost your workload compared to native?",
		Long: `nearnative starts the same server software natively, in Docker containers with
several network paths, in a QEMU VM and in Docker inside it; drives it with the same load in
randomised interleaved rounds; and reports every platform relative to native
with a 95% confidence interval.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	defaultDB := a.dir.DB()
	if env := os.Getenv("NEARNATIVE_DB"); env != "" {
		defaultDB = env
	}
	root.PersistentFlags().StringVar(&a.db, "db", defaultDB, "result database: a SQLite file or a postgres:// DSN (env NEARNATIVE_DB)")
	root.PersistentFlags().StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster the k8s platforms use (env KUBECONFIG; default: the local cluster of `nearnative cluster up`)")
	root.PersistentPreRunE = a.applyKubeconfig
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitBadInput, fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath()))
	})
	root.AddCommand(
		a.versionCmd(), a.doctorCmd(), a.platformsCmd(), a.imageCmd(), a.cleanupCmd(),
		a.runCmd(), a.runsCmd(), a.showCmd(), a.studiesCmd(), a.workloadsCmd(),
		a.reportCmd(), a.compareCmd(), a.exportCmd(),
		a.clusterCmd(),
	)
	err := root.ExecuteContext(ctx)
	if err != nil && isUsageError(err) {
		return withCode(ExitBadInput, err)
	}
	return err
}

func isUsageError(err error) bool {
	var ee *ExitError
	if errors.As(err, &ee) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print nearnative's version and commit",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(a.stdout, "nearnative "+version.String())
			return nil
		},
	}
}
