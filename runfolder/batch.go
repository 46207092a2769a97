package runfolder

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/pipeline"
	"github.com/densitykv/densitykv/tokenizer"
)

// A batch folder (generate --prompts FILE) holds one run folder per
// prompt, NNNNN/ (the prompt's index among the file's non-blank lines),
// beside the batch's own files.
const (
	FileBatch        = "batch.yaml"  // the batch's resolved configuration (each run's, but for its prompt)
	FileBatchPrompts = "prompts.txt" // a copy of the prompts file
	FileBatchStatus  = "batch.json"  // each prompt's run folder and state
	// MaxPromptsFile bounds a prompts file.
	MaxPromptsFile = 64 << 20
)

// ReadPrompts reads a prompts file: one prompt per line, blank lines
// skipped, surrounding whitespace (and a Windows line end) removed.
func ReadPrompts(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxPromptsFile {
		return nil, fmt.Errorf("prompts file %s has %d bytes, more than the %d accepted", path, st.Size(), MaxPromptsFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePrompts(path, b)
}

func parsePrompts(path string, b []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<16), tokenizer.MaxTextBytes+2)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line != "" {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("prompts file %s: %w (a line may hold at most %d bytes)", path, err, tokenizer.MaxTextBytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prompts file %s has no prompt (one per line)", path)
	}
	return out, nil
}

// BatchEntry is one prompt of a batch and what became of it.
type BatchEntry struct {
	Index  int    `json:"index"`
	Prompt string `json:"prompt"`
	Dir    string `json:"dir"`
	// State is "done" (complete before this call: skipped), "generated",
	// "resumed", "interrupted" or "pending" (not reached).
	State string `json:"state"`
	Video string `json:"video,omitempty"`
}

// BatchDir is the run folder of prompt i of a batch in dir.
func BatchDir(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("%05d", i)) }

// batchRunConfig is the configuration of prompt i's run: the batch's, with
// the prompt and its folder.
func batchRunConfig(gc config.GenerateConfig, dir string, i int, prompt string) config.GenerateConfig {
	sub := gc
	sub.Generate.PromptsFile = ""
	sub.Generate.Prompts = []config.PromptSpec{{Text: prompt}}
	sub.Run.Out, sub.Run.Name = dir, filepath.Base(BatchDir(dir, i))
	return sub
}

// GenerateBatch makes one video per prompt of gc's prompts file, each in
// its own run folder <out>/<name>/NNNNN/ with its video.mp4. Run again
// (or with resume, from the batch's saved configuration), it skips the
// videos that are complete, resumes the ones stopped with a checkpoint and
// starts the others. All prompts are encoded first (the encoder then
// released; the embeddings wait in the text cache, read back one prompt at
// a time), the backbone and the VAE are loaded once. A stop (ctx) ends
// the current video at a block boundary and returns ErrInterrupted.
func GenerateBatch(ctx context.Context, gc config.GenerateConfig, resume, force bool, hooks Hooks) (*Result, error) {
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	prompts, err := openBatch(dir, gc, resume, force)
	if err != nil {
		return nil, err
	}
	in, err := checkGenerateInputs(g, hooks, true)
	if err != nil {
		return nil, err
	}
	// What each prompt needs: nothing (complete), resume, or a new run.
	entries := make([]BatchEntry, len(prompts))
	var encode []config.PromptSpec
	var encodeAt []int
	for i, p := range prompts {
		sd := BatchDir(dir, i)
		entries[i] = BatchEntry{Index: i, Prompt: p, Dir: sd, State: "pending"}
		var s Summary
		if ReadJSON(filepath.Join(sd, FileSummary), &s) == nil && s.Complete {
			entries[i].State = "done"
			if _, err := os.Stat(filepath.Join(sd, "video.mp4")); err == nil {
				entries[i].Video = filepath.Join(sd, "video.mp4")
			}
			continue
		}
		if checkpointed, _ := Status(sd); !checkpointed {
			encode, encodeAt = append(encode, config.PromptSpec{Text: p}), append(encodeAt, i)
		}
	}
	embeds := make([]*pipeline.Embedding, len(prompts))
	if len(encode) > 0 && g.TextCache == "" {
		return nil, userf("--prompts needs a text cache (generate.text_cache)")
	}
	es, err := encodePrompts(in, g, encode, true, hooks) // values read back per prompt
	if err != nil {
		return nil, err
	}
	for k, i := range encodeAt {
		embeds[i] = es[k]
	}
	todo := 0
	for _, e := range entries {
		if e.State != "done" {
			todo++
		}
	}
	res := &Result{}
	if todo > 0 {
		if err := in.loadBackbone(g); err != nil {
			return nil, err
		}
	}
	for i, p := range prompts {
		e := &entries[i]
		if e.State == "done" {
			continue
		}
		sub := batchRunConfig(gc, dir, i, p)
		checkpointed, _ := Status(e.Dir)
		hooks.info("prompt %d of %d (%s): %q", i+1, len(prompts), e.Dir, short(p))
		gs := &GenerateState{}
		var subEmbeds []*pipeline.Embedding
		if checkpointed {
			saved, err := resumeState(e.Dir, filepath.Join(e.Dir, DirState, FileCheckpoint), sub)
			if err != nil {
				return nil, fmt.Errorf("prompt %d: %w", i, err)
			}
			gs = saved
			if subEmbeds, err = readRunEmbeddings(e.Dir, sub.Generate); err != nil {
				return nil, fmt.Errorf("prompt %d: %w", i, err)
			}
		} else {
			e, err := pipeline.ReadEmbedding(pipeline.CachePath(g.TextCache, embeds[i].Key))
			if err != nil {
				return nil, fmt.Errorf("prompt %d: text cache: %w", i, err)
			}
			subEmbeds = []*pipeline.Embedding{e}
		}
		// A folder without a checkpoint holds nothing to continue from:
		// it is started over.
		r, err := generateRun(ctx, sub, in, subEmbeds, gs, checkpointed, true, hooks)
		if r != nil {
			res.Summary, res.Preview = r.Summary, r.Preview
			e.Video = r.Video
		}
		switch {
		case errors.Is(err, ErrInterrupted):
			e.State = "interrupted"
		case err != nil:
			return nil, fmt.Errorf("prompt %d (%s): %w", i, e.Dir, err)
		case checkpointed:
			e.State = "resumed"
		default:
			e.State = "generated"
		}
		if err := WriteJSON(filepath.Join(dir, FileBatchStatus), entries); err != nil {
			return nil, err
		}
		if e.State == "interrupted" {
			res.Batch, res.Interrupted = entries, true
			return res, ErrInterrupted
		}
	}
	if err := WriteJSON(filepath.Join(dir, FileBatchStatus), entries); err != nil {
		return nil, err
	}
	res.Batch = entries
	return res, nil
}

