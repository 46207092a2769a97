package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/limitread"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
	"github.com/densitykv/densitykv/video"
)

func init() { register(newGenerateCmd) }

func newGenerateCmd() *cobra.Command {
	c := &generateCmd{}
	cmd := &cobra.Command{
		Use:         "generate",
		Short:       "Make a video: prompt → umT5 → the Wan backbone's rollout with any memory policy → VAE → mp4",
		Long:        generateLong,
		Example:     generateExample,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current forward call"),
		RunE:        c.run,
	}
	c.bind(cmd.Flags())
	return cmd
}

// generateCmd holds generate's flags.
type generateCmd struct {
	g  config.GenerateSection
	rf runFlags
	lf listFlags
	cf *configFlags
	// Flags parsed into the configuration by resolveGenerate.
	texts, prompts                                                      []string
	textTensor, policy, backbone, update, sourceIDs, recache, precision string
	seconds                                                             float64
	seed                                                                uint64
	snapEvery                                                           int
	out, name                                                           string
}

// run is generate: the configuration (a resumed run's saved one, or the
// defaults, --config and the flags), then one run or a list.
func (c *generateCmd) run(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	var gc config.GenerateConfig
	if c.rf.resume {
		var bad []string
		f.Visit(func(fl *pflag.Flag) {
			if !strings.Contains(" out name resume json quiet shard dry-run skip-existing device "+relocatable, " "+fl.Name+" ") {
				bad = append(bad, "--"+fl.Name)
			}
		})
		if len(bad) > 0 {
			return usagef("--resume continues a run with its saved %s; drop %v", runfolder.FileConfig, bad)
		}
		// Over the defaults: keys a run folder written before they
		// existed keep the values that run used.
		if err := checkRunName(c.name); err != nil {
			return err
		}
		gc = config.GenerateDefaults()
		if err := loadGenerateConfig(filepath.Join(c.out, c.name), &gc); err != nil {
			return resumeLoadError(filepath.Join(c.out, c.name), err)
		}
		resumeList(f, &gc, c.out, c.name, c.g.SkipExisting)
		// The folder named by --out/--name, wherever the run
		// started (a folder moved or copied since).
		gc.Run.Out, gc.Run.Name = c.out, c.name
		if err := relocateInputs(f, &gc.Generate, c.g, c.texts); err != nil {
			return err
		}
		// The same bits on every device: a run may continue elsewhere.
		setIf(f, "device", &gc.Generate.Device, c.g.Device)
	} else {
		var err error
		if gc, err = resolveGenerate(f, c.cf, c.g, generateFlags{texts: c.texts, textTensor: c.textTensor, prompts: c.prompts, policy: c.policy, precision: c.precision,
			seconds: c.seconds, seed: c.seed, out: c.out, name: c.name, snapEvery: c.snapEvery, backbone: c.backbone, update: c.update,
			sourceIDs: c.sourceIDs, recache: c.recache}); err != nil {
			return err
		}
	}
	if gc.Generate.PromptsFile != "" || c.lf.shard != "" || c.lf.dryRun {
		return runList(cmd, gc, c.rf, c.lf, c.cf.file)
	}
	return runGenerate(cmd, gc, c.rf, c.cf.file)
}

