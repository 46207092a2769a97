package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/tokenizer"
	"github.com/densitykv/densitykv/video"
)

// ListOptions say how GenerateList runs a list.
type ListOptions struct {
	Shard runfolder.Shard
	// Resume takes the configuration and the prompts from the list folder
	// (the caller read the configuration from its FileBatch).
	Resume bool
	// Force starts the whole list over (refused for one shard of several).
	Force bool
	// DryRun reports what the shard would do, writing nothing.
	DryRun bool
	// Inputs are further files the list reads (the --config file), checked
	// against its outputs as GenerateInputs are (CheckListOutputs, and per
	// prompt CheckGenerateOutputs).
	Inputs []atomicfile.Input
}

// batchRunConfig is the configuration of prompt i's run: the list's, with
// the prompt's (extended) text and its folder.
func batchRunConfig(gc config.GenerateConfig, dir string, i int, text string) config.GenerateConfig {
	sub := gc
	g := &sub.Generate
	// What may differ between the list's workers stays out of the prompt's
	// run (its embedding comes from the list's text cache).
	g.PromptsFile, g.ExtendedPromptsFile, g.PromptIndices, g.TextCache = "", "", nil, ""
	g.SkipExisting = true
	g.Prompts = []config.PromptSpec{{Text: text}}
	sub.Run.Out, sub.Run.Name = dir, filepath.Base(runfolder.BatchDir(dir, i))
	return sub
}

// GenerateBatch runs a whole prompts file (GenerateList without shards).
func GenerateBatch(ctx context.Context, gc config.GenerateConfig, resume, force bool, hooks runfolder.Hooks) (*runfolder.Result, error) {
	return GenerateList(ctx, gc, ListOptions{Resume: resume, Force: force}, hooks)
}

