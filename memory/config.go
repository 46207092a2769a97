package memory

import (
	"encoding"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/internal/vocab"
	"github.com/densitykv/densitykv/rope"
)

// Policy names accepted by New (case-insensitive; "-" and "_" are ignored).
const (
	NameNative        = "native"
	NameInfinityRoPE  = "infinity-rope"
	NameDeepForcing   = "deep-forcing"
	NameLongLiveRAG   = "longlive-rag"
	NameFullHistory   = "full-history"
	NameFIFO          = "fifo"
	NameUniformStride = "uniform-stride"
	NameDensityKV     = "densitykv"
)

// Names lists every policy name New accepts, in the paper's order.
func Names() []string {
	return []string{NameNative, NameInfinityRoPE, NameDeepForcing, NameLongLiveRAG,
		NameFullHistory, NameFIFO, NameUniformStride, NameDensityKV}
}

// Config configures every policy. The zero value of a field means "default"
// (see DefaultConfig and Resolve); the YAML form uses the tags below.
type Config struct {
	Layout Layout `yaml:"layout"`

	// SinkFrames is the number of first latent frames kept as the attention
	// sink (1). They are never evicted and never bank candidates.
	SinkFrames int `yaml:"sink_frames"`
	// CacheFrames is the native rolling-cache length in frames including the
	// sink (12). It bounds Native, Infinity-RoPE and Deep Forcing, and fixes
	// the block-relative RoPE positions of the bounded-memory policies
	// (queries at CacheFrames−FramesPerBlock … CacheFrames−1 once it rolls).
	CacheFrames int `yaml:"cache_frames"`
	// WindowFrames is the local window of the bounded-memory policies
	// (DensityKV, LongLive-RAG, FullHistory, FIFO, uniform stride), counted
	// in frames and including the FramesPerBlock frames being generated (5).
	WindowFrames int `yaml:"window_frames"`
	// Capacity is the per-head historical budget M in tokens of the
	// bounded-memory policies. Zero means
	// (CacheFrames − SinkFrames − WindowFrames)·TokensPerFrame (9,360 for Wan).
	Capacity int `yaml:"capacity"`
	// RoPETheta is the RoPE base (10000).
	RoPETheta float64 `yaml:"rope_theta"`

	Bank        BankConfig        `yaml:"bank"`
	DeepForcing DeepForcingConfig `yaml:"deep_forcing"`
	LongLiveRAG LongLiveRAGConfig `yaml:"longlive_rag"`
}

// BankConfig selects the DensityKV bank parameters and variants. Every field
// maps onto the bank package's configuration; zeros mean the paper
// defaults (the zero value of every variant is the paper's). In YAML the
// variants are their names (package bank's vocabulary: String,
// MarshalText, UnmarshalText).
type BankConfig struct {
	Tau   float64 `yaml:"tau"`   // density-growth limit τ (2.0)
	Sigma float64 `yaml:"sigma"` // kernel width σ (8)
	P     float64 `yaml:"p"`     // kernel power p (2)
	Eps   float64 `yaml:"eps"`   // kernel offset ε (1)
	Delta float64 `yaml:"delta"` // baseline floor δ (1e-6)
	// Ordering of candidates: mean (paper), max (authors' code and the Wan
	// golden rollout) or source.
	Ordering bank.Ordering `yaml:"ordering"`
	// Baselines: frozen (paper) or refresh.
	Baselines bank.Baselines `yaml:"baselines"`
	// Eviction: mandatory-densest (paper), densest or mandatory-source.
	Eviction bank.Eviction `yaml:"eviction"`
	// Prefix: shared across the heads of a layer (paper) or per-head.
	Prefix bank.Prefix `yaml:"prefix"`
	// Admission: joint (paper) or sequential (within-block competition).
	Admission bank.Admission `yaml:"admission"`
	// Payload of stored K/V: bf16 (paper accounting) or f32.
	Payload bank.Payload `yaml:"payload"`
	// Densities dtype: f32 or f64.
	Densities bank.DType `yaml:"densities"`
	// Descriptor the density is measured on: post-rope-key (paper),
	// pre-rope-key, key-value ([K;V], post-RoPE K) or pre-rope-key-value
	// ([K;V], pre-RoPE K).
	Descriptor bank.Descriptor `yaml:"descriptor"`
	// Workers bounds the bank's parallelism (0 = GOMAXPROCS).
	Workers int `yaml:"workers"`
}

