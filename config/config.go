// Package config is the YAML configuration of densitykv's runs: the types
// of config.resolved.yaml (Config for simulate, demo and eval;
// GenerateConfig for generate), their defaults, reading and writing them
// (unknown keys are errors; variant names are checked as package bank and
// memory spell them), and resolving them: every default filled in and
// every value checked, with errors that name the YAML key and the flag
// that sets it. The command binds flags to the fields (see Flags) and
// reports these errors as usage errors.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/internal/limitread"
	"github.com/densitykv/densitykv/internal/vocab"
	"github.com/densitykv/densitykv/memory"
)

// Config is the full configuration of a simulate, demo or eval run. It is
// read from YAML (unknown keys are errors), overridden by flags, resolved
// (every default filled in by memory.Config.Resolve), validated, and
// written to config.resolved.yaml in the run folder.
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
	// "file" (a stream recorded in package record's format, at Path; its
	// layout replaces memory.layout: runinput.Resolve).
	Kind string `yaml:"kind"`
	Path string `yaml:"path"`
	// Synth parameterises the synthetic scene.
	Synth SynthParams `yaml:"synth,omitempty"`
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

// StreamKinds are the stream kinds of simulate, demo and eval.
var StreamKinds = []string{"synthetic", "file"}

// yamlFlags maps YAML paths to the flags that set them, for error messages
// (the command registers exactly these; a test checks it).
var yamlFlags = map[string]string{
	"run.out": "out", "run.name": "name", "run.seed": "seed", "run.snapshot_every": "snapshot-every", "run.plots": "plots",
	"policies": "policy", "stream.kind": "stream", "stream.path": "stream-file",
	"stream.seconds": "seconds", "stream.fps": "fps", "stream.first_layer": "first-layer",
	"memory.layout.layers": "layers", "memory.layout.heads": "heads", "memory.layout.head_dim": "head-dim",
	"memory.layout.height": "height", "memory.layout.width": "width", "memory.layout.frames_per_block": "frames-per-block",
	"memory.sink_frames": "sink-frames", "memory.cache_frames": "cache-frames", "memory.window_frames": "window-frames",
	"memory.capacity": "capacity", "memory.bank.tau": "tau", "memory.bank.sigma": "sigma", "memory.bank.p": "p",
	"memory.bank.eps": "eps", "memory.bank.delta": "delta", "memory.bank.ordering": "ordering",
	"memory.bank.baselines": "baselines", "memory.bank.eviction": "eviction", "memory.bank.prefix": "prefix",
	"memory.bank.admission": "admission", "memory.bank.descriptor": "descriptor", "memory.bank.payload": "payload",
	"memory.bank.densities": "densities", "memory.bank.workers": "workers",
	"memory.deep_forcing.recent_frames": "deep-forcing-recent", "memory.deep_forcing.max_reuse": "deep-forcing-max-reuse",
	"memory.longlive_rag.top_k": "rag-top-k", "memory.longlive_rag.descriptor": "rag-descriptor",
	"memory.deep_forcing.queries": "deep-forcing-queries", "memory.deep_forcing.sink": "deep-forcing-sink",
	"memory.deep_forcing.fusion": "deep-forcing-fusion", "memory.longlive_rag.pool": "rag-pool",
}

// Flags returns the YAML keys that a flag of the same meaning sets, mapped
// to the flag's name (without --).
func Flags() map[string]string { return maps.Clone(yamlFlags) }

// KeyOf returns the YAML key the flag sets.
func KeyOf(flag string) (string, bool) {
	for p, f := range yamlFlags {
		if f == flag {
			return p, true
		}
	}
	return "", false
}

