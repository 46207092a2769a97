package vae

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
)

// Config is the architecture of a Wan2.1 VAE decoder (the arguments of
// Wan's WanVAE_ that shape the decoding path).
type Config struct {
	Dim          int   `json:"dim"`            // base width (96)
	ZDim         int   `json:"z_dim"`          // latent channels (16)
	DimMult      []int `json:"dim_mult"`       // width multipliers, encoder order ([1, 2, 4, 4])
	NumResBlocks int   `json:"num_res_blocks"` // the decoder has NumResBlocks+1 residual blocks per stage (2)
	// TemporalUpsample says, per decoder stage but the last, whether its
	// upsampling also doubles time (upsample3d) or only space
	// (upsample2d): Wan's temperal_downsample reversed, [true, true, false].
	TemporalUpsample []bool `json:"temperal_upsample"`
}

// DefaultConfig is the real Wan2.1 VAE (Wan2.1_VAE.pth).
func DefaultConfig() Config {
	return Config{Dim: 96, ZDim: 16, DimMult: []int{1, 2, 4, 4}, NumResBlocks: 2, TemporalUpsample: []bool{true, true, false}}
}

// TinyConfig is the configuration of the golden tiny VAEs with zDim latent
// channels (4 for ../shared/golden/vae, 16 for ../shared/golden/pipeline/vae):
// every width of the real model divided by 12.
func TinyConfig(zDim int) Config {
	c := DefaultConfig()
	c.Dim, c.ZDim = 8, zDim
	return c
}

// maxWidth bounds every channel count (the real model's widest is 768).
const maxWidth = 1 << 14

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Dim <= 0 || c.ZDim <= 0 || c.NumResBlocks < 0 {
		return fmt.Errorf("vae: config: dim %d and z_dim %d must be positive, num_res_blocks %d non-negative", c.Dim, c.ZDim, c.NumResBlocks)
	}
	if len(c.DimMult) == 0 || len(c.DimMult) > 8 {
		return fmt.Errorf("vae: config: dim_mult %v must have 1 to 8 entries", c.DimMult)
	}
	if len(c.TemporalUpsample) != len(c.DimMult)-1 {
		return fmt.Errorf("vae: config: temperal_upsample %v must have len(dim_mult)-1 = %d entries", c.TemporalUpsample, len(c.DimMult)-1)
	}
	if c.ZDim > maxWidth || c.NumResBlocks > 64 {
		return fmt.Errorf("vae: config: z_dim %d or num_res_blocks %d too large", c.ZDim, c.NumResBlocks)
	}
	for i, m := range c.DimMult {
		if m <= 0 || m > maxWidth || c.Dim > maxWidth/m {
			return fmt.Errorf("vae: config: dim_mult[%d] = %d gives width outside [1, %d]", i, m, maxWidth)
		}
	}
	d := c.dims()
	for i := 1; i < len(d)-1; i++ {
		if d[i]%2 != 0 {
			return fmt.Errorf("vae: config: stage %d width %d must be even (its upsampling halves it)", i-1, d[i])
		}
	}
	return nil
}

// dims returns the decoder widths: dims[0] for conv1 and the middle, dims[i+1]
// for stage i (Wan's [dim·u for u in [dim_mult[-1]] + dim_mult[::-1]]).
func (c Config) dims() []int {
	n := len(c.DimMult)
	d := []int{c.Dim * c.DimMult[n-1]}
	for i := n - 1; i >= 0; i-- {
		d = append(d, c.Dim*c.DimMult[i])
	}
	return d
}

// SpatialScale returns the pixel size of one latent (8 for Wan2.1).
func (c Config) SpatialScale() int { return 1 << (len(c.DimMult) - 1) }

// TemporalScale returns the pixel frames of every latent frame after the
// first (4 for Wan2.1).
func (c Config) TemporalScale() int {
	s := 1
	for _, t := range c.TemporalUpsample {
		if t {
			s *= 2
		}
	}
	return s
}

// PixelFrames returns the pixel frames decoded from the latent frames
// [start, start+n) of a stream: latent frame 0 gives one frame, every later
// one TemporalScale (so a whole video of T latents has 1 + 4(T−1)).
func (c Config) PixelFrames(start, n int) int {
	if n <= 0 {
		return 0
	}
	f := n * c.TemporalScale()
	if start == 0 {
		f -= c.TemporalScale() - 1
	}
	return f
}

