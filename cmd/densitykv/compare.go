package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/parity"
)

func init() { register(newCompareCmd) }

func newCompareCmd() *cobra.Command {
	var out string
	var asJSON bool
	var framesPerBlock int
	cmd := &cobra.Command{
		Use:   "compare A B",
		Short: "Diff two runs block by block: latents, bank decisions, attention traces (a run folder against another, or against the authors' outputs)",
		Long: `compare reads two folders — densitykv generate run folders, or a run folder
and a folder of the DensityKV authors' outputs (their latents .pt, lineage and
attention trace, saved with torch.save; docs/parity.md) — and compares them
block by block:

  latents      max and mean |A − B|, ‖A − B‖ / ‖B‖ and max |A − B| / max |B|
  bank         Jaccard index of the source ids each traced layer and head
               admitted at each update (the lineage), and of the final banks
  trace        total variation between the attention mass each query frame
               puts on the source frames (per traced layer and head)

Parts only one side has are noted and skipped. Run with the same noise on both
sides (generate --noise, --save-noise) for a draw-for-draw comparison.

It writes compare.json, compare.txt and the figure compare.png and
compare.svg into --out, and prints the text (or, with --json, the JSON).`,
		Example: `  densitykv compare runs/seed1 runs/replay
  densitykv compare runs/panda authors/panda_stream --out runs/panda/vs-authors`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if framesPerBlock < 0 {
				return usagef("--frames-per-block is %d, want 0 (the run folder's) or more", framesPerBlock)
			}
			a, err := parity.Open(dirs[0])
			if err != nil {
				return usageError{err}
			}
			b, err := parity.Open(dirs[1])
			if err != nil {
				return usageError{err}
			}
			rep, err := parity.Compare(a, b, parity.Options{FramesPerBlock: framesPerBlock})
			if err != nil {
				return usageError{err}
			}
			paths, err := rep.Write(out)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			io.WriteString(cmd.OutOrStdout(), rep.Text())
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %v\n", paths)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "compare", "folder of compare.json, compare.txt, compare.png and compare.svg")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().IntVar(&framesPerBlock, "frames-per-block", 0, "latent frames per block (0: the run folder's; 3 between two folders of the authors' outputs)")
	return cmd
}
