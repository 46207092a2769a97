package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

// Config is the full configuration of a simulate or demo run. It is read
// from YAML (unknown keys are errors), overridden by flags, resolved (every
// default filled in by memory.Config.Resolve), validated, and written to
// config.resolved.yaml in the run folder.
type Config struct {
	Run    RunConfig    `yaml:"run"`
	Stream StreamConfig `yaml:"stream"`
	// Policies run side by side on the same stream (memory.Names()).
	Policies []string `yaml:"policies"`
	// Memory configures the token layout (memory.layout), the attention
	// budget (sink, cache, local window, capacity M), the DensityKV bank
	// parameters and variants (memory.bank) and the baselines.
	Memory memory.Config `yaml:"memory"`
}

// RunConfig names the run folder and controls determinism and output.
type RunConfig struct {
	// Out is the parent folder of run folders.
	Out string `yaml:"out"`
	// Name is the run folder's name inside Out.
	Name string `yaml:"name"`
	// Seed drives the synthetic stream (same seed, same results).
	Seed int64 `yaml:"seed"`
	// SnapshotEvery saves policy snapshots for --resume every this many
	// blocks (0 = only when stopped by Ctrl-C).
	SnapshotEvery int `yaml:"snapshot_every"`
	// Plots draws the figures at the end of the run.
	Plots bool `yaml:"plots"`
}

// StreamConfig is the length and kind of the KV stream.
type StreamConfig struct {
	// Kind of stream: "synthetic" (the built-in video-like generator) or
	// "file" (a stream recorded with package synth's format, at Path; its
	// layout replaces memory.layout).
	Kind string `yaml:"kind"`
	Path string `yaml:"path"`
	// Synth parameterises the synthetic scene.
	Synth SynthParams `yaml:"synth"`
	// Seconds of video; the stream has ceil(Seconds·FPS) latent frames
	// rounded up to whole blocks.
	Seconds float64 `yaml:"seconds"`
	// FPS is latent frames per second (4 for Wan2.1).
	FPS float64 `yaml:"fps"`
	// FirstLayer simulates the stream's layers [FirstLayer, FirstLayer +
	// memory.layout.layers) (synthetic streams): the policies' layers are
	// independent, so a paper-scale run can be split over several runs
	// that each fit in memory. Logged layer indices are the stream's.
	FirstLayer int `yaml:"first_layer"`
}

var streamKinds = []string{"synthetic", "file"}

// yamlFlags maps YAML paths to the flags that set them, for error messages.
var yamlFlags = map[string]string{
	"run.out": "out", "run.name": "name", "run.snapshot_every": "snapshot-every",
	"stream.seconds": "seconds", "stream.fps": "fps", "stream.kind": "stream", "policies": "policy",
	"stream.first_layer": "first-layer",
}

// DefaultConfig is the paper-scale setting (Wan2.1-1.3B layout, 60 s).
func DefaultConfig() Config {
	return Config{
		Run:      RunConfig{Out: "runs", Seed: 0, SnapshotEvery: 10, Plots: true},
		Stream:   StreamConfig{Kind: "synthetic", Seconds: 60, FPS: 4, Synth: synthParams(synth.PaperConfig(1))},
		Policies: []string{memory.NameDensityKV},
		Memory:   layoutFreeDefaults(memory.DefaultLayout()),
	}
}

// layoutFreeDefaults returns memory's defaults for l with the fields that
// derive from the layout (capacity, LongLive-RAG top-k) left at 0, so that
// Resolve recomputes them after flags change the layout.
func layoutFreeDefaults(l memory.Layout) memory.Config {
	m := memory.DefaultConfig(l)
	m.Capacity = 0
	m.LongLiveRAG.TopK = 0
	return m
}

// DemoConfig is the reduced but faithful scale of `densitykv demo`: the
// paper's block of three frames, one sink frame, a five-frame local window,
// a twelve-frame native cache, six frame-equivalents of memory and 4 latent
// frames/s, on a smaller token grid with fewer layers, heads and dimensions.
func DemoConfig() Config {
	c := DefaultConfig()
	sc := synth.DefaultConfig()
	c.Memory.Layout = sc.Layout
	c.Stream.Synth = synthParams(sc)
	// Keys are RMS-normalised (‖k‖ ≈ √d), so the paper's σ = 8 at d = 128
	// becomes σ = 8·√(d/128) at the demo's d = 64: the same σ/‖k‖.
	c.Memory.Bank.Sigma = 8 * math.Sqrt(float64(sc.Layout.HeadDim)/128)
	c.Stream.Seconds = 30
	c.Run.Name = "demo"
	c.Policies = []string{memory.NameNative, memory.NameFIFO, memory.NameUniformStride,
		memory.NameDeepForcing, memory.NameLongLiveRAG, memory.NameDensityKV}
	return c
}