// bind defines generate's flags on f.
func (c *generateCmd) bind(f *pflag.FlagSet) {
	def := config.GenerateDefaults()
	dg := def.Generate
	f.StringVar(&c.g.Checkpoint, "checkpoint", dg.Checkpoint, "generator checkpoint (.safetensors or PyTorch .pt), or a folder of one (diffusers, sharded safetensors) (generate.checkpoint)")
	f.StringVar(&c.g.ModelDir, "model", dg.ModelDir, "a diffusers model folder (model_index.json: Wan2.1-T2V-1.3B-Diffusers) giving --checkpoint, --vae, --text-encoder and --tokenizer not given (generate.model_dir)")
	f.StringVar(&c.backbone, "backbone", dg.Backbone.String(), "backbone preset: "+strings.Join(dg.Backbone.Names(), ", ")+" (generate.backbone)")
	f.StringVar(&c.g.Entry, "entry", dg.Entry, "PyTorch checkpoint entry (default: the backbone's, else generator, generator_ema, model) (generate.entry)")
	f.StringVar(&c.g.LoRA, "lora", dg.LoRA, "LoRA merged into the weights: LongLive's longlive_lora.pt (generator_lora entry), or a PEFT, diffusers or ComfyUI file or folder; checked against --backbone (generate.lora)")
	f.Float64Var(&c.g.LoRAAlpha, "lora-alpha", dg.LoRAAlpha, "LoRA alpha: each adapter is scaled by alpha/rank (0 = the file's, else the preset's, else the rank); giving it also merges a LoRA the backbone does not take (generate.lora_alpha)")
	f.StringVar(&c.g.Arch, "arch", dg.Arch, "model architecture: 1.3b (Wan2.1-T2V-1.3B) or tiny (the golden test model) (generate.arch)")
	f.StringVar(&c.precision, "precision", "", "model precision: fp32, bf16 or bf16-fast (default: bf16 for --arch 1.3b, fp32 for tiny; "+fastUsage+") (generate.precision)")
	c.g.Device = dg.Device
	f.Var(&c.g.Device, "device", "where the DiT computes: "+device.Values+" (exact mode: the CPU's bits on any device, so --resume may change it; the text encoder and VAE stay on the CPU; Vulkan needs a build with -tags vulkan) (generate.device)")
	f.StringSliceVar(&c.texts, "text", nil, "text-encoder output tensor file; PATH@BLOCK (an integer after the last @) switches to it at BLOCK (repeatable) (generate.texts)")
	f.StringVar(&c.textTensor, "text-tensor", "", "tensor name inside the text files (default: context, or the only tensor)")
	f.StringArrayVar(&c.prompts, "prompt", nil, "prompt text; TEXT@BLOCK (an integer after the last @) switches to it at BLOCK (repeatable) (generate.prompts)")
	f.StringVar(&c.g.PromptsFile, "prompts", "", "file of prompts, one video per line, each in <out>/<name>/NNNNN/ (NNNNN: the line's index from 0) (generate.prompts_file)")
	f.StringVar(&c.g.ExtendedPromptsFile, "extended-prompts", "", "file whose line i is the text encoded for line i of --prompts (the authors' extended prompts) (generate.extended_prompts_file)")
	f.IntSliceVar(&c.g.PromptIndices, "prompt-indices", nil, "make only these lines of --prompts (indices from 0, e.g. the paper's ablation subset) (generate.prompt_indices)")
	f.BoolVar(&c.g.SkipExisting, "skip-existing", dg.SkipExisting, "skip the prompts of a list whose video is complete; =false makes them again (generate.skip_existing)")
	f.Float64SliceVar(&c.g.Horizons, "horizons", nil, "also write video_<S>s.mp4 for these lengths in seconds, exact prefixes of the one rollout (e.g. 30,60,120; sets the length when --seconds/--blocks are not given) (generate.horizons)")
	f.StringVar(&c.lf.shard, "shard", "", "with --prompts, make only shard I of N of the list (I/N from 0; env or env/N: I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID, N from DENSITYKV_SHARDS or SLURM_ARRAY_TASK_COUNT)")
	f.BoolVar(&c.lf.dryRun, "dry-run", false, "with --prompts, print what this shard would make (each prompt's index and state) and exit, writing nothing")
	f.StringVar(&c.g.TextEncoder, "text-encoder", dg.TextEncoder, "umT5 text encoder: models_t5_umt5-xxl-enc-bf16.pth or .safetensors, a Hugging Face UMT5EncoderModel folder (google/umt5-xxl) or a ComfyUI umt5_xxl file (generate.text_encoder)")
	f.StringVar(&c.g.Tokenizer, "tokenizer", dg.Tokenizer, "the text encoder's spiece.model, or a folder holding it (google/umt5-xxl, a diffusers model's tokenizer/) (generate.tokenizer)")
	f.StringVar(&c.g.TextCache, "text-cache", dg.TextCache, "folder of cached prompt embeddings (default <out>/text_cache) (generate.text_cache)")
	f.StringVar(&c.g.VAE, "vae", dg.VAE, "Wan VAE (Wan2.1_VAE.pth, .safetensors, a diffusers vae/ folder): decode each block into video.mp4 (generate.vae)")
	f.Float32SliceVar(&c.g.VAEMean, "vae-mean", nil, "latent mean per channel (default: Wan2.1's 16 values) (generate.vae_mean)")
	f.Float32SliceVar(&c.g.VAEStd, "vae-std", nil, "latent std per channel (default: Wan2.1's 16 values) (generate.vae_std)")
	f.IntVar(&c.g.Video.FPS, "fps", dg.Video.FPS, fmt.Sprintf("frames per second of video.mp4, the horizons and the segments (1..%d; the playback speed: the length in frames is the rollout's) (generate.video.fps)", video.MaxFPS))
	f.IntVar(&c.g.Video.CRF, "crf", dg.Video.CRF, fmt.Sprintf("x264's constant rate factor of the mp4s, 0..%d (lower: better and larger) (generate.video.crf)", video.MaxCRF))
	f.IntVar(&c.g.LatentHeight, "latent-height", dg.LatentHeight, "latent height (60 for 480×832 video) (generate.latent_height)")
	f.IntVar(&c.g.LatentWidth, "latent-width", dg.LatentWidth, "latent width (104 for 480×832 video) (generate.latent_width)")
	f.Float64Var(&c.seconds, "seconds", 5, "video length at 4 latent frames/s, rounded up to whole blocks (stream.seconds)")
	f.IntVar(&c.g.Blocks, "blocks", 0, "number of blocks, instead of --seconds (generate.blocks)")
	f.IntVar(&c.g.FramesPerBlock, "frames-per-block", dg.FramesPerBlock, "latent frames per block (generate.frames_per_block)")
	f.IntSliceVar(&c.g.Schedule.Steps, "steps", dg.Schedule.Steps, "denoising step list, decreasing values in 0..1000 (generate.schedule.steps)")
	f.IntSliceVar(&c.g.Schedule.FirstChunkSteps, "first-chunk-steps", nil, "step list of block 0 only (default: --steps) (generate.schedule.first_chunk_steps)")
	f.BoolVar(&c.g.Schedule.Warp, "warp", dg.Schedule.Warp, "warp the steps onto the shifted scheduler table (false: the steps are the timesteps) (generate.schedule.warp)")
	f.Float64Var(&c.g.Schedule.Shift, "shift", dg.Schedule.Shift, "timestep shift of the scheduler (generate.schedule.shift)")
	f.StringVar(&c.update, "update", dg.Schedule.Update.String(), "denoising update: "+strings.Join(dg.Schedule.Update.Names(), ", ")+" (generate.schedule.update)")
	f.Uint64Var(&c.seed, "seed", 0, "noise seed (run.seed)")
	f.StringVar(&c.policy, "policy", def.Policies[0], "memory policy: "+strings.Join(memory.Names(), ", ")+" (policies)")
	f.IntVar(&c.g.TraceStep, "trace-step", dg.TraceStep, "denoising step whose attention is traced (3 = 4th pass; default: 3, or the last step of a shorter schedule), -1 = off (generate.trace_step)")
	f.StringVar(&c.g.TraceLayers, "trace-layers", dg.TraceLayers, "layers whose attention trace is kept per head (attention_trace_layers.safetensors, [1,H,F,F] per layer): all, none or a list (generate.trace_layers)")
	f.StringVar(&c.g.LineageLayers, "lineage-layers", dg.LineageLayers, "DensityKV layers whose admissions and evictions density_kv_lineage.jsonl records: all, none or a list (generate.lineage_layers)")
	f.StringVar(&c.g.LineageHeads, "lineage-heads", dg.LineageHeads, "heads of those layers: all, none or a list (generate.lineage_heads)")
	f.StringVar(&c.sourceIDs, "source-ids", dg.SourceIDs.String(), "provenance ids in provenance.csv and the lineage: global (frame·P + position) or authors (non-sink token count, the authors' source_index) (generate.source_ids)")
	f.StringVar(&c.recache, "recache", dg.Recache.String(), "at a prompt switch: none (the DensityKV authors': cross-attention only) or longlive (re-run the most recent frames under the new prompt) (generate.recache)")
	f.BoolVar(&c.g.Preview, "preview", dg.Preview, "write PNG frames of a latent preview (not decoded video) in latent_preview/, and latent_preview.mp4 with ffmpeg; default on without --vae (generate.preview)")
	f.StringVar(&c.g.RecordStream, "record-stream", dg.RecordStream, "record the clean passes' q/k/v into this stream file, replayed with simulate/eval --stream file (generate.record_stream)")
	f.StringVar(&c.g.Noise, "noise", dg.Noise, "replay the draws of this noise file (initial noise and re-noise per block and step: a --save-noise file, or the authors' torch.save; docs/parity.md) instead of the seed's (generate.noise)")
	f.StringVar(&c.g.SaveNoise, "save-noise", dg.SaveNoise, "write every draw the run uses to this safetensors file when it completes, replayed with --noise (generate.save_noise)")
	f.StringVar(&c.g.StopOnDrift, "stop-on-drift", dg.StopOnDrift, "stop the run cleanly (resumable) after the first block whose drift record trips STAT>VALUE or STAT<VALUE, comma-separated, quoted for the shell, e.g. 'seam_flicker>3' (docs/drift.md; a rule stops a run once) (generate.stop_on_drift)")
	f.StringVar(&c.g.RAGAE, "rag-ae", dg.RAGAE, "LongLive-RAG: the authors' retrieval autoencoder ae_latent_mem.pt; describes frames with it (descriptor ae) instead of the latent mean (generate.rag_ae)")
	f.IntVar(&c.snapEvery, "snapshot-every", def.Run.SnapshotEvery, "save a resume checkpoint (policy snapshot) every N blocks, 0 = only when stopped with Ctrl-C (run.snapshot_every)")
	f.StringVar(&c.out, "out", def.Run.Out, "parent folder of run folders (run.out)")
	f.StringVar(&c.name, "name", def.Run.Name, "run folder name (run.name)")
	c.cf = &configFlags{fs: f}
	f.StringVar(&c.cf.file, "config", "", "YAML config in the format of a generate config.resolved.yaml (flags given on the command line override it)")
	c.cf.bindMemoryFlags(def.Config)
	f.BoolVar(&c.rf.json, "json", false, "print the summary as JSON")
	f.BoolVar(&c.rf.resume, "resume", false, "continue the stopped run --out/--name with its saved config (input files that moved: their flags)")
	f.BoolVar(&c.rf.force, "force", false, "overwrite an existing run folder")
	f.BoolVar(&c.rf.quiet, "quiet", false, "no progress output")
}

