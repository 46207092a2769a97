package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/runfolder"
)

func init() { register(newTraceCmd) }

func newTraceCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "trace RUN_FOLDER",
		Short: "Render the diagnostics figures of a run folder (PNG and SVG)",
		Long: `trace reads a run folder written by demo, simulate or generate
(config.resolved.yaml, memory_log.jsonl, admissions.json, storage.json,
attention_trace.json) and draws into RUN_FOLDER/plots/:

  occupancy_admissions_densitykv  bank occupancy and admissions per update,
                                  per layer, with the min–max band over heads
  policies                        every policy's memory and attention keys
  admission_montage               (a) layer–head banks admitting each source
                                  token, (b) admissions by layer × source time,
                                  (c) fraction of entries and positions admitted
                                  per source frame (the paper's supplementary
                                  figure)
  storage_vs_horizon              measured live bytes of each policy
  attention_trace                 (generate runs) attention mass from each
                                  query frame to each source frame

Use it on a run stopped with Ctrl-C, or after changing the plotting code.`,
		Example: `  densitykv trace runs/demo
  densitykv trace runs/simulate --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return usagef("trace: run folder %q does not exist", dir)
			}
			pngs, err := renderAny(dir)
			if err != nil {
				return err
			}
			// Never present a partial run as complete.
			if st := runfolder.Inspect(dir); !st.Complete && !isEval(dir) {
				note := fmt.Sprintf("trace: %s is not complete", dir)
				if st.NextBlock > 0 {
					note += fmt.Sprintf(" (its checkpoint is at block %d)", st.NextBlock)
				}
				if st.TornLog {
					note += "; its memory log ends in a torn line (a write that failed), left out of the figures"
				}
				command := st.Command
				if command == "" {
					command = "simulate"
				}
				note += fmt.Sprintf("; continue it with: densitykv %s --out %s --name %s --resume", command, filepath.Dir(filepath.Clean(dir)), filepath.Base(filepath.Clean(dir)))
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return printJSON(w, map[string]any{"run_dir": dir, "plots": pngs})
			}
			fmt.Fprintf(w, "plots of %s (PNG, with SVG beside each):\n", dir)
			for _, p := range pngs {
				fmt.Fprintf(w, "  %s\n", p)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the plot paths as JSON")
	return cmd
}

// isEval reports an eval folder (trace draws nothing of its own there).
func isEval(dir string) bool {
	o, _ := runfolder.ReadOwner(dir)
	return o == "eval"
}

// renderAny renders a simulate/demo run folder, or a generate run folder.
func renderAny(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, runfolder.FileConfig)); err != nil {
		return nil, usagef("trace: %s has no %s: not a densitykv run folder (demo, simulate or generate write one)", dir, runfolder.FileConfig)
	}
	return runfolder.Render(dir)
}
