package vbench

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/limitread"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// listRun is one run as the export reads it: a prompt list (the folders
// of its shards merged) or a single generate run.
type listRun struct {
	dirs     []string // absolute
	kind     string   // "list" or "generate"
	man      runfolder.ListManifest
	gc       config.GenerateConfig
	prompts  map[int]string // selected index → prompt (blank ones left out)
	blank    []int
	complete map[int]string // index → the prompt's complete run folder
	flat     map[string]string
	key      string // what makes two folders one list
}

// readRun reads one run folder given on the command line.
func readRun(dir string) (*listRun, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("vbench: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, userf("vbench: run %s: %v", dir, unwrapPath(err))
	}
	if !st.IsDir() {
		return nil, userf("vbench: run %s is not a folder", dir)
	}
	owner, err := runfolder.ReadOwner(abs)
	if err != nil {
		return nil, userf("vbench: run %s: %w", dir, err)
	}
	_, lerr := os.Stat(filepath.Join(abs, runfolder.FileList))
	switch {
	case owner == runfolder.ListCommand || (owner == "" && lerr == nil):
		return readList(abs)
	case owner == "generate":
		return readSingle(abs)
	case owner == "":
		return nil, userf("vbench: %s is not a run folder (no %s or %s): give prompt-list folders (generate --prompts) or generate run folders", dir, runfolder.FileOwner, runfolder.FileList)
	}
	return nil, userf("vbench: %s is a %q run folder; vbench export takes prompt-list folders (generate --prompts) and generate run folders", dir, owner)
}

func readList(dir string) (*listRun, error) {
	r := &listRun{dirs: []string{dir}, kind: "list", prompts: map[int]string{}, complete: map[int]string{}}
	if err := runfolder.ReadJSON(filepath.Join(dir, runfolder.FileList), &r.man); err != nil {
		return nil, userf("vbench: list folder %s: %w", dir, err)
	}
	b, err := limitread.File(filepath.Join(dir, runfolder.FileBatch), runfolder.MaxRecordFile, "list configuration")
	if err != nil {
		return nil, userf("vbench: list folder %s: %w", dir, err)
	}
	if _, err := config.Decode(b, &r.gc, false); err != nil {
		return nil, userf("vbench: %s: %w", filepath.Join(dir, runfolder.FileBatch), err)
	}
	ext := ""
	if _, err := os.Stat(filepath.Join(dir, runfolder.FileBatchExtended)); err == nil {
		ext = filepath.Join(dir, runfolder.FileBatchExtended)
	}
	pl, err := runfolder.ReadPromptList(filepath.Join(dir, runfolder.FileBatchPrompts), ext)
	if err != nil {
		return nil, userf("vbench: list folder %s: %w", dir, err)
	}
	if pl.SHA256 != r.man.PromptsSHA256 || len(pl.Prompts) != r.man.Prompts {
		return nil, userf("vbench: list folder %s: %s does not match %s (%d lines, SHA-256 %.12s…; the list says %d, %.12s…)",
			dir, runfolder.FileBatchPrompts, runfolder.FileList, len(pl.Prompts), pl.SHA256, r.man.Prompts, r.man.PromptsSHA256)
	}
	for _, i := range r.man.Selected {
		if i < 0 || i >= len(pl.Prompts) {
			return nil, userf("vbench: list folder %s: %s selects prompt %d of %d", dir, runfolder.FileList, i, len(pl.Prompts))
		}
		if pl.Blank(i) {
			r.blank = append(r.blank, i)
			continue
		}
		r.prompts[i] = pl.Prompts[i]
	}
	r.key = fmt.Sprintf("list %s %s %v", r.man.PromptsSHA256, r.man.ConfigSHA256, r.man.Selected)
	return r, r.finish()
}

func readSingle(dir string) (*listRun, error) {
	r := &listRun{dirs: []string{dir}, kind: "generate", prompts: map[int]string{}, complete: map[int]string{}}
	if err := runfolder.LoadConfig(dir, &r.gc); err != nil {
		return nil, userf("vbench: %w", err)
	}
	if len(r.gc.Generate.Prompts) == 0 || strings.TrimSpace(r.gc.Generate.Prompts[0].Text) == "" {
		return nil, userf("vbench: run %s has no prompt text (made from --text embeddings): VBench names a video by its prompt", dir)
	}
	// A prompt schedule is named by its first prompt.
	r.prompts[0] = r.gc.Generate.Prompts[0].Text
	r.man.Selected = []int{0}
	h := sha256.Sum256([]byte(r.prompts[0]))
	r.man.PromptsSHA256 = hex.EncodeToString(h[:])
	r.key = "generate " + dir
	return r, r.finish()
}

// finish checks the run's policy and flattens its configuration.
func (r *listRun) finish() error {
	if len(r.gc.Policies) != 1 {
		return userf("vbench: run %s has policies %v; a generate run has one", r.dirs[0], r.gc.Policies)
	}
	flat, err := flattenConfig(r.gc)
	if err != nil {
		return fmt.Errorf("vbench: run %s: %w", r.dirs[0], err)
	}
	r.flat = flat
	if r.man.ConfigSHA256 == "" {
		r.man.ConfigSHA256 = hashMap(identityKeys(flat, func(string) bool { return true }))
	}
	return nil
}