// DeepForcingConfig configures the Deep Forcing baseline. The zero value
// of every variant is the DensityKV authors' adapter (their
// utils/deep_forcing.py, a port of cvlab-kaist/DeepForcing's persistent
// context); the other names keep this project's earlier reading.
type DeepForcingConfig struct {
	// RecentFrames kept verbatim at the end of the cache, including the
	// current block; as many frames' worth of query tokens are buffered
	// for scoring (4).
	RecentFrames int `yaml:"recent_frames"`
	// MaxReuse is how many compressions a token may survive (7).
	MaxReuse int `yaml:"max_reuse"`
	// Queries is what the query buffer keeps: every-call (the authors':
	// the last RecentFrames·P post-RoPE query tokens of every forward
	// call, noisy ones included, so a compression at a block's first call
	// scores with 1 clean frame and the block's 3 frames at t = 1000) or
	// clean (the clean passes' queries of the last RecentFrames frames).
	Queries DFQueries `yaml:"queries"`
	// Sink is where the sink's RoPE position goes after a compression:
	// authors (the official code's relocation: start − (CacheFrames −
	// SinkFrames) − SinkFrames, start − 12 for the paper's cache) or
	// before-tail (just before the recent tail: start − 2).
	Sink DFSink `yaml:"sink"`
	// Fusion combines the buffered queries' scores of a key: sum (the
	// summed query dotted with the key) or max (the largest single
	// query's dot product).
	Fusion DFFusion `yaml:"fusion"`
}

// DFQueries selects Deep Forcing's query buffer (every-call, clean).
type DFQueries uint8

// DFSink selects Deep Forcing's sink position after a compression
// (authors, before-tail).
type DFSink uint8

// DFFusion selects how Deep Forcing fuses its buffered queries' scores
// (sum, max).
type DFFusion uint8

const (
	DFQueriesEveryCall DFQueries = iota // the authors' adapter
	DFQueriesClean
)

const (
	DFSinkAuthors DFSink = iota // the authors' adapter
	DFSinkBeforeTail
)

const (
	DFFusionSum DFFusion = iota // the authors' default
	DFFusionMax
)

var (
	dfQueriesNames = vocab.List{Pkg: "memory", Kind: "deep forcing queries", Names: []string{"every-call", "clean"}}
	dfSinkNames    = vocab.List{Pkg: "memory", Kind: "deep forcing sink", Names: []string{"authors", "before-tail"}}
	dfFusionNames  = vocab.List{Pkg: "memory", Kind: "deep forcing fusion", Names: []string{"sum", "max"}}
)

func (v DFQueries) String() string               { return dfQueriesNames.String(uint8(v), "DFQueries") }
func (v DFQueries) MarshalText() ([]byte, error) { return dfQueriesNames.Marshal(uint8(v)) }
func (v *DFQueries) UnmarshalText(b []byte) error {
	x, err := dfQueriesNames.Parse(b)
	if err == nil {
		*v = DFQueries(x)
	}
	return err
}

// Names lists the query buffers' names.
func (DFQueries) Names() []string { return dfQueriesNames.All() }

func (v DFSink) String() string               { return dfSinkNames.String(uint8(v), "DFSink") }
func (v DFSink) MarshalText() ([]byte, error) { return dfSinkNames.Marshal(uint8(v)) }
func (v *DFSink) UnmarshalText(b []byte) error {
	x, err := dfSinkNames.Parse(b)
	if err == nil {
		*v = DFSink(x)
	}
	return err
}

// Names lists the sink positions' names.
func (DFSink) Names() []string { return dfSinkNames.All() }

func (v DFFusion) String() string               { return dfFusionNames.String(uint8(v), "DFFusion") }
func (v DFFusion) MarshalText() ([]byte, error) { return dfFusionNames.Marshal(uint8(v)) }
func (v *DFFusion) UnmarshalText(b []byte) error {
	x, err := dfFusionNames.Parse(b)
	if err == nil {
		*v = DFFusion(x)
	}
	return err
}

// Names lists the fusions' names.
func (DFFusion) Names() []string { return dfFusionNames.All() }