// VariantName returns the name of c's variant at YAML key path (see
// VariantKeys).
func VariantName(c Config, path string) string {
	vars := map[string]fmt.Stringer{
		"memory.bank.ordering": c.Memory.Bank.Ordering, "memory.bank.baselines": c.Memory.Bank.Baselines,
		"memory.bank.eviction": c.Memory.Bank.Eviction, "memory.bank.prefix": c.Memory.Bank.Prefix,
		"memory.bank.admission": c.Memory.Bank.Admission, "memory.bank.payload": c.Memory.Bank.Payload,
		"memory.bank.densities": c.Memory.Bank.Densities, "memory.bank.descriptor": c.Memory.Bank.Descriptor,
		"memory.longlive_rag.descriptor": c.Memory.LongLiveRAG.Descriptor,
		"memory.deep_forcing.queries":    c.Memory.DeepForcing.Queries, "memory.deep_forcing.sink": c.Memory.DeepForcing.Sink,
		"memory.deep_forcing.fusion": c.Memory.DeepForcing.Fusion, "memory.longlive_rag.pool": c.Memory.LongLiveRAG.Pool,
	}
	return vars[path].String()
}

// Named returns a YAML path with its flag, if it has one:
// "memory.bank.sigma (--sigma)".
func Named(path string) string {
	if f, ok := yamlFlags[path]; ok {
		return path + " (--" + f + ")"
	}
	return path
}

