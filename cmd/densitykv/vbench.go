package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/vbench"
)

func init() { register(newVBenchCmd) }

func newVBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vbench",
		Short: "Lay videos out for VBench and turn VBench's results into the paper's tables",
		Long: `vbench bridges densitykv and VBench (github.com/Vchitect/VBench), the
benchmark of the paper's tables: "vbench export" lays the videos of prompt
lists out as VBench-Long's custom-input evaluation reads them and writes the
VBench command of every folder; "vbench table" reads VBench's results files
and renders the paper's tables (six dimensions, Avg. Rank, single-metric wins,
three-backbone means for ablations) as Markdown, CSV and LaTeX, and the wins
figure. See docs/vbench.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newVBenchExportCmd(), newVBenchTableCmd())
	return cmd
}

func newVBenchExportCmd() *cobra.Command {
	var o vbench.ExportOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export RUN... --out DIR",
		Short: "Lay prompt lists' videos out for VBench-Long, with a manifest and the VBench commands",
		Long: `export takes prompt-list folders (generate --prompts; the folders of one
list's shards are merged) and generate run folders, and lays their videos out
for VBench-Long's custom-input evaluation: one folder per prompt set, backbone,
method and horizon (DIR/prompts-128/longlive/densitykv/60s/), each video named
{prompt}-{k}.mp4 under VBench's naming rules with the prompt map VBench's
--prompt_file reads (prompts.json), manifest.json (which run, prompt index,
policy, backbone, seed and horizon each file came from) and vbench.sh (the
VBench-Long command of every folder, for the six dimensions).

--horizons picks the lengths (default: each run's horizon videos, or its full
video when it has none). Videos are hard links (no copy; copies across file
systems), or --link symlink / copy. Every prompt of a run must be complete.
The export is written into a temporary folder and renamed into place; an
export already in DIR is kept when identical, replaced only with --force.`,
		Example: `  densitykv vbench export runs/paper-main-*-* --out vbench/main
  densitykv vbench export runs/paper-ablation-*-* --out vbench/ablation --horizons 60`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Runs = args
			res, err := vbench.Export(o)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res.Manifest)
			}
			printExport(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "the export folder (required)")
	f.Float64SliceVar(&o.Horizons, "horizons", nil, "video lengths in seconds to export, e.g. 30,60,120 (default: each run's horizon videos, or its full video)")
	f.StringVar(&o.Link, "link", vbench.LinkHard, "how videos are exported: "+strings.Join(vbench.LinkModes, ", ")+" (hard falls back to copies across file systems)")
	f.BoolVar(&o.Force, "force", false, "replace an earlier, different export in --out (and what VBench wrote inside it)")
	f.BoolVar(&asJSON, "json", false, "print the manifest as JSON")
	return cmd
}

func printExport(w io.Writer, res *vbench.ExportResult) {
	m := res.Manifest
	videos := 0
	for _, f := range m.Folders {
		videos += len(f.Videos)
	}
	if res.UpToDate {
		fmt.Fprintf(w, "%s already holds this export (same runs, videos and options): nothing written\n", res.Out)
	} else {
		how := m.Link + " links"
		if m.Link == vbench.LinkCopy {
			how = "copies"
		}
		if res.Copied > 0 {
			how += fmt.Sprintf(" (%d copied: another file system)", res.Copied)
		}
		fmt.Fprintf(w, "exported %d videos of %d runs into %d folders at %s, as %s\n", videos, len(m.Runs), len(m.Folders), res.Out, how)
	}
	fmt.Fprintf(w, "\n| folder | method | videos |\n|---|---|---:|\n")
	for _, f := range m.Folders {
		label := f.Method
		for _, x := range m.Methods {
			if x.ID == f.Method {
				label = x.Label
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d |\n", f.Dir, label, len(f.Videos))
	}
	for _, s := range m.Warnings {
		fmt.Fprintf(w, "\nwarning: %s", s)
	}
	if len(m.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nmanifest: %s\nVBench: from a checkout of github.com/Vchitect/VBench, run\n  bash %s\nwhich runs, for each folder, the VBench-Long command (the first folder's):\n  %s\nthen: densitykv vbench table --manifest %s %s --out TABLES\n",
		filepath.Join(res.Out, vbench.FileManifest), res.Commands, res.Example, res.Out, filepath.Join(res.Out, "results"))
}

func newVBenchTableCmd() *cobra.Command {
	var o vbench.TableOptions
	cmd := &cobra.Command{
		Use:   "table RESULTS... --manifest EXPORT --out DIR",
		Short: "Render the paper's tables from VBench's results of an export",
		Long: `table reads VBench's results files (*_eval_results.json, or folders holding
them) of the folders of an export (--manifest: its manifest.json or folder),
checks each against the manifest (the six dimensions of the paper's protocol
only; every video of one exported folder, no other), and writes, per prompt
set, into DIR/<prompt set>/:

  backbones.md/.csv/.tex (+ _rows.tex)  the main table: per horizon and backbone,
                                        each method's six values (score × 100, two
                                        decimals) and Avg. Rank (midranks of the
                                        displayed values), best bold, second underlined
  overall.csv                           Avg. Rank over every cell, single-metric wins
  wins.png/.svg                         the wins per horizon and method
  means.md/.csv/.tex (+ _rows.tex)      the three-backbone means, ranked within the
                                        ablation groups (competition ranks)

and scores.csv (every folder's scores) and tables.md (all tables, also printed).
A prompt set whose folders lack results, or that is not a full grid of methods,
backbones and horizons, is refused.`,
		Example: `  densitykv vbench table vbench/main/results --manifest vbench/main --out tables/main`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Results = args
			res, err := vbench.Table(o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			io.WriteString(w, res.Markdown)
			fmt.Fprintf(w, "\nwrote %d files into %s\n", len(res.Files), o.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Manifest, "manifest", "", "the export's manifest.json, or the export folder (required)")
	f.StringVar(&o.Out, "out", "", "the folder of the tables (required)")
	return cmd
}
