package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/schedule"
	"github.com/densitykv/densitykv/video"
	"github.com/densitykv/densitykv/wan/arch"
)

// GenerateConfig is config.resolved.yaml of a generate run: the run,
// policies and memory of Config (the stream follows the model: kind wan, 4
// latent frames/s) and the generate section.
type GenerateConfig struct {
	Config   `yaml:",inline"`
	Generate GenerateSection `yaml:"generate"`
	// Warnings are choices Resolve made that a user may not expect (not
	// part of the file).
	Warnings []string `yaml:"-"`
	// loraAlphaGiven records that ApplyPreset found the LoRA alpha given
	// by a flag or the file.
	loraAlphaGiven bool
}

// GenerateSection is the generate-specific part of a generate run's
// configuration.
type GenerateSection struct {
	// Backbone applies the preset of a released backbone (Self-Forcing,
	// Causal-Forcing, LongLive): entry, frames per block, sink, cache size
	// and schedule as the authors run it (see Backbone.Preset); explicit
	// keys and flags override it.
	Backbone Backbone `yaml:"backbone"`
	// ModelDir is a diffusers model folder (model_index.json; e.g.
	// Wan-AI/Wan2.1-T2V-1.3B-Diffusers) that Checkpoint, VAE,
	// TextEncoder and Tokenizer come from when not given: its
	// transformer/, vae/, text_encoder/ and tokenizer/ folders (Resolve
	// records them in those keys).
	ModelDir   string `yaml:"model_dir,omitempty"`
	Checkpoint string `yaml:"checkpoint"`
	// Entry is the PyTorch checkpoint entry of the generator weights
	// (generator, generator_ema, …). Empty asks for the automatic choice
	// (checkpoint.AutoEntries); the resolved configuration records the
	// entry actually loaded ("" for a safetensors file).
	Entry     string  `yaml:"entry"`
	LoRA      string  `yaml:"lora"`
	LoRAAlpha float64 `yaml:"lora_alpha"`
	Arch      string  `yaml:"arch"` // 1.3b or tiny
	// Precision is the models' precision (DiT, text encoder and VAE), fp32
	// or bf16. Left out, it follows the architecture: bf16 for the real
	// model (1.3b: half the weight memory, the authors' GPU arithmetic),
	// fp32 for tiny (the golden test model, whose references are float64).
	// bf16-fast is bf16 with the linears of the DiT and the text encoder
	// on a GPU's tensor cores (compute.Fast: not the CPU's bits; the VAE
	// stays exact bf16): it needs generate.device on such a GPU and is
	// refused on the CPU.
	Precision compute.Precision `yaml:"precision"`
	// Device is where the models compute — the text encoder, the DiT with
	// its attention history, DensityKV's banks and the VAE: cpu (the
	// default), vulkan, vulkan:N or auto (package device). Exact mode
	// gives the CPU's bits on every device, so it is no part of a run's
	// identity: --resume may continue a run on another device. (In fast
	// mode, bf16-fast, the bits depend on the device: a run resumed
	// elsewhere continues within fast mode's tolerance, not bit for bit.)
	Device device.Spec `yaml:"device"`
	Model  arch.Config `yaml:"model"`
	Texts  []TextSpec  `yaml:"texts"`
	// Prompts are prompt texts (--prompt TEXT[@BLOCK]), encoded by
	// TextEncoder with Tokenizer; together with Texts they form the
	// prompt schedule.
	Prompts []PromptSpec `yaml:"prompts"`
	// PromptsFile (--prompts) makes one video per line of the file, each
	// in its own run folder <out>/<name>/NNNNN.
	PromptsFile string `yaml:"prompts_file,omitempty"`
	// ExtendedPromptsFile holds, line for line, the text encoded for each
	// prompt of PromptsFile (the authors' TextDataset extended prompts).
	ExtendedPromptsFile string `yaml:"extended_prompts_file,omitempty"`
	// PromptIndices, when set, are the zero-based line indices of
	// PromptsFile to make (e.g. the paper's 16-prompt ablation subset);
	// empty makes every line.
	PromptIndices []int `yaml:"prompt_indices,omitempty,flow"`
	// SkipExisting skips the prompts of a list whose video is complete
	// (the authors' skip_existing); false makes them again.
	SkipExisting bool `yaml:"skip_existing"`
	// Horizons are video lengths in seconds (e.g. 30, 60, 120) whose
	// videos, video_30s.mp4 …, are written as exact prefixes of the one
	// rollout: the decoded frames of its first HorizonBlocks blocks.
	Horizons []float64 `yaml:"horizons,omitempty,flow"`
	// TextEncoder is the umT5 encoder checkpoint, Tokenizer its
	// spiece.model (or a folder holding it); TextCache keeps computed
	// embeddings (default <out>/text_cache).
	TextEncoder string `yaml:"text_encoder"`
	Tokenizer   string `yaml:"tokenizer"`
	TextCache   string `yaml:"text_cache"`
	// VAE is the Wan VAE checkpoint that decodes each finished block into
	// video (empty: latents only); VAEMean and VAEStd override Wan2.1's
	// 16 latent statistics (both or neither).
	VAE     string    `yaml:"vae"`
	VAEMean []float32 `yaml:"vae_mean,omitempty,flow"`
	VAEStd  []float32 `yaml:"vae_std,omitempty,flow"`
	// Video is the mp4 encode of the decoded frames (--fps, --crf).
	Video VideoEncode `yaml:"video"`
	// LatentHeight and LatentWidth are the VAE latent size (60×104 for
	// 480×832 video); tokens are 2×2 patches of it.
	LatentHeight int `yaml:"latent_height"`
	LatentWidth  int `yaml:"latent_width"`
	// FramesPerBlock is the block length in latent frames (3; LongLive's
	// own release uses 6). The memory layout follows it.
	FramesPerBlock int `yaml:"frames_per_block"`
	Blocks         int `yaml:"blocks"`
	// Schedule is the denoising schedule (steps, first-chunk steps, warp,
	// shift, update).
	Schedule ScheduleConfig `yaml:"schedule"`
	// TraceStep is the denoising step whose attention is traced (3 = the
	// 4th pass, the authors' denoise call 3); -1 disables the trace. Left
	// unset it follows the schedule (DefaultTraceStep): the authors' call 3,
	// or the last step of a schedule with fewer than four.
	TraceStep int `yaml:"trace_step"`
	// TraceLayers are the layers traced per head ([1, H, F, F] per layer,
	// the authors' temporal_attention_trace shape, in
	// attention_trace_layers.safetensors): all, none or a list such as
	// 0,15,29. They cost 8·H·F² bytes each (F latent frames).
	TraceLayers string `yaml:"trace_layers"`
	// LineageLayers and LineageHeads are the DensityKV banks whose every
	// admission and eviction density_kv_lineage.jsonl records (the
	// authors' lineage_trace: layers (0,) and heads (0,) by default): all,
	// none or lists.
	LineageLayers string `yaml:"lineage_layers"`
	LineageHeads  string `yaml:"lineage_heads"`
	// SourceIDs is the provenance id convention of provenance.csv and the
	// lineage: global or authors.
	SourceIDs SourceIDs `yaml:"source_ids"`
	// Recache is what a prompt switch does to the cached K/V: none (the
	// DensityKV authors') or longlive (re-run the most recent frames).
	Recache Recache `yaml:"recache"`
	Preview bool    `yaml:"preview"`
	// RecordStream, when set, records the clean passes' q/k/v of every layer
	// into a stream file (package synth's format) that simulate and eval
	// replay with --stream file.
	RecordStream string `yaml:"record_stream"`
	// StopOnDrift, when set, stops the run cleanly (a resume checkpoint,
	// as with Ctrl-C) after the first block whose drift record (package
	// drift, drift.jsonl) trips one of its rules: STAT>VALUE or
	// STAT<VALUE, comma-separated (e.g. seam_flicker>3). A rule that has
	// stopped the run does not stop it again after --resume.
	StopOnDrift string `yaml:"stop_on_drift,omitempty"`
	// Noise, when set, is a noise file (package rollout's format: the
	// initial noise of every frame and the re-noise draws of every block
	// and step, a safetensors file or the authors' torch.save) whose draws
	// the rollout uses instead of the seed's. SaveNoise, when set, is
	// where the run writes every draw it used, in that format, when it
	// completes.
	Noise     string `yaml:"noise,omitempty"`
	SaveNoise string `yaml:"save_noise,omitempty"`
	// RAGAE is the DensityKV authors' LongLive-RAG retrieval autoencoder
	// (ae_latent_mem.pt, package ragae). Set, LongLive-RAG describes
	// frames with it (memory.longlive_rag.descriptor ae, the paper's
	// 1,024-d descriptors); unset, with the latent mean (their avg_pool
	// fallback).
	RAGAE string `yaml:"rag_ae"`
}

