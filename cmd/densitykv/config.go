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

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/internal/vocab"
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

var streamKinds = []string{"synthetic", "file"}

// yamlFlags maps YAML paths to the flags that set them, for error messages
// (bindConfigFlags registers exactly these; a test checks it).
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
}

// variantName returns the name of c's variant at YAML key path.
func variantName(c Config, path string) string {
	vars := map[string]fmt.Stringer{
		"memory.bank.ordering": c.Memory.Bank.Ordering, "memory.bank.baselines": c.Memory.Bank.Baselines,
		"memory.bank.eviction": c.Memory.Bank.Eviction, "memory.bank.prefix": c.Memory.Bank.Prefix,
		"memory.bank.admission": c.Memory.Bank.Admission, "memory.bank.payload": c.Memory.Bank.Payload,
		"memory.bank.densities": c.Memory.Bank.Densities, "memory.bank.descriptor": c.Memory.Bank.Descriptor,
		"memory.longlive_rag.descriptor": c.Memory.LongLiveRAG.Descriptor,
	}
	return vars[path].String()
}

// named returns a YAML path with its flag, if it has one:
// "memory.bank.sigma (--sigma)".
func named(path string) string {
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

// variantKeys are the YAML keys that hold a variant's name (memory.bank.*
// and memory.longlive_rag.descriptor, see memory.VariantPaths), read
// through memory.Config.SetVariant: an unknown name is an error naming the
// key, the name and the names allowed.
func variantKeys() []string {
	var out []string
	for _, p := range memory.VariantPaths() {
		out = append(out, "memory."+p)
	}
	return out
}

// setVariant sets the variant at YAML key path from name.
func setVariant(c *Config, path, name string) error {
	return memoryError(c.Memory.SetVariant(strings.TrimPrefix(path, "memory."), name))
}

// explicitZeros rejects the defaultedZeros given explicitly, and the
// variant names given empty: a changed flag of fs (may be nil) or a key
// present in the YAML file (keys, from file).
func explicitZeros(c *Config, fs *pflag.FlagSet, keys yamlKeys, file string) error {
	var errs []error
	report := func(path, v, want string) {
		flag, hasFlag := yamlFlags[path]
		switch {
		case hasFlag && fs != nil && fs.Changed(flag):
			errs = append(errs, fmt.Errorf("--%s is %s, want %s (%s; leave the flag out for the default)", flag, v, want, path))
		case keys.set[path]:
			errs = append(errs, fmt.Errorf("%s: %s is %s, want %s (leave the key out for the default)", file, named(path), v, want))
		}
	}
	for _, z := range defaultedZeros {
		if z.zero(c) {
			report(z.path, "0", z.want)
		}
	}
	for _, path := range variantKeys() {
		flag, hasFlag := yamlFlags[path]
		flagBlank := hasFlag && fs != nil && fs.Changed(flag) && blank(fs.Lookup(flag).Value.String())
		if flagBlank || keys.blank[path] && !(hasFlag && fs != nil && fs.Changed(flag)) {
			report(path, `""`, vocab.Or(memory.VariantNames(strings.TrimPrefix(path, "memory."))))
		}
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
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
		errs = append(errs, fmt.Errorf("%s is %v, want %s", named(field), v, want))
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
	var valid []string
	for _, p := range c.Policies {
		if slices.Contains(memory.Names(), p) {
			valid = append(valid, p)
		}
	}
	m, err := resolveMemory(c.Memory, valid)
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

// resolveMemory resolves m (memory.Config.Resolve), checks that each of
// policies can be built from it (memory.Config.Check: DensityKV's bank
// rules), and records the values a zero leaves to the run: the bank workers
// actually used and the LongLive-RAG descriptor size counted. Errors name
// the YAML keys and flags at fault.
func resolveMemory(m memory.Config, policies []string) (memory.Config, error) {
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
		names[i] = named("memory." + f)
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

// LoadConfigFile decodes a YAML file over base (keys absent from the file
// keep base's values) and returns the keys present. Unknown keys, unknown
// variant names, empty ones and type errors name the file and line.
func LoadConfigFile(path string, base Config) (Config, map[string]bool, error) {
	c := base
	keys, err := loadYAMLKeys(path, &c, true)
	if err == nil {
		// Only the empty variant names are errors here (the numeric
		// zeros are Resolve's business for a file read on its own).
		err = explicitZeros(&c, nil, yamlKeys{set: keys.blank, blank: keys.blank}, path)
	}
	if err != nil {
		return base, nil, err
	}
	return c, keys.set, nil
}

// loadYAMLKeys decodes the YAML file at path into v (see decodeYAML),
// naming the file in errors.
func loadYAMLKeys(path string, v any, strict bool) (yamlKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return yamlKeys{}, fmt.Errorf("config %s: %w", path, err)
	}
	keys, err := decodeYAML(b, v, strict)
	if err != nil {
		return yamlKeys{}, fmt.Errorf("config %s: %w", path, err)
	}
	return keys, nil
}

func decodeConfig(r io.Reader, base Config) (Config, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return base, err
	}
	c := base
	if _, err := decodeYAML(b, &c, true); err != nil {
		return base, err
	}
	return c, nil
}

// legacyLayoutKeys are memory.layout keys of files written before the
// layout had snake_case keys; they are read as their new names.
var legacyLayoutKeys = map[string]string{"framesperblock": "frames_per_block", "headdim": "head_dim"}

// yamlKeys are the dotted paths of the keys a YAML file sets
// ("memory.bank.sigma"; a null value counts as absent), so that an explicit
// value can be told from a default; blank are the variant keys set to an
// empty name, which are decoded as absent and reported by explicitZeros.
type yamlKeys struct {
	set, blank map[string]bool
}

// decodeYAML decodes b over v (strict: unknown keys are errors; an empty
// document changes nothing) and returns the keys present. Variant names
// (variantKeys) are checked and spelled as package bank and memory spell
// them before the document is decoded.
func decodeYAML(b []byte, v any, strict bool) (yamlKeys, error) {
	keys := yamlKeys{set: map[string]bool{}, blank: map[string]bool{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return keys, err
	}
	if len(doc.Content) == 0 {
		return keys, nil
	}
	variants := variantKeys()
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
			keys.set[path] = true
			if slices.Contains(variants, path) && val.Kind == yaml.ScalarNode {
				var scratch Config
				switch err := setVariant(&scratch, path, val.Value); {
				case blank(val.Value):
					keys.blank[path] = true
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
	applies []func(*Config) error
	// keys are the YAML keys present in the --config file (after resolve).
	keys yamlKeys
}

// usage appends a flag's YAML key to its help text.
func usageFor(flag, usage string) string {
	for p, f := range yamlFlags {
		if f == flag {
			return usage + " (" + p + ")"
		}
	}
	return usage
}

// set registers the apply of a flag that sets one field.
func set[T any](cf *configFlags, name string, v *T, field func(*Config) *T) {
	cf.applies = append(cf.applies, func(c *Config) error {
		if cf.fs.Changed(name) {
			*field(c) = *v
		}
		return nil
	})
}

func (cf *configFlags) str(name, usage string, def Config, field func(*Config) *string) {
	set(cf, name, cf.fs.String(name, *field(&def), usageFor(name, usage)), field)
}

func (cf *configFlags) integer(name, usage string, def Config, field func(*Config) *int) {
	set(cf, name, cf.fs.Int(name, *field(&def), usageFor(name, usage)), field)
}

func (cf *configFlags) float(name, usage string, def Config, field func(*Config) *float64) {
	set(cf, name, cf.fs.Float64(name, *field(&def), usageFor(name, usage)), field)
}

// variant registers the flag of the variant at YAML key path (see
// variantKeys): its value is a name, read by setVariant; an empty one is
// left to explicitZeros.
func (cf *configFlags) variant(name, usage string, def Config, path string) {
	v := cf.fs.String(name, variantName(def, path), usageFor(name, usage))
	cf.applies = append(cf.applies, func(c *Config) error {
		if !cf.fs.Changed(name) || blank(*v) {
			return nil
		}
		return setVariant(c, path, *v)
	})
}

// bindConfigFlags registers --config and a flag for every setting of a
// simulate-style run: the run, the stream, the layout, and the memory
// flags shared with generate (bindMemoryFlags).
func bindConfigFlags(fs *pflag.FlagSet, def Config) *configFlags {
	cf := &configFlags{fs: fs}
	fs.StringVar(&cf.file, "config", "", "YAML config file (flags given on the command line override it)")
	cf.str("out", "parent folder of run folders", def, func(c *Config) *string { return &c.Run.Out })
	cf.str("name", "run folder name inside --out (default: the command name)", def, func(c *Config) *string { return &c.Run.Name })
	set(cf, "seed", fs.Int64("seed", def.Run.Seed, usageFor("seed", "random seed of the synthetic stream")), func(c *Config) *int64 { return &c.Run.Seed })
	cf.integer("snapshot-every", "save resume snapshots every N blocks, 0 = only on Ctrl-C", def, func(c *Config) *int { return &c.Run.SnapshotEvery })
	set(cf, "plots", fs.Bool("plots", def.Run.Plots, usageFor("plots", "draw the figures at the end")), func(c *Config) *bool { return &c.Run.Plots })
	pol := fs.StringSlice("policy", def.Policies, usageFor("policy", "memory policies, comma-separated: "+strings.Join(memory.Names(), ", ")))
	cf.applies = append(cf.applies, func(c *Config) error {
		if fs.Changed("policy") {
			c.Policies = append([]string(nil), *pol...)
		}
		return nil
	})
	cf.str("stream", "stream kind: "+strings.Join(streamKinds, ", "), def, func(c *Config) *string { return &c.Stream.Kind })
	cf.str("stream-file", "recorded stream file for --stream file", def, func(c *Config) *string { return &c.Stream.Path })
	cf.float("seconds", "video length in seconds at --fps latent frames/s", def, func(c *Config) *float64 { return &c.Stream.Seconds })
	cf.float("fps", "latent frames per second", def, func(c *Config) *float64 { return &c.Stream.FPS })
	cf.integer("first-layer", "simulate the stream's layers [first-layer, first-layer + layers)", def, func(c *Config) *int { return &c.Stream.FirstLayer })
	cf.integer("layers", "transformer layers", def, func(c *Config) *int { return &c.Memory.Layout.Layers })
	cf.integer("heads", "attention heads per layer", def, func(c *Config) *int { return &c.Memory.Layout.Heads })
	cf.integer("head-dim", "per-head key/value dimension", def, func(c *Config) *int { return &c.Memory.Layout.HeadDim })
	cf.integer("height", "latent token rows per frame", def, func(c *Config) *int { return &c.Memory.Layout.Height })
	cf.integer("width", "latent token columns per frame", def, func(c *Config) *int { return &c.Memory.Layout.Width })
	cf.integer("frames-per-block", "latent frames per block", def, func(c *Config) *int { return &c.Memory.Layout.FramesPerBlock })
	cf.bindMemoryFlags(def)
	return cf
}

// bindMemoryFlags registers the memory flags that simulate, demo, eval and
// generate share: the attention budget, every DensityKV bank parameter and
// variant, and the baselines' settings (YAML memory.*).
func (cf *configFlags) bindMemoryFlags(def Config) {
	cf.integer("sink-frames", "first-frame sink, in frames", def, func(c *Config) *int { return &c.Memory.SinkFrames })
	cf.integer("cache-frames", "native rolling cache incl. sink, in frames", def, func(c *Config) *int { return &c.Memory.CacheFrames })
	cf.integer("window-frames", "local window incl. the current block, in frames", def, func(c *Config) *int { return &c.Memory.WindowFrames })
	cf.integer("capacity", "historical budget M per head in tokens, 0 = (cache − sink − window) frames", def, func(c *Config) *int { return &c.Memory.Capacity })
	cf.float("tau", "DensityKV density-growth threshold τ (> 1)", def, func(c *Config) *float64 { return &c.Memory.Bank.Tau })
	cf.float("sigma", "Soft-Riesz length scale σ", def, func(c *Config) *float64 { return &c.Memory.Bank.Sigma })
	cf.float("p", "Soft-Riesz exponent p", def, func(c *Config) *float64 { return &c.Memory.Bank.P })
	cf.float("eps", "Soft-Riesz softening ε", def, func(c *Config) *float64 { return &c.Memory.Bank.Eps })
	cf.float("delta", "baseline floor δ", def, func(c *Config) *float64 { return &c.Memory.Bank.Delta })
	cf.variant("ordering", "candidate ordering: mean (paper), max (authors' code), source", def, "memory.bank.ordering")
	cf.variant("baselines", "insertion baselines: frozen (paper), refresh", def, "memory.bank.baselines")
	cf.variant("eviction", "eviction: mandatory-densest (paper), densest, mandatory-source", def, "memory.bank.eviction")
	cf.variant("prefix", "admitted prefix: shared (paper), per-head", def, "memory.bank.prefix")
	cf.variant("admission", "admission: joint (paper), sequential", def, "memory.bank.admission")
	cf.variant("descriptor", "density descriptor: post-rope-key (paper), pre-rope-key, key-value ([K;V], post-RoPE K), pre-rope-key-value ([K;V], pre-RoPE K)", def, "memory.bank.descriptor")
	cf.variant("payload", "stored K/V dtype: bf16 (paper), f32", def, "memory.bank.payload")
	cf.variant("densities", "density/baseline precision: f32, f64", def, "memory.bank.densities")
	cf.integer("workers", "bank worker threads, 0 = one per head up to the cores (recorded resolved)", def, func(c *Config) *int { return &c.Memory.Bank.Workers })
	cf.integer("deep-forcing-recent", "Deep Forcing recent frames incl. the current block", def, func(c *Config) *int { return &c.Memory.DeepForcing.RecentFrames })
	cf.integer("deep-forcing-max-reuse", "Deep Forcing compressions a token may survive", def, func(c *Config) *int { return &c.Memory.DeepForcing.MaxReuse })
	cf.integer("rag-top-k", "LongLive-RAG frames retrieved per block, 0 = capacity / tokens per frame", def, func(c *Config) *int { return &c.Memory.LongLiveRAG.TopK })
	cf.variant("rag-descriptor", "LongLive-RAG frame descriptor: latent-mean, key-mean", def, "memory.longlive_rag.descriptor")
}

// load returns base overlaid with the --config file (recording its keys in
// cf.keys) and then the flags given on the command line, with explicit
// zeros that would silently become defaults rejected; not yet resolved.
func (cf *configFlags) load(base Config, v *Config, file any) error {
	*v = base
	cf.keys = yamlKeys{set: map[string]bool{}, blank: map[string]bool{}}
	if cf.file != "" {
		keys, err := loadYAMLKeys(cf.file, file, true)
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
	return explicitZeros(v, cf.fs, cf.keys, cf.file)
}

// resolve returns base overlaid with the --config file and then the flags
// given on the command line, validated.
func (cf *configFlags) resolve(base Config) (Config, error) {
	var c Config
	if err := cf.load(base, &c, &c); err != nil {
		return base, err
	}
	r, err := c.Resolve()
	if err != nil {
		return base, usageError{err}
	}
	return r, nil
}