// GenerateList makes one video per selected prompt of gc's prompts file
// (every line, or generate.prompt_indices) that belongs to the shard,
// each in its own run folder <out>/<name>/NNNNN/ with its video.mp4 (and
// the horizons' prefixes), every prompt with the run's seed (the seed is
// reset per prompt, as the paper's protocol does). Run again, it skips the
// prompts whose video is complete (generate.skip_existing; false makes
// them again), resumes the ones stopped with a checkpoint and starts the
// others. The prompts it makes are encoded first (the encoder then
// released; the embeddings wait in the text cache, read back one prompt at
// a time), the backbone and the VAE are loaded once. A stop (ctx) ends the
// current video at a block boundary and returns ErrInterrupted.
//
// The list folder is shared by the list's shards: the first to arrive
// writes the list's files, the others check that they run the same list
// (prompts and configuration) and are refused otherwise. The folder is
// marked as the list's (ListCommand; checkListFolder: another command's
// folder or a folder that is no run folder is refused unless o.Force),
// its outputs are checked against its inputs first (CheckListOutputs), and
// each prompt's folder is a generate run folder (runListPrompt).
func GenerateList(ctx context.Context, gc config.GenerateConfig, o ListOptions, hooks runfolder.Hooks) (*runfolder.Result, error) {
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	if o.Force && !o.Shard.Whole() {
		return nil, userf("--force starts the whole list %s over and would remove other shards' videos; remove the prompts' folders by hand, or run without --shard", dir)
	}
	if err := runfolder.CheckListOutputs(gc, o.Force, o.Inputs...); err != nil {
		return nil, err
	}
	list, err := readList(dir, gc, o.Resume)
	if err != nil {
		return nil, err
	}
	selected, err := list.Select(g.PromptIndices)
	if err != nil {
		return nil, userf("%w", err)
	}
	ident, man, err := listIdentity(gc, list, selected, o.Resume)
	if err != nil {
		return nil, err
	}
	mine := o.Shard.Take(selected)
	if !o.DryRun {
		if err := openList(dir, gc, list, ident, man, o.Force); err != nil {
			return nil, err
		}
	} else if err := checkListFolder(dir, list, ident, man, o.Force); err != nil {
		return nil, err
	}
	entries, encode, encodeAt, redo := planList(dir, g, list, mine, o.DryRun, hooks)
	res := &runfolder.Result{Batch: entries}
	if o.DryRun {
		return res, nil
	}
	in, err := checkGenerateInputs(g, hooks, len(encode) > 0)
	if err != nil {
		return nil, err
	}
	defer in.close()
	if len(encode) > 0 && g.TextCache == "" {
		return nil, userf("--prompts needs a text cache (generate.text_cache)")
	}
	embeds := make([]*Embedding, len(mine))
	es, err := encodePrompts(in, g, dedupe(encode), true, hooks) // values read back per prompt
	if err != nil {
		return nil, err
	}
	byText := map[string]*Embedding{}
	for _, e := range es {
		byText[e.Prompt] = e
	}
	for _, k := range encodeAt {
		embeds[k] = byText[list.Text(mine[k])]
	}
	todo := 0
	for _, e := range entries {
		if e.State == "pending" {
			todo++
		}
	}
	st := runfolder.ShardStatus{Shard: o.Shard.String(), Started: now(), Entries: entries}
	st.Host, _ = os.Hostname()
	statusPath := filepath.Join(dir, runfolder.DirShards, o.Shard.Name()+".json")
	writeStatus := func() error {
		st.Updated = now()
		return runfolder.WriteJSON(statusPath, st)
	}
	if err := os.MkdirAll(filepath.Join(dir, runfolder.DirShards), 0o755); err != nil {
		return nil, err
	}
	if err := writeStatus(); err != nil {
		return nil, err
	}
	if todo > 0 {
		if err := in.loadBackbone(g, gc.Config.Memory, gc.Policies[0], hooks); err != nil {
			return nil, err
		}
	}
	hooks.Infof("list %s: shard %s makes %d of its %d prompts (%d selected of %d lines)", dir, o.Shard, todo, len(mine), len(selected), len(list.Prompts))
	for k, i := range mine {
		e := &entries[k]
		if e.State != "pending" {
			continue
		}
		unlock, err := lockPrompt(dir, i)
		if err != nil {
			return nil, err
		}
		if unlock == nil {
			e.State = "busy"
			hooks.Warnf("prompt %d: another worker holds %s; skipped (is a shard of another --shard count running on this list?)", i, filepath.Join(runfolder.DirLocks, fmt.Sprintf("%05d.lock", i)))
			continue
		}
		e.Started = now()
		r, state, err := runListPrompt(ctx, gc, dir, i, list.Text(i), in, embeds[k], redo[k], o.Inputs, hooks, len(mine), k)
		unlock()
		e.Finished = now()
		if r != nil {
			res.Summary, res.Preview = r.Summary, r.Preview
			e.Video = r.Video
		}
		if err != nil && !errors.Is(err, runfolder.ErrInterrupted) {
			return nil, fmt.Errorf("prompt %d (%s): %w", i, e.Dir, err)
		}
		e.State = state
		if err := writeStatus(); err != nil {
			return nil, err
		}
		if state == "interrupted" {
			res.Interrupted = true
			return res, runfolder.ErrInterrupted
		}
	}
	st.Complete = true
	for _, e := range entries {
		if e.State == "busy" || e.State == "pending" {
			st.Complete = false
		}
	}
	if err := writeStatus(); err != nil {
		return nil, err
	}
	return res, nil
}