// InferConfig reads the configuration from the shapes of a state dict's
// decoder tensors (keys as checkpoint.NormalizeKey leaves them): z_dim from
// conv2, dim from the head's norm, the stages and their widths from the
// sequence of decoder.upsamples modules (residual blocks, and resamples with
// or without a time_conv). It checks only what it reads; FromStateDict then
// checks every tensor against the inferred configuration.
func InferConfig(sd checkpoint.StateDict) (Config, error) {
	shape := func(name string, rank int) ([]int, error) {
		t, ok := sd[name]
		if !ok {
			return nil, fmt.Errorf("vae: infer config: tensor %s missing", name)
		}
		if len(t.Shape) != rank {
			return nil, fmt.Errorf("vae: infer config: tensor %s has shape %v, want rank %d", name, t.Shape, rank)
		}
		for _, s := range t.Shape {
			if s <= 0 || s > maxWidth {
				return nil, fmt.Errorf("vae: infer config: tensor %s has shape %v", name, t.Shape)
			}
		}
		return t.Shape, nil
	}
	var c Config
	s, err := shape("conv2.weight", 5)
	if err != nil {
		return c, err
	}
	c.ZDim = s[0]
	if s, err = shape("decoder.head.0.gamma", 4); err != nil {
		return c, err
	}
	c.Dim = s[0]
	if s, err = shape("decoder.conv1.weight", 5); err != nil {
		return c, err
	}
	top := s[0] // dim·dim_mult[-1]
	// The flat list decoder.upsamples.<i>: residual blocks, each stage but
	// the last closed by a resample.
	n := 0
	for k := range sd {
		if rest, ok := strings.CutPrefix(k, "decoder.upsamples."); ok {
			idx, _, _ := strings.Cut(rest, ".")
			if i, err := strconv.Atoi(idx); err == nil && i >= n && i < 1<<12 {
				n = i + 1
			}
		}
	}
	var widths []int // output width of each stage
	res := 0         // residual blocks in the current stage
	var perStage []int
	for i := 0; i < n; i++ {
		p := "decoder.upsamples." + strconv.Itoa(i) + "."
		switch {
		case sd[p+"residual.2.weight"] != nil:
			s, err := shape(p+"residual.6.weight", 5)
			if err != nil {
				return c, err
			}
			if res == 0 {
				widths = append(widths, s[0])
			}
			res++
		case sd[p+"resample.1.weight"] != nil:
			if res == 0 {
				return c, fmt.Errorf("vae: infer config: decoder.upsamples.%d is a resample with no residual block before it", i)
			}
			perStage = append(perStage, res)
			res = 0
			_, td := sd[p+"time_conv.weight"]
			c.TemporalUpsample = append(c.TemporalUpsample, td)
		default:
			return c, fmt.Errorf("vae: infer config: decoder.upsamples.%d is neither a residual block (residual.2.weight) nor a resample (resample.1.weight)", i)
		}
	}
	if res == 0 {
		return c, fmt.Errorf("vae: infer config: decoder.upsamples (%d modules) does not end with a residual block", n)
	}
	perStage = append(perStage, res)
	for _, r := range perStage {
		if r != perStage[0] {
			return c, fmt.Errorf("vae: infer config: stages have %v residual blocks, want the same number in each", perStage)
		}
	}
	c.NumResBlocks = perStage[0] - 1
	// dims = [top] + widths; widths are dim·dim_mult reversed.
	c.DimMult = make([]int, len(widths))
	for i, w := range widths {
		if w%c.Dim != 0 {
			return c, fmt.Errorf("vae: infer config: stage %d width %d is not a multiple of dim %d (decoder.head.0.gamma)", i, w, c.Dim)
		}
		c.DimMult[len(widths)-1-i] = w / c.Dim
	}
	if want := c.Dim * c.DimMult[len(c.DimMult)-1]; top != want {
		return c, fmt.Errorf("vae: infer config: decoder.conv1 has %d outputs, want dim·dim_mult[-1] = %d", top, want)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// Equal reports whether two configurations are the same.
func (c Config) Equal(o Config) bool {
	return c.Dim == o.Dim && c.ZDim == o.ZDim && c.NumResBlocks == o.NumResBlocks &&
		slices.Equal(c.DimMult, o.DimMult) && slices.Equal(c.TemporalUpsample, o.TemporalUpsample)
}