// generateLong is generate's help.
const generateLong = `generate runs the whole pipeline of a streaming video generator: the prompts
through Wan2.1's umT5 text encoder (--text-encoder, --tokenizer; embeddings
cached in --text-cache), the streaming block rollout (3 latent frames per
block, 4 denoising steps at warped timesteps, then a clean t=0 pass whose K/V
the memory policy keeps) of a Wan2.1-style causal DiT loaded from a
checkpoint (.safetensors or PyTorch .pt: generator / generator_ema / model
entries; LongLive LoRA adapters with --lora), and with --vae the streaming Wan
VAE decoder, which turns each finished block into video as the rollout goes.

--prompt TEXT[@BLOCK] (repeatable) switches to a prompt at a block; --text
FILE[@BLOCK] gives text-encoder outputs computed elsewhere instead (both may
be mixed in one schedule). --prompts FILE makes one video per line, each in
<out>/<name>/NNNNN/ (NNNNN: the line's index from 0, blank lines counted and
skipped, as the authors' TextDataset reads the file), every prompt with
--seed; run the same command again, or --resume, to continue a stopped list:
finished videos are skipped (--skip-existing=false makes them again).
--prompt-indices selects lines; --shard I/N (or env: JOB_COMPLETION_INDEX or
SLURM_ARRAY_TASK_ID) makes one worker's share, and shards may share the list
folder; --dry-run lists what a worker would make; densitykv collect merges the
list's folders into one report. --horizons 30,60,120 also writes
video_30s.mp4 … as exact prefixes of the one rollout (30 s = 40 blocks, 477
frames), each one continuous encode like video.mp4.

--precision fp32|bf16 is the precision of the text encoder, the DiT and the
VAE (default: bf16 for --arch 1.3b, fp32 for tiny). bf16-fast is bf16 in
fast mode: the linears of the text encoder and the DiT on a GPU's tensor
cores (--device vulkan on a GPU with VK_NV_cooperative_matrix), not the
CPU's bits but within bf16's tolerance of the float64 model; the VAE stays
exact bf16. It is refused on the CPU and on a device without a usable
cooperative matrix, before the run folder is made.

--backbone self-forcing|causal-forcing|longlive sets what the authors'
configs/examples/paper_cases.yaml sets for that backbone: the checkpoint
entry (Self-Forcing generator_ema, Causal-Forcing generator, LongLive
generator + the generator_lora of --lora), 3 frames per block, sink 1,
cache 12 and the schedule (steps 1000,750,500,250 warped, shift 5,
x0_renoise). Flags and --config keys given explicitly override the preset
(LongLive's own release setting: --backbone longlive --frames-per-block 6
--sink-frames 3 --window-frames 6 --deep-forcing-recent 6). Without
--backbone the entry is automatic (generator, then generator_ema, model);
config.resolved.yaml records the entry loaded.
The schedule flags are the authors' rollout options: --steps
(denoising_step_list), --first-chunk-steps (block 0's list), --warp
(warp_denoising_step), --shift (timestep_shift), --update x0_renoise|
flow_euler (denoising_update_mode).

The run folder <out>/<name>/ gets video.mp4 (H.264, 16 fps and crf 18 as the
authors encode, --fps and --crf otherwise: one continuous encode of the whole
video, from lossless copies of each block's frames kept in state/video/ until
the run is complete), segments/ (each block's own mp4, to watch the run as it
goes; PNG frames in frames/ instead when ffmpeg is not installed), generation.json (prompts, seed, policy,
backbone and input-file hashes, also in the mp4's metadata), text/ (the
prompts' embeddings), latents/block_NNNNN.safetensors and manifest.json
(streamed per block), memory_log.jsonl, summary.json, admissions.json and
provenance.csv (DensityKV), attention_trace.json (the attention mass from
each query frame to each source frame on the 4th denoising pass; per layer and
head in attention_trace_layers.safetensors), density_kv_lineage.jsonl
(DensityKV), and plots/. --preview adds a latent preview (3 latent channels as RGB, not decoded video)
in latent_preview/ and latent_preview.mp4; it is on by default without --vae.

Every input file is checked before any work starts and before the run folder
is made (errors name the file and tensor). The memory flags are simulate's
(budget, every bank parameter and variant, Deep Forcing and LongLive-RAG).
--config reads a YAML file in the format of a generate run's
config.resolved.yaml (run, policies, memory, generate); flags override it.
The layout (memory.layout) follows the model and the latent size, the token
length the DiT's text length (512 for Wan2.1), and the stream (kind wan, 4
latent frames/s) the block count.

Ctrl-C stops after the current block and saves a resume checkpoint (also
saved every --snapshot-every blocks); --resume continues from it without
computing the completed blocks again, with latents and video frames
identical to an uninterrupted run. A run folder may be moved or copied
(another disk, another mount point) and resumed there with --out/--name:
its own files are found in it, and its inputs are checked by content;
an input that moved too is given by its flag (--resume --checkpoint FILE,
--lora, --vae, --rag-ae, --text, --text-encoder, --tokenizer,
--record-stream, --noise, --save-noise) and must be the file the run started with.

--save-noise FILE writes every random draw of the run (the initial noise of
every latent frame, the re-noise draw of every block and step) when it
completes; --noise FILE replays the draws of such a file, or of one the
authors' pipeline wrote with torch.save, instead of the seed's, so that a run
is reproduced draw for draw from either side (docs/parity.md; densitykv
compare diffs the results).`