// LongLiveRAGConfig configures the LongLive-RAG baseline.
type LongLiveRAGConfig struct {
	// TopK frames retrieved per block (0 = Capacity / TokensPerFrame, 6).
	TopK int `yaml:"top_k"`
	// ExcludeRecent most recent evictions excluded from retrieval (5).
	ExcludeRecent int `yaml:"exclude_recent"`
	// Descriptor: latent-mean (spatial mean of the frame's latent,
	// L2-normalised; needs Call.Latent on clean passes; the default and
	// the authors' avg_pool fallback), key-mean (mean of the frame's
	// layer-0 keys over tokens, L2-normalised; works for synthetic
	// streams) or ae (the authors' trained autoencoder, ae_latent_mem.pt:
	// the policy cannot build it, the caller loads it, package ragae, and
	// sets it with SetDescriber before the first call).
	Descriptor RAGDescriptor `yaml:"descriptor"`
	// Pool is where the retrievable frames come from: physical (the
	// authors' code: frames evicted from the CacheFrames physical cache,
	// sink kept, so with the paper's cache of 12, sink 1 and 3-frame
	// blocks frames 1 … 3b−12 are in the pool at block b and, after
	// ExcludeRecent = 5, frames ≤ 3b−17 retrievable; the default) or
	// window (frames as they leave the WindowFrames local window: ≤ 3b−8
	// retrievable at block b; this project's earlier reading).
	Pool RAGPool `yaml:"pool"`
	// LatentChannels C of Call.Latent [F][C][H'][W'] (16).
	LatentChannels int `yaml:"latent_channels"`
	// DescriptorStorageDim overrides the descriptor size Bytes counts per
	// frame, in BF16 values. 0 (the default) counts the descriptor the
	// policy actually keeps (LatentChannels for latent-mean, Heads·HeadDim
	// for key-mean, Describer.Dim for a custom one), so Bytes is the storage
	// formula (storage.Config.LongLiveRAG) of the live state. A positive
	// value projects another descriptor size onto the run, e.g. the paper's
	// 1,024 (storage.Paper); Bytes then no longer describes the state held.
	DescriptorStorageDim int `yaml:"descriptor_storage_dim"`
}

// RAGDescriptor selects LongLive-RAG's built-in frame descriptor. Its
// names are latent-mean and key-mean (String, MarshalText, UnmarshalText,
// as for package bank's variants).
type RAGDescriptor uint8

const (
	// RAGLatentMean is LatentMean, the frame's latent averaged over space
	// (the default).
	RAGLatentMean RAGDescriptor = iota
	// RAGKeyMean is KeyMean, the frame's layer-0 keys averaged over tokens.
	RAGKeyMean
	// RAGAE is the authors' retrieval autoencoder (package ragae), set by
	// the caller with SetDescriber.
	RAGAE
)

var ragDescriptorNames = vocab.List{Pkg: "memory", Kind: "longlive-rag descriptor", Names: []string{"latent-mean", "key-mean", "ae"}}

func (d RAGDescriptor) String() string               { return ragDescriptorNames.String(uint8(d), "RAGDescriptor") }
func (d RAGDescriptor) MarshalText() ([]byte, error) { return ragDescriptorNames.Marshal(uint8(d)) }
func (d *RAGDescriptor) UnmarshalText(b []byte) error {
	x, err := ragDescriptorNames.Parse(b)
	if err == nil {
		*d = RAGDescriptor(x)
	}
	return err
}

// Names lists the descriptors' names: latent-mean, key-mean, ae.
func (RAGDescriptor) Names() []string { return ragDescriptorNames.All() }

// RAGPool selects the frames LongLive-RAG retrieves from (see
// LongLiveRAGConfig.Pool). Its names are physical and window.
type RAGPool uint8

const (
	// RAGPoolPhysical pools the frames evicted from the physical cache
	// (the authors' code; the default).
	RAGPoolPhysical RAGPool = iota
	// RAGPoolWindow pools the frames that leave the local window.
	RAGPoolWindow
)

var ragPoolNames = vocab.List{Pkg: "memory", Kind: "longlive-rag pool", Names: []string{"physical", "window"}}

func (v RAGPool) String() string               { return ragPoolNames.String(uint8(v), "RAGPool") }
func (v RAGPool) MarshalText() ([]byte, error) { return ragPoolNames.Marshal(uint8(v)) }
func (v *RAGPool) UnmarshalText(b []byte) error {
	x, err := ragPoolNames.Parse(b)
	if err == nil {
		*v = RAGPool(x)
	}
	return err
}

