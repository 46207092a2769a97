package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/runfolder"
)

// listFlags are generate's flags for prompt lists that are not part of
// the configuration: which shard this worker is, and a dry run.
type listFlags struct {
	shard  string
	dryRun bool
}

// resumeList completes a list's configuration read back from its folder
// (batch.yaml leaves out what may differ between workers): the run
// folder's place, the text cache's default and skip_existing.
func resumeList(f *pflag.FlagSet, gc *config.GenerateConfig, out, name string, skip bool) {
	if gc.Run.Out != "" || gc.Run.Name != "" {
		return // a single run's config.resolved.yaml
	}
	gc.Run.Out, gc.Run.Name = out, name
	if gc.Generate.TextCache == "" {
		gc.Generate.TextCache = filepath.Join(out, "text_cache")
	}
	gc.Generate.PromptsFile = filepath.Join(out, name, runfolder.FileBatchPrompts)
	gc.Generate.SkipExisting = true
	if f.Changed("skip-existing") {
		gc.Generate.SkipExisting = skip
	}
}

// runList makes a prompt list's videos, or this worker's shard of them
// (generate.GenerateList; configFile, the --config file, is one of its
// inputs), and reports each prompt's state.
func runList(cmd *cobra.Command, gc config.GenerateConfig, rf runFlags, lf listFlags, configFile string) error {
	if gc.Generate.PromptsFile == "" {
		return usagef("--shard and --dry-run split a prompt list: give --prompts FILE")
	}
	shard, err := runfolder.ParseShard(lf.shard, os.Getenv)
	if err != nil {
		return usageError{err}
	}
	stdout := cmd.OutOrStdout()
	if !lf.dryRun {
		capGenerateHeap(gc.Generate.Arch)
		if !rf.resume {
			warnVideoDisk(cmd.ErrOrStderr(), gc) // one video at a time: a finished one keeps its mp4s only
		}
	}
	var updates io.Writer = stdout
	if rf.json || lf.dryRun {
		updates = nil
	}
	hooks, finish := generateHooks(cmd, gc, rf, updates)
	res, err := generate.GenerateList(cmd.Context(), gc, generate.ListOptions{Shard: shard, Resume: rf.resume, Force: rf.force, DryRun: lf.dryRun,
		Inputs: []atomicfile.Input{{Role: "--config", Path: configFile}}}, hooks)
	finish()
	if err != nil && !errors.Is(err, runfolder.ErrInterrupted) {
		return inputError(err, gc.Generate)
	}
	return reportList(stdout, gc, shard, res, rf, lf.dryRun)
}

// reportList prints what a list (--prompts) or its shard did, or in a dry
// run would do.
func reportList(w io.Writer, gc config.GenerateConfig, shard runfolder.Shard, res *runfolder.Result, rf runFlags, dry bool) error {
	done := 0
	for _, e := range res.Batch {
		switch e.State {
		case "done", "generated", "resumed", "blank":
			done++
		}
	}
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	if rf.json {
		if err := printJSON(w, res.Batch); err != nil {
			return err
		}
	} else {
		for _, e := range res.Batch {
			video := e.Video
			if video == "" {
				video = "-"
			}
			fmt.Fprintf(w, "%5d  %-11s  %s  %q\n", e.Index, e.State, video, e.Prompt)
		}
		what := "list"
		if !shard.Whole() {
			what = "shard " + shard.String() + " of list"
		}
		if dry {
			g := gc.Generate
			latent := g.Blocks * g.BlockFrames()
			fmt.Fprintf(w, "each video: %s backbone, policy %s, seed %d, %d blocks of %d latent frames (%d latent frames, %g s, %d frames at %d fps, crf %d)",
				g.Backbone, gc.Policies[0], gc.Run.Seed, g.Blocks, g.BlockFrames(), latent, float64(latent)/config.LatentFPS, config.VideoFrames(latent), g.Video.FPS, g.Video.CRF)
			for _, h := range g.Horizons {
				hl := config.HorizonBlocks(h, g.BlockFrames()) * g.BlockFrames()
				fmt.Fprintf(w, "; %s: %d frames", config.HorizonName(h), config.VideoFrames(hl))
			}
			fmt.Fprintln(w)
			fmt.Fprintf(w, "dry run: %s %s takes %d prompts; nothing was written\n", what, dir, len(res.Batch))
		} else {
			fmt.Fprintf(w, "%s %s: %d of %d videos complete (status in %s)\n", what, dir, done, len(res.Batch),
				filepath.Join(dir, runfolder.DirShards, shard.Name()+".json"))
		}
	}
	if res.Interrupted {
		again := ""
		if !shard.Whole() {
			again = " --shard " + shard.String()
		}
		return fmt.Errorf("%w with %d of %d videos complete; continue with: densitykv generate --out %s --name %s --resume%s",
			errInterrupted, done, len(res.Batch), gc.Run.Out, gc.Run.Name, again)
	}
	return nil
}