// openBatch makes or reopens a batch folder and returns its prompts: a new
// folder gets the configuration and a copy of the prompts file; an
// existing one must hold the same (or, with resume, is taken as it is);
// force starts it over.
func openBatch(dir string, gc config.GenerateConfig, resume, force bool) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, FileConfig)); err == nil {
		return nil, userf("%s is the run folder of a single generate run, not a batch (--prompts); pick another --name", dir)
	}
	y, err := config.MarshalGenerate(gc)
	if err != nil {
		return nil, err
	}
	have, herr := os.ReadFile(filepath.Join(dir, FileBatch))
	if resume {
		if herr != nil {
			return nil, userf("--resume: %s is not a batch folder (%v)", dir, herr)
		}
		return ReadPrompts(filepath.Join(dir, FileBatchPrompts))
	}
	data, err := os.ReadFile(gc.Generate.PromptsFile)
	if err != nil {
		return nil, userf("--prompts: %w", err)
	}
	if len(data) > MaxPromptsFile {
		return nil, userf("--prompts %s has %d bytes, more than the %d accepted", gc.Generate.PromptsFile, len(data), MaxPromptsFile)
	}
	prompts, err := parsePrompts(gc.Generate.PromptsFile, data)
	if err != nil {
		return nil, userf("--prompts: %w", err)
	}
	if herr == nil && !force {
		old, _ := os.ReadFile(filepath.Join(dir, FileBatchPrompts))
		if !bytes.Equal(have, y) || !bytes.Equal(old, data) {
			return nil, userf("batch folder %s holds a batch with another configuration or prompts file; continue it with --resume, start it over with --force, or pick another --name", dir)
		}
		return prompts, nil
	}
	if force {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if _, ok := batchIndex(e.Name()); ok || e.Name() == FileBatch || e.Name() == FileBatchPrompts || e.Name() == FileBatchStatus {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("batch folder: %w", err)
	}
	if err := WriteFile(filepath.Join(dir, FileBatchPrompts), data); err != nil {
		return nil, err
	}
	if err := WriteFile(filepath.Join(dir, FileBatch), y); err != nil {
		return nil, err
	}
	return prompts, nil
}

// batchIndex parses a prompt folder's name (NNNNN).
func batchIndex(name string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(name, "%05d", &i); err != nil || fmt.Sprintf("%05d", i) != name {
		return 0, false
	}
	return i, true
}

// short abbreviates a prompt for messages.
func short(s string) string {
	r := []rune(s)
	if len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}
