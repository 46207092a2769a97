package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runinput"
)

// configFlags binds command-line flags to Config fields. Flags override the
// YAML file only when given on the command line.
type configFlags struct {
	fs      *pflag.FlagSet
	file    string
	applies []func(*config.Config) error
	// keys are the YAML keys present in the --config file (after resolve).
	keys config.Keys
}

// usageFor appends a flag's YAML key to its help text.
func usageFor(flag, usage string) string {
	if p, ok := config.KeyOf(flag); ok {
		return usage + " (" + p + ")"
	}
	return usage
}

// set registers the apply of a flag that sets one field.
func set[T any](cf *configFlags, name string, v *T, field func(*config.Config) *T) {
	cf.applies = append(cf.applies, func(c *config.Config) error {
		if cf.fs.Changed(name) {
			*field(c) = *v
		}
		return nil
	})
}

func (cf *configFlags) str(name, usage string, def config.Config, field func(*config.Config) *string) {
	set(cf, name, cf.fs.String(name, *field(&def), usageFor(name, usage)), field)
}

func (cf *configFlags) integer(name, usage string, def config.Config, field func(*config.Config) *int) {
	set(cf, name, cf.fs.Int(name, *field(&def), usageFor(name, usage)), field)
}

func (cf *configFlags) float(name, usage string, def config.Config, field func(*config.Config) *float64) {
	set(cf, name, cf.fs.Float64(name, *field(&def), usageFor(name, usage)), field)
}

// variant registers the flag of the variant at YAML key path (see
// variantKeys): its value is a name, read by setVariant; an empty one is
// left to explicitZeros.
func (cf *configFlags) variant(name, usage string, def config.Config, path string) {
	v := cf.fs.String(name, config.VariantName(def, path), usageFor(name, usage))
	cf.applies = append(cf.applies, func(c *config.Config) error {
		if !cf.fs.Changed(name) || strings.TrimSpace(*v) == "" {
			return nil
		}
		return config.SetVariant(c, path, *v)
	})
}

// bindConfigFlags registers --config and a flag for every setting of a
// simulate-style run: the run, the stream, the layout, and the memory
// flags shared with generate (bindMemoryFlags).
func bindConfigFlags(fs *pflag.FlagSet, def config.Config) *configFlags {
	cf := &configFlags{fs: fs}
	fs.StringVar(&cf.file, "config", "", "YAML config file (flags given on the command line override it)")
	cf.str("out", "parent folder of run folders", def, func(c *config.Config) *string { return &c.Run.Out })
	cf.str("name", "run folder name inside --out (default: the command name)", def, func(c *config.Config) *string { return &c.Run.Name })
	set(cf, "seed", fs.Int64("seed", def.Run.Seed, usageFor("seed", "random seed of the synthetic stream")), func(c *config.Config) *int64 { return &c.Run.Seed })
	cf.integer("snapshot-every", "save resume snapshots every N blocks, 0 = only on Ctrl-C", def, func(c *config.Config) *int { return &c.Run.SnapshotEvery })
	set(cf, "plots", fs.Bool("plots", def.Run.Plots, usageFor("plots", "draw the figures at the end")), func(c *config.Config) *bool { return &c.Run.Plots })
	pol := fs.StringSlice("policy", def.Policies, usageFor("policy", "memory policies, comma-separated: "+strings.Join(memory.Names(), ", ")))
	cf.applies = append(cf.applies, func(c *config.Config) error {
		if fs.Changed("policy") {
			c.Policies = append([]string(nil), *pol...)
		}
		return nil
	})
	cf.str("stream", "stream kind: "+strings.Join(config.StreamKinds, ", "), def, func(c *config.Config) *string { return &c.Stream.Kind })
	cf.str("stream-file", "recorded stream file for --stream file", def, func(c *config.Config) *string { return &c.Stream.Path })
	cf.float("seconds", "video length in seconds at --fps latent frames/s", def, func(c *config.Config) *float64 { return &c.Stream.Seconds })
	cf.float("fps", "latent frames per second", def, func(c *config.Config) *float64 { return &c.Stream.FPS })
	cf.integer("first-layer", "simulate the stream's layers [first-layer, first-layer + layers)", def, func(c *config.Config) *int { return &c.Stream.FirstLayer })
	cf.integer("layers", "transformer layers", def, func(c *config.Config) *int { return &c.Memory.Layout.Layers })
	cf.integer("heads", "attention heads per layer", def, func(c *config.Config) *int { return &c.Memory.Layout.Heads })
	cf.integer("head-dim", "per-head key/value dimension", def, func(c *config.Config) *int { return &c.Memory.Layout.HeadDim })
	cf.integer("height", "latent token rows per frame", def, func(c *config.Config) *int { return &c.Memory.Layout.Height })
	cf.integer("width", "latent token columns per frame", def, func(c *config.Config) *int { return &c.Memory.Layout.Width })
	cf.integer("frames-per-block", "latent frames per block", def, func(c *config.Config) *int { return &c.Memory.Layout.FramesPerBlock })
	cf.bindMemoryFlags(def)
	return cf
}