// planList says what each prompt of mine (indices into list) needs:
// nothing (complete or blank), resume, a new run, or (skip_existing false)
// a run again (redo, by place in mine). encode are the prompts to encode,
// encodeAt their places in mine; a dry run's entries say what it would do.
func planList(dir string, g config.GenerateSection, list *runfolder.PromptList, mine []int, dryRun bool, hooks runfolder.Hooks) (entries []runfolder.BatchEntry, encode []config.PromptSpec, encodeAt []int, redo map[int]bool) {
	entries = make([]runfolder.BatchEntry, len(mine))
	redo = map[int]bool{}
	for k, i := range mine {
		sd := runfolder.BatchDir(dir, i)
		e := &entries[k]
		*e = runfolder.BatchEntry{Index: i, Prompt: list.Prompts[i], Dir: sd, State: "pending"}
		if list.Blank(i) {
			e.State = "blank"
			hooks.Warnf("prompt %d (line %d of %s) is blank: no video (the authors' TextDataset would make one from the empty prompt)", i, i+1, list.Path)
			continue
		}
		if video, ok := completeRun(sd, g); ok && g.SkipExisting {
			e.State, e.Video = "done", video
			continue
		} else if ok || !g.SkipExisting {
			redo[k] = true
		}
		checkpointed, _ := runfolder.Status(sd)
		switch {
		case dryRun && redo[k]:
			e.State = "to redo"
		case dryRun && checkpointed:
			e.State = "to resume"
		case dryRun:
			e.State = "to generate"
		}
		if redo[k] || !checkpointed {
			encode, encodeAt = append(encode, config.PromptSpec{Text: list.Text(i)}), append(encodeAt, k)
		}
	}
	return entries, encode, encodeAt, redo
}

// runListPrompt makes prompt i of a list (resuming its checkpoint unless
// redo) and returns its result and state. Its folder is a generate run
// folder under the prompt's lock: its outputs are checked against the
// inputs (extra: the --config file) as a single run's are; resumed, it
// must be a generate run's and loses the temporary files of writes a
// killed worker left; made anew, it is claimed as a generate run, its own
// earlier files replaced (a list's prompt is made again from the start
// when nothing in its folder can be continued).
func runListPrompt(ctx context.Context, gc config.GenerateConfig, dir string, i int, text string, in *genInputs, emb *Embedding, redo bool, extra []atomicfile.Input, hooks runfolder.Hooks, n, k int) (*runfolder.Result, string, error) {
	sd := runfolder.BatchDir(dir, i)
	sub := batchRunConfig(gc, dir, i, text)
	if err := runfolder.CheckGenerateOutputs(sub, extra...); err != nil {
		return nil, "", err
	}
	checkpointed, _ := runfolder.Status(sd)
	resume := checkpointed && !redo
	hooks.Infof("prompt %d (%d of %d in this shard, %s): %q", i, k+1, n, sd, short(text))
	gs := &runfolder.GenerateState{}
	var subEmbeds []*Embedding
	if resume {
		if err := runfolder.CheckOwner(sd, "generate"); err != nil {
			return nil, "", err
		}
		if err := atomicfile.CleanTemps(sd); err != nil {
			return nil, "", fmt.Errorf("--resume: %w", err)
		}
		saved, err := resumeState(sd, filepath.Join(sd, runfolder.DirState, runfolder.FileCheckpoint), sub, hooks)
		if err != nil {
			return nil, "", err
		}
		gs = saved
		if subEmbeds, err = readRunEmbeddings(sd, sub.Generate); err != nil {
			return nil, "", err
		}
	} else {
		e, err := ReadEmbedding(CachePath(gc.Generate.TextCache, emb.Key))
		if err != nil {
			return nil, "", fmt.Errorf("text cache: %w", err)
		}
		subEmbeds = []*Embedding{e}
	}
	// A folder without a checkpoint holds nothing to continue from: it is
	// started over (Claim with overwriteOwn), as is one made again; a
	// folder of another command is refused (--force starts the whole list
	// over).
	r, err := generateRun(ctx, sub, in, subEmbeds, gs, resume, false, true, hooks)
	switch {
	case errors.Is(err, runfolder.ErrInterrupted):
		return r, "interrupted", err
	case err != nil:
		return nil, "", err
	case resume:
		return r, "resumed", nil
	}
	return r, "generated", nil
}

