package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/runfolder"
)

func init() { register(newCollectCmd) }

func newCollectCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "collect LIST_FOLDER...",
		Short: "Merge the shard folders of a prompt list (generate --prompts) into one report",
		Long: `collect reads a prompt list's folders — the one folder its shards shared, or
one folder per shard copied from several machines — checks that they hold the
same list (list.json: the prompts file's and the configuration's hashes, the
selected indices), and writes one report: every selected prompt with its state
(complete, blank, stopped, missing) and video, the shards' status files, the
memory logs aggregated per policy (admissions, evictions, final occupancy,
flushes, the authors' candidate-density and admission-score means, update
time), and the storage table: each policy's live bytes at every horizon over
the prompts, beside the paper's formula for the same configuration.

It writes report.json and report.md into --out (default: the first folder)
and prints the Markdown (or, with --json, the JSON).`,
		Example: `  densitykv collect runs/paper-main-self-forcing-densitykv
  densitykv collect node0/list node1/list node2/list --out report/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			rep, err := (&generate.CollectJob{Dirs: dirs}).Run()
			if err != nil {
				return err
			}
			if out == "" {
				out = dirs[0]
			}
			md := reportMarkdown(rep)
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := runfolder.WriteJSON(filepath.Join(out, generate.FileReport), rep); err != nil {
				return err
			}
			if err := runfolder.WriteFile(filepath.Join(out, generate.FileReportMD), []byte(md)); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			io.WriteString(cmd.OutOrStdout(), md)
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s, %s\n", filepath.Join(out, generate.FileReport), filepath.Join(out, generate.FileReportMD))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder of report.json and report.md (default: the first list folder)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// reportMarkdown renders a collected report.
func reportMarkdown(r *generate.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Prompt list report\n\n")
	fmt.Fprintf(&b, "List: %d prompts selected of %d lines (prompts SHA-256 %.12s…, configuration %.12s…), from %s.\n\n",
		len(r.List.Selected), r.List.Prompts, r.List.PromptsSHA256, r.List.ConfigSHA256, strings.Join(r.Folders, ", "))
	fmt.Fprintf(&b, "**%d complete**, %d blank, %d missing or stopped", r.Complete, r.Blank, len(r.Missing))
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, " (indices %v)", r.Missing)
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintf(&b, "; complete in more than one folder: %v (the first folder's is reported)", r.Duplicates)
	}
	b.WriteString(".\n\n## Shards\n\n| status file | shard | host | prompts | complete | updated |\n|---|---|---|---|---|---|\n")
	for _, s := range r.Shards {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %v | %s |\n", s.File, s.Shard, s.Host, s.Prompts, s.Complete, s.Updated)
	}
	b.WriteString("\n## Memory log (over the complete prompts)\n\n")
	b.WriteString("| policy | prompts | bank updates | admitted | admitted / update | evicted mandatory | evicted capacity | final occupancy/head (mean, min–max) | flushed | floor-blocked | infeasible | candidate density | admission score | update s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	opt := func(p *float64) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprintf("%.4g", *p)
	}
	for _, s := range r.MemoryLog {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %d | %d | %.1f (%d–%d) | %d | %d | %d | %s | %s | %.2f |\n", s.Policy, s.Prompts, s.Updates, s.AdmittedTotal,
			s.AdmittedPerLine, s.EvictedMandatory, s.EvictedCapacity, s.FinalOccMean, s.FinalOccMin, s.FinalOccMax, s.Flushed, s.FloorBlocked, s.Infeasible,
			opt(s.CandidateDensityMean), opt(s.AdmissionScoreMean), s.UpdateSeconds)
	}
	b.WriteString("\n## Storage (live persistent bytes, storage.json)\n\n| policy | horizon s | prompts | mean | min | max | paper formula |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Storage {
		f := "–"
		if s.Formula > 0 {
			f = humanBytes(s.Formula)
		}
		fmt.Fprintf(&b, "| %s | %g | %d | %s | %s | %s | %s |\n", s.Policy, s.Seconds, s.Prompts, humanBytes(int64(s.Mean+0.5)), humanBytes(s.Min), humanBytes(s.Max), f)
	}
	if len(r.Drift) > 0 {
		b.WriteString("\n## Drift (drift.jsonl: model-free proxies, not VBench scores; docs/drift.md)\n\n| policy | prompts | statistic | blocks | median | max (prompt, block) |\n|---|---|---|---|---|---|\n")
		for _, s := range r.Drift {
			for _, name := range drift.Names {
				if st, ok := s.Stats[name]; ok {
					fmt.Fprintf(&b, "| %s | %d | %s | %d | %.4g | %.4g (%d, %d) |\n", s.Policy, s.Prompts, name, st.Blocks, st.Median, st.Max, st.MaxPrompt, st.MaxBlock)
				}
			}
		}
		b.WriteString("\n| policy | threshold | prompts beyond it | first block (prompt) |\n|---|---|---|---|\n")
		for _, s := range r.Drift {
			for _, w := range s.Watch {
				first := "–"
				if w.FirstBlock >= 0 {
					first = fmt.Sprintf("%d (%d)", w.FirstBlock, w.FirstPrompt)
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %s |\n", s.Policy, w.Rule, w.Prompts, first)
			}
		}
	}
	b.WriteString("\n## Prompts\n\n| index | state | blocks | video | horizons | prompt |\n|---|---|---|---|---|---|\n")
	for _, p := range r.Prompts {
		v := p.Video
		if v == "" {
			v = "–"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %q |\n", p.Index, p.State, p.Blocks, v, strings.Join(p.Horizons, " "), p.Prompt)
	}
	return b.String()
}
