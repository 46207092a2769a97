package config

import (
	"fmt"

	"github.com/densitykv/densitykv/internal/vocab"
	"github.com/densitykv/densitykv/schedule"
)

// Backbone names a released few-step causal generator whose settings a
// preset carries (generate.backbone, --backbone). Its names are none,
// self-forcing, causal-forcing and longlive (String, MarshalText,
// UnmarshalText).
type Backbone uint8

const (
	// BackboneNone applies no preset: every setting is the generate
	// default or given explicitly.
	BackboneNone Backbone = iota
	// BackboneSelfForcing is Self-Forcing, run from its EMA weights
	// (generator_ema, the authors' use_ema: true).
	BackboneSelfForcing
	// BackboneCausalForcing is Causal-Forcing (generator, use_ema: false).
	BackboneCausalForcing
	// BackboneLongLive is LongLive: the base generator plus its LoRA
	// (generator + generator_lora of --lora, rank 256, alpha 256).
	BackboneLongLive
)

var backboneNames = vocab.List{Pkg: "config", Kind: "backbone", Names: []string{"none", "self-forcing", "causal-forcing", "longlive"}}

func (b Backbone) String() string               { return backboneNames.String(uint8(b), "Backbone") }
func (b Backbone) MarshalText() ([]byte, error) { return backboneNames.Marshal(uint8(b)) }
func (b *Backbone) UnmarshalText(t []byte) error {
	x, err := backboneNames.Parse(t)
	if err == nil {
		*b = Backbone(x)
	}
	return err
}

// Names lists the backbones' names.
func (Backbone) Names() []string { return backboneNames.All() }

// ScheduleConfig is the denoising schedule of a generate run
// (generate.schedule): every option of the authors' rollout, with their
// names in the comments.
type ScheduleConfig struct {
	// Steps is denoising_step_list.
	Steps []int `yaml:"steps,flow"`
	// FirstChunkSteps is denoising_step_list_first_chunk, the step list of
	// block 0 only (empty: Steps).
	FirstChunkSteps []int `yaml:"first_chunk_steps,flow"`
	// Warp is warp_denoising_step: the steps are warped onto the shifted
	// scheduler table (true), or used as timesteps as they are.
	Warp bool `yaml:"warp"`
	// Shift is timestep_shift.
	Shift float64 `yaml:"shift"`
	// Update is denoising_update_mode: x0_renoise or flow_euler.
	Update schedule.Update `yaml:"update"`
}

// Options returns the rollout's schedule options.
func (s ScheduleConfig) Options() schedule.Options {
	o := schedule.Options{Steps: append([]int(nil), s.Steps...), Unwarped: !s.Warp, Shift: s.Shift, Update: s.Update}
	if len(s.FirstChunkSteps) > 0 {
		o.FirstChunkSteps = append([]int(nil), s.FirstChunkSteps...)
	}
	return o
}

// DefaultScheduleConfig is the released models' schedule (the common
// section of the authors' configs/examples/paper_cases.yaml): steps 1000,
// 750, 500, 250, warped, shift 5, x0 re-noise.
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{Steps: append([]int(nil), schedule.DefaultSteps...), Warp: true, Shift: 5, Update: schedule.UpdateX0Renoise}
}

// Preset is what a backbone preset sets: the checkpoint entry, the LoRA
// that must come with it, the block length, the attention budget and the
// schedule, exactly as the authors' configs/examples/paper_cases.yaml runs
// the backbone (its common section: 3 frames per block, sink 1,
// local_attn_size 12, steps 1000/750/500/250 warped with shift 5;
// its backbones section: use_ema and the LoRA adapter).
type Preset struct {
	Entry          string  // PyTorch checkpoint entry of the generator
	NeedsLoRA      bool    // the backbone needs --lora (its generator_lora adapters)
	LoRARank       int     // the adapters' rank (0: none)
	LoRAAlpha      float64 // adapter alpha (0: none)
	FramesPerBlock int
	SinkFrames     int
	CacheFrames    int
	Schedule       ScheduleConfig
}

