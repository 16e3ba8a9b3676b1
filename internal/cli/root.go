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
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/engine"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/version"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/auction"
	"github.com/nearnative/nearnative/internal/workload/containerstart"
	"github.com/nearnative/nearnative/internal/workload/fio"
	"github.com/nearnative/nearnative/internal/workload/httpmax"
	"github.com/nearnative/nearnative/internal/workload/icc"
	"github.com/nearnative/nearnative/internal/workload/linpack"
	"github.com/nearnative/nearnative/internal/workload/oltp"
	"github.com/nearnative/nearnative/internal/workload/pgbench"
	"github.com/nearnative/nearnative/internal/workload/redis"
	"github.com/nearnative/nearnative/internal/workload/scaleout"
	"github.com/nearnative/nearnative/internal/workload/stream"
	"github.com/nearnative/nearnative/internal/workload/tcprr"
	"github.com/nearnative/nearnative/internal/workload/tcpstream"
	"github.com/nearnative/nearnative/internal/workload/web20"
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
	return workload.NewRegistry(redis.Workload{}, fio.Workload{}, tcpstream.Workload{}, tcprr.Workload{}, icc.Workload{}, linpack.Workload{}, stream.Workload{}, pgbench.Workload{}, httpmax.Workload{},
		scaleout.Workload{}, oltp.Workload{}, web20.Workload{}, auction.Workload{}, containerstart.Workload{})
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

// ExitCode is the process exit code for err, decided by the error's type,
// never by its text: an *ExitError's own code; an interrupted run or a
// cancelled context 130; bad input (a study file's *study.Error, a run
// reference that matches nothing, engine.ErrConfig, a client host setting
// this machine refuses, host.ErrSetting) 2; something this
// machine lacks (platform.ErrUnavailable, the measuring lock held with
// --no-wait, a result store that failed, engine.ErrStore) 3; anything else, I/O and system errors included, 1.
func ExitCode(err error) int {
	var (
		ee   *ExitError
		se   *study.Error
		busy *state.BusyError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, engine.ErrInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &se), errors.Is(err, store.ErrNoRun), errors.Is(err, store.ErrAmbiguous), errors.Is(err, engine.ErrConfig),
		errors.Is(err, host.ErrSetting):
		return ExitBadInput
	case errors.Is(err, platform.ErrUnavailable), errors.As(err, &busy), errors.Is(err, engine.ErrStore):
		return ExitUnavailable
	}
	return ExitFailure
}

// Main runs nearnative with args and returns the process exit code. The first
// SIGINT, SIGTERM or SIGHUP (those not inherited as ignored, as nohup ignores
// SIGHUP) cancels the command's context so it stops gracefully and tears down
// what it made; a second one exits at once. A closed stdout or stderr (the
// reader of a pipe gone) stops the command the same graceful way: SIGPIPE
// does not kill it, later writes are dropped, and it exits ExitBrokenPipe.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer ignoreSIGPIPE()()
	var fired, broken atomic.Bool
	errOut := &pipeGuard{w: stderr, fired: &fired}
	out := &pipeGuard{w: stdout, fired: &fired}
	pipeGone := func() {
		broken.Store(true)
		// On the other stream, which may still be read (`| head` takes
		// only stdout).
		fmt.Fprintln(errOut, "\nnearnative: output closed (broken pipe): stopping gracefully and removing what this run made")
		cancel()
	}
	errOut.gone, out.gone = pipeGone, pipeGone
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals()...)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(errOut, "\n%v: stopping gracefully and removing what this run made (send it again to exit at once)\n", s)
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(errOut, "second signal: exiting now; `nearnative cleanup` removes what is left")
			os.Exit(ExitInterrupted)
		}
	}()
	err := Run(ctx, args, out, errOut)
	if err == nil && !broken.Load() {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(errOut, "nearnative: "+err.Error())
	}
	if broken.Load() {
		return ExitBrokenPipe
	}
	if code := ExitCode(err); code != ExitFailure || ctx.Err() == nil {
		return code
	}
	return ExitInterrupted
}

