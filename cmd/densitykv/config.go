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
)

// Config is the full configuration of a simulate or demo run. It is read
// from YAML (unknown keys are errors), overridden by flags, validated, and
// written with every default filled in to config.resolved.yaml in the run
// folder.
type Config struct {
	Run      RunConfig    `yaml:"run"`
	Stream   StreamConfig `yaml:"stream"`
	Window   WindowConfig `yaml:"window"`
	Policies []string     `yaml:"policies"`
	Bank     BankConfig   `yaml:"bank"`
}

// RunConfig names the run folder and controls determinism and output.
type RunConfig struct {
	// Out is the parent folder of run folders.
	Out string `yaml:"out"`
	// Name is the run folder's name inside Out.
	Name string `yaml:"name"`
	// Seed drives the synthetic stream (same seed, same results).
	Seed int64 `yaml:"seed"`
	// Threads bounds parallel work (0 = all cores).
	Threads int `yaml:"threads"`
	// SnapshotEvery saves policy snapshots for --resume every this many
	// blocks (0 = never; the last completed block is always saved on
	// Ctrl-C).
	SnapshotEvery int `yaml:"snapshot_every"`
	// Plots draws the figures at the end of the run.
	Plots bool `yaml:"plots"`
}

// StreamConfig is the token layout and length of the synthetic KV stream.
type StreamConfig struct {
	// Kind of stream; "synthetic" (the built-in video-like generator).
	Kind           string  `yaml:"kind"`
	Height         int     `yaml:"height"`           // latent token rows per frame (30)
	Width          int     `yaml:"width"`            // latent token columns per frame (52)
	FramesPerBlock int     `yaml:"frames_per_block"` // latent frames per generated block (3)
	Layers         int     `yaml:"layers"`           // transformer layers (30)
	Heads          int     `yaml:"heads"`            // attention heads per layer (12)
	HeadDim        int     `yaml:"head_dim"`         // per-head key/value dimension (128)
	Seconds        float64 `yaml:"seconds"`          // video length
	FPS            float64 `yaml:"fps"`              // latent frames per second (4)
}

// WindowConfig is the attention budget of the paper's matched-capacity
// setting, in frames: one sink frame, a five-frame local window and six
// frame-equivalents of nonlocal memory.
type WindowConfig struct {
	SinkFrames   int `yaml:"sink_frames"`
	LocalFrames  int `yaml:"local_frames"`
	MemoryFrames int `yaml:"memory_frames"`
}

// BankConfig holds DensityKV's parameters and variants (paper defaults).
type BankConfig struct {
	// Capacity M per head; 0 = memory_frames × tokens per frame (9,360 at
	// paper scale).
	Capacity int     `yaml:"capacity"`
	Tau      float64 `yaml:"tau"`
	Sigma    float64 `yaml:"sigma"`
	P        float64 `yaml:"p"`
	Eps      float64 `yaml:"eps"`
	Delta    float64 `yaml:"delta"`
	// Ordering of candidates: mean (the paper), max (the authors' public
	// code), source.
	Ordering string `yaml:"ordering"`
	// Baselines: frozen (the paper) or refresh (after every update).
	Baselines string `yaml:"baselines"`
	// Eviction: mandatory-densest (the paper), densest, mandatory-source.
	Eviction string `yaml:"eviction"`
	// Prefix: shared across the heads of a layer (the paper) or per-head.
	Prefix string `yaml:"prefix"`
	// Admission: joint (the paper) or sequential (within-block competition).
	Admission string `yaml:"admission"`
	// Descriptor of density: post-rope-key (the paper), pre-rope-key, key-value.
	Descriptor string `yaml:"descriptor"`
	// Payload dtype of stored K/V: bf16 (the paper) or f32.
	Payload string `yaml:"payload"`
	// Density precision: f32 or f64.
	Density string `yaml:"density"`
}

// Choices of the enumerated options; the first is the default.
var (
	orderingChoices   = []string{"mean", "max", "source"}
	baselineChoices   = []string{"frozen", "refresh"}
	evictionChoices   = []string{"mandatory-densest", "densest", "mandatory-source"}
	prefixChoices     = []string{"shared", "per-head"}
	admissionChoices  = []string{"joint", "sequential"}
	descriptorChoices = []string{"post-rope-key", "pre-rope-key", "key-value"}
	payloadChoices    = []string{"bf16", "f32"}
	densityChoices    = []string{"f32", "f64"}
	streamKinds       = []string{"synthetic"}
)