// Preset returns the backbone's preset; BackboneNone has none (ok false).
func (b Backbone) Preset() (p Preset, ok bool) {
	p = Preset{FramesPerBlock: 3, SinkFrames: 1, CacheFrames: 12, Schedule: DefaultScheduleConfig()}
	switch b {
	case BackboneSelfForcing:
		p.Entry = "generator_ema"
	case BackboneCausalForcing:
		p.Entry = "generator"
	case BackboneLongLive:
		p.Entry, p.NeedsLoRA, p.LoRARank, p.LoRAAlpha = "generator", true, 256, 256
	default:
		return Preset{}, false
	}
	return p, true
}

// LongLiveUpstream is LongLive's own release setting
// (longlive_inference.yaml of NVlabs/LongLive: num_frame_per_block 6,
// sink_size 3, local_attn_size 12), which the paper does not use, as
// flags on top of --backbone longlive. The local window and Deep Forcing's
// recent tail include the current block, so they grow to 6 frames with it
// (every policy's settings are checked, whichever runs).
const LongLiveUpstream = "--backbone longlive --frames-per-block 6 --sink-frames 3 --window-frames 6 --deep-forcing-recent 6"

// presetKeys are the YAML keys a preset fills, in the order ApplyPreset
// sets them.
var presetKeys = []string{"generate.entry", "generate.lora_alpha", "generate.frames_per_block", "memory.sink_frames", "memory.cache_frames",
	"generate.schedule.steps", "generate.schedule.first_chunk_steps", "generate.schedule.warp", "generate.schedule.shift", "generate.schedule.update"}

// PresetKeys returns the YAML keys a backbone preset fills.
func PresetKeys() []string { return append([]string(nil), presetKeys...) }

// ApplyPreset fills the settings of gc's backbone preset into every key
// that was not given explicitly (explicit reports a YAML key set by the
// file or by its flag); --entry and the other flags override the preset.
// It does nothing for BackboneNone, and returns an error for a backbone
// that needs a LoRA checkpoint when none is given.
func (gc *GenerateConfig) ApplyPreset(explicit func(key string) bool) error {
	G := &gc.Generate
	gc.loraAlphaGiven = explicit("generate.lora_alpha")
	p, ok := G.Backbone.Preset()
	if !ok {
		if _, err := G.Backbone.MarshalText(); err != nil {
			return fmt.Errorf("generate.backbone (--backbone): %w", err)
		}
		return nil
	}
	set := func(key string, apply func()) {
		if !explicit(key) {
			apply()
		}
	}
	set("generate.entry", func() { G.Entry = p.Entry })
	set("generate.lora_alpha", func() { G.LoRAAlpha = p.LoRAAlpha })
	set("generate.frames_per_block", func() { G.FramesPerBlock = p.FramesPerBlock })
	set("memory.sink_frames", func() { gc.Memory.SinkFrames = p.SinkFrames })
	set("memory.cache_frames", func() { gc.Memory.CacheFrames = p.CacheFrames })
	set("generate.schedule.steps", func() { G.Schedule.Steps = p.Schedule.Steps })
	set("generate.schedule.first_chunk_steps", func() { G.Schedule.FirstChunkSteps = p.Schedule.FirstChunkSteps })
	set("generate.schedule.warp", func() { G.Schedule.Warp = p.Schedule.Warp })
	set("generate.schedule.shift", func() { G.Schedule.Shift = p.Schedule.Shift })
	set("generate.schedule.update", func() { G.Schedule.Update = p.Schedule.Update })
	if p.NeedsLoRA && G.LoRA == "" {
		return fmt.Errorf("--backbone %s needs its LoRA checkpoint: --lora (generate.lora), e.g. longlive_lora.pt", G.Backbone)
	}
	return nil
}

// LoRAAlphaGiven reports whether the LoRA alpha was given (a flag or the
// file: ApplyPreset's explicit, or keys, the file's): the input stage then
// holds the LoRA file's own alpha against it.
func (gc *GenerateConfig) LoRAAlphaGiven(keys Keys) bool {
	return gc.loraAlphaGiven || keys.Set["generate.lora_alpha"]
}