// Names lists the pools' names: physical, window.
func (RAGPool) Names() []string { return ragPoolNames.All() }

// DefaultConfig returns the paper's configuration for layout l.
func DefaultConfig(l Layout) Config {
	c := Config{Layout: l}
	r, _ := c.Resolve()
	return r
}

// Resolve fills defaults into zero fields and validates the result. It
// returns the resolved configuration (the receiver is not modified).
func (c Config) Resolve() (Config, error) {
	if c.Layout == (Layout{}) {
		c.Layout = DefaultLayout()
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	deff := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.SinkFrames, 1)
	def(&c.CacheFrames, 12)
	def(&c.WindowFrames, 5)
	deff(&c.RoPETheta, rope.DefaultTheta)
	if c.Capacity == 0 {
		c.Capacity = (c.CacheFrames - c.SinkFrames - c.WindowFrames) * c.Layout.TokensPerFrame()
	}
	b := &c.Bank
	deff(&b.Tau, 2)
	deff(&b.Sigma, 8)
	deff(&b.P, 2)
	deff(&b.Eps, 1)
	deff(&b.Delta, 1e-6)
	def(&c.DeepForcing.RecentFrames, 4)
	def(&c.DeepForcing.MaxReuse, 7)
	l := &c.LongLiveRAG
	if l.TopK == 0 && c.Layout.TokensPerFrame() > 0 {
		l.TopK = c.Capacity / c.Layout.TokensPerFrame()
	}
	def(&l.ExcludeRecent, 5)
	def(&l.LatentChannels, 16)
	return c, c.validate()
}

// FieldError is a configuration error that names the fields at fault by
// their YAML paths inside Config ("bank.tau", "layout.heads"), so that a
// command can name its own flags or keys for them.
type FieldError struct {
	Fields []string
	Msg    string
}

func (e *FieldError) Error() string { return "memory: config: " + e.Msg }

func fieldErr(fields []string, format string, a ...any) error {
	return &FieldError{Fields: fields, Msg: fmt.Sprintf(format, a...)}
}

func (c Config) validate() error {
	l := c.Layout
	for _, f := range []struct {
		name string
		v    int
	}{{"height", l.Height}, {"width", l.Width}, {"frames_per_block", l.FramesPerBlock}, {"layers", l.Layers}, {"heads", l.Heads}} {
		if f.v <= 0 {
			return fieldErr([]string{"layout." + f.name}, "layout %s %d must be positive", f.name, f.v)
		}
	}
	if l.HeadDim < 6 || l.HeadDim%2 != 0 {
		return fieldErr([]string{"layout.head_dim"}, "head dim %d must be even and at least 6", l.HeadDim)
	}
	if c.SinkFrames < 0 {
		return fieldErr([]string{"sink_frames"}, "sink frames %d is negative", c.SinkFrames)
	}
	if c.WindowFrames < l.FramesPerBlock {
		return fieldErr([]string{"window_frames", "layout.frames_per_block"}, "window frames %d < frames per block %d (the window includes the current block)", c.WindowFrames, l.FramesPerBlock)
	}
	if c.CacheFrames < c.SinkFrames+l.FramesPerBlock {
		return fieldErr([]string{"cache_frames", "sink_frames", "layout.frames_per_block"}, "cache frames %d < sink %d + frames per block %d", c.CacheFrames, c.SinkFrames, l.FramesPerBlock)
	}
	if c.WindowFrames+c.SinkFrames > c.CacheFrames {
		return fieldErr([]string{"window_frames", "sink_frames", "cache_frames"}, "window frames %d + sink %d exceed cache frames %d (window positions would leave the cache)", c.WindowFrames, c.SinkFrames, c.CacheFrames)
	}
	if c.Capacity < 0 {
		return fieldErr([]string{"capacity"}, "capacity %d is negative", c.Capacity)
	}
	if !(c.RoPETheta > 1) || math.IsInf(c.RoPETheta, 0) {
		return fieldErr([]string{"rope_theta"}, "rope theta %v must be finite and > 1", c.RoPETheta)
	}
	if d := c.DeepForcing; d.RecentFrames < l.FramesPerBlock {
		return fieldErr([]string{"deep_forcing.recent_frames", "layout.frames_per_block"}, "deep forcing recent frames %d must be ≥ frames per block %d", d.RecentFrames, l.FramesPerBlock)
	}
	if d := c.DeepForcing; d.MaxReuse < 0 {
		return fieldErr([]string{"deep_forcing.max_reuse"}, "deep forcing max reuse %d is negative", d.MaxReuse)
	}
	if c.DeepForcing.RecentFrames+c.SinkFrames > c.CacheFrames {
		return fieldErr([]string{"deep_forcing.recent_frames", "sink_frames", "cache_frames"}, "deep forcing recent frames %d + sink %d exceed cache frames %d", c.DeepForcing.RecentFrames, c.SinkFrames, c.CacheFrames)
	}
	r := c.LongLiveRAG
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{{"top_k", r.TopK, 0}, {"exclude_recent", r.ExcludeRecent, 0}, {"latent_channels", r.LatentChannels, 1}, {"descriptor_storage_dim", r.DescriptorStorageDim, 0}} {
		if f.v < f.min {
			return fieldErr([]string{"longlive_rag." + f.name}, "longlive-rag %s %d must be ≥ %d", strings.ReplaceAll(f.name, "_", " "), f.v, f.min)
		}
	}
	b := c.Bank
	for _, f := range []struct {
		name string
		v    float64
	}{{"tau", b.Tau}, {"sigma", b.Sigma}, {"p", b.P}, {"eps", b.Eps}, {"delta", b.Delta}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fieldErr([]string{"bank." + f.name}, "bank %s %v must be finite and positive", f.name, f.v)
		}
	}
	for _, v := range c.variants() {
		if name, err := v.value.MarshalText(); err != nil || !slices.Contains(v.names, string(name)) {
			return v.unknown(fmt.Sprint(v.value))
		}
	}
	if b.Workers < 0 {
		return fieldErr([]string{"bank.workers"}, "bank workers %d is negative", b.Workers)
	}
	return nil
}