// VideoEncode is the mp4 encode of a generate run's video (package
// video): FPS frames per second, exactly (frame i at i/FPS s; it sets the
// playback speed, not the length: a block is 4·frames_per_block frames
// whatever the rate), and x264's constant rate factor CRF (0..51, lower is
// better and larger). The authors' are 16 and 18 (video.DefaultFPS,
// video.DefaultCRF).
type VideoEncode struct {
	FPS int `yaml:"fps"`
	CRF int `yaml:"crf"`
}

// Check checks the rate and the crf (their flags named in errors).
func (v VideoEncode) Check() error {
	if v.FPS < 1 || v.FPS > video.MaxFPS {
		return fmt.Errorf("--fps (generate.video.fps) is %d, want 1..%d video frames per second", v.FPS, video.MaxFPS)
	}
	if v.CRF < 0 || v.CRF > video.MaxCRF {
		return fmt.Errorf("--crf (generate.video.crf) is %d, want 0..%d (x264's constant rate factor)", v.CRF, video.MaxCRF)
	}
	return nil
}

// TextSpec is one prompt: a text-encoder output file used from FromBlock on.
type TextSpec struct {
	Path      string `yaml:"path"`
	Tensor    string `yaml:"tensor"`
	FromBlock int    `yaml:"from_block"`
}

