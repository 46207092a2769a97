// Package memory is the streaming memory runtime between the DensityKV bank
// and an autoregressive video backbone: it decides what each self-attention
// call of a block sees (sink, historical memory, local window), applies the
// RoPE geometry of each part, writes clean K/V into the cache, and accounts
// for persistent storage.
//
// This file defines the contract shared by the backbone (package wan), the
// rollout, the simulator and the evaluation. Policies implement Policy.
//
// Policies are built by name with New(name, Config) (Names lists them;
// DefaultConfig gives the paper's setting, Config has YAML tags):
//
//   - Native: [sink | last CacheFrames−SinkFrames frames incl. the current
//     block], keys stored rotated at absolute frame positions.
//   - Infinity-RoPE: the same keys, stored raw and re-indexed every call at
//     slot positions 0…n−1.
//   - Deep Forcing: a CacheFrames cache of sink, a query-scored compressed
//     middle and the RecentFrames tail.
//   - LongLive-RAG, FullHistory, FIFO, uniform stride and DensityKV share the
//     windowed geometry of the golden rollout: [sink at t = 0 | memory at
//     t = 0 | last WindowFrames frames incl. the current block], window and
//     queries at their slot in a CacheFrames rolling cache; frames leaving
//     the window are offered to the memory at the first call of the next
//     block. Every committed sink frame sits at t = 0 (see windowed).
//
// Every policy also implements StatsReporter (a per-call record) and
// Snapshotter (Save/Load of the whole state between calls). Bytes follows
// the paper's accounting (package storage) applied to the state the policy
// holds: what the policy keeps itself (sink, window and cache K/V, pools,
// Deep Forcing's query buffer, LongLive-RAG's descriptors), held as float32
// in memory (or bfloat16 where that loses nothing, below), is counted as
// BF16, as the paper stores it; DensityKV's banks
// count what they store (bank.Config.BytesPerState: payload and density
// dtypes, provenance, and a float32 descriptor when a separate one is kept),
// which is the paper's BF16/FP32 bank only with the default bf16 payload,
// f32 densities and post-RoPE-key descriptor. Provenance ids are global
// token indices
// frame·TokensPerFrame + h·Width + w (Layout.TokenPos).
//
// The clean pass (Call.Clean) is what commits a block's K/V; its k and v are
// copied during Attend, one tensor per frame and layer, and committed at
// End. A returned error leaves the persistent state unchanged (an Attend
// error leaves the call open at the same layer).
//
// Memory. The windowed policies hold a frame's K/V as bfloat16 when every
// value is one (a bf16 stream; lossless), and DensityKV with a bfloat16
// payload and the post-RoPE-key descriptor holds the frames that have left
// the window and only wait to be offered as the bank's candidates (keys
// rotated at t = 0 and both rounded: what the bank stores), half the
// bytes; contexts, decisions and bytes are bit-identical either way. The
// bank's memory is decoded from its storage straight into the context
// (bank.Bank.Interleaved), never kept as a float32 copy. FullHistory and
// LongLive-RAG, which keep every frame, can keep them in a file instead
// (Archiver). A paper-scale layer of DensityKV holds about 150 MB (bank
// 58 MB of BF16 K/V, sink and window frames); see config.Estimate for
// every policy.
package memory

// Layout describes the token geometry and attention shape of a backbone.
// The Wan2.1-1.3B default is DefaultLayout().
type Layout struct {
	Height         int `yaml:"height"`           // latent token rows per frame (30 for Wan2.1 at 480×832)
	Width          int `yaml:"width"`            // latent token columns per frame (52)
	FramesPerBlock int `yaml:"frames_per_block"` // latent frames generated per block (3)
	Layers         int `yaml:"layers"`           // transformer layers (30)
	Heads          int `yaml:"heads"`            // attention heads per layer (12)
	HeadDim        int `yaml:"head_dim"`         // per-head key/value dimension (128)
}

// DefaultLayout is the Wan2.1-T2V-1.3B setting used in the paper.
func DefaultLayout() Layout {
	return Layout{Height: 30, Width: 52, FramesPerBlock: 3, Layers: 30, Heads: 12, HeadDim: 128}
}

// TokensPerFrame returns Height·Width (1,560 by default).
func (l Layout) TokensPerFrame() int { return l.Height * l.Width }

// TokensPerBlock returns FramesPerBlock·TokensPerFrame (4,680 by default).
func (l Layout) TokensPerBlock() int { return l.FramesPerBlock * l.TokensPerFrame() }

// TokenPos returns the latent frame and in-frame grid position (h, w) of a
// global token index (frame·TokensPerFrame + h·Width + w), the provenance
// id the memory policies use.
func (l Layout) TokenPos(src int64) (frame, h, w int) {
	p := int64(l.TokensPerFrame())
	frame = int(src / p)
	r := int(src % p)
	return frame, r / l.Width, r % l.Width
}

// Call describes one forward call of the backbone on one block.
type Call struct {
	Block  int  // block index b ≥ 0; the block holds frames [b·F, b·F+F)
	Step   int  // denoising step index (0 = first call of the block); the clean pass uses Step = Steps
	Clean  bool // the clean t = 0 pass, whose K/V persist in the cache
	First  bool // first call of this block (where DensityKV updates its bank)
	Latent []float32
	// Latent is optional: the block's latents [F][C][H'][W'] (C channels at the
	// latent, not token, resolution) for policies that describe frames by their
	// latents (LongLive-RAG's default descriptor). Nil when unavailable.
}

// Parts counts the attention keys of one call by part.
type Parts struct {
	Sink, Memory, Local int
}

// Total returns Sink + Memory + Local.
func (p Parts) Total() int { return p.Sink + p.Memory + p.Local }

// Context is what one layer's self-attention reads on one call.
// Q is [T][H][D] (the block's queries after RoPE); K and V are [S][H][D]
// with S = Parts.Total(), keys after RoPE, in the order sink | memory | local.
// The slices are owned by the policy and valid until the next call to Attend.
type Context struct {
	Q, K, V []float32
	Parts   Parts
	// HeadMemory is nil unless heads hold different numbers of memory
	// entries (only DensityKV's per-head-prefix ablation). Then head h's
	// memory is rows [Sink, Sink+HeadMemory[h]) and rows
	// [Sink+HeadMemory[h], Sink+Memory) of head h are zero padding that
	// attention must mask out.
	HeadMemory []int
}

// Policy is one memory policy (Native, Infinity-RoPE, Deep Forcing,
// LongLive-RAG, FullHistory, FIFO, uniform stride, DensityKV).
//
// For every forward call the backbone calls Begin, then Attend once per layer
// in order 0..Layers−1, then End. q, k and v are the current block's
// projections [T][H][D] (T = TokensPerBlock): q and k after qk-norm and
// before RoPE, v raw. Attend must not retain q, k or v after it returns;
// it copies what it keeps.
type Policy interface {
	Name() string
	Layout() Layout
	Begin(c Call) error
	Attend(layer int, q, k, v []float32) (Context, error)
	End() error
	// Bytes returns the live persistent temporal-state storage of the policy
	// (see package storage for the formulas it must equal).
	Bytes() int64
}
