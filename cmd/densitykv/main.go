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
// 3 stopped by generate --stop-on-drift, 130 interrupted (Ctrl-C); both
// leave the run folder consistent, to be continued with --resume.
//
// The first Ctrl-C cancels the command's context and prints what the
// command does about it (its annInterrupt annotation, e.g. "stopping after
// the current block"); main then stops catching the signal, so a second
// Ctrl-C kills the process at once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/runfolder"
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
	exitDriftStop   = 3
)

// errInterrupted is returned by long-running commands stopped by Ctrl-C
// after they have left their run folder consistent.
var errInterrupted = runfolder.ErrInterrupted

// usageError marks errors in flags or arguments (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// annInterrupt is the cobra annotation with what a command does on the
// first Ctrl-C ("stopping after the current block"); commands without one
// just say "stopping".
const annInterrupt = "densitykv.interrupt"

// interruptible returns the annotations of a command that stops with what
// on Ctrl-C.
func interruptible(what string) map[string]string { return map[string]string{annInterrupt: what} }

// stopSignals, set by main, stops catching Ctrl-C (restoring the default:
// the next one kills the process).
var stopSignals func()

// lockedWriter serialises writes from the command and the Ctrl-C notice.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "densitykv",
		Short: "Bounded per-head historical KV memory for autoregressive video diffusion",
		Long: `densitykv runs DensityKV and the baseline memory policies.

Start with "densitykv demo": it runs the memory policies side by side on a
built-in synthetic video-like KV stream (no downloads, about 20 s on two
cores), writes a run folder with logs, a summary and plots, and prints where
the plots are.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// execute prefixes "densitykv: "; name the subcommand only.
		if c.HasParent() {
			return usageError{fmt.Errorf("%s: %w (see %s --help)", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), err, c.CommandPath())}
		}
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
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
	notice := "stopping"
	if c, _, err := root.Find(args); err == nil && c.Annotations[annInterrupt] != "" {
		notice = c.Annotations[annInterrupt]
	}
	tty := isTerminal(stderr)
	stderr = &lockedWriter{w: stderr}
	// On the first Ctrl-C: stop listening (a second one kills the process)
	// and say what happens now.
	var once sync.Once
	interrupted := func() {
		once.Do(func() {
			if stopSignals != nil {
				stopSignals()
			}
			nl := ""
			if tty { // end a progress bar's line
				nl = "\n"
			}
			fmt.Fprintf(stderr, "%sdensitykv: Ctrl-C: %s (Ctrl-C again to abort)\n", nl, notice)
		})
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			interrupted()
		case <-finished:
		}
	}()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	close(finished)
	wg.Wait()
	if ctx.Err() != nil {
		interrupted() // the command may have seen the cancellation first
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "densitykv: %v\n", err)
	var ue usageError
	var re *runfolder.UserError
	switch {
	case errors.Is(err, generate.ErrDriftStop):
		return exitDriftStop
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &ue), errors.As(err, &re), isCobraUsage(err):
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
	stopSignals = stop
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
