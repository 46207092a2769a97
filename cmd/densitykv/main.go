// Command densitykv runs DensityKV (training-free bounded per-head historical
// KV memory for autoregressive video diffusion) and the baseline memory
// policies: a built-in synthetic demo, simulations at any scale, benchmarks,
// storage accounting, Wan rollouts from a checkpoint, and diagnostics
// rendered from a run folder.
//
// Each subcommand lives in its own file and registers itself from that
// file's init function:
//
//	func init() { register(newFooCmd) }
//
// where newFooCmd returns a fresh *cobra.Command. A fresh command tree is
// built for every execution (so tests can run commands in-process any number
// of times without flag values leaking between runs). Commands added
// directly with rootCmd.AddCommand are adopted into every tree too.
//
// With no arguments it runs the demo, its default job.
//
// Exit codes: 0 success, 1 failure, 2 usage error (bad flag or argument),
// 130 interrupted (Ctrl-C; the run folder is left consistent and can be
// continued with --resume).
package main

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
)

// rootCmd holds subcommands that other files add directly with
// rootCmd.AddCommand; prefer register, which builds a fresh command per run.
var rootCmd = &cobra.Command{Use: "densitykv"}

var constructors []func() *cobra.Command

// register adds a subcommand constructor; call it from a file's init.
func register(newCmd func() *cobra.Command) { constructors = append(constructors, newCmd) }

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// errInterrupted is returned by long-running commands stopped by Ctrl-C
// after they have left their run folder consistent.
var errInterrupted = errors.New("interrupted")

// usageError marks errors in flags or arguments (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "densitykv",
		Short: "Bounded per-head historical KV memory for autoregressive video diffusion",
		Long: `densitykv runs DensityKV and the baseline memory policies.

Start with "densitykv demo": it runs the memory policies side by side on a
built-in synthetic video-like KV stream (no downloads, about a minute on two
cores), writes a run folder with logs, a summary and plots, and prints where
the plots are.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())}
	})
	for _, newCmd := range constructors {
		root.AddCommand(newCmd())
	}
	for _, c := range rootCmd.Commands() {
		rootCmd.RemoveCommand(c)
		root.AddCommand(c)
		rootCmd.AddCommand(c)
	}
	return root
}

// execute runs the command line args with the given streams and returns
// the process exit code. Errors are printed to stderr prefixed "densitykv:".
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// The default job: the demo (bank updates on the built-in stream).
		fmt.Fprintln(stderr, "densitykv: no command given, running the demo (densitykv --help lists the commands)")
		args = []string{"demo"}
	}
	root := newRootCmd()
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(root.FlagErrorFunc())
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "densitykv: %v\n", err)
	var ue usageError
	switch {
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &ue), isCobraUsage(err):
		return exitUsage
	}
	return exitFailure
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments).
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func main() {
	setMemoryLimit()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
