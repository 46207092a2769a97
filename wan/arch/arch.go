// Package arch is the architecture of a Wan2.1-style DiT as plain data
// (Config: sizes, patch, RoPE base; the 1.3B and tiny ones) and what
// follows from it without weights: the memory layout and RoPE base a
// policy needs (Config.Memory, Config.Layout) and the FLOPs of a forward
// call. Package wan is the model; run configurations (package config) hold
// a Config without importing it.
package arch

import (
	"fmt"

	"github.com/densitykv/densitykv/memory"
)

// Config is the architecture of a Wan2.1-style DiT.
type Config struct {
	Dim     int     `json:"dim" yaml:"dim"`           // hidden size (1536)
	FFNDim  int     `json:"ffn_dim" yaml:"ffn_dim"`   // FFN hidden size (8960)
	FreqDim int     `json:"freq_dim" yaml:"freq_dim"` // sinusoidal time embedding size (256)
	TextDim int     `json:"text_dim" yaml:"text_dim"` // text encoder width (4096)
	TextLen int     `json:"text_len" yaml:"text_len"` // text rows attended (512)
	InDim   int     `json:"in_dim" yaml:"in_dim"`     // latent channels in (16)
	OutDim  int     `json:"out_dim" yaml:"out_dim"`   // latent channels out (16)
	Heads   int     `json:"num_heads" yaml:"num_heads"`
	Layers  int     `json:"num_layers" yaml:"num_layers"`
	Patch   [3]int  `json:"patch_size" yaml:"patch_size"` // (t, h, w) = (1, 2, 2)
	Eps     float64 `json:"eps" yaml:"eps"`               // RMSNorm / LayerNorm epsilon (1e-6)
	// RoPEBase is the RoPE base θ (10000). The memory policy applies RoPE
	// for the model, so its memory.Config.RoPETheta must equal this:
	// Memory fills it in, and Forward rejects a policy that reports another.
	RoPEBase float64 `json:"rope_theta" yaml:"rope_theta"`
}

// DefaultConfig is Wan2.1-T2V-1.3B.
func DefaultConfig() Config {
	return Config{Dim: 1536, FFNDim: 8960, FreqDim: 256, TextDim: 4096, TextLen: 512, InDim: 16, OutDim: 16,
		Heads: 12, Layers: 30, Patch: [3]int{1, 2, 2}, Eps: 1e-6, RoPEBase: 10000}
}

// TinyConfig is the configuration of the golden reference data
// (../shared/golden/wan): dim 64, 2 heads × 32, 2 layers, text 8 × 32.
func TinyConfig() Config {
	return Config{Dim: 64, FFNDim: 128, FreqDim: 256, TextDim: 32, TextLen: 8, InDim: 16, OutDim: 16,
		Heads: 2, Layers: 2, Patch: [3]int{1, 2, 2}, Eps: 1e-6, RoPEBase: 10000}
}

// HeadDim returns Dim / Heads.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// PatchLen returns InDim·pt·ph·pw, the input size of the patch embedding.
func (c Config) PatchLen() int { return c.InDim * c.Patch[0] * c.Patch[1] * c.Patch[2] }

// OutLen returns OutDim·pt·ph·pw, the head's output size per token.
func (c Config) OutLen() int { return c.OutDim * c.Patch[0] * c.Patch[1] * c.Patch[2] }

// Validate checks the configuration.
func (c Config) Validate() error {
	for _, f := range []struct {
		n string
		v int
	}{{"dim", c.Dim}, {"ffn_dim", c.FFNDim}, {"freq_dim", c.FreqDim}, {"text_dim", c.TextDim}, {"text_len", c.TextLen},
		{"in_dim", c.InDim}, {"out_dim", c.OutDim}, {"num_heads", c.Heads}, {"num_layers", c.Layers},
		{"patch t", c.Patch[0]}, {"patch h", c.Patch[1]}, {"patch w", c.Patch[2]}} {
		if f.v <= 0 {
			return fmt.Errorf("wan: config: %s %d must be positive", f.n, f.v)
		}
	}
	if c.Patch[0] != 1 {
		return fmt.Errorf("wan: config: temporal patch %d unsupported (the causal model uses 1)", c.Patch[0])
	}
	if c.Dim%c.Heads != 0 || c.HeadDim()%2 != 0 || c.HeadDim() < 6 {
		return fmt.Errorf("wan: config: dim %d / heads %d must give an even head dim ≥ 6", c.Dim, c.Heads)
	}
	if c.FreqDim%2 != 0 {
		return fmt.Errorf("wan: config: freq_dim %d must be even", c.FreqDim)
	}
	if !(c.Eps > 0) || !(c.RoPEBase > 1) {
		return fmt.Errorf("wan: config: eps %v must be > 0 and rope_theta %v > 1", c.Eps, c.RoPEBase)
	}
	return nil
}

// Memory returns mc completed for this model: the layout for latents of
// height×width and framesPerBlock frames per block (see Layout), and the
// model's RoPE base (a zero mc.RoPETheta becomes RoPEBase; a different one
// is an error, since the policy rotates this model's queries and keys).
func (c Config) Memory(mc memory.Config, height, width, framesPerBlock int) (memory.Config, error) {
	mc.Layout = c.Layout(height, width, framesPerBlock)
	if mc.RoPETheta == 0 {
		mc.RoPETheta = c.RoPEBase
	}
	if mc.RoPETheta != c.RoPEBase {
		return mc, fmt.Errorf("wan: memory config rope_theta %v differs from the model's rope_theta %v", mc.RoPETheta, c.RoPEBase)
	}
	return mc, nil
}

// Layout returns the memory layout of this model for latents of height×width
// (latent pixels) and framesPerBlock frames per block.
func (c Config) Layout(height, width, framesPerBlock int) memory.Layout {
	return memory.Layout{Height: height / c.Patch[1], Width: width / c.Patch[2], FramesPerBlock: framesPerBlock,
		Layers: c.Layers, Heads: c.Heads, HeadDim: c.HeadDim()}
}

// FLOPs returns the floating-point operations (2 per multiply-add) of the
// matrix products of one Forward call on frames frames of tokens tokens in
// all whose self-attention attends keys keys per layer: the patch
// embedding, the time embedding, per layer the self-attention
// projections (4·2·T·dim²), QKᵀ and PV (4·T·keys·dim), the cross-attention
// projections (2·2·T·dim²) and its products over text_len keys, the FFN
// (2·2·T·dim·ffn_dim), and the head. The text embedding (once per prompt)
// and the element-wise steps are not counted.
func (c Config) FLOPs(tokens, keys, frames int) float64 {
	T, S, F := float64(tokens), float64(keys), float64(frames)
	d, ffn, L := float64(c.Dim), float64(c.FFNDim), float64(c.TextLen)
	perLayer := 8*T*d*d + 4*T*S*d + 4*T*d*d + 4*T*L*d + 4*T*d*ffn
	return 2*T*float64(c.PatchLen())*d + 2*F*(float64(c.FreqDim)*d+d*d+6*d*d) +
		float64(c.Layers)*perLayer + 2*T*d*float64(c.OutLen())
}
