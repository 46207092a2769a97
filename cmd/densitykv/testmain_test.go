package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
)

// envTestMain makes the test binary run as the densitykv command (with the
// test-only "test-wait" command), so tests can send it real signals.
const envTestMain = "DENSITYKV_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envTestMain) == "1" {
		register(newTestWaitCmd)
		main()
	}
	os.Exit(m.Run())
}

// newTestWaitCmd prints "ready" and waits: for Ctrl-C (then it stops like
// a run does, with errInterrupted), or, with --ignore-ctrl-c, for a minute
// whatever happens (a command busy in a long step).
func newTestWaitCmd() *cobra.Command {
	var ignore bool
	cmd := &cobra.Command{
		Use:         "test-wait",
		Annotations: interruptible("stopping the test wait"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "ready")
			if ignore {
				time.Sleep(time.Minute)
				return nil
			}
			<-cmd.Context().Done()
			return fmt.Errorf("%w: test wait stopped", errInterrupted)
		},
	}
	cmd.Flags().BoolVar(&ignore, "ignore-ctrl-c", false, "keep waiting after Ctrl-C")
	return cmd
}

// loadRunConfig reads a simulate, demo or eval run folder's configuration.
func loadRunConfig(dir string) (config.Config, error) {
	var c config.Config
	err := runfolder.LoadConfig(dir, &c)
	return c, err
}