// PromptSpec is one prompt text used from FromBlock on.
type PromptSpec struct {
	Text      string `yaml:"text"`
	FromBlock int    `yaml:"from_block"`
}

// FramesPerBlock is the default block length of a generate run in latent
// frames (generate.frames_per_block).
const FramesPerBlock = 3

// BlockFrames returns the block length in latent frames (FramesPerBlock
// when unset).
func (g GenerateSection) BlockFrames() int {
	if g.FramesPerBlock <= 0 {
		return FramesPerBlock
	}
	return g.FramesPerBlock
}

// DefaultPrecision is the precision of an architecture when none is
// given: fp32 for tiny (the golden test model), bf16 otherwise.
func DefaultPrecision(arch string) gemm.Precision {
	if arch == "tiny" {
		return gemm.F32
	}
	return gemm.BF16
}

// Archs are the model architectures generate knows.
var Archs = map[string]func() arch.Config{"1.3b": arch.DefaultConfig, "tiny": arch.TinyConfig}

// GenerateDefaults is a generate run's configuration before the --config
// file and the flags: the 1.3B model at 480×832, 5 s, DensityKV with the
// paper's memory settings (the layout follows the model and latent size).
func GenerateDefaults() GenerateConfig {
	return GenerateConfig{
		Config: Config{Run: RunConfig{Out: "runs", Name: "generate", Plots: true, SnapshotEvery: 10}, Stream: StreamConfig{Kind: "wan", FPS: 4},
			Policies: []string{memory.NameDensityKV}, Memory: LayoutFreeDefaults(memory.DefaultLayout())},
		Generate: GenerateSection{Arch: "1.3b", LatentHeight: 60, LatentWidth: 104, FramesPerBlock: FramesPerBlock,
			Schedule: DefaultScheduleConfig(), TraceStep: AuthorsTraceStep, TraceLayers: "all", LineageLayers: "0", LineageHeads: "0", Preview: true, SkipExisting: true,
			Video: VideoEncode{FPS: video.DefaultFPS, CRF: video.DefaultCRF}},
	}
}

// AuthorsTraceStep is the authors' traced denoising call
// (temporal_attention_trace.denoise_calls: (3,), the 4th pass).
const AuthorsTraceStep = 3

