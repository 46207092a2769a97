// Package storage implements the paper's persistent temporal-state
// accounting (supplementary "Persistent-storage accounting"): the bytes each
// memory policy keeps between blocks, excluding model parameters and
// layer-local temporary workspace.
//
// Formulas (L layers, H heads, key/value dims dk, dv, P tokens per frame):
//
//	S_KV(n)       = L·H·n·(dk+dv)·2            BF16 K/V of n states per head
//	S_bank(n)     = S_KV(n) + L·H·n·(4+4+8+4)  + two FP32 density scalars
//	                                              (density, baseline) and int64
//	                                              source + int32 admission-update
//	                                              provenance per state
//	S_prov(n)     = S_KV(n) + L·H·n·(8+4)      K/V with provenance only (FIFO,
//	                                              uniform-stride controls)
//	DensityKV     = S_KV((sink+window)·P) + S_bank(M)
//	LongLive-RAG  = S_KV(frames·P) + frames·D_desc·2   (all frames, BF16 K/V,
//	                                              one BF16 descriptor per frame)
//	Deep Forcing  = S_KV(cache·P) + L·H·(recent·P)·dk·2 + L·(cache·P)·13
//	                                              (12-frame cache, 4-frame BF16
//	                                              query buffer, per layer and
//	                                              cache token an int64 index, an
//	                                              int32 reuse count and a 1-byte
//	                                              mask = 0.01 GiB at paper scale)
//	Native/∞-RoPE = S_KV(cache·P)
//	FullHistory   = S_KV(frames·P)
//
// At the paper's scale (L=30, H=12, dk=dv=128, P=1,560, M=9,360, sink 1,
// window 5, cache 12, 4 latent frames per second, 1,024-d descriptors) these
// give the printed figures: bank payload 1.61 GiB, bank total 1.67 GiB,
// DensityKV 3.28 GiB, LongLive-RAG 32.1/64.3/128.5 GiB at 30/60/120 s
// (120/240/480 frames), Deep Forcing 3.76 GiB, reductions 9.8×/19.6×/39.2×.
//
// A running policy's live bytes (memory.Policy.Bytes) are these formulas
// applied to the state it actually holds: in particular a LongLive-RAG
// policy counts its own descriptor (16 values with the built-in latent-mean
// descriptor), not the paper's 1,024, so it matches LongLiveRAG only with
// DescriptorDim set to that size.
package storage

import (
	"fmt"
	"math"
)

// GiB is 2^30 bytes.
const GiB = 1 << 30

// Per-state sizes in bytes.
const (
	BF16Bytes           = 2     // one BF16 K/V, query or descriptor value
	DensityScalarsBytes = 4 + 4 // FP32 density and FP32 baseline
	ProvenanceBytes     = 8 + 4 // int64 source token, int32 admission update
	// DeepForcingMetaBytes is the Deep Forcing metadata per layer and cache
	// token: int64 source index, int32 reuse count, 1-byte mask.
	DeepForcingMetaBytes = 8 + 4 + 1
)

// Model is the attention geometry the accounting depends on.
type Model struct {
	Layers, Heads    int
	KeyDim, ValueDim int
	TokensPerFrame   int
}

// Config holds the policy settings of the storage table.
type Config struct {
	Model
	SinkFrames        int     // explicit sink (1)
	WindowFrames      int     // local window incl. the current block (5)
	Capacity          int     // DensityKV bank capacity M per head (9,360)
	CacheFrames       int     // native / Deep Forcing cache (12)
	QueryBufferFrames int     // Deep Forcing query buffer (4)
	DescriptorDim     int     // LongLive-RAG descriptor, BF16 values (1,024 in the paper; a running memory.LongLiveRAG reports its own, see its DescriptorDim)
	LatentFPS         float64 // latent frames per second of video (4)
}

// Paper returns the configuration of the paper's storage figures
// (Wan2.1-T2V-1.3B).
func Paper() Config {
	return Config{
		Model:        Model{Layers: 30, Heads: 12, KeyDim: 128, ValueDim: 128, TokensPerFrame: 1560},
		SinkFrames:   1,
		WindowFrames: 5, Capacity: 9360, CacheFrames: 12, QueryBufferFrames: 4,
		DescriptorDim: 1024, LatentFPS: 4,
	}
}

func (m Model) lh() int64 { return int64(m.Layers) * int64(m.Heads) }

// KV returns S_KV(n): BF16 K/V of n states per layer and head.
func (m Model) KV(n int64) int64 { return m.lh() * n * int64(m.KeyDim+m.ValueDim) * BF16Bytes }

// KVFrames returns S_KV of frames whole frames per layer and head.
func (m Model) KVFrames(frames int64) int64 { return m.KV(frames * int64(m.TokensPerFrame)) }

// BankExtra returns the density scalars and provenance of n bank states per
// layer and head.
func (m Model) BankExtra(n int64) int64 {
	return m.lh() * n * (DensityScalarsBytes + ProvenanceBytes)
}