// PolicyNames are the memory policies a run may name.
var PolicyNames = []string{"native", "infinity-rope", "deep-forcing", "longlive-rag", "full-history", "fifo", "uniform-stride", "densitykv"}

// yamlFlags maps YAML paths to the flags that set them, for error messages.
var yamlFlags = map[string]string{
	"run.out": "out", "run.name": "name", "run.threads": "threads", "run.snapshot_every": "snapshot-every",
	"stream.height": "height", "stream.width": "width", "stream.frames_per_block": "frames-per-block",
	"stream.layers": "layers", "stream.heads": "heads", "stream.head_dim": "head-dim",
	"stream.seconds": "seconds", "stream.fps": "fps", "window.sink_frames": "sink-frames",
	"window.local_frames": "local-frames", "window.memory_frames": "memory-frames", "policies": "policy",
	"bank.capacity": "capacity", "bank.tau": "tau", "bank.sigma": "sigma", "bank.p": "p", "bank.eps": "eps",
	"bank.delta": "delta", "bank.ordering": "ordering", "bank.baselines": "baselines", "bank.eviction": "eviction",
	"bank.prefix": "prefix", "bank.admission": "admission", "bank.descriptor": "descriptor",
	"bank.payload": "payload", "bank.density": "density",
}

// DefaultConfig is the paper-scale setting (Wan2.1-1.3B layout, 60 s).
func DefaultConfig() Config {
	return Config{
		Run:      RunConfig{Out: "runs", Seed: 0, SnapshotEvery: 10, Plots: true},
		Stream:   StreamConfig{Kind: "synthetic", Height: 30, Width: 52, FramesPerBlock: 3, Layers: 30, Heads: 12, HeadDim: 128, Seconds: 60, FPS: 4},
		Window:   WindowConfig{SinkFrames: 1, LocalFrames: 5, MemoryFrames: 6},
		Policies: []string{"densitykv"},
		Bank: BankConfig{Tau: 2, Sigma: 8, P: 2, Eps: 1, Delta: 1e-6,
			Ordering: orderingChoices[0], Baselines: baselineChoices[0], Eviction: evictionChoices[0],
			Prefix: prefixChoices[0], Admission: admissionChoices[0], Descriptor: descriptorChoices[0],
			Payload: payloadChoices[0], Density: densityChoices[0]},
	}
}

// DemoConfig is the reduced but faithful scale of `densitykv demo`: the
// paper's block of three frames, sink/local/memory budget in frames and
// 4 latent frames/s, on a smaller token grid with fewer layers and heads.
func DemoConfig() Config {
	c := DefaultConfig()
	c.Stream.Height, c.Stream.Width = 12, 20
	c.Stream.Layers, c.Stream.Heads, c.Stream.HeadDim = 4, 4, 64
	c.Stream.Seconds = 30
	c.Run.Name = "demo"
	c.Policies = []string{"native", "fifo", "uniform-stride", "deep-forcing", "longlive-rag", "densitykv"}
	return c
}

// TokensPerFrame is Height·Width.
func (s StreamConfig) TokensPerFrame() int { return s.Height * s.Width }

// Frames is the number of latent frames of the stream, rounded up to whole
// blocks.
func (s StreamConfig) Frames() int { return s.Blocks() * s.FramesPerBlock }

// Blocks is the number of generated blocks covering Seconds.
func (s StreamConfig) Blocks() int {
	if s.FramesPerBlock <= 0 || s.FPS <= 0 {
		return 0
	}
	frames := int(math.Ceil(s.Seconds*s.FPS - 1e-9))
	return (frames + s.FramesPerBlock - 1) / s.FramesPerBlock
}

// EffectiveCapacity is Capacity, or MemoryFrames × tokens per frame when 0.
func (c Config) EffectiveCapacity() int {
	if c.Bank.Capacity > 0 {
		return c.Bank.Capacity
	}
	return c.Window.MemoryFrames * c.Stream.TokensPerFrame()
}