// variant is a Config field that holds a variant name: its YAML path
// inside Config, the label of its errors, the field, and the names it
// accepts (those of its type, except that densities take f32 or f64).
type variant struct {
	path, label string
	value       interface {
		encoding.TextMarshaler
		encoding.TextUnmarshaler
	}
	names []string
}

func (v variant) unknown(name string) error {
	return fieldErr([]string{v.path}, "%s %q unknown (%s)", v.label, name, strings.Join(v.names, ", "))
}

// variants lists c's variant fields.
func (c *Config) variants() []variant {
	b := &c.Bank
	return []variant{
		{"bank.ordering", "bank ordering", &b.Ordering, b.Ordering.Names()},
		{"bank.baselines", "bank baselines", &b.Baselines, b.Baselines.Names()},
		{"bank.eviction", "bank eviction", &b.Eviction, b.Eviction.Names()},
		{"bank.prefix", "bank prefix", &b.Prefix, b.Prefix.Names()},
		{"bank.admission", "bank admission", &b.Admission, b.Admission.Names()},
		{"bank.payload", "bank payload", &b.Payload, b.Payload.Names()},
		{"bank.densities", "bank densities", &b.Densities, []string{bank.F32.String(), bank.F64.String()}},
		{"bank.descriptor", "bank descriptor", &b.Descriptor, b.Descriptor.Names()},
		{"longlive_rag.descriptor", "longlive-rag descriptor", &c.LongLiveRAG.Descriptor, c.LongLiveRAG.Descriptor.Names()},
		{"longlive_rag.pool", "longlive-rag pool", &c.LongLiveRAG.Pool, c.LongLiveRAG.Pool.Names()},
		{"deep_forcing.queries", "deep forcing queries", &c.DeepForcing.Queries, c.DeepForcing.Queries.Names()},
		{"deep_forcing.sink", "deep forcing sink", &c.DeepForcing.Sink, c.DeepForcing.Sink.Names()},
		{"deep_forcing.fusion", "deep forcing fusion", &c.DeepForcing.Fusion, c.DeepForcing.Fusion.Names()},
	}
}

// VariantPaths returns the YAML paths inside Config of the fields that hold
// a variant name ("bank.ordering", …, "longlive_rag.descriptor").
func VariantPaths() []string {
	var out []string
	for _, v := range new(Config).variants() {
		out = append(out, v.path)
	}
	return out
}

// VariantNames returns the names the variant field at path accepts, in
// value order (nil for a path that is not a variant field).
func VariantNames(path string) []string {
	for _, v := range new(Config).variants() {
		if v.path == path {
			return v.names
		}
	}
	return nil
}