// generateExample is generate's examples.
const generateExample = `  densitykv generate --checkpoint self_forcing.pt --text-encoder models_t5_umt5-xxl-enc-bf16.pth \
      --tokenizer google/umt5-xxl --vae Wan2.1_VAE.pth --prompt "a red panda walks through snow, cinematic" \
      --seconds 30 --policy densitykv
  densitykv generate ... --prompt "a heron stands in a pond@0" --prompt "the heron takes off@20"
  densitykv generate ... --prompts prompts.txt
  densitykv generate --checkpoint wan_causal.pt --text prompt.safetensors --seconds 30 --policy densitykv
  densitykv generate --config runs/generate/config.resolved.yaml --name again --tau 3`

// relocatable are the flags --resume takes besides --out/--name: the
// input files' (and the recording's) places, for inputs that moved since
// the run began; each input is checked to be the file the run started
// with by its content.
const relocatable = "checkpoint lora vae rag-ae text text-encoder tokenizer record-stream noise save-noise "

// relocateInputs sets, on --resume, the places of the input files given
// by their flags (relocatable) in g, the saved configuration; flags holds
// the flags' values. --text gives the text files' places in the run's
// order, each PATH or PATH@BLOCK with the run's block.
func relocateInputs(f *pflag.FlagSet, g *config.GenerateSection, flags config.GenerateSection, texts []string) error {
	for _, r := range []struct {
		flag string
		dst  *string
		v    string
	}{{"checkpoint", &g.Checkpoint, flags.Checkpoint}, {"lora", &g.LoRA, flags.LoRA}, {"vae", &g.VAE, flags.VAE}, {"rag-ae", &g.RAGAE, flags.RAGAE},
		{"text-encoder", &g.TextEncoder, flags.TextEncoder}, {"tokenizer", &g.Tokenizer, flags.Tokenizer}, {"record-stream", &g.RecordStream, flags.RecordStream},
		{"noise", &g.Noise, flags.Noise}, {"save-noise", &g.SaveNoise, flags.SaveNoise}} {
		if !f.Changed(r.flag) {
			continue
		}
		if *r.dst == "" || r.v == "" {
			return usagef("--resume --%s gives the new place of the run's --%s file; the run has none (start a new run to add one)", r.flag, r.flag)
		}
		*r.dst = r.v
	}
	if f.Changed("text") {
		if len(texts) != len(g.Texts) {
			return usagef("--resume --text gives the new places of the run's %d text files in order; got %d", len(g.Texts), len(texts))
		}
		for i, t := range texts {
			ts, err := config.ParseTextSpec(t, g.Texts[i].Tensor)
			if err != nil {
				return usageError{err}
			}
			if ts.Path != t && ts.FromBlock != g.Texts[i].FromBlock {
				return usagef("--resume --text %s: the run's text file %d starts at block %d, not %d", t, i, g.Texts[i].FromBlock, ts.FromBlock)
			}
			g.Texts[i].Path = ts.Path
		}
	}
	return nil
}