// DefaultTraceStep is the traced step of a run that names none: the
// authors' call 3 when every block after the first has at least four
// steps, otherwise the last step of those blocks' schedule (the authors'
// trace records nothing there; a 1- or 2-step schedule would otherwise
// need --trace-step). The first block's own list (FirstChunkSteps) does
// not move it: the trace follows the blocks that make up the video.
func DefaultTraceStep(so schedule.Options) int {
	n := len(so.Steps)
	if so.Steps == nil {
		n = len(schedule.DefaultSteps)
	}
	return min(AuthorsTraceStep, n-1)
}

// resolveDiagnostics checks the authors' diagnostics: the traced step
// (following the schedule when not given: DefaultTraceStep), the traced
// layers and the lineage's layers and heads.
func (G *GenerateSection) resolveDiagnostics(so schedule.Options, model arch.Config, stepGiven bool) error {
	if !stepGiven {
		G.TraceStep = DefaultTraceStep(so)
	}
	if steps := so.MaxSteps(); G.TraceStep < -1 || G.TraceStep >= steps {
		return fmt.Errorf("--trace-step (generate.trace_step) is %d, want -1 (off) or 0..%d", G.TraceStep, steps-1)
	}
	if _, err := ParseIndexList(G.TraceLayers, "--trace-layers (generate.trace_layers)", model.Layers); err != nil {
		return err
	}
	if _, err := ParseIndexList(G.LineageLayers, "--lineage-layers (generate.lineage_layers)", model.Layers); err != nil {
		return err
	}
	_, err := ParseIndexList(G.LineageHeads, "--lineage-heads (generate.lineage_heads)", model.Heads)
	return err
}

// ParseTextSpec parses one --text value: PATH, or PATH@BLOCK to switch to
// that prompt at block BLOCK. Only the text after the last '@' can be the
// block, and only when it is an integer, so a path that contains '@'
// ("runs/v@2/ctx.safetensors") is taken whole; a negative or out-of-range
// block, or an empty path before it, is an error.
func ParseTextSpec(arg, tensor string) (TextSpec, error) {
	ts := TextSpec{Path: arg, Tensor: tensor}
	i := strings.LastIndex(arg, "@")
	if i < 0 {
		return ts, nil
	}
	b, err := strconv.Atoi(arg[i+1:])
	switch {
	case errors.Is(err, strconv.ErrRange):
		return ts, fmt.Errorf("--text %q: block %s after @ is out of range", arg, arg[i+1:])
	case err != nil:
		return ts, nil // not PATH@BLOCK: the '@' belongs to the path
	case b < 0:
		return ts, fmt.Errorf("--text %q: the block after @ must be non-negative", arg)
	case i == 0:
		return ts, fmt.Errorf("--text %q: no file before @%d", arg, b)
	}
	ts.Path, ts.FromBlock = arg[:i], b
	return ts, nil
}

// ParsePromptSpec parses one --prompt value: TEXT, or TEXT@BLOCK to switch
// to that prompt at block BLOCK, with ParseTextSpec's rule (only an
// integer after the last '@' is a block, so "meet me @ noon" is taken
// whole).
func ParsePromptSpec(arg string) (PromptSpec, error) {
	ts, err := ParseTextSpec(arg, "")
	if err != nil {
		return PromptSpec{}, errors.New(strings.Replace(err.Error(), "--text", "--prompt", 1))
	}
	return PromptSpec{Text: ts.Path, FromBlock: ts.FromBlock}, nil
}

// ScheduleEntry is one entry of a generate run's prompt schedule: a text
// file (Text) or a prompt (Prompt), from block FromBlock.
type ScheduleEntry struct {
	FromBlock int
	Text      *TextSpec
	Prompt    *PromptSpec
}

// PromptSchedule returns the prompt schedule: the text files, then the
// prompts, each in the order given (the order Resolve checks; rollout
// sorts by block).
func (g *GenerateSection) PromptSchedule() []ScheduleEntry {
	var out []ScheduleEntry
	for i := range g.Texts {
		out = append(out, ScheduleEntry{FromBlock: g.Texts[i].FromBlock, Text: &g.Texts[i]})
	}
	for i := range g.Prompts {
		out = append(out, ScheduleEntry{FromBlock: g.Prompts[i].FromBlock, Prompt: &g.Prompts[i]})
	}
	return out
}