// Run executes the command line args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := &app{stdout: stdout, stderr: stderr, dir: state.Home(), reg: Registry()}
	root := a.rootCmd()
	root.SetArgs(args)
	// An unknown command is found before any command runs: Find's error is
	// the usage error, whatever its wording. (Shell completion's hidden
	// request command is added by Execute itself.)
	if len(args) == 0 || (args[0] != cobra.ShellCompRequestCmd && args[0] != cobra.ShellCompNoDescRequestCmd) {
		if _, _, err := root.Find(args); err != nil {
			return withCode(ExitBadInput, fmt.Errorf("%w (see `nearnative --help`)", err))
		}
	}
	return root.ExecuteContext(ctx)
}

// rootCmd builds nearnative's command tree, writing to a's stdout and
// stderr.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "nearnative",
		Short: "What does a container, a network mode, a VM cost your workload compared to native?",
		Long: `nearnative starts the same server software natively, in Docker containers with
several network paths, in a QEMU VM and in Docker inside it, and in Kubernetes
pods; drives it with the same load in randomised interleaved rounds; and
reports every platform relative to native with a 95% confidence interval.`,
		Example: `  nearnative doctor
  nearnative studies
  nearnative run redis --quick
  nearnative show last --json - | jq .
  source <(nearnative completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	defaultDB := a.dir.DB()
	if env := os.Getenv("NEARNATIVE_DB"); env != "" {
		defaultDB = env
	}
	root.PersistentFlags().StringVar(&a.db, "db", defaultDB, "result database: a SQLite file or a postgres:// DSN (env NEARNATIVE_DB)")
	root.PersistentFlags().StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` of the cluster the k8s platforms use (env KUBECONFIG; default: the local cluster of nearnative cluster up)")
	root.PersistentPreRunE = a.applyKubeconfig
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitBadInput, fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath()))
	})
	root.AddCommand(
		a.versionCmd(), a.doctorCmd(), a.platformsCmd(), a.imageCmd(), a.cleanupCmd(),
		a.runCmd(), a.runsCmd(), a.showCmd(), a.studiesCmd(), a.workloadsCmd(),
		a.reportCmd(), a.compareCmd(), a.exportCmd(), a.seriesCmd(), a.driverChildCmd(), a.agentCmd(),
		a.clusterCmd(), a.testbedCmd(),
	)
	// cobra adds help and completion when it executes; added now, they are
	// found below and get examples like every other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	completionExamples(root)
	badInputArgs(root)
	return root
}

// badInputArgs makes every command's argument check (cobra.ExactArgs and
// the like) return bad input, so that the exit code comes from where the
// error arose rather than from its words.
func badInputArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return withCode(ExitBadInput, fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath()))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		badInputArgs(sub)
	}
}

// completionExamples gives cobra's help and completion commands examples,
// as every command of nearnative's has.
func completionExamples(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  nearnative help run\n  nearnative help studies show"
		case "completion":
			c.Example = "  source <(nearnative completion bash)\n  nearnative completion zsh > \"${fpath[1]}/_nearnative\""
			for _, sh := range c.Commands() {
				switch sh.Name() {
				case "bash":
					sh.Example = "  source <(nearnative completion bash)\n  nearnative completion bash > /etc/bash_completion.d/nearnative"
				case "zsh":
					sh.Example = "  nearnative completion zsh > \"${fpath[1]}/_nearnative\""
				case "fish":
					sh.Example = "  nearnative completion fish > ~/.config/fish/completions/nearnative.fish"
				default:
					sh.Example = "  nearnative completion " + sh.Name() + " > nearnative-completion"
				}
			}
		}
	}
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print nearnative's version and commit",
		Example: "  nearnative version\n  nearnative --version",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(a.stdout, "nearnative "+version.String())
			return nil
		},
	}
}