// generateFlags are generate's flags that are not GenerateSection fields.
type generateFlags struct {
	texts, prompts     []string
	textTensor, policy string
	precision          string
	seconds            float64
	seed               uint64
	out, name          string
	snapEvery          int
	backbone, update   string
	sourceIDs, recache string
}

// generateKeys maps generate's own flags to the YAML keys they set (the
// memory flags are config.Flags'), for the backbone preset: a key given
// by its flag is not the preset's to fill.
var generateKeys = map[string]string{
	"backbone": "generate.backbone", "checkpoint": "generate.checkpoint", "model": "generate.model_dir", "entry": "generate.entry", "lora": "generate.lora",
	"lora-alpha": "generate.lora_alpha", "arch": "generate.arch", "latent-height": "generate.latent_height", "latent-width": "generate.latent_width",
	"frames-per-block": "generate.frames_per_block", "blocks": "generate.blocks", "steps": "generate.schedule.steps",
	"first-chunk-steps": "generate.schedule.first_chunk_steps", "warp": "generate.schedule.warp", "shift": "generate.schedule.shift",
	"update": "generate.schedule.update", "trace-step": "generate.trace_step", "preview": "generate.preview", "record-stream": "generate.record_stream",
	"trace-layers": "generate.trace_layers", "lineage-layers": "generate.lineage_layers", "lineage-heads": "generate.lineage_heads",
	"source-ids": "generate.source_ids", "recache": "generate.recache", "rag-ae": "generate.rag_ae", "noise": "generate.noise", "save-noise": "generate.save_noise",
	"fps": "generate.video.fps", "crf": "generate.video.crf", "stop-on-drift": "generate.stop_on_drift",
}

// explicitKey reports whether YAML key was given by the --config file or by
// the flag that sets it.
func explicitKey(f *pflag.FlagSet, cf *configFlags, key string) bool {
	if cf.keys.Set[key] {
		return true
	}
	for flag, k := range generateKeys {
		if k == key && f.Changed(flag) {
			return true
		}
	}
	if flag, ok := config.Flags()[key]; ok && f.Changed(flag) {
		return true
	}
	return false
}

// setIf sets *dst to v when flag was given on the command line.
func setIf[T any](f *pflag.FlagSet, flag string, dst *T, v T) {
	if f.Changed(flag) {
		*dst = v
	}
}