// Bank returns S_bank(n) = S_KV(n) + BankExtra(n).
func (m Model) Bank(n int64) int64 { return m.KV(n) + m.BankExtra(n) }

// BankStates returns the bank bytes of one layer-head with n states: the
// building block for banks whose occupancy differs across layers.
func (m Model) BankStates(n int64) int64 {
	return n * (int64(m.KeyDim+m.ValueDim)*BF16Bytes + DensityScalarsBytes + ProvenanceBytes)
}

// Provenance returns K/V plus provenance (no density) for n states per layer
// and head (FIFO and uniform-stride controls).
func (m Model) Provenance(n int64) int64 { return m.KV(n) + m.lh()*n*ProvenanceBytes }

// Descriptors returns the BF16 bytes of frames descriptors of dim values.
func Descriptors(frames int64, dim int) int64 { return frames * int64(dim) * BF16Bytes }

// QueryBuffer returns the BF16 bytes of buffered queries of n tokens per
// layer and head.
func (m Model) QueryBuffer(n int64) int64 { return m.lh() * n * int64(m.KeyDim) * BF16Bytes }

// DeepForcingMeta returns the metadata bytes of n cache tokens per layer.
func (m Model) DeepForcingMeta(n int64) int64 { return int64(m.Layers) * n * DeepForcingMetaBytes }

// Frames returns the latent frames of a horizon of seconds.
func (c Config) Frames(seconds float64) int64 { return int64(math.Round(seconds * c.LatentFPS)) }

// DensityKVBank returns the full bank (M states) with densities and provenance.
func (c Config) DensityKVBank() int64 { return c.Bank(int64(c.Capacity)) }

// DensityKVBankPayload returns the bank's K/V payload only.
func (c Config) DensityKVBankPayload() int64 { return c.KV(int64(c.Capacity)) }

// DensityKV returns the total: sink + window K/V and the full bank.
func (c Config) DensityKV() int64 {
	return c.KVFrames(int64(c.SinkFrames+c.WindowFrames)) + c.DensityKVBank()
}

// LongLiveRAG returns the bytes after frames latent frames: all K/V and one
// descriptor per frame.
func (c Config) LongLiveRAG(frames int64) int64 {
	return c.KVFrames(frames) + Descriptors(frames, c.DescriptorDim)
}

// DeepForcing returns the cache, query buffer and metadata bytes.
func (c Config) DeepForcing() int64 {
	n := int64(c.CacheFrames * c.TokensPerFrame)
	return c.KV(n) + c.QueryBuffer(int64(c.QueryBufferFrames*c.TokensPerFrame)) + c.DeepForcingMeta(n)
}

// Native returns the rolling cache bytes of Native and Infinity-RoPE.
func (c Config) Native() int64 { return c.KVFrames(int64(c.CacheFrames)) }

// FullHistory returns all K/V of frames latent frames.
func (c Config) FullHistory(frames int64) int64 { return c.KVFrames(frames) }

// Controls returns the FIFO / uniform-stride total at full capacity.
func (c Config) Controls() int64 {
	return c.KVFrames(int64(c.SinkFrames+c.WindowFrames)) + c.Provenance(int64(c.Capacity))
}

// Row is one policy at one horizon.
type Row struct {
	Policy  string
	Seconds float64
	Frames  int64
	Bytes   int64
	// Reduction is LongLive-RAG bytes / Bytes at the same horizon.
	Reduction float64
}

// GiB returns Bytes in GiB.
func (r Row) GiB() float64 { return float64(r.Bytes) / GiB }

// Table returns one row per policy and horizon (seconds), policies in the
// order Native, Deep Forcing, LongLive-RAG, FullHistory, DensityKV (bank
// payload, bank, total). It errors on a non-positive horizon or size.
func Table(c Config, horizons []float64) ([]Row, error) {
	m := c.Model
	if m.Layers <= 0 || m.Heads <= 0 || m.KeyDim <= 0 || m.ValueDim <= 0 || m.TokensPerFrame <= 0 || c.Capacity < 0 || !(c.LatentFPS > 0) {
		return nil, fmt.Errorf("storage: table: invalid config %+v", c)
	}
	var rows []Row
	for _, s := range horizons {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("storage: table: horizon %v s must be positive and finite", s)
		}
		f := c.Frames(s)
		rag := c.LongLiveRAG(f)
		add := func(name string, b int64) {
			rows = append(rows, Row{Policy: name, Seconds: s, Frames: f, Bytes: b, Reduction: float64(rag) / float64(b)})
		}
		add("native", c.Native())
		add("deep-forcing", c.DeepForcing())
		add("longlive-rag", rag)
		add("full-history", c.FullHistory(f))
		add("fifo/uniform-stride", c.Controls())
		add("densitykv-bank-payload", c.DensityKVBankPayload())
		add("densitykv-bank", c.DensityKVBank())
		add("densitykv", c.DensityKV())
	}
	return rows, nil
}