// completeRun reports whether the run folder sd holds a complete video of
// g: a generate run whose final checkpoint, written after every result
// file, agrees with its summary (Inspect), and with a VAE the video
// (video.mp4, or the PNG frames) and every horizon's video are there. It
// returns the video's path.
func completeRun(sd string, g config.GenerateSection) (string, bool) {
	if s := runfolder.Inspect(sd); !s.Complete || s.Command != "generate" {
		return "", false
	}
	if g.VAE == "" {
		return "", true
	}
	v := filepath.Join(sd, video.FileVideo)
	if _, err := os.Stat(v); err != nil {
		if _, err := os.Stat(filepath.Join(sd, video.DirFrames)); err == nil {
			return filepath.Join(sd, video.DirFrames), true // made without ffmpeg
		}
		return "", false
	}
	for _, h := range g.Horizons {
		if _, err := os.Stat(filepath.Join(sd, config.HorizonName(h))); err != nil {
			return "", false
		}
	}
	return v, true
}

// readList reads the list's prompts: from the list folder's copies with
// resume, else from the configuration's files.
func readList(dir string, gc config.GenerateConfig, resume bool) (*runfolder.PromptList, error) {
	g := gc.Generate
	if resume {
		ext := ""
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileBatchExtended)); err == nil {
			ext = filepath.Join(dir, runfolder.FileBatchExtended)
		}
		l, err := runfolder.ReadPromptList(filepath.Join(dir, runfolder.FileBatchPrompts), ext)
		if err != nil {
			return nil, userf("--resume: %s is not a prompt-list folder: %w", dir, err)
		}
		return l, nil
	}
	l, err := runfolder.ReadPromptList(g.PromptsFile, g.ExtendedPromptsFile)
	if err != nil {
		flags := "--prompts"
		if g.ExtendedPromptsFile != "" {
			flags = "--prompts/--extended-prompts"
		}
		return nil, userf("%s: %w", flags, err)
	}
	return l, nil
}

// listVersion is the version of list.json: 2 identifies the input files
// by content (Inputs) and hashes the configuration without their paths
// (listKey); version 1 (earlier lists) hashed FileBatch, paths included.
const listVersion = 2

// listIdentity is the list's FileBatch bytes and its manifest. With
// resume, an input that is not where the configuration says is refused
// with the flag that gives its new place.
func listIdentity(gc config.GenerateConfig, l *runfolder.PromptList, selected []int, resume bool) ([]byte, runfolder.ListManifest, error) {
	y, err := config.MarshalGenerate(config.ListIdentity(gc))
	if err != nil {
		return nil, runfolder.ListManifest{}, err
	}
	key, err := listKey(gc)
	if err != nil {
		return nil, runfolder.ListManifest{}, err
	}
	ins, err := listInputs(gc.Generate, resume)
	if err != nil {
		return nil, runfolder.ListManifest{}, err
	}
	man := runfolder.ListManifest{Version: listVersion, PromptsSHA256: l.SHA256, ExtendedSHA256: l.ExtendedSHA256, Prompts: len(l.Prompts),
		Selected: selected, ConfigSHA256: filehash.Bytes(key), Inputs: ins}
	return y, man, nil
}

// listKey is the configuration every shard of a list shares
// (config.ListIdentity) without the input files' paths: a worker may
// read them from elsewhere (another mount point of the same volume);
// listInputs identifies them by content.
func listKey(gc config.GenerateConfig) ([]byte, error) {
	id := config.ListIdentity(gc)
	g := &id.Generate
	g.Checkpoint, g.LoRA, g.VAE, g.RAGAE, g.TextEncoder, g.Tokenizer = "", "", "", "", "", ""
	g.Texts = slices.Clone(g.Texts)
	for i := range g.Texts {
		g.Texts[i].Path = ""
	}
	return config.MarshalGenerate(id)
}