// Frames is the number of latent frames of the stream, rounded up to whole
// blocks.
func (c Config) Frames() int { return c.Blocks() * c.Memory.Layout.FramesPerBlock }

// Blocks is the number of generated blocks covering Stream.Seconds.
func (c Config) Blocks() int {
	fpb := c.Memory.Layout.FramesPerBlock
	if fpb <= 0 || !(c.Stream.FPS > 0) || !(c.Stream.Seconds > 0) {
		return 0
	}
	frames := int(math.Ceil(c.Stream.Seconds*c.Stream.FPS - 1e-9))
	return (frames + fpb - 1) / fpb
}

// Resolve fills every default (memory.Config.Resolve) and validates c,
// naming the first field at fault by its YAML path and flag.
func (c Config) Resolve() (Config, error) {
	var errs []error
	bad := func(field string, v any, want string) {
		if f, ok := yamlFlags[field]; ok {
			field += " (--" + f + ")"
		}
		errs = append(errs, fmt.Errorf("%s is %v, want %s", field, v, want))
	}
	if c.Run.Out == "" {
		bad("run.out", `""`, "a folder")
	}
	if strings.ContainsAny(c.Run.Name, `/\`) || c.Run.Name == "." || c.Run.Name == ".." {
		bad("run.name", fmt.Sprintf("%q", c.Run.Name), "a plain folder name")
	}
	if c.Run.SnapshotEvery < 0 {
		bad("run.snapshot_every", c.Run.SnapshotEvery, ">= 0")
	}
	if !slices.Contains(streamKinds, c.Stream.Kind) {
		bad("stream.kind", fmt.Sprintf("%q", c.Stream.Kind), "one of "+strings.Join(streamKinds, ", "))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"stream.seconds", c.Stream.Seconds}, {"stream.fps", c.Stream.FPS}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			bad(f.name, f.v, "a finite number > 0")
		}
	}
	if len(c.Policies) == 0 {
		bad("policies", "[]", "at least one of "+strings.Join(memory.Names(), ", "))
	}
	seen := map[string]bool{}
	for i, p := range c.Policies {
		if !slices.Contains(memory.Names(), p) {
			bad(fmt.Sprintf("policies[%d] (--policy)", i), fmt.Sprintf("%q", p), "one of "+strings.Join(memory.Names(), ", "))
		}
		if seen[p] {
			bad(fmt.Sprintf("policies[%d] (--policy)", i), fmt.Sprintf("%q", p), "each policy once")
		}
		seen[p] = true
	}
	if c.Stream.Kind == "file" {
		if c.Stream.Path == "" {
			bad("stream.path", `""`, "a stream file for stream.kind file")
		} else if l, _, err := streamLayoutFromFile(c.Stream.Path); err != nil {
			errs = append(errs, fmt.Errorf("stream.path (--stream-file) %s: %w", c.Stream.Path, err))
		} else {
			c.Memory.Layout = l
		}
	}
	if c.Stream.Kind == "synthetic" {
		// LongLive-RAG reads the generator's latents [F][C][2H][2W].
		c.Memory.LongLiveRAG.LatentChannels = c.Stream.Synth.Channels
	}
	if c.Run.Seed < 0 {
		bad("run.seed", c.Run.Seed, ">= 0")
	}
	if c.Stream.FirstLayer < 0 {
		bad("stream.first_layer", c.Stream.FirstLayer, ">= 0")
	} else if c.Stream.FirstLayer > 0 && c.Stream.Kind != "synthetic" {
		bad("stream.first_layer", c.Stream.FirstLayer, "0 for stream.kind "+c.Stream.Kind+" (only synthetic streams start at a later layer)")
	}
	m, err := c.Memory.Resolve()
	if err != nil {
		errs = append(errs, err)
	}
	if err == nil && c.Stream.Kind == "synthetic" {
		sc := synthConfig(Config{Run: c.Run, Stream: c.Stream, Memory: m})
		sc.Blocks = max(sc.Blocks, 1)
		if err := sc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stream.synth: %w", err))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	c.Memory = m
	return c, nil
}

// LoadConfigFile decodes a YAML file over base (keys absent from the file
// keep base's values). Unknown keys and type errors name the file and line.
func LoadConfigFile(path string, base Config) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return base, fmt.Errorf("config %s: %w", path, err)
	}
	defer f.Close()
	c, err := decodeConfig(f, base)
	if err != nil {
		return base, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

func decodeConfig(r io.Reader, base Config) (Config, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	c := base
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) { // empty file: all defaults
			return base, nil
		}
		return base, err
	}
	return c, nil
}

// MarshalConfig renders c as YAML with a header comment.
func MarshalConfig(c Config) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# densitykv resolved configuration: every default filled in.\n")
	buf.WriteString("# Re-run with: densitykv simulate --config config.resolved.yaml\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// configFlags binds command-line flags to Config fields. Flags override the
// YAML file only when given on the command line.
type configFlags struct {
	fs      *pflag.FlagSet
	file    string
	applies []func(*Config)
}

func bindConfigFlags(fs *pflag.FlagSet, def Config) *configFlags {
	cf := &configFlags{fs: fs}
	fs.StringVar(&cf.file, "config", "", "YAML config file (flags given on the command line override it)")
	str := func(name, usage string, field func(*Config) *string) {
		v := fs.String(name, *field(&def), usage)
		cf.applies = append(cf.applies, func(c *Config) {
			if fs.Changed(name) {
				*field(c) = *v
			}
		})
	}
	integer := func(name, usage string, field func(*Config) *int) {
		v := fs.Int(name, *field(&def), usage)
		cf.applies = append(cf.applies, func(c *Config) {
			if fs.Changed(name) {
				*field(c) = *v
			}
		})
	}
	float := func(name, usage string, field func(*Config) *float64) {
		v := fs.Float64(name, *field(&def), usage)
		cf.applies = append(cf.applies, func(c *Config) {
			if fs.Changed(name) {
				*field(c) = *v
			}
		})
	}
	str("out", "parent folder of run folders (run.out)", func(c *Config) *string { return &c.Run.Out })
	str("name", "run folder name inside --out (run.name; default: the command name)", func(c *Config) *string { return &c.Run.Name })
	seed := fs.Int64("seed", def.Run.Seed, "random seed of the synthetic stream (run.seed)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("seed") {
			c.Run.Seed = *seed
		}
	})
	integer("snapshot-every", "save resume snapshots every N blocks, 0 = only on Ctrl-C (run.snapshot_every)", func(c *Config) *int { return &c.Run.SnapshotEvery })
	plots := fs.Bool("plots", def.Run.Plots, "draw the figures at the end (run.plots)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("plots") {
			c.Run.Plots = *plots
		}
	})
	pol := fs.StringSlice("policy", def.Policies, "memory policies, comma-separated: "+strings.Join(memory.Names(), ", ")+" (policies)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("policy") {
			c.Policies = append([]string(nil), *pol...)
		}
	})
	str("stream", "stream kind: "+strings.Join(streamKinds, ", ")+" (stream.kind)", func(c *Config) *string { return &c.Stream.Kind })
	str("stream-file", "recorded stream file for --stream file (stream.path)", func(c *Config) *string { return &c.Stream.Path })
	float("seconds", "video length in seconds at --fps latent frames/s (stream.seconds)", func(c *Config) *float64 { return &c.Stream.Seconds })
	float("fps", "latent frames per second (stream.fps)", func(c *Config) *float64 { return &c.Stream.FPS })
	integer("first-layer", "simulate the stream's layers [first-layer, first-layer + layers) (stream.first_layer)", func(c *Config) *int { return &c.Stream.FirstLayer })
	integer("layers", "transformer layers (memory.layout.layers)", func(c *Config) *int { return &c.Memory.Layout.Layers })
	integer("heads", "attention heads per layer (memory.layout.heads)", func(c *Config) *int { return &c.Memory.Layout.Heads })
	integer("head-dim", "per-head key/value dimension (memory.layout.headdim)", func(c *Config) *int { return &c.Memory.Layout.HeadDim })
	integer("height", "latent token rows per frame (memory.layout.height)", func(c *Config) *int { return &c.Memory.Layout.Height })
	integer("width", "latent token columns per frame (memory.layout.width)", func(c *Config) *int { return &c.Memory.Layout.Width })
	integer("frames-per-block", "latent frames per block (memory.layout.framesperblock)", func(c *Config) *int { return &c.Memory.Layout.FramesPerBlock })
	integer("sink-frames", "first-frame sink, in frames (memory.sink_frames)", func(c *Config) *int { return &c.Memory.SinkFrames })
	integer("cache-frames", "native rolling cache incl. sink, in frames (memory.cache_frames)", func(c *Config) *int { return &c.Memory.CacheFrames })
	integer("window-frames", "local window incl. the current block, in frames (memory.window_frames)", func(c *Config) *int { return &c.Memory.WindowFrames })
	integer("capacity", "historical budget M per head in tokens, 0 = (cache − sink − window) frames (memory.capacity)", func(c *Config) *int { return &c.Memory.Capacity })
	float("tau", "DensityKV density-growth threshold τ (memory.bank.tau)", func(c *Config) *float64 { return &c.Memory.Bank.Tau })
	float("sigma", "Soft-Riesz length scale σ (memory.bank.sigma)", func(c *Config) *float64 { return &c.Memory.Bank.Sigma })
	float("p", "Soft-Riesz exponent p (memory.bank.p)", func(c *Config) *float64 { return &c.Memory.Bank.P })
	float("eps", "Soft-Riesz softening ε (memory.bank.eps)", func(c *Config) *float64 { return &c.Memory.Bank.Eps })
	float("delta", "baseline floor δ (memory.bank.delta)", func(c *Config) *float64 { return &c.Memory.Bank.Delta })
	str("ordering", "candidate ordering: mean (paper), max (authors' code), source (memory.bank.ordering)", func(c *Config) *string { return &c.Memory.Bank.Ordering })
	str("baselines", "insertion baselines: frozen (paper), refresh (memory.bank.baselines)", func(c *Config) *string { return &c.Memory.Bank.Baselines })
	str("eviction", "eviction: mandatory-densest (paper), densest, mandatory-source (memory.bank.eviction)", func(c *Config) *string { return &c.Memory.Bank.Eviction })
	str("prefix", "admitted prefix: shared (paper), per-head (memory.bank.prefix)", func(c *Config) *string { return &c.Memory.Bank.Prefix })
	str("admission", "admission: joint (paper), sequential (memory.bank.admission)", func(c *Config) *string { return &c.Memory.Bank.Admission })
	str("descriptor", "density descriptor: post-rope-key (paper), pre-rope-key, key-value ([K;V], post-RoPE K), pre-rope-key-value ([K;V], pre-RoPE K) (memory.bank.descriptor)", func(c *Config) *string { return &c.Memory.Bank.Descriptor })
	str("payload", "stored K/V dtype: bf16 (paper), f32 (memory.bank.payload)", func(c *Config) *string { return &c.Memory.Bank.Payload })
	str("densities", "density/baseline precision: f32, f64 (memory.bank.densities)", func(c *Config) *string { return &c.Memory.Bank.Densities })
	integer("workers", "bank worker threads, 0 = all cores (memory.bank.workers)", func(c *Config) *int { return &c.Memory.Bank.Workers })
	integer("deep-forcing-recent", "Deep Forcing recent frames incl. the current block (memory.deep_forcing.recent_frames)", func(c *Config) *int { return &c.Memory.DeepForcing.RecentFrames })
	integer("deep-forcing-max-reuse", "Deep Forcing compressions a token may survive (memory.deep_forcing.max_reuse)", func(c *Config) *int { return &c.Memory.DeepForcing.MaxReuse })
	integer("rag-top-k", "LongLive-RAG frames retrieved per block, 0 = capacity / tokens per frame (memory.longlive_rag.top_k)", func(c *Config) *int { return &c.Memory.LongLiveRAG.TopK })
	str("rag-descriptor", "LongLive-RAG frame descriptor: latent-mean, key-mean (memory.longlive_rag.descriptor)", func(c *Config) *string { return &c.Memory.LongLiveRAG.Descriptor })
	return cf
}

// resolve returns base overlaid with the --config file and then the flags
// given on the command line, validated.
func (cf *configFlags) resolve(base Config) (Config, error) {
	c := base
	if cf.file != "" {
		var err error
		if c, err = LoadConfigFile(cf.file, base); err != nil {
			return base, usageError{fmt.Errorf("--config: %w", err)}
		}
	}
	for _, apply := range cf.applies {
		apply(&c)
	}
	r, err := c.Resolve()
	if err != nil {
		return base, usageError{err}
	}
	return r, nil
}