// defaultedZeros are the keys whose zero value memory.Config Resolve
// replaces by the default, where zero is not itself a documented choice (as
// it is for capacity, rag top-k, workers and the descriptor storage
// dimension: 0 = derived). Given explicitly, as a flag or a YAML key, such
// a zero is an error instead of silently becoming the default; so is an
// empty variant name (see variantKeys).
var defaultedZeros = []struct {
	path, want string
	zero       func(*Config) bool
}{
	{"memory.layout.height", "an integer >= 1", func(c *Config) bool { return c.Memory.Layout.Height == 0 }},
	{"memory.layout.width", "an integer >= 1", func(c *Config) bool { return c.Memory.Layout.Width == 0 }},
	{"memory.layout.frames_per_block", "an integer >= 1", func(c *Config) bool { return c.Memory.Layout.FramesPerBlock == 0 }},
	{"memory.layout.layers", "an integer >= 1", func(c *Config) bool { return c.Memory.Layout.Layers == 0 }},
	{"memory.layout.heads", "an integer >= 1", func(c *Config) bool { return c.Memory.Layout.Heads == 0 }},
	{"memory.layout.head_dim", "an even integer >= 6", func(c *Config) bool { return c.Memory.Layout.HeadDim == 0 }},
	{"memory.sink_frames", "an integer >= 1", func(c *Config) bool { return c.Memory.SinkFrames == 0 }},
	{"memory.cache_frames", "an integer >= 1", func(c *Config) bool { return c.Memory.CacheFrames == 0 }},
	{"memory.window_frames", "an integer >= frames per block", func(c *Config) bool { return c.Memory.WindowFrames == 0 }},
	{"memory.rope_theta", "a finite number > 1", func(c *Config) bool { return c.Memory.RoPETheta == 0 }},
	{"memory.bank.tau", "a finite number > 1", func(c *Config) bool { return c.Memory.Bank.Tau == 0 }},
	{"memory.bank.sigma", "a finite number > 0", func(c *Config) bool { return c.Memory.Bank.Sigma == 0 }},
	{"memory.bank.p", "a finite number > 0", func(c *Config) bool { return c.Memory.Bank.P == 0 }},
	{"memory.bank.eps", "a finite number > 0", func(c *Config) bool { return c.Memory.Bank.Eps == 0 }},
	{"memory.bank.delta", "a finite number > 0", func(c *Config) bool { return c.Memory.Bank.Delta == 0 }},
	{"memory.deep_forcing.recent_frames", "an integer >= frames per block", func(c *Config) bool { return c.Memory.DeepForcing.RecentFrames == 0 }},
	{"memory.deep_forcing.max_reuse", "an integer >= 1 (0 is not available: the field's zero selects the default 7)", func(c *Config) bool { return c.Memory.DeepForcing.MaxReuse == 0 }},
	{"memory.longlive_rag.exclude_recent", "an integer >= 1 (0 is not available: the field's zero selects the default 5)", func(c *Config) bool { return c.Memory.LongLiveRAG.ExcludeRecent == 0 }},
	{"memory.longlive_rag.latent_channels", "an integer >= 1", func(c *Config) bool { return c.Memory.LongLiveRAG.LatentChannels == 0 }},
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// VariantKeys are the YAML keys that hold a variant's name (memory.bank.*
// and memory.longlive_rag.descriptor, see memory.VariantPaths), read
// through memory.Config.SetVariant: an unknown name is an error naming the
// key, the name and the names allowed.
func VariantKeys() []string {
	var out []string
	for _, p := range memory.VariantPaths() {
		out = append(out, "memory."+p)
	}
	return out
}

// SetVariant sets the variant at YAML key path (see VariantKeys) from
// name; an unknown name is an error naming the key and flag, the name and
// the names allowed.
func SetVariant(c *Config, path, name string) error {
	return memoryError(c.Memory.SetVariant(strings.TrimPrefix(path, "memory."), name))
}

// Changed reports whether the flag was given on the command line and its
// value as given.
type Changed func(flag string) (value string, ok bool)

// ExplicitZeros rejects the zeros that would silently become defaults
// (defaultedZeros) given explicitly, and the variant names given empty: as
// a flag given (changed; may be nil) or a key present in the YAML file
// (keys, of file).
func ExplicitZeros(c *Config, changed Changed, keys Keys, file string) error {
	given := func(flag string) (string, bool) {
		if changed == nil {
			return "", false
		}
		return changed(flag)
	}
	var errs []error
	report := func(path, v, want string) {
		flag, hasFlag := yamlFlags[path]
		_, flagGiven := given(flag)
		switch {
		case hasFlag && flagGiven:
			errs = append(errs, fmt.Errorf("--%s is %s, want %s (%s; leave the flag out for the default)", flag, v, want, path))
		case keys.Set[path]:
			errs = append(errs, fmt.Errorf("%s: %s is %s, want %s (leave the key out for the default)", file, Named(path), v, want))
		}
	}
	for _, z := range defaultedZeros {
		if z.zero(c) {
			report(z.path, "0", z.want)
		}
	}
	for _, path := range VariantKeys() {
		v, flagGiven := given(yamlFlags[path])
		if flagGiven && blank(v) || !flagGiven && keys.Blank[path] {
			report(path, `""`, vocab.Or(memory.VariantNames(strings.TrimPrefix(path, "memory."))))
		}
	}
	return errors.Join(errs...)
}

// DefaultConfig is the paper-scale setting (Wan2.1-1.3B layout, 60 s).
func DefaultConfig() Config {
	return Config{
		Run:      RunConfig{Out: "runs", Name: "simulate", Seed: 0, SnapshotEvery: 10, Plots: true},
		Stream:   StreamConfig{Kind: "synthetic", Seconds: 60, FPS: 4, Synth: paperSynth},
		Policies: []string{memory.NameDensityKV},
		Memory:   LayoutFreeDefaults(memory.DefaultLayout()),
	}
}

// LayoutFreeDefaults returns memory's defaults for l with the fields that
// derive from the layout (capacity, LongLive-RAG top-k) left at 0, so that
// Resolve recomputes them after flags change the layout.
func LayoutFreeDefaults(l memory.Layout) memory.Config {
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
	c.Memory.Layout = demoLayout
	c.Stream.Synth = demoSynth
	// Keys are RMS-normalised (‖k‖ ≈ √d), so the paper's σ = 8 at d = 128
	// becomes σ = 8·√(d/128) at the demo's d = 64: the same σ/‖k‖.
	c.Memory.Bank.Sigma = 8 * math.Sqrt(float64(demoLayout.HeadDim)/128)
	c.Stream.Seconds = 30
	c.Run.Name = "demo"
	c.Policies = []string{memory.NameNative, memory.NameFIFO, memory.NameUniformStride,
		memory.NameDeepForcing, memory.NameLongLiveRAG, memory.NameDensityKV}
	return c
}

// EvalConfig is the default of `densitykv eval`: the demo's reduced scale
// (10×16 tokens per frame, 4 heads of dimension 64, three-frame blocks,
// one sink frame, five-frame window, six frame-equivalents of memory, σ
// scaled to d) with 1 layer and 30 s of video (40 blocks), so that the
// whole suite (25 distinct policies) finishes in a few minutes on two cores
// in the pure-Go build too (a second layer doubles the time).
func EvalConfig() Config {
	c := DemoConfig()
	c.Memory.Layout.Layers = 1
	c.Run.Name = "eval"
	c.Policies = EvalPolicies() // recorded in the resolved config; the suite decides
	return c
}

// EvalPolicies lists the memory policies the evaluation suite's baselines
// use (eval.Suite; recorded in an eval run's configuration).
func EvalPolicies() []string {
	return []string{memory.NameNative, memory.NameInfinityRoPE, memory.NameDeepForcing, memory.NameLongLiveRAG,
		memory.NameFIFO, memory.NameUniformStride, memory.NameDensityKV}
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
// naming the first field at fault by its YAML path and flag. It reads no
// file: for stream.kind file, memory.layout must already be the stream
// file's (runinput.Resolve reads it from the file's header).
func (c Config) Resolve() (Config, error) {
	var errs errList
	bad := func(field string, v any, want string) {
		errs = append(errs, fmt.Errorf("%s is %v, want %s", Named(field), v, want))
	}
	if c.Run.Out == "" {
		bad("run.out", `""`, "a folder")
	}
	if blank(c.Run.Name) || strings.ContainsAny(c.Run.Name, `/\`) || c.Run.Name == "." || c.Run.Name == ".." {
		bad("run.name", fmt.Sprintf("%q", c.Run.Name), "a plain folder name")
	}
	if c.Run.SnapshotEvery < 0 {
		bad("run.snapshot_every", c.Run.SnapshotEvery, ">= 0")
	}
	if !slices.Contains(StreamKinds, c.Stream.Kind) {
		bad("stream.kind", fmt.Sprintf("%q", c.Stream.Kind), "one of "+strings.Join(StreamKinds, ", "))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"stream.seconds", c.Stream.Seconds}, {"stream.fps", c.Stream.FPS}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			bad(f.name, f.v, "a finite number > 0")
		}
	}
	policies := c.Policies
	switch {
	case len(policies) == 0:
		bad("policies", "[]", "at least one of "+strings.Join(memory.Names(), ", "))
	case len(policies) > len(memory.Names()):
		bad("policies", fmt.Sprintf("a list of %d", len(policies)), fmt.Sprintf("each of the %d policies at most once (%s)", len(memory.Names()), strings.Join(memory.Names(), ", ")))
		policies = nil
	}
	seen := map[string]bool{}
	for i, p := range policies {
		if !slices.Contains(memory.Names(), p) {
			bad(fmt.Sprintf("policies[%d] (--policy)", i), fmt.Sprintf("%q", p), "one of "+strings.Join(memory.Names(), ", "))
		}
		if seen[p] {
			bad(fmt.Sprintf("policies[%d] (--policy)", i), fmt.Sprintf("%q", p), "each policy once")
		}
		seen[p] = true
	}
	if c.Stream.Kind != "file" && c.Stream.Path != "" {
		bad("stream.path", fmt.Sprintf("%q", c.Stream.Path), fmt.Sprintf(`"" for stream.kind (--stream) %q; a stream file is read only with --stream file`, c.Stream.Kind))
	}
	if c.Stream.Kind == "file" {
		if c.Stream.Path == "" {
			bad("stream.path", `""`, "a stream file for stream.kind file")
		}
	}
	if c.Stream.Kind == "synthetic" {
		// LongLive-RAG reads the generator's latents [F][C][2H][2W].
		c.Memory.LongLiveRAG.LatentChannels = c.Stream.Synth.Channels
	}
	if c.Memory.LongLiveRAG.Descriptor == memory.RAGAE {
		bad("memory.longlive_rag.descriptor", "ae", "latent-mean or key-mean (the autoencoder describes a model's latents: generate --rag-ae)")
	}
	if c.Run.Seed < 0 {
		bad("run.seed", c.Run.Seed, ">= 0")
	}
	if c.Stream.FirstLayer < 0 {
		bad("stream.first_layer", c.Stream.FirstLayer, ">= 0")
	} else if c.Stream.FirstLayer > 0 && c.Stream.Kind != "synthetic" {
		bad("stream.first_layer", c.Stream.FirstLayer, "0 for stream.kind "+c.Stream.Kind+" (only synthetic streams start at a later layer)")
	}
	var valid []string
	for _, p := range policies {
		if slices.Contains(memory.Names(), p) {
			valid = append(valid, p)
		}
	}
	frames, ferr := streamFrames(c.Stream.Seconds, c.Stream.FPS, c.Memory.Layout.FramesPerBlock)
	if ferr != nil {
		errs = append(errs, ferr)
	}
	// Sizes are bounded before memory derives anything from them, and the
	// derived ones (capacity, top-k) after.
	m := c.Memory
	err := checkLimits(Config{Run: c.Run, Stream: c.Stream, Memory: c.Memory}, frames)
	if err == nil {
		if m, err = resolveMemory(c.Memory, valid); err == nil {
			err = checkLimits(Config{Run: c.Run, Stream: c.Stream, Memory: m}, frames)
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("config: %w", errs.err())
	}
	c.Memory = m
	return c, nil
}

// resolveMemory resolves m (memory.Config.Resolve), checks that each of
// policies can be built from it (memory.Config.Check: DensityKV's bank
// rules), and records the values a zero leaves to the run: the bank workers
// actually used and the LongLive-RAG descriptor size counted. Errors name
// the YAML keys and flags at fault.
func resolveMemory(m memory.Config, policies []string) (memory.Config, error) {
	if err := checkTau(m.Bank.Tau); err != nil {
		return m, err
	}
	r, err := m.Resolve()
	if err != nil {
		return m, memoryError(err)
	}
	for _, p := range policies {
		if err := r.Check(p); err != nil {
			return m, memoryError(err)
		}
	}
	if r.Bank.Workers == 0 { // the bank's own rule
		r.Bank.Workers = bank.Config{Heads: r.Layout.Heads}.WorkerCount()
	}
	if l := &r.LongLiveRAG; l.DescriptorStorageDim == 0 { // the descriptor kept
		switch l.Descriptor {
		case memory.RAGLatentMean:
			l.DescriptorStorageDim = l.LatentChannels
		case memory.RAGKeyMean:
			l.DescriptorStorageDim = r.Layout.Heads * r.Layout.HeadDim
		}
	}
	return r, nil
}

// memoryError names the YAML keys (and flags) of a memory.FieldError.
func memoryError(err error) error {
	if err == nil {
		return nil
	}
	var fe *memory.FieldError
	if !errors.As(err, &fe) || len(fe.Fields) == 0 {
		return err
	}
	names := make([]string, len(fe.Fields))
	for i, f := range fe.Fields {
		names[i] = Named("memory." + f)
	}
	return &namedFieldError{names: strings.Join(names, ", "), fe: fe}
}

// namedFieldError prints a memory.FieldError after the YAML keys (and
// flags) it names, without the package prefix; it unwraps to the
// FieldError.
type namedFieldError struct {
	names string
	fe    *memory.FieldError
}

func (e *namedFieldError) Error() string { return e.names + ": " + e.fe.Msg }
func (e *namedFieldError) Unwrap() error { return e.fe }

// LoadFile decodes a YAML file over base (keys absent from the file keep
// base's values) and returns the keys present. Unknown keys, unknown
// variant names, empty ones and type errors name the file and line.
func LoadFile(path string, base Config) (Config, map[string]bool, error) {
	c := base
	keys, err := Load(path, &c, true)
	if err == nil {
		// Only the empty variant names are errors here (the numeric
		// zeros are Resolve's business for a file read on its own).
		err = ExplicitZeros(&c, nil, Keys{Set: keys.Blank, Blank: keys.Blank}, path)
	}
	if err != nil {
		return base, nil, err
	}
	return c, keys.Set, nil
}

// MaxConfigFile bounds a configuration file (--config, a run folder's
// resolved configuration).
const MaxConfigFile = 16 << 20

// Load decodes the YAML file at path into v (see Decode), naming the file
// in errors.
func Load(path string, v any, strict bool) (Keys, error) {
	b, err := limitread.File(path, MaxConfigFile, "configuration files")
	if err != nil {
		return Keys{}, fmt.Errorf("config %s: %w", path, err)
	}
	keys, err := Decode(b, v, strict)
	if err != nil {
		return Keys{}, fmt.Errorf("config %s: %w", path, err)
	}
	return keys, nil
}

// legacyLayoutKeys are memory.layout keys of files written before the
// layout had snake_case keys; they are read as their new names.
var legacyLayoutKeys = map[string]string{"framesperblock": "frames_per_block", "headdim": "head_dim"}

// Keys are the dotted paths of the keys a YAML file sets
// ("memory.bank.sigma"; a null value counts as absent), so that an explicit
// value can be told from a default; Blank are the variant keys set to an
// empty name, which are decoded as absent and reported by ExplicitZeros.
type Keys struct {
	Set, Blank map[string]bool
}

// NewKeys returns an empty key set.
func NewKeys() Keys { return Keys{Set: map[string]bool{}, Blank: map[string]bool{}} }

// Decode decodes b over v (strict: unknown keys are errors; an empty
// document changes nothing) and returns the keys present. Variant names
// (VariantKeys) are checked and spelled as package bank and memory spell
// them before the document is decoded; the keys of files written before
// the layout had snake_case keys are read as their new names.
func Decode(b []byte, v any, strict bool) (Keys, error) {
	keys := NewKeys()
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return keys, err
	}
	if len(doc.Content) == 0 {
		return keys, nil
	}
	variants := VariantKeys()
	renamed := false
	var bad error
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if nk, ok := legacyLayoutKeys[k.Value]; ok && prefix == "memory.layout." {
				k.Value, renamed = nk, true
			}
			if val.Tag == "!!null" {
				continue
			}
			path := prefix + k.Value
			keys.Set[path] = true
			if slices.Contains(variants, path) && val.Kind == yaml.ScalarNode {
				var scratch Config
				switch err := SetVariant(&scratch, path, val.Value); {
				case blank(val.Value):
					keys.Blank[path] = true
					n.Content = slices.Delete(n.Content, i, i+2)
					i -= 2
				case err != nil:
					if bad == nil {
						bad = fmt.Errorf("line %d: %w", val.Line, err)
					}
				default:
					// The name as the types spell it (SetVariant took it).
					val.Value, val.Style, val.Tag = strings.ToLower(strings.TrimSpace(val.Value)), 0, "!!str"
				}
				renamed = true
				continue
			}
			walk(val, path+".")
		}
	}
	walk(doc.Content[0], "")
	if bad != nil {
		return keys, bad
	}
	if err := checkIntegers(doc.Content[0], reflect.TypeOf(v), ""); err != nil {
		return keys, err
	}
	if renamed {
		var err error
		if b, err = yaml.Marshal(&doc); err != nil {
			return keys, err
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return keys, err
	}
	return keys, nil
}

// Marshal renders c as YAML with a header comment.
func Marshal(c Config) ([]byte, error) {
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