// Resolve checks a generate configuration once the file and the flags
// are applied (keys are the file's, named file in errors) and derives what
// follows from it: the model from the architecture, the stream from the
// block count, the layout and RoPE base from the model and latent size,
// and the resolved memory. It reads no file: the input stage
// (runinput.ResolveGenerate) fills a model folder's parts in before it and
// checks the input files after it (the checkpoint's entry, the LoRA
// against the backbone, the text and VAE files).
func (gc *GenerateConfig) Resolve(keys Keys, file string) error {
	G := &gc.Generate
	has := func(key string) bool { return keys.Set[key] }
	if gc.Run.SnapshotEvery < 0 {
		return fmt.Errorf("--snapshot-every (run.snapshot_every) is %d, want >= 0", gc.Run.SnapshotEvery)
	}
	if gc.Run.Seed < 0 {
		return fmt.Errorf("%s: run.seed is %d, want >= 0", file, gc.Run.Seed)
	}
	newArch, ok := Archs[G.Arch]
	if !ok {
		return fmt.Errorf("--arch (generate.arch) is %q, want 1.3b or tiny", G.Arch)
	}
	model := newArch()
	if has("generate.model") && G.Model != model {
		return fmt.Errorf("%s: generate.model differs from the %s architecture (generate.arch); the model follows the architecture, leave generate.model out", file, G.Arch)
	}
	G.Model = model
	if !has("generate.precision") {
		G.Precision = compute.Exactly(DefaultPrecision(G.Arch))
	}
	if G.Precision.Mode == compute.Fast && G.Device == device.CPU {
		return fmt.Errorf("--precision (generate.precision) %v with --device (generate.device) cpu: %w", G.Precision, compute.ErrFastOnCPU)
	}
	if G.Checkpoint == "" {
		return fmt.Errorf("--checkpoint is required (a .safetensors or .pt file of the causal Wan generator, or a diffusers folder; --model for a whole diffusers model)")
	}
	if G.FramesPerBlock <= 0 {
		return fmt.Errorf("--frames-per-block (generate.frames_per_block) is %d, want >= 1", G.FramesPerBlock)
	}
	so := G.Schedule.Options()
	if _, _, err := so.Build(); err != nil {
		return fmt.Errorf("generate.schedule (--steps, --first-chunk-steps, --warp, --shift, --update): %w", err)
	}
	if err := G.resolveText(model, gc.Run.Out); err != nil {
		return err
	}
	if err := G.resolveVAE(); err != nil {
		return err
	}
	if err := G.Video.Check(); err != nil {
		return err
	}
	if G.LatentHeight <= 0 || G.LatentWidth <= 0 || G.LatentHeight%model.Patch[1] != 0 || G.LatentWidth%model.Patch[2] != 0 {
		return fmt.Errorf("--latent-height/--latent-width %d×%d must be positive multiples of the %d×%d patch", G.LatentHeight, G.LatentWidth, model.Patch[1], model.Patch[2])
	}
	if G.Blocks <= 0 {
		return fmt.Errorf("--blocks (generate.blocks) is %d, want > 0", G.Blocks)
	}
	if err := checkGenerateSizes(G); err != nil {
		return err
	}
	if err := G.resolveList(G.BlockFrames()); err != nil {
		return err
	}
	if err := G.resolveDiagnostics(so, model, has("generate.trace_step")); err != nil {
		return err
	}
	for _, v := range []interface{ MarshalText() ([]byte, error) }{G.SourceIDs, G.Recache} {
		if _, err := v.MarshalText(); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	if G.Recache == RecacheLongLive {
		if len(gc.Policies) == 1 && gc.Policies[0] == memory.NameDeepForcing {
			return fmt.Errorf("--recache longlive (generate.recache): policy deep-forcing keeps compressed tokens, not frames, and has no recache; use --recache none")
		}
		if G.RecordStream != "" {
			return fmt.Errorf("--recache longlive with --record-stream: the recorded stream holds the clean passes only, so a replay would miss the recomputed K/V; drop one of them")
		}
	}
	if _, err := drift.ParseRules(G.StopOnDrift, "--stop-on-drift (generate.stop_on_drift)"); err != nil {
		return err
	}
	if G.StopOnDrift != "" && G.PromptsFile != "" {
		return fmt.Errorf("--stop-on-drift (generate.stop_on_drift) with --prompts: a prompt list would stop at its first drifting prompt; collect summarises every prompt's drift.jsonl instead")
	}
	if gc.Run.Name == "" || strings.ContainsAny(gc.Run.Name, `/\`) || gc.Run.Name == "." || gc.Run.Name == ".." {
		return fmt.Errorf("--name (run.name) %q must be a plain folder name", gc.Run.Name)
	}
	if gc.Run.Out == "" {
		return fmt.Errorf("--out (run.out) is empty, want a folder")
	}
	if len(gc.Policies) != 1 || !slices.Contains(memory.Names(), gc.Policies[0]) {
		return fmt.Errorf("--policy (policies) is %q, want one of %s", strings.Join(gc.Policies, ","), strings.Join(memory.Names(), ", "))
	}
	// The stream and the layout follow the model and the block count; a
	// file may carry them (a config.resolved.yaml does) only unchanged.
	stream := StreamConfig{Kind: "wan", Seconds: float64(G.Blocks*G.FramesPerBlock) / 4, FPS: 4}
	if has("stream.kind") && gc.Stream.Kind != stream.Kind || has("stream.fps") && gc.Stream.FPS != stream.FPS {
		return fmt.Errorf("%s: stream.kind %q at %g frames/s: generate rolls out the Wan model (kind wan, 4 latent frames/s); leave stream out", file, gc.Stream.Kind, gc.Stream.FPS)
	}
	gc.Stream = stream
	m, err := model.Memory(gc.Memory, G.LatentHeight, G.LatentWidth, G.FramesPerBlock) // layout and RoPE base follow the model
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if has("memory.layout") && gc.Memory.Layout != m.Layout {
		return fmt.Errorf("%s: memory.layout %+v differs from the model's %+v at latent %d×%d; the layout follows --arch and --latent-height/--latent-width, leave it out",
			file, gc.Memory.Layout, m.Layout, G.LatentHeight, G.LatentWidth)
	}
	m.LongLiveRAG.LatentChannels = model.OutDim // the descriptor reads the model's latents
	if err := checkLimits(Config{Run: gc.Run, Stream: gc.Stream, Memory: m}, int64(G.Blocks)*int64(G.FramesPerBlock)); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := gc.resolveRAGAE(&m); err != nil {
		return err
	}
	rm, err := resolveMemory(m, gc.Policies)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := checkLimits(Config{Run: gc.Run, Stream: gc.Stream, Memory: rm}, int64(G.Blocks)*int64(G.FramesPerBlock)); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	gc.Memory = rm
	return nil
}

// MarshalGenerate renders a generate run's configuration as YAML with a
// header comment.
func MarshalGenerate(gc GenerateConfig) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# densitykv generate: resolved configuration\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(gc); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// resolveText checks the prompt schedule (--text files, --prompt texts,
// or a --prompts file) and the text encoder's files, and fills in the
// embedding cache's default folder.
func (G *GenerateSection) resolveText(model arch.Config, out string) error {
	if G.PromptsFile != "" {
		if len(G.Texts) > 0 || len(G.Prompts) > 0 {
			return fmt.Errorf("--prompts makes one video per line of %s; leave out --text and --prompt", G.PromptsFile)
		}
	} else if len(G.Texts) == 0 && len(G.Prompts) == 0 {
		return fmt.Errorf("--prompt (with --text-encoder and --tokenizer) or --text is required (a tensor file with the text-encoder output [L, %d])", model.TextDim)
	}
	for i, ts := range G.Texts {
		if i > 0 && ts.FromBlock <= G.Texts[i-1].FromBlock {
			return fmt.Errorf("--text: prompt %s starts at block %d, not after the previous one's %d", ts.Path, ts.FromBlock, G.Texts[i-1].FromBlock)
		}
	}
	for i, p := range G.Prompts {
		if i > 0 && p.FromBlock <= G.Prompts[i-1].FromBlock {
			return fmt.Errorf("--prompt: prompt %q starts at block %d, not after the previous one's %d", p.Text, p.FromBlock, G.Prompts[i-1].FromBlock)
		}
	}
	if G.PromptsFile == "" {
		blocks := map[int]string{}
		first := -1
		for _, e := range G.PromptSchedule() {
			what := ""
			if e.Text != nil {
				what = "--text " + e.Text.Path
			} else {
				what = fmt.Sprintf("--prompt %q", e.Prompt.Text)
			}
			if prev, ok := blocks[e.FromBlock]; ok {
				return fmt.Errorf("%s and %s both start at block %d", prev, what, e.FromBlock)
			}
			blocks[e.FromBlock] = what
			if first < 0 || e.FromBlock < first {
				first = e.FromBlock
			}
		}
		if first != 0 {
			return fmt.Errorf("--prompt/--text: the first prompt must start at block 0, got @%d", first)
		}
	}
	if len(G.Prompts) > 0 || G.PromptsFile != "" {
		if G.TextEncoder == "" || G.Tokenizer == "" {
			return errors.New("--prompt and --prompts need --text-encoder (umT5 checkpoint) and --tokenizer (spiece.model or its folder)")
		}
		if G.TextCache == "" {
			G.TextCache = filepath.Join(out, "text_cache")
		}
	}
	return nil
}

// resolveVAE checks the latent statistics (the VAE file itself: the input
// stage, runinput.ResolveGenerate).
func (G *GenerateSection) resolveVAE() error {
	if (G.VAEMean == nil) != (G.VAEStd == nil) || len(G.VAEMean) != len(G.VAEStd) {
		return fmt.Errorf("--vae-mean and --vae-std (generate.vae_mean, vae_std) give %d and %d values; give both with one value per latent channel, or neither (Wan2.1's statistics)", len(G.VAEMean), len(G.VAEStd))
	}
	if G.VAEMean != nil && G.VAE == "" {
		return errors.New("--vae-mean/--vae-std without --vae")
	}
	for i := range G.VAEMean {
		m, s := float64(G.VAEMean[i]), float64(G.VAEStd[i])
		if math.IsNaN(m) || math.IsInf(m, 0) {
			return fmt.Errorf("--vae-mean value %d is %v, want a finite number", i, m)
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("--vae-std value %d is %v, want a positive finite number", i, s)
		}
	}
	return nil
}

// resolveRAGAE checks LongLive-RAG's autoencoder against the descriptor
// choice: --rag-ae selects descriptor ae (the latent-mean default gives
// way; key-mean conflicts), and descriptor ae needs --rag-ae. The file
// itself is read by the input stage (runinput.CheckRAGAE: before the run
// folder is made), which records the descriptor size it yields
// (memory.longlive_rag.descriptor_storage_dim).
func (gc *GenerateConfig) resolveRAGAE(m *memory.Config) error {
	G := &gc.Generate
	r := &m.LongLiveRAG
	if G.RAGAE == "" {
		if r.Descriptor == memory.RAGAE {
			return fmt.Errorf("memory.longlive_rag.descriptor (--rag-descriptor) is ae: give the authors' autoencoder with --rag-ae FILE (generate.rag_ae, ae_latent_mem.pt), or use latent-mean (their avg_pool fallback)")
		}
		return nil
	}
	if r.Descriptor == memory.RAGKeyMean {
		return fmt.Errorf("--rag-ae %s (generate.rag_ae) with --rag-descriptor key-mean: the autoencoder is a descriptor; drop one of them", G.RAGAE)
	}
	r.Descriptor = memory.RAGAE
	if len(gc.Policies) == 1 && gc.Policies[0] != memory.NameLongLiveRAG {
		gc.Warnings = append(gc.Warnings, fmt.Sprintf("generate: --rag-ae %s is read by policy longlive-rag only, not %s", G.RAGAE, gc.Policies[0]))
	}
	return nil
}