// SetVariant sets the variant field at path (see VariantPaths) from its
// name, case and surrounding space ignored. An unknown name is a
// *FieldError naming the field, the name and the names allowed, and
// leaves c unchanged.
func (c *Config) SetVariant(path, name string) error {
	for _, v := range c.variants() {
		if v.path != path {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(name))
		if !slices.Contains(v.names, text) {
			return v.unknown(name)
		}
		return v.value.UnmarshalText([]byte(text))
	}
	return fmt.Errorf("memory: config: %q is not a variant field (%s)", path, strings.Join(VariantPaths(), ", "))
}

// Check resolves c and reports whether policy name can be built from it,
// without building it: for DensityKV that includes the bank's own checks
// (bank.Config.Validate: τ > 1, capacity ≥ 1, the kernel's range), so a
// caller can reject a configuration before it creates anything.
func (c Config) Check(name string) error {
	n, err := canonical(name)
	if err != nil {
		return err
	}
	r, err := c.Resolve()
	if err != nil {
		return err
	}
	if n == NameDensityKV {
		if _, err := bankConfig(r); err != nil {
			msg := strings.TrimPrefix(err.Error(), "memory: densitykv: ")
			var fields []string
			for _, f := range []struct{ in, field string }{
				{"Tau", "bank.tau"}, {"Delta", "bank.delta"}, {"sigma", "bank.sigma"}, {"riesz: p ", "bank.p"},
				{"eps", "bank.eps"}, {"(−p)", "bank.p"}, {"Capacity", "capacity"}, {"Heads", "layout.heads"}, {"KeyDim", "layout.head_dim"},
			} {
				if strings.Contains(msg, f.in) && !slices.Contains(fields, f.field) {
					fields = append(fields, f.field)
				}
			}
			return &FieldError{Fields: fields, Msg: "DensityKV bank: " + strings.TrimPrefix(strings.TrimPrefix(msg, "bank: config: "), "bank: config ")}
		}
	}
	return nil
}

// canonical maps a user-supplied policy name onto one of Names().
func canonical(name string) (string, error) {
	key := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(name))
	aliases := map[string]string{
		"native": NameNative, "infinityrope": NameInfinityRoPE, "∞rope": NameInfinityRoPE,
		"deepforcing": NameDeepForcing, "longliverag": NameLongLiveRAG, "rag": NameLongLiveRAG,
		"fullhistory": NameFullHistory, "full": NameFullHistory, "fifo": NameFIFO,
		"uniformstride": NameUniformStride, "stride": NameUniformStride,
		"densitykv": NameDensityKV,
	}
	if n, ok := aliases[key]; ok {
		return n, nil
	}
	names := Names()
	sort.Strings(names)
	return "", fmt.Errorf("memory: unknown policy %q (known: %s)", name, strings.Join(names, ", "))
}

// New builds the policy called name (see Names) from cfg, after Resolve.
func New(name string, cfg Config) (Policy, error) { return NewWith(name, cfg, Options{}) }

// Options are what a caller gives a policy beyond its Config: code, not
// data, so never part of the YAML configuration. The zero Options are
// New's.
type Options struct {
	// NewBank builds each layer's DensityKV bank (bank.New when nil), e.g.
	// gpu.NewBank on a Vulkan device. A snapshot loaded into the policy
	// is read into these banks (bank.Bank.ReadFrom).
	NewBank func(bank.Config) (*bank.Bank, error)
}

// NewWith is New with options.
func NewWith(name string, cfg Config, opt Options) (Policy, error) {
	n, err := canonical(name)
	if err != nil {
		return nil, err
	}
	c, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	switch n {
	case NameNative:
		return newNative(c, false)
	case NameInfinityRoPE:
		return newNative(c, true)
	case NameDeepForcing:
		return newDeepForcing(c)
	case NameLongLiveRAG:
		return newLongLiveRAG(c)
	case NameFullHistory:
		return newSelector(c, NameFullHistory)
	case NameFIFO:
		return newSelector(c, NameFIFO)
	case NameUniformStride:
		return newSelector(c, NameUniformStride)
	case NameDensityKV:
		return newDensityKV(c, opt)
	}
	return nil, fmt.Errorf("memory: policy %q not built", n)
}