// bindMemoryFlags registers the memory flags that simulate, demo, eval and
// generate share: the attention budget, every DensityKV bank parameter and
// variant, and the baselines' settings (YAML memory.*).
func (cf *configFlags) bindMemoryFlags(def config.Config) {
	cf.integer("sink-frames", "first-frame sink, in frames", def, func(c *config.Config) *int { return &c.Memory.SinkFrames })
	cf.integer("cache-frames", "native rolling cache incl. sink, in frames", def, func(c *config.Config) *int { return &c.Memory.CacheFrames })
	cf.integer("window-frames", "local window incl. the current block, in frames", def, func(c *config.Config) *int { return &c.Memory.WindowFrames })
	cf.integer("capacity", "historical budget M per head in tokens, 0 = (cache − sink − window) frames", def, func(c *config.Config) *int { return &c.Memory.Capacity })
	cf.float("tau", "DensityKV density-growth threshold τ (> 1)", def, func(c *config.Config) *float64 { return &c.Memory.Bank.Tau })
	cf.float("sigma", "Soft-Riesz length scale σ", def, func(c *config.Config) *float64 { return &c.Memory.Bank.Sigma })
	cf.float("p", "Soft-Riesz exponent p", def, func(c *config.Config) *float64 { return &c.Memory.Bank.P })
	cf.float("eps", "Soft-Riesz softening ε", def, func(c *config.Config) *float64 { return &c.Memory.Bank.Eps })
	cf.float("delta", "baseline floor δ", def, func(c *config.Config) *float64 { return &c.Memory.Bank.Delta })
	cf.variant("ordering", "candidate ordering: mean (paper), max (authors' code), source", def, "memory.bank.ordering")
	cf.variant("baselines", "insertion baselines: frozen (paper), refresh", def, "memory.bank.baselines")
	cf.variant("eviction", "eviction: mandatory-densest (paper), densest, mandatory-source", def, "memory.bank.eviction")
	cf.variant("prefix", "admitted prefix: shared (paper), per-head", def, "memory.bank.prefix")
	cf.variant("admission", "admission: joint (paper), sequential", def, "memory.bank.admission")
	cf.variant("descriptor", "density descriptor: post-rope-key (paper), pre-rope-key, key-value ([K;V], post-RoPE K), pre-rope-key-value ([K;V], pre-RoPE K)", def, "memory.bank.descriptor")
	cf.variant("payload", "stored K/V dtype: bf16 (paper), f32", def, "memory.bank.payload")
	cf.variant("densities", "density/baseline precision: f32, f64", def, "memory.bank.densities")
	cf.integer("workers", "bank worker threads, 0 = one per head up to the cores (recorded resolved)", def, func(c *config.Config) *int { return &c.Memory.Bank.Workers })
	cf.integer("deep-forcing-recent", "Deep Forcing recent frames incl. the current block", def, func(c *config.Config) *int { return &c.Memory.DeepForcing.RecentFrames })
	cf.integer("deep-forcing-max-reuse", "Deep Forcing compressions a token may survive", def, func(c *config.Config) *int { return &c.Memory.DeepForcing.MaxReuse })
	cf.variant("deep-forcing-queries", "Deep Forcing query buffer: every-call (the authors' adapter: the last recent-frames' worth of query tokens of every call), clean (clean-pass queries only)", def, "memory.deep_forcing.queries")
	cf.variant("deep-forcing-sink", "Deep Forcing sink RoPE position after a compression: authors (start − cache frames), before-tail (just before the recent tail)", def, "memory.deep_forcing.sink")
	cf.variant("deep-forcing-fusion", "Deep Forcing query fusion: sum (summed query), max (largest single query)", def, "memory.deep_forcing.fusion")
	cf.integer("rag-top-k", "LongLive-RAG frames retrieved per block, 0 = capacity / tokens per frame", def, func(c *config.Config) *int { return &c.Memory.LongLiveRAG.TopK })
	cf.variant("rag-descriptor", "LongLive-RAG frame descriptor: latent-mean (the authors' avg_pool fallback), key-mean, ae (the authors' autoencoder; generate --rag-ae FILE)", def, "memory.longlive_rag.descriptor")
	cf.variant("rag-pool", "LongLive-RAG retrieval pool: physical (the authors' code: frames evicted from the cache-frames cache), window (frames leaving the local window)", def, "memory.longlive_rag.pool")
}

// load returns base overlaid with the --config file (recording its keys in
// cf.keys) and then the flags given on the command line, with explicit
// zeros that would silently become defaults rejected; not yet resolved.
func (cf *configFlags) load(base config.Config, v *config.Config, file any) error {
	*v = base
	cf.keys = config.NewKeys()
	if cf.file != "" {
		keys, err := config.Load(cf.file, file, true)
		if err != nil {
			return usageError{fmt.Errorf("--config: %w", err)}
		}
		cf.keys = keys
	}
	var errs []error
	for _, apply := range cf.applies {
		if err := apply(v); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return usageError{fmt.Errorf("config: %w", errors.Join(errs...))}
	}
	if err := config.ExplicitZeros(v, cf.changed, cf.keys, cf.file); err != nil {
		return usageError{err}
	}
	return nil
}

// changed is config.Changed for the command line.
func (cf *configFlags) changed(flag string) (string, bool) {
	if f := cf.fs.Lookup(flag); f != nil && cf.fs.Changed(flag) {
		return f.Value.String(), true
	}
	return "", false
}

// resolve returns base overlaid with the --config file and then the flags
// given on the command line, validated.
func (cf *configFlags) resolve(base config.Config) (config.Config, error) {
	var c config.Config
	if err := cf.load(base, &c, &c); err != nil {
		return base, err
	}
	if c.Stream.Kind == "file" && c.Stream.Path != "" {
		// A recorded stream brings its layout and its run's attention
		// budget; the file and the flags still override them.
		sb, err := runinput.StreamDefaults(base, c.Stream.Path)
		if err != nil {
			return base, usageError{err}
		}
		if err := cf.load(sb, &c, &c); err != nil {
			return base, err
		}
	}
	r, err := runinput.Resolve(c)
	if err != nil {
		return base, usageError{err}
	}
	return r, nil
}