// resolveGenerate builds a new generate run's configuration: the defaults,
// the --config file, then the flags given on the command line (g and gf
// hold their values), validated with its input files checked
// (runinput.ResolveGenerate: a model folder's parts, the checkpoint's
// entry, the LoRA; config.GenerateConfig.Resolve in between), with the
// LongLive-RAG autoencoder read (runinput.CheckRAGAE: it records the
// descriptor size); the weights are read later, before the run folder is
// created.
func resolveGenerate(f *pflag.FlagSet, cf *configFlags, g config.GenerateSection, gf generateFlags) (config.GenerateConfig, error) {
	gc := config.GenerateDefaults()
	if err := cf.load(gc.Config, &gc.Config, &gc); err != nil {
		return gc, err
	}
	file := func(key string) bool { return cf.keys.Set[key] }
	G := &gc.Generate
	setIf(f, "checkpoint", &G.Checkpoint, g.Checkpoint)
	setIf(f, "model", &G.ModelDir, g.ModelDir)
	setIf(f, "entry", &G.Entry, g.Entry)
	setIf(f, "lora", &G.LoRA, g.LoRA)
	setIf(f, "lora-alpha", &G.LoRAAlpha, g.LoRAAlpha)
	setIf(f, "arch", &G.Arch, g.Arch)
	setIf(f, "device", &G.Device, g.Device)
	if f.Changed("precision") {
		if err := G.Precision.UnmarshalText([]byte(gf.precision)); err != nil {
			return gc, usagef("--precision: %v", err)
		}
		cf.keys.Set["generate.precision"] = true // given: Resolve keeps it
	}
	setIf(f, "latent-height", &G.LatentHeight, g.LatentHeight)
	setIf(f, "latent-width", &G.LatentWidth, g.LatentWidth)
	setIf(f, "frames-per-block", &G.FramesPerBlock, g.FramesPerBlock)
	setIf(f, "steps", &G.Schedule.Steps, g.Schedule.Steps)
	setIf(f, "first-chunk-steps", &G.Schedule.FirstChunkSteps, g.Schedule.FirstChunkSteps)
	setIf(f, "warp", &G.Schedule.Warp, g.Schedule.Warp)
	setIf(f, "shift", &G.Schedule.Shift, g.Schedule.Shift)
	if f.Changed("update") {
		if err := G.Schedule.Update.UnmarshalText([]byte(strings.ToLower(strings.TrimSpace(gf.update)))); err != nil {
			return gc, usagef("--update: %w", err)
		}
	}
	if f.Changed("backbone") {
		if err := G.Backbone.UnmarshalText([]byte(strings.ToLower(strings.TrimSpace(gf.backbone)))); err != nil {
			return gc, usagef("--backbone: %w", err)
		}
	}
	if f.Changed("trace-step") {
		G.TraceStep = g.TraceStep
		cf.keys.Set["generate.trace_step"] = true // given: Resolve keeps it
	}
	setIf(f, "trace-layers", &G.TraceLayers, g.TraceLayers)
	setIf(f, "lineage-layers", &G.LineageLayers, g.LineageLayers)
	setIf(f, "lineage-heads", &G.LineageHeads, g.LineageHeads)
	for _, tv := range []struct {
		flag, v string
		dst     interface{ UnmarshalText([]byte) error }
	}{{"source-ids", gf.sourceIDs, &G.SourceIDs}, {"recache", gf.recache, &G.Recache}} {
		if f.Changed(tv.flag) {
			if err := tv.dst.UnmarshalText([]byte(strings.ToLower(strings.TrimSpace(tv.v)))); err != nil {
				return gc, usagef("--%s: %w", tv.flag, err)
			}
		}
	}
	setIf(f, "preview", &G.Preview, g.Preview)
	setIf(f, "record-stream", &G.RecordStream, g.RecordStream)
	setIf(f, "noise", &G.Noise, g.Noise)
	setIf(f, "save-noise", &G.SaveNoise, g.SaveNoise)
	setIf(f, "stop-on-drift", &G.StopOnDrift, g.StopOnDrift)
	setIf(f, "prompts", &G.PromptsFile, g.PromptsFile)
	setIf(f, "extended-prompts", &G.ExtendedPromptsFile, g.ExtendedPromptsFile)
	setIf(f, "prompt-indices", &G.PromptIndices, g.PromptIndices)
	setIf(f, "skip-existing", &G.SkipExisting, g.SkipExisting)
	setIf(f, "horizons", &G.Horizons, g.Horizons)
	setIf(f, "text-encoder", &G.TextEncoder, g.TextEncoder)
	setIf(f, "tokenizer", &G.Tokenizer, g.Tokenizer)
	setIf(f, "text-cache", &G.TextCache, g.TextCache)
	setIf(f, "vae", &G.VAE, g.VAE)
	setIf(f, "vae-mean", &G.VAEMean, g.VAEMean)
	setIf(f, "vae-std", &G.VAEStd, g.VAEStd)
	setIf(f, "fps", &G.Video.FPS, g.Video.FPS)
	setIf(f, "crf", &G.Video.CRF, g.Video.CRF)
	if G.VAE != "" && !f.Changed("preview") && !file("generate.preview") {
		G.Preview = false // the video is the VAE's
	}
	if f.Changed("prompt") {
		G.Prompts = nil
		for _, p := range gf.prompts {
			ps, err := config.ParsePromptSpec(p)
			if err != nil {
				return gc, usageError{err}
			}
			G.Prompts = append(G.Prompts, ps)
		}
	}
	setIf(f, "rag-ae", &G.RAGAE, g.RAGAE)
	setIf(f, "out", &gc.Run.Out, gf.out)
	setIf(f, "name", &gc.Run.Name, gf.name)
	setIf(f, "snapshot-every", &gc.Run.SnapshotEvery, gf.snapEvery)
	if f.Changed("seed") {
		if gf.seed > math.MaxInt64 {
			return gc, usagef("--seed is %d, want at most %d", gf.seed, int64(math.MaxInt64))
		}
		gc.Run.Seed = int64(gf.seed)
	}
	if f.Changed("policy") {
		gc.Policies = []string{gf.policy}
	}
	if f.Changed("text") || f.Changed("text-tensor") {
		if !f.Changed("text") {
			var paths []string
			for _, t := range G.Texts {
				paths = append(paths, fmt.Sprintf("%s@%d", t.Path, t.FromBlock))
			}
			gf.texts = paths
		}
		G.Texts = nil
		for _, t := range gf.texts {
			ts, err := config.ParseTextSpec(t, gf.textTensor)
			if err != nil {
				return gc, usageError{err}
			}
			G.Texts = append(G.Texts, ts)
		}
	}
	if err := gc.ApplyPreset(func(key string) bool { return explicitKey(f, cf, key) }); err != nil {
		return gc, usageError{err}
	}
	F := G.FramesPerBlock
	if F <= 0 {
		return gc, usagef("--frames-per-block (generate.frames_per_block) is %d, want >= 1", F)
	}
	// The length: --blocks or --seconds, else the file's generate.blocks or
	// stream.seconds, else the longest horizon, else --seconds' default.
	switch {
	case f.Changed("seconds") && f.Changed("blocks"):
		return gc, usagef("give --seconds or --blocks, not both")
	case f.Changed("blocks"):
		G.Blocks = g.Blocks
	case len(G.Horizons) > 0 && !f.Changed("seconds") && !file("generate.blocks") && !file("stream.seconds"):
		G.Blocks = config.HorizonBlocks(slices.Max(G.Horizons), F)
	case f.Changed("seconds") || !file("generate.blocks"):
		s := gf.seconds
		if !f.Changed("seconds") && file("stream.seconds") {
			s = gc.Stream.Seconds
		}
		b, err := config.GenerateBlocks(s, F)
		if err != nil {
			return gc, usageError{err}
		}
		G.Blocks = b
	}
	if err := runinput.ResolveGenerate(&gc, cf.keys, cf.file); err != nil {
		return gc, usageError{err}
	}
	if err := runinput.CheckRAGAE(&gc); err != nil {
		return gc, usageError{err}
	}
	return gc, nil
}