// listInputs fingerprints the files every prompt of a list reads: the
// checkpoint, LoRA, text files, VAE, LongLive-RAG's autoencoder, the text
// encoder and the tokenizer (its spiece.model).
func listInputs(g config.GenerateSection, resume bool) ([]runfolder.FileFingerprint, error) {
	type in struct{ role, flag, path string }
	ins := []in{{"checkpoint", "--checkpoint", g.Checkpoint}, {"lora", "--lora", g.LoRA}}
	for _, t := range g.Texts {
		ins = append(ins, in{"text", "--text", t.Path})
	}
	tok := g.Tokenizer
	if st, err := os.Stat(tok); err == nil && st.IsDir() {
		tok = filepath.Join(tok, tokenizer.ModelFile)
	}
	ins = append(ins, in{"vae", "--vae", g.VAE}, in{"rag-ae", "--rag-ae", g.RAGAE}, in{"text-encoder", "--text-encoder", g.TextEncoder}, in{"tokenizer", "--tokenizer", tok}, in{"noise", "--noise", g.Noise})
	var out []runfolder.FileFingerprint
	for _, i := range ins {
		if i.path == "" {
			continue
		}
		fp, err := runfolder.Fingerprint(i.role, i.path)
		switch {
		case err != nil && resume && errors.Is(err, os.ErrNotExist):
			return nil, userf("--resume: %s %s: %w (if it moved since the list began, give its new place: --resume %s FILE; it is checked to be the same file by its content)", i.flag, i.path, err, i.flag)
		case err != nil:
			return nil, userf("%s %s: %w", i.flag, i.path, err)
		}
		out = append(out, fp)
	}
	return out, nil
}

