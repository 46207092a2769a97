package t5

import "fmt"

// Config is the shape of a umT5 encoder (Wan's T5Encoder with
// shared_pos=False). Load infers every field but MaxDist and Eps from the
// checkpoint's tensor shapes.
type Config struct {
	Vocab   int // token_embedding rows (256,384 for umT5-XXL)
	Dim     int // d_model: token_embedding columns, norm widths (4,096)
	DimAttn int // q/k/v output width = Heads·HeadDim (4,096)
	DimFFN  int // gate/fc1 output width (10,240)
	Heads   int // attention heads: pos_embedding columns (64)
	Layers  int // encoder blocks (24)
	Buckets int // relative-position buckets per layer: pos_embedding rows (32)
	MaxDist int // distance where the log buckets saturate (128; not in the checkpoint)
	// Eps is the RMSNorm epsilon inside the square root (1e-6; not in the
	// checkpoint).
	Eps float64
}

// UMT5XXL is the encoder of umT5-XXL as Wan2.1 builds it (umt5_xxl with
// encoder_only=True): about 5.7 B parameters.
func UMT5XXL() Config {
	return Config{Vocab: 256384, Dim: 4096, DimAttn: 4096, DimFFN: 10240, Heads: 64, Layers: 24,
		Buckets: 32, MaxDist: 128, Eps: 1e-6}
}

// HeadDim is DimAttn/Heads (64 for umT5-XXL).
func (c Config) HeadDim() int { return c.DimAttn / c.Heads }

// Upper bounds on a configuration: far above umT5-XXL, low enough that the
// products of sizes below cannot overflow an int.
const (
	maxVocab = 1 << 24
	maxWidth = 1 << 18
	maxLayer = 1 << 10
)

// Validate checks the sizes: all positive and within bounds, DimAttn a
// multiple of Heads, at least 4 Buckets (each direction gets Buckets/2, of
// which half are exact distances; an odd last bucket goes unused, as in
// Wan's code), MaxDist above the exact range, and 0 ≤ Eps < 1.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{{"vocab", c.Vocab, maxVocab}, {"dim", c.Dim, maxWidth}, {"dim_attn", c.DimAttn, maxWidth},
		{"dim_ffn", c.DimFFN, maxWidth}, {"heads", c.Heads, maxWidth}, {"layers", c.Layers, maxLayer},
		{"buckets", c.Buckets, maxWidth}, {"max_dist", c.MaxDist, 1 << 30}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("t5: config: %s = %d, want 1…%d", f.name, f.v, f.max)
		}
	}
	if c.DimAttn%c.Heads != 0 {
		return fmt.Errorf("t5: config: dim_attn %d is not a multiple of heads %d", c.DimAttn, c.Heads)
	}
	if c.Buckets < 4 {
		return fmt.Errorf("t5: config: buckets = %d, want at least 4 (bidirectional, exact and log buckets each way)", c.Buckets)
	}
	if maxExact := c.Buckets / 2 / 2; c.MaxDist <= maxExact {
		return fmt.Errorf("t5: config: max_dist %d must exceed the exact range %d", c.MaxDist, maxExact)
	}
	if !(c.Eps >= 0 && c.Eps < 1) {
		return fmt.Errorf("t5: config: eps = %v, want 0 ≤ eps < 1", c.Eps)
	}
	return nil
}

// Params returns the number of parameters (umT5-XXL's encoder: 5.68 B).
func (c Config) Params() int64 {
	perLayer := 2*int64(c.Dim) + 4*int64(c.Dim)*int64(c.DimAttn) + 3*int64(c.Dim)*int64(c.DimFFN) + int64(c.Buckets)*int64(c.Heads)
	return int64(c.Vocab)*int64(c.Dim) + int64(c.Layers)*perLayer + int64(c.Dim)
}

// FLOPs returns the multiply-adds×2 of one Forward over n tokens: the
// linear layers (2·n·(4·Dim·DimAttn + 3·Dim·DimFFN) per layer) and the
// attention products (2·2·n²·DimAttn per layer).
func (c Config) FLOPs(n int) float64 {
	nn := float64(n)
	lin := 2 * nn * (4*float64(c.Dim)*float64(c.DimAttn) + 3*float64(c.Dim)*float64(c.DimFFN))
	att := 4 * nn * nn * float64(c.DimAttn)
	return float64(c.Layers) * (lin + att)
}