// loadGenerateConfig reads the saved configuration of a generate run
// folder, or of a batch folder (--prompts).
func loadGenerateConfig(dir string, gc *config.GenerateConfig) error {
	b, err := limitread.File(filepath.Join(dir, runfolder.FileBatch), config.MaxConfigFile, "list configurations")
	if errors.Is(err, os.ErrNotExist) {
		return runfolder.LoadConfig(dir, gc)
	}
	if err != nil {
		return err
	}
	if _, err := config.Decode(b, gc, false); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, runfolder.FileBatch), err)
	}
	return nil
}

// generateHeapLimit is the Go heap's soft limit of a real-size generate
// run (18 GiB, 19.3 GB): the run is designed to fit in 20 GB resident (the
// README's measured budget: the text encoder alone first, then the DiT, the
// memory policy and the streaming VAE, well below it), and without the cap
// the collector lets the heap grow towards twice the live data up to the
// machine-wide limit (3/4 of the memory), past 20 GB on a large machine.
const generateHeapLimit = 18 << 30

// capGenerateHeap lowers the soft memory limit to generateHeapLimit for a
// real-size architecture, unless GOMEMLIMIT is set or the limit is lower.
func capGenerateHeap(arch string) {
	if arch == "tiny" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if debug.SetMemoryLimit(-1) > generateHeapLimit {
		debug.SetMemoryLimit(generateHeapLimit)
	}
}

// runGenerate runs a rollout into its run folder or, with --resume,
// continues a stopped one (generate.Generate), and reports.
func runGenerate(cmd *cobra.Command, gc config.GenerateConfig, rf runFlags, configFile string) error {
	stdout := cmd.OutOrStdout()
	g := gc.Generate
	capGenerateHeap(g.Arch)
	updates := stdout
	if rf.json {
		updates = nil
	}
	hooks, finish := generateHooks(cmd, gc, rf, updates)
	if err := runfolder.CheckGenerateOutputs(gc, atomicfile.Input{Role: "--config", Path: configFile}); err != nil {
		finish()
		return err
	}
	if !rf.resume {
		warnVideoDisk(cmd.ErrOrStderr(), gc)
	}
	res, err := generate.Generate(cmd.Context(), gc, rf.resume, rf.force, hooks)
	finish()
	if err != nil && !errors.Is(err, runfolder.ErrInterrupted) {
		return inputError(err, g)
	}
	if rf.json {
		if err := printJSON(stdout, res.Summary); err != nil {
			return err
		}
	} else {
		printSummary(stdout, res.Summary)
		fmt.Fprintf(stdout, "latents: %s (manifest.json, latents/)\n", res.Summary.RunDir)
		if res.Video != "" {
			fmt.Fprintln(stdout, res.Video)
		}
		if res.Preview != "" {
			fmt.Fprintln(stdout, res.Preview)
		}
	}
	if res.Interrupted && errors.Is(err, generate.ErrDriftStop) {
		return fmt.Errorf("%w with %d of %d blocks done (%s); continue with: densitykv generate --out %s --name %s --resume (the rule that tripped does not stop it again)",
			err, res.Summary.CompletedBlocks, g.Blocks, runfolder.FileDrift, gc.Run.Out, gc.Run.Name)
	}
	if res.Interrupted {
		return fmt.Errorf("%w with %d of %d blocks done; continue with: densitykv generate --out %s --name %s --resume",
			errInterrupted, res.Summary.CompletedBlocks, g.Blocks, gc.Run.Out, gc.Run.Name)
	}
	return nil
}