// openList makes or joins a list folder, after checking it
// (checkListFolder): the folder's marker names the list (ListCommand),
// and each shared file is created if absent (atomically, so that shards
// starting together agree on one) and else compared with this worker's.
// force (a whole run) starts the list over: the list's files and its
// prompts' folders are removed, and a folder of another command taken
// over (its run files removed, as Claim does).
func openList(dir string, gc config.GenerateConfig, l *runfolder.PromptList, ident []byte, man runfolder.ListManifest, force bool) error {
	if err := checkListFolder(dir, l, ident, man, force); err != nil {
		return err
	}
	prompts, err := runfolder.ReadPromptsFile(l.Path, "prompts file")
	if err != nil {
		return userf("--prompts: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{{runfolder.FileBatchPrompts, prompts}}
	if l.Extended != nil {
		ext, err := runfolder.ReadPromptsFile(l.ExtendedPath, "extended prompts file")
		if err != nil {
			return userf("--extended-prompts: %w", err)
		}
		files = append(files, struct {
			name string
			data []byte
		}{runfolder.FileBatchExtended, ext})
	}
	mj, err := jsonBytes(man)
	if err != nil {
		return err
	}
	owner, _ := json.Marshal(runfolder.Owner{Format: runfolder.OwnerFormat, Command: runfolder.ListCommand})
	files = append(files, struct {
		name string
		data []byte
	}{runfolder.FileBatch, ident}, struct {
		name string
		data []byte
	}{runfolder.FileList, mj})
	if force {
		if err := atomicfile.CleanTemps(dir); err != nil {
			return fmt.Errorf("list folder: %w", err)
		}
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileConfig)); err == nil {
			for _, f := range runfolder.RunFiles {
				if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
					return err
				}
			}
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			_, ok := runfolder.PromptFolderIndex(e.Name())
			switch e.Name() {
			case runfolder.FileOwner, runfolder.FileBatch, runfolder.FileBatchPrompts, runfolder.FileBatchExtended, runfolder.FileList, runfolder.DirShards, runfolder.DirLocks, "batch.json":
				ok = true
			}
			if ok {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("list folder: %w", err)
	}
	// The marker first: a shard arriving meanwhile sees the list's folder.
	if err := createOnce(filepath.Join(dir, runfolder.FileOwner), append(owner, '\n')); err != nil {
		return err
	}
	for _, f := range files {
		if err := createOnce(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return checkList(dir, l, ident, man)
}

// checkListFolder checks, writing nothing, that dir may hold this list:
// a missing folder, the list's own folder (marked ListCommand, or made
// before markers: its list.json) holding the same list (checkList), or
// with force any folder but a file. Refused without force: another
// command's run folder (its marker, or before markers its summary.json
// or config), a damaged marker, a batch folder of the first --prompts
// layout, and a non-empty folder that is no run folder. Shards of one
// list are never refused by one another's files: a shard that finds the
// marker but not yet list.json (another shard is creating the list's
// files) passes, and openList compares once its own are in place.
func checkListFolder(dir string, l *runfolder.PromptList, ident []byte, man runfolder.ListManifest, force bool) error {
	owner, err := runfolder.ReadOwner(dir)
	if err != nil && !force {
		return userf("list folder %s: %v; start the list over with --force (without --shard) or pick another --name", dir, err)
	}
	if hookAfterOwnerRead != nil {
		hookAfterOwnerRead(dir)
	}
	st, serr := os.Stat(dir)
	switch {
	case errors.Is(serr, os.ErrNotExist):
		return nil
	case serr != nil:
		return fmt.Errorf("list folder: %w", serr)
	case !st.IsDir():
		return userf("list folder %s exists and is not a folder; pick another --name or --out", dir)
	case force:
		return nil
	}
	if owner == "" {
		owner = runfolder.LegacyOwner(dir)
	}
	_, lerr := os.Stat(filepath.Join(dir, runfolder.FileList))
	hasList := lerr == nil
	switch {
	case owner == runfolder.ListCommand:
		if !hasList {
			return nil
		}
	case owner != "":
		return userf("%s is the run folder of a %s run, not a prompt list (--prompts); pick another --name, or overwrite it with --force", dir, owner)
	case hasList:
		// A list made before markers: joined (openList marks it).
	default:
		if err := checkLegacyBatch(dir); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileBatch)); err == nil {
			return checkList(dir, l, ident, man) // a list from before list.json: refused there
		}
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileConfig)); err == nil {
			return userf("%s is the run folder of an earlier run (made before run folders recorded their command), not a prompt list (--prompts); pick another --name, or overwrite it with --force", dir)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("list folder: %w", err)
		}
		n := 0
		for _, e := range ents {
			if !atomicfile.IsTemp(e.Name()) { // a shard's marker being created
				n++
			}
		}
		if n > 0 {
			// Another shard may have marked the folder since the marker
			// was read above: what was counted may be its marker.
			if o, err := runfolder.ReadOwner(dir); err == nil && o == runfolder.ListCommand {
				return checkListFolder(dir, l, ident, man, force)
			}
			return userf("%s exists and is not a densitykv prompt list (%d entries); pick another --name or --out, or write the list's files into it with --force", dir, n)
		}
		return nil
	}
	if err := checkLegacyBatch(dir); err != nil {
		return err
	}
	return checkList(dir, l, ident, man)
}

// hookAfterOwnerRead, when set (tests), runs in checkListFolder between
// reading the folder's marker and looking at its files: where another
// shard's marker can appear.
var hookAfterOwnerRead func(dir string)