// Validate checks every field and names the first one at fault by its YAML
// path.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, v any, want string) {
		if f, ok := yamlFlags[field]; ok {
			field += " (--" + f + ")"
		}
		errs = append(errs, fmt.Errorf("%s is %v, want %s", field, v, want))
	}
	pos := func(field string, v int) {
		if v <= 0 {
			bad(field, v, "> 0")
		}
	}
	choice := func(field, v string, cs []string) {
		if !slices.Contains(cs, v) {
			bad(field, fmt.Sprintf("%q", v), "one of "+strings.Join(cs, ", "))
		}
	}
	finitePos := func(field string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			bad(field, v, "a finite number > 0")
		}
	}
	if c.Run.Out == "" {
		bad("run.out", `""`, "a folder")
	}
	if strings.ContainsAny(c.Run.Name, `/\`) || c.Run.Name == "." || c.Run.Name == ".." {
		bad("run.name", fmt.Sprintf("%q", c.Run.Name), "a plain folder name")
	}
	if c.Run.Threads < 0 {
		bad("run.threads", c.Run.Threads, ">= 0")
	}
	if c.Run.SnapshotEvery < 0 {
		bad("run.snapshot_every", c.Run.SnapshotEvery, ">= 0")
	}
	choice("stream.kind", c.Stream.Kind, streamKinds)
	pos("stream.height", c.Stream.Height)
	pos("stream.width", c.Stream.Width)
	pos("stream.frames_per_block", c.Stream.FramesPerBlock)
	pos("stream.layers", c.Stream.Layers)
	pos("stream.heads", c.Stream.Heads)
	pos("stream.head_dim", c.Stream.HeadDim)
	if c.Stream.HeadDim > 0 && c.Stream.HeadDim%2 != 0 {
		bad("stream.head_dim", c.Stream.HeadDim, "an even number (RoPE rotates pairs)")
	}
	finitePos("stream.seconds", c.Stream.Seconds)
	finitePos("stream.fps", c.Stream.FPS)
	if c.Window.SinkFrames < 0 {
		bad("window.sink_frames", c.Window.SinkFrames, ">= 0")
	}
	pos("window.local_frames", c.Window.LocalFrames)
	if c.Window.MemoryFrames < 0 {
		bad("window.memory_frames", c.Window.MemoryFrames, ">= 0")
	}
	if len(c.Policies) == 0 {
		bad("policies", "[]", "at least one of "+strings.Join(PolicyNames, ", "))
	}
	seen := map[string]bool{}
	for i, p := range c.Policies {
		if !slices.Contains(PolicyNames, p) {
			bad(fmt.Sprintf("policies[%d]", i), fmt.Sprintf("%q", p), "one of "+strings.Join(PolicyNames, ", "))
		}
		if seen[p] {
			bad(fmt.Sprintf("policies[%d]", i), fmt.Sprintf("%q", p), "each policy once")
		}
		seen[p] = true
	}
	if c.Bank.Capacity < 0 {
		bad("bank.capacity", c.Bank.Capacity, ">= 0 (0 = memory_frames × tokens per frame)")
	} else if c.EffectiveCapacity() <= 0 && slices.Contains(c.Policies, "densitykv") {
		bad("bank.capacity", c.EffectiveCapacity(), "> 0 for densitykv (set bank.capacity or window.memory_frames)")
	}
	finitePos("bank.tau", c.Bank.Tau)
	finitePos("bank.sigma", c.Bank.Sigma)
	finitePos("bank.p", c.Bank.P)
	finitePos("bank.eps", c.Bank.Eps)
	finitePos("bank.delta", c.Bank.Delta)
	choice("bank.ordering", c.Bank.Ordering, orderingChoices)
	choice("bank.baselines", c.Bank.Baselines, baselineChoices)
	choice("bank.eviction", c.Bank.Eviction, evictionChoices)
	choice("bank.prefix", c.Bank.Prefix, prefixChoices)
	choice("bank.admission", c.Bank.Admission, admissionChoices)
	choice("bank.descriptor", c.Bank.Descriptor, descriptorChoices)
	choice("bank.payload", c.Bank.Payload, payloadChoices)
	choice("bank.density", c.Bank.Density, densityChoices)
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
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
	str("name", "run folder name inside --out (run.name; default: <command>-<seed>)", func(c *Config) *string { return &c.Run.Name })
	seed := fs.Int64("seed", def.Run.Seed, "random seed of the synthetic stream (run.seed)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("seed") {
			c.Run.Seed = *seed
		}
	})
	integer("threads", "worker threads, 0 = all cores (run.threads)", func(c *Config) *int { return &c.Run.Threads })
	integer("snapshot-every", "save resume snapshots every N blocks, 0 = only on Ctrl-C (run.snapshot_every)", func(c *Config) *int { return &c.Run.SnapshotEvery })
	plots := fs.Bool("plots", def.Run.Plots, "draw the figures at the end (run.plots)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("plots") {
			c.Run.Plots = *plots
		}
	})
	pol := fs.StringSlice("policy", def.Policies, "memory policies, comma-separated: "+strings.Join(PolicyNames, ", ")+" (policies)")
	cf.applies = append(cf.applies, func(c *Config) {
		if fs.Changed("policy") {
			c.Policies = append([]string(nil), *pol...)
		}
	})
	float("seconds", "video length in seconds at --fps latent frames/s (stream.seconds)", func(c *Config) *float64 { return &c.Stream.Seconds })
	float("fps", "latent frames per second (stream.fps)", func(c *Config) *float64 { return &c.Stream.FPS })
	integer("layers", "transformer layers (stream.layers)", func(c *Config) *int { return &c.Stream.Layers })
	integer("heads", "attention heads per layer (stream.heads)", func(c *Config) *int { return &c.Stream.Heads })
	integer("head-dim", "per-head key/value dimension (stream.head_dim)", func(c *Config) *int { return &c.Stream.HeadDim })
	integer("height", "latent token rows per frame (stream.height)", func(c *Config) *int { return &c.Stream.Height })
	integer("width", "latent token columns per frame (stream.width)", func(c *Config) *int { return &c.Stream.Width })
	integer("frames-per-block", "latent frames per block (stream.frames_per_block)", func(c *Config) *int { return &c.Stream.FramesPerBlock })
	integer("sink-frames", "first-frame sink, in frames (window.sink_frames)", func(c *Config) *int { return &c.Window.SinkFrames })
	integer("local-frames", "local window, in frames (window.local_frames)", func(c *Config) *int { return &c.Window.LocalFrames })
	integer("memory-frames", "nonlocal memory budget, in frame-equivalents (window.memory_frames)", func(c *Config) *int { return &c.Window.MemoryFrames })
	integer("capacity", "DensityKV bank capacity M per head, 0 = memory-frames × tokens per frame (bank.capacity)", func(c *Config) *int { return &c.Bank.Capacity })
	float("tau", "density-growth threshold τ (bank.tau)", func(c *Config) *float64 { return &c.Bank.Tau })
	float("sigma", "Soft-Riesz length scale σ (bank.sigma)", func(c *Config) *float64 { return &c.Bank.Sigma })
	float("p", "Soft-Riesz exponent p (bank.p)", func(c *Config) *float64 { return &c.Bank.P })
	float("eps", "Soft-Riesz softening ε (bank.eps)", func(c *Config) *float64 { return &c.Bank.Eps })
	float("delta", "baseline floor δ (bank.delta)", func(c *Config) *float64 { return &c.Bank.Delta })
	str("ordering", "candidate ordering: "+strings.Join(orderingChoices, ", ")+" (bank.ordering)", func(c *Config) *string { return &c.Bank.Ordering })
	str("baselines", "insertion baselines: "+strings.Join(baselineChoices, ", ")+" (bank.baselines)", func(c *Config) *string { return &c.Bank.Baselines })
	str("eviction", "eviction rule: "+strings.Join(evictionChoices, ", ")+" (bank.eviction)", func(c *Config) *string { return &c.Bank.Eviction })
	str("prefix", "admitted prefix: "+strings.Join(prefixChoices, ", ")+" (bank.prefix)", func(c *Config) *string { return &c.Bank.Prefix })
	str("admission", "admission: "+strings.Join(admissionChoices, ", ")+" (bank.admission)", func(c *Config) *string { return &c.Bank.Admission })
	str("descriptor", "density descriptor: "+strings.Join(descriptorChoices, ", ")+" (bank.descriptor)", func(c *Config) *string { return &c.Bank.Descriptor })
	str("payload", "stored K/V dtype: "+strings.Join(payloadChoices, ", ")+" (bank.payload)", func(c *Config) *string { return &c.Bank.Payload })
	str("density", "density/baseline precision: "+strings.Join(densityChoices, ", ")+" (bank.density)", func(c *Config) *string { return &c.Bank.Density })
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
	if err := c.Validate(); err != nil {
		return base, usageError{err}
	}
	return c, nil
}
