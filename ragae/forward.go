package ragae

import (
	"fmt"
	"math"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/nn"
)

// maxPixels bounds a latent frame's H·W.
const maxPixels = 1 << 22

// groupNormEps is nn.GroupNorm's default ε.
const groupNormEps = 1e-5

// Describer encodes latent frames of one size with an AE. It implements
// memory.Describer for LongLive-RAG (descriptor ae). Calls are serialised
// (it reuses its buffers).
type Describer struct {
	ae   *AE
	h, w int

	mu           sync.Mutex
	x, t, y, col []float32
}

// ForLatent returns the describer of latent frames [channels][h][w]; the
// channels must be the AE's in_channels.
func (a *AE) ForLatent(channels, h, w int) (*Describer, error) {
	if channels != a.Config.InChannels {
		return nil, fmt.Errorf("ragae: %s: the autoencoder reads %d latent channels (config in_channels), the model's latents have %d", a.File, a.Config.InChannels, channels)
	}
	if h < 1 || w < 1 || h*w > maxPixels {
		return nil, fmt.Errorf("ragae: latent frame %d×%d: want positive sizes with at most %d pixels", h, w, maxPixels)
	}
	return &Describer{ae: a, h: h, w: w}, nil
}

// Dim returns the descriptor length (config latent_dim).
func (d *Describer) Dim() int { return d.ae.Config.LatentDim }

// NeedsLatent returns true: the AE reads the clean latent.
func (d *Describer) NeedsLatent() bool { return true }

// Describe returns the L2-normalised embedding of frame's latent
// [C][H][W] (LatentAE.encode with normalize=True), a fresh slice.
func (d *Describer) Describe(frame int, latent []float32, _ [][]float32) ([]float32, error) {
	out, err := d.Encode(latent)
	if err != nil {
		return nil, fmt.Errorf("ragae: frame %d: %w", frame, err)
	}
	return out, nil
}

// Encode returns the L2-normalised embedding of one latent frame
// [C][H][W].
func (d *Describer) Encode(latent []float32) ([]float32, error) {
	c := d.ae.Config.InChannels
	if len(latent) != c*d.h*d.w {
		return nil, fmt.Errorf("latent has %d values, want %d channels × %d × %d = %d", len(latent), c, d.h, d.w, c*d.h*d.w)
	}
	if i := finite.First(latent); i >= 0 {
		return nil, fmt.Errorf("latent has %v at index %d (channel %d)", latent[i], i, i/(d.h*d.w))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	emb := d.forward(latent)
	normalize(emb)
	return emb, nil
}

// forward runs Encoder.forward on x [C][H][W] and returns the embedding
// before normalisation (a fresh slice).
func (d *Describer) forward(in []float32) []float32 {
	e := &d.ae.Encoder
	h, w := d.h, d.w
	d.x = append(d.x[:0], in...)
	for i := range e.Stages {
		s := &e.Stages[i]
		// Down: conv stride 2, GroupNorm, SiLU.
		d.y, h, w = d.conv(&s.Down, d.y, d.x, h, w)
		d.x, d.y = d.y, d.x
		s.Norm.apply(d.x, h*w, true)
		// Res: x + Conv2(SiLU(GN2(Conv1(SiLU(GN1(x)))))).
		d.t = append(d.t[:0], d.x...)
		s.Res.Norm1.apply(d.t, h*w, true)
		d.y, _, _ = d.conv(&s.Res.Conv1, d.y, d.t, h, w)
		s.Res.Norm2.apply(d.y, h*w, true)
		d.t, _, _ = d.conv(&s.Res.Conv2, d.t, d.y, h, w)
		for j, v := range d.t {
			d.x[j] += v
		}
	}
	e.FinalNorm.apply(d.x, h*w, true)
	ch, P := e.FinalNorm.Channels, h*w
	pooled := make([]float32, ch) // AdaptiveAvgPool2d(1)
	for c := range pooled {
		var s float64
		for _, v := range d.x[c*P : (c+1)*P] {
			s += float64(v)
		}
		pooled[c] = float32(s / float64(P))
	}
	emb := make([]float32, e.FC.Out)
	e.FC.Apply(emb, pooled, 1)
	return emb
}

// conv applies c to x [In][h][w] into dst (grown as needed) and returns
// it as [Out][ho][wo]: im2col rows [ho·wo][In·9] (c.Weight's layout),
// one gemm product, then the bias.
func (d *Describer) conv(c *Conv2d, dst, x []float32, h, w int) ([]float32, int, int) {
	ho, wo := (h-1)/c.Stride+1, (w-1)/c.Stride+1
	K, P := c.In*9, ho*wo
	d.col = grow(d.col, P*K)
	col := d.col
	for oy := 0; oy < ho; oy++ {
		for ox := 0; ox < wo; ox++ {
			row := col[(oy*wo+ox)*K : (oy*wo+ox+1)*K]
			for ci := 0; ci < c.In; ci++ {
				plane := x[ci*h*w : (ci+1)*h*w]
				for ky := 0; ky < 3; ky++ {
					iy := oy*c.Stride - 1 + ky
					for kx := 0; kx < 3; kx++ {
						ix := ox*c.Stride - 1 + kx
						v := float32(0)
						if iy >= 0 && iy < h && ix >= 0 && ix < w {
							v = plane[iy*w+ix]
						}
						row[ci*9+ky*3+kx] = v
					}
				}
			}
		}
	}
	dst = grow(dst, c.Out*P)
	gemm.NT(c.Out, P, K, c.Weight, K, col, K, dst, P)
	for o := 0; o < c.Out; o++ {
		b := c.Bias[o]
		for p := range dst[o*P : (o+1)*P] {
			dst[o*P+p] += b
		}
	}
	return dst, ho, wo
}

// apply normalises x [Channels][P] in place per group (nn.GroupNorm, ε =
// 1e-5), then SiLU when silu is set.
func (g *GroupNorm) apply(x []float32, P int, silu bool) {
	nn.GroupNorm(x, g.Channels, P, g.Groups, g.Weight, g.Bias, groupNormEps, silu)
}

// normalize is F.normalize(x, dim=-1): x / max(‖x‖₂, 1e-12).
func normalize(x []float32) {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	n := max(math.Sqrt(s), 1e-12)
	for i, v := range x {
		x[i] = float32(float64(v) / n)
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