// checkList compares an existing list folder's identity with this
// worker's: the prompts, the configuration and the selection. A folder
// without a list (new) passes.
func checkList(dir string, l *runfolder.PromptList, ident []byte, man runfolder.ListManifest) error {
	var have runfolder.ListManifest
	err := runfolder.ReadJSON(filepath.Join(dir, runfolder.FileList), &have)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileBatch)); err == nil {
			return userf("%s holds a prompt list from an older densitykv (no %s); continue it with that version or pick another --name", dir, runfolder.FileList)
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case have.PromptsSHA256 != man.PromptsSHA256 || have.Prompts != man.Prompts:
		return userf("list folder %s was made from another prompts file (%d lines, SHA-256 %.12s…; %s has %d lines, SHA-256 %.12s…); every shard of a list reads the same file: pick another --name for this one",
			dir, have.Prompts, have.PromptsSHA256, l.Path, man.Prompts, man.PromptsSHA256)
	case have.ExtendedSHA256 != man.ExtendedSHA256:
		return userf("list folder %s was made with other extended prompts (SHA-256 %q, this run %q); pick another --name", dir, have.ExtendedSHA256, man.ExtendedSHA256)
	case have.Version < listVersion && have.ConfigSHA256 != filehash.Bytes(ident):
		// A list of an earlier version: its configuration with the paths.
		old, _ := runfolder.ReadRecord(filepath.Join(dir, runfolder.FileBatch))
		return userf("list folder %s was made with another configuration (%s%s); every shard of a list runs the same configuration: pick another --name, or continue the list with --resume",
			dir, runfolder.FileBatch, firstDiff(old, ident))
	case have.Version >= listVersion && have.ConfigSHA256 != man.ConfigSHA256:
		old, _ := runfolder.ReadRecord(filepath.Join(dir, runfolder.FileBatch))
		return userf("list folder %s was made with another configuration (%s%s); every shard of a list runs the same configuration: pick another --name, or continue the list with --resume",
			dir, runfolder.FileBatch, firstDiff(keyOf(old), keyOf(ident)))
	case fmt.Sprint(have.Selected) != fmt.Sprint(man.Selected):
		return userf("list folder %s makes prompts %v, this run %v (generate.prompt_indices); pick another --name", dir, have.Selected, man.Selected)
	}
	if have.Version >= listVersion {
		if err := runfolder.SameListInputs(have.Inputs, man.Inputs); err != nil {
			return userf("list folder %s was made with other input files: %w; every shard of a list reads the same files (wherever each worker sees them): pick another --name", dir, err)
		}
	}
	return nil
}

// keyOf is the configuration of a FileBatch without the input files'
// paths (listKey), for messages; b itself when it does not decode.
func keyOf(b []byte) []byte {
	var gc config.GenerateConfig
	if _, err := config.Decode(b, &gc, false); err != nil {
		return b
	}
	k, err := listKey(gc)
	if err != nil {
		return b
	}
	return k
}

// checkLegacyBatch refuses a batch folder of the first --prompts layout
// (blank lines skipped, so its folder numbers are not line indices).
func checkLegacyBatch(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "batch.json")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, runfolder.FileList)); err != nil {
			return userf("%s holds a batch from an older densitykv whose folders count non-blank lines; start it over with --force or pick another --name", dir)
		}
	}
	return nil
}

// firstDiff describes the first line where two configurations differ.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf(", line %d: the folder's %q, this run's %q", i+1, strings.TrimSpace(x), strings.TrimSpace(y))
		}
	}
	return ""
}

// createOnce writes data to path if no file is there (atomically: a
// temporary file hard-linked into place, so that of two workers creating
// it at once one wins and the other sees its file), and otherwise leaves
// the file as it is (checkList compares it).
func createOnce(path string, data []byte) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("list folder: %w", err)
	}
	return nil
}

// lockPrompt takes prompt i's lock file without waiting: it returns the
// unlock function, or nil when another process holds the lock.
func lockPrompt(dir string, i int) (func(), error) {
	if err := os.MkdirAll(filepath.Join(dir, runfolder.DirLocks), 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, runfolder.DirLocks, fmt.Sprintf("%05d.lock", i))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// dedupe drops repeated prompt texts (one encoding each).
func dedupe(ps []config.PromptSpec) []config.PromptSpec {
	seen := map[string]bool{}
	var out []config.PromptSpec
	for _, p := range ps {
		if !seen[p.Text] {
			seen[p.Text] = true
			out = append(out, p)
		}
	}
	return out
}

func jsonBytes(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }
