package runfolder

import (
	"path/filepath"
	"strings"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
)

// GenerateInputs lists the files a generate run reads (checkpoint, LoRA,
// texts), with the flags that name them.
func GenerateInputs(g config.GenerateSection) []atomicfile.Input {
	ins := []atomicfile.Input{{Role: "--checkpoint", Path: g.Checkpoint}}
	if g.LoRA != "" {
		ins = append(ins, atomicfile.Input{Role: "--lora", Path: g.LoRA})
	}
	for _, t := range g.Texts {
		ins = append(ins, atomicfile.Input{Role: "--text", Path: t.Path})
	}
	for _, f := range []atomicfile.Input{{Role: "--text-encoder", Path: g.TextEncoder}, {Role: "--tokenizer", Path: g.Tokenizer}, {Role: "--vae", Path: g.VAE}, {Role: "--prompts", Path: g.PromptsFile}, {Role: "--rag-ae", Path: g.RAGAE}, {Role: "--noise", Path: g.Noise}} {
		if f.Path != "" {
			ins = append(ins, f)
		}
	}
	return ins
}

// CheckGenerateOutputs refuses, before anything is written, a generate
// run whose outputs (the run folder's files, the horizons' videos,
// --record-stream) would overwrite one of its inputs (GenerateInputs and
// extra, e.g. the --config file) or the record stream's folder is
// missing. Errors are UserErrors.
func CheckGenerateOutputs(gc config.GenerateConfig, extra ...atomicfile.Input) error {
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	ins := append(GenerateInputs(g), extra...)
	outs := Outputs(dir)
	for _, h := range g.Horizons {
		outs = append(outs, atomicfile.Output{Role: "the run folder's", Path: filepath.Join(dir, config.HorizonName(h))})
	}
	if g.RecordStream != "" {
		// Not one of the run folder's own files, not an input, and its
		// folder exists.
		for _, o := range outs {
			if atomicfile.Aliases(o, g.RecordStream) {
				return userf("--record-stream %s is %s %s: the run writes it; record the stream elsewhere", g.RecordStream, o.Role, o.Path)
			}
		}
		outs = append(outs, atomicfile.Output{Role: "--record-stream", Path: g.RecordStream})
	}
	if g.SaveNoise != "" {
		for _, o := range outs {
			if atomicfile.Aliases(o, g.SaveNoise) {
				return userf("--save-noise %s is %s %s: the run writes it; save the noise elsewhere", g.SaveNoise, o.Role, o.Path)
			}
		}
		outs = append(outs, atomicfile.Output{Role: "--save-noise", Path: g.SaveNoise})
	}
	if err := atomicfile.CheckOutputs(outs, ins); err != nil {
		return &UserError{err}
	}
	for _, o := range [][2]string{{"--record-stream", g.RecordStream}, {"--save-noise", g.SaveNoise}} {
		if o[1] != "" {
			if err := atomicfile.CheckWritable(o[0], o[1]); err != nil {
				return &UserError{err}
			}
		}
	}
	return nil
}

// CheckSimulateOutputs refuses a simulate, demo or eval run whose folder
// would overwrite one of its inputs (the stream file, the --config file).
func CheckSimulateOutputs(cfg config.Config, ins ...atomicfile.Input) error {
	if cfg.Stream.Kind == "file" {
		ins = append(ins, atomicfile.Input{Role: "--stream-file", Path: cfg.Stream.Path})
	}
	if err := atomicfile.CheckOutputs(Outputs(filepath.Join(cfg.Run.Out, cfg.Run.Name)), ins); err != nil {
		return &UserError{err}
	}
	return nil
}

// CheckListOutputs refuses, before anything is written, a prompt list
// (generate --prompts) whose outputs would overwrite one of its inputs
// (GenerateInputs, the extended prompts file, and extra, e.g. the --config
// file): the shards' status files and the prompt locks, the list's shared
// files when force starts the list over (else they are written once and
// never replaced: a list may read its own prompts.txt), and the run files
// of every prompt folder (NNNNN/) an input lies in. Each prompt's run is
// checked again before it starts (CheckGenerateOutputs), as a single run
// is. --record-stream is refused: every prompt's run would write it.
// Errors are UserErrors.
func CheckListOutputs(gc config.GenerateConfig, force bool, extra ...atomicfile.Input) error {
	g := gc.Generate
	if g.RecordStream != "" {
		return userf("--record-stream %s records one run's stream; a prompt list (--prompts) makes one run per prompt: record a single run", g.RecordStream)
	}
	if g.SaveNoise != "" {
		return userf("--save-noise %s saves one run's noise; a prompt list (--prompts) makes one run per prompt, all with the same noise: save it from a single run", g.SaveNoise)
	}
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	ins := append(GenerateInputs(g), extra...)
	if g.ExtendedPromptsFile != "" {
		ins = append(ins, atomicfile.Input{Role: "--extended-prompts", Path: g.ExtendedPromptsFile})
	}
	outs := []atomicfile.Output{
		{Role: "the list folder's", Path: filepath.Join(dir, DirShards), Dir: true},
		{Role: "the list folder's", Path: filepath.Join(dir, DirLocks), Dir: true},
	}
	if force {
		for _, f := range []string{FileOwner, FileBatch, FileBatchPrompts, FileBatchExtended, FileList} {
			outs = append(outs, atomicfile.Output{Role: "the list folder's", Path: filepath.Join(dir, f)})
		}
	}
	seen := map[int]bool{}
	for _, in := range ins {
		for _, i := range promptFoldersOf(dir, in.Path) {
			if !seen[i] {
				seen[i] = true
				outs = append(outs, Outputs(BatchDir(dir, i))...)
			}
		}
	}
	if err := atomicfile.CheckOutputs(outs, ins); err != nil {
		return &UserError{err}
	}
	return nil
}

// promptFoldersOf returns the prompt folders of the list folder dir
// (NNNNN/, by index) that the file at path lies in, as spelled or through
// symbolic links.
func promptFoldersOf(dir, path string) []int {
	if path == "" {
		return nil
	}
	var out []int
	add := func(d, p string) {
		rel, err := filepath.Rel(d, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return
		}
		first, _, _ := strings.Cut(rel, string(filepath.Separator))
		if i, ok := PromptFolderIndex(first); ok {
			out = append(out, i)
		}
	}
	ad, err1 := filepath.Abs(dir)
	ap, err2 := filepath.Abs(path)
	if err1 == nil && err2 == nil {
		add(ad, ap)
	}
	if rd, err := filepath.EvalSymlinks(dir); err == nil {
		if rp, err := filepath.EvalSymlinks(path); err == nil {
			add(rd, rp)
		}
	}
	return out
}