// warnVideoDisk warns when the run's video (config.VideoDisk: its lossless
// copies and mp4s while it runs) may not fit the free disk of the run
// folder's filesystem.
func warnVideoDisk(w io.Writer, gc config.GenerateConfig) {
	need := gc.Generate.VideoDisk()
	if need.Total() == 0 {
		return
	}
	if _, free := machine(filepath.Join(gc.Run.Out, gc.Run.Name)); free >= 0 && need.Total() > free {
		fmt.Fprintf(w, "warning: the video may need about %s of disk while the run goes (%s of it the lossless copies of its blocks in %s/%s/, removed when the run is complete); %s is free\n",
			config.Bytes(need.Total()), config.Bytes(need.Lossless), runfolder.DirState, runfolder.DirVideoState, config.Bytes(free))
	}
}

// generateHooks reports a generate run (or a list's runs) on the command's
// output: the run's header, block progress and updates (on updates, nil
// for none), the other stages' progress, information and warnings.
// finish ends the progress bar.
func generateHooks(cmd *cobra.Command, gc config.GenerateConfig, rf runFlags, updates io.Writer) (runfolder.Hooks, func()) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	g := gc.Generate
	var prog *progress
	stages := map[string]*progress{}
	hooks := runfolder.Hooks{
		Start: func(first, total int) {
			if !rf.json && !rf.quiet {
				l := gc.Memory.Layout
				frames := g.Blocks * g.BlockFrames()
				fmt.Fprintf(stdout, "generate: %s model, %d blocks (%d latent frames, %.4g s), latent %d×%d (%d×%d tokens), policy %s, M=%d\n",
					g.Arch, g.Blocks, frames, float64(frames)/4, g.LatentHeight, g.LatentWidth, l.Height, l.Width, gc.Policies[0], gc.Memory.Capacity)
				entry := g.Entry
				if entry == "" {
					entry = "safetensors"
				}
				fmt.Fprintf(stdout, "  backbone %s, weights %s (%s), %d frames per block, sink %d, cache %d, steps %v (warp %v, shift %g, %s)\n",
					g.Backbone, filepath.Base(g.Checkpoint), entry, g.BlockFrames(), gc.Memory.SinkFrames, gc.Memory.CacheFrames,
					g.Schedule.Steps, g.Schedule.Warp, g.Schedule.Shift, g.Schedule.Update)
				if d := g.VideoDisk(); d.Total() > 0 {
					fmt.Fprintf(stdout, "  video: %d frames at %d fps, crf %d; up to about %s of disk while the run goes (%s of lossless copies in %s/%s/, removed when complete)\n",
						config.VideoFrames(frames), g.Video.FPS, g.Video.CRF, config.Bytes(d.Total()), config.Bytes(d.Lossless), runfolder.DirState, runfolder.DirVideoState)
				}
			}
			if prog != nil {
				prog.finish()
			}
			label := "generate (blocks)"
			if g.VAE != "" {
				label = "generate (blocks, decoded)"
			}
			prog = newProgress(stderr, label, total, first, rf.quiet)
		},
		Block: func(b int, lines []runfolder.LogLine) {
			prog.add(1)
			printUpdates(updates, "all", gc.Config, b, lines, prog)
			if genHook != nil {
				genHook()
			}
		},
		Progress: func(stage string, done, total int) {
			p := stages[stage]
			if p == nil || p.total != total {
				p = newProgress(stderr, stage, total, 0, rf.quiet)
				stages[stage] = p
			}
			p.add(done - p.done)
			if done == total {
				p.finish()
			}
		},
		Info: func(msg string) {
			if !rf.quiet {
				fmt.Fprintln(stderr, msg)
			}
		},
		Warn: func(msg string) { fmt.Fprintln(stderr, msg) },
	}
	for _, w := range gc.Warnings {
		fmt.Fprintln(stderr, w)
	}
	return hooks, func() {
		if prog != nil {
			prog.finish()
		}
	}
}

// inputError names the flag of a checkpoint or text that the rollout could
// not use (rollout.InputError), as a usage error.
func inputError(err error, g config.GenerateSection) error {
	var ie *rollout.InputError
	if !errors.As(err, &ie) {
		return err
	}
	if ie.Prompt < 0 {
		return usagef("--checkpoint %s: %w", g.Checkpoint, ie.Err)
	}
	if ie.Prompt >= len(g.Texts) {
		return usagef("--prompt %q: %w", ie.Name, ie.Err)
	}
	path := g.Texts[ie.Prompt].Path
	var te *rollout.TextTensorError
	switch {
	case errors.As(ie.Err, &te) && te.Tensor != "":
		return usagef("--text %s: no tensor %q (--text-tensor)", path, te.Tensor)
	case errors.As(ie.Err, &te):
		return usagef("--text %s: %d tensors; name one with --text-tensor", path, len(te.Have))
	}
	return usagef("--text %s: %w", path, ie.Err)
}

// genHook, when set (tests), runs after every finished block of generate.
var genHook func()