// findVideos finds each prompt's complete run: the first of the list's
// folders that holds it (as collect does). A prompt complete in none is
// an error naming them all.
func (r *listRun) findVideos() error {
	var missing []int
	for _, i := range r.indices() {
		for _, d := range r.dirs {
			sd := d
			if r.kind == "list" {
				sd = runfolder.BatchDir(d, i)
			}
			if runfolder.Inspect(sd).Complete {
				r.complete[i] = sd
				break
			}
		}
		if r.complete[i] == "" {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return userf("vbench: run %s: %d of %d prompts have no complete video (indices %s); finish them (densitykv collect shows the list's state): a VBench score over part of the prompts does not compare with the others'",
			strings.Join(r.dirs, ", "), len(missing), len(r.prompts), short(missing))
	}
	return nil
}

// indices are the prompts with a video, in increasing order.
func (r *listRun) indices() []int {
	out := make([]int, 0, len(r.prompts))
	for i := range r.prompts {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

func (r *listRun) policy() string   { return r.gc.Policies[0] }
func (r *listRun) backbone() string { return r.gc.Generate.Backbone.String() }

// seconds is the run's length.
func (r *listRun) seconds() float64 {
	return float64(r.gc.Generate.Blocks*r.gc.Generate.BlockFrames()) / config.LatentFPS
}

// ownHorizons are the horizons the run wrote videos for, or its length.
func (r *listRun) ownHorizons() []float64 {
	if len(r.gc.Generate.Horizons) > 0 {
		return slices.Clone(r.gc.Generate.Horizons)
	}
	return []float64{r.seconds()}
}

// videoFile is the file of the run's video of h seconds in a prompt's
// folder: its horizon video (video_60s.mp4), or video.mp4 when h is the
// run's length.
func (r *listRun) videoFile(h float64) (string, error) {
	g := r.gc.Generate
	if slices.Contains(g.Horizons, h) {
		return config.HorizonName(h), nil
	}
	if config.HorizonBlocks(h, g.BlockFrames()) == g.Blocks {
		return video.FileVideo, nil
	}
	hs := "none"
	if len(g.Horizons) > 0 {
		hs = fmtSeconds(g.Horizons)
	}
	return "", userf("vbench: run %s has no %g s video (its length is %g s, its horizon videos: %s)", r.dirs[0], h, r.seconds(), hs)
}

// flattenConfig is the resolved configuration as "dotted.key" → value
// (YAML scalars as written; sequences in flow form).
func flattenConfig(gc config.GenerateConfig) (map[string]string, error) {
	b, err := config.MarshalGenerate(gc)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], prefix+n.Content[i].Value+".")
			}
		case yaml.SequenceNode:
			var parts []string
			for _, c := range n.Content {
				if c.Kind == yaml.ScalarNode {
					parts = append(parts, c.Value)
				} else {
					s, _ := yaml.Marshal(c)
					parts = append(parts, strings.TrimSpace(string(s)))
				}
			}
			out[strings.TrimSuffix(prefix, ".")] = "[" + strings.Join(parts, ", ") + "]"
		default:
			out[strings.TrimSuffix(prefix, ".")] = n.Value
		}
	}
	walk(&doc, "")
	return out, nil
}

// noiseKeys are configuration keys that say where a run read or wrote its
// files or how it reported, not what it made.
var noiseKeys = []string{"run.out", "run.name", "run.snapshot_every", "run.plots", "generate.checkpoint", "generate.lora",
	"generate.vae", "generate.rag_ae", "generate.text_encoder", "generate.tokenizer", "generate.text_cache", "generate.texts",
	"generate.prompts", "generate.prompts_file", "generate.extended_prompts_file", "generate.prompt_indices", "generate.skip_existing",
	"generate.preview", "generate.record_stream", "generate.trace_step", "generate.trace_layers", "generate.lineage_layers",
	"generate.lineage_heads", "memory.bank.workers"}

// lengthKeys set a run's length, which horizons make comparable.
var lengthKeys = []string{"stream.seconds", "generate.blocks", "generate.horizons"}

func identityKeys(flat map[string]string, keep func(string) bool) map[string]string {
	out := map[string]string{}
	for k, v := range flat {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// hashMap is the SHA-256 of a map's sorted "key=value" lines.
func hashMap(m map[string]string) string {
	h := sha256.New()
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(h, "%s=%s\n", k, m[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diffKeys lists the keys whose values differ between a and b.
func diffKeys(a, b map[string]string, keep func(string) bool) []string {
	var out []string
	for _, k := range sortedKeys(a) {
		if keep(k) && a[k] != b[k] {
			out = append(out, k)
		}
	}
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok && keep(k) {
			out = append(out, k)
		}
	}
	return out
}

func describeDiff(keys []string, a, b map[string]string) string {
	var parts []string
	for i, k := range keys {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %q/%q", k, a[k], b[k]))
	}
	return strings.Join(parts, ", ")
}

func fmtSeconds(hs []float64) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = strconv.FormatFloat(h, 'g', -1, 64)
	}
	return strings.Join(s, ", ") + " s"
}

// short lists at most 12 indices.
func short(xs []int) string {
	s := make([]string, 0, 13)
	for i, x := range xs {
		if i == 12 {
			s = append(s, fmt.Sprintf("… %d more", len(xs)-i))
			break
		}
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
