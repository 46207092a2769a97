package ragae

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/nn"
)

// Config is the authors' AEConfig (ae/config.py).
type Config struct {
	InChannels int   `json:"in_channels"` // latent channels C (16)
	SpatialH   int   `json:"spatial_h"`   // training latent height (60; not used by the encoder)
	SpatialW   int   `json:"spatial_w"`   // training latent width (104; not used by the encoder)
	LatentDim  int   `json:"latent_dim"`  // descriptor length (1,024)
	HiddenDims []int `json:"hidden_dims"` // channels of each downsampling stage ([64, 128, 256])
}

// DefaultConfig returns AEConfig's defaults.
func DefaultConfig() Config {
	return Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 1024, HiddenDims: []int{64, 128, 256}}
}

// Bounds of a configuration, checked before anything is allocated.
const (
	maxChannels = 1 << 14
	maxStages   = 16
	maxLatent   = 1 << 16
)

func (c Config) validate() error {
	if c.InChannels < 1 || c.InChannels > maxChannels {
		return fmt.Errorf("in_channels %d outside [1, %d]", c.InChannels, maxChannels)
	}
	if c.LatentDim < 1 || c.LatentDim > maxLatent {
		return fmt.Errorf("latent_dim %d outside [1, %d]", c.LatentDim, maxLatent)
	}
	if len(c.HiddenDims) == 0 || len(c.HiddenDims) > maxStages {
		return fmt.Errorf("hidden_dims has %d stages, want 1 to %d", len(c.HiddenDims), maxStages)
	}
	for i, h := range c.HiddenDims {
		if h < 1 || h > maxChannels {
			return fmt.Errorf("hidden_dims[%d] %d outside [1, %d]", i, h, maxChannels)
		}
	}
	return nil
}

// configFrom reads the checkpoint's "config" dictionary as the authors'
// loader does: AEConfig's defaults for missing fields, unknown fields
// dropped; values of the wrong type are errors.
func configFrom(v any) (Config, error) {
	c := DefaultConfig()
	m, ok := v.(map[string]any)
	if !ok {
		return c, fmt.Errorf("config is %T, not a dictionary", v)
	}
	integer := func(key string, dst *int) error {
		x, ok := m[key]
		if !ok {
			return nil
		}
		n, ok := x.(int64)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return fmt.Errorf("config %s is %v, not an integer", key, x)
		}
		*dst = int(n)
		return nil
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"in_channels", &c.InChannels}, {"spatial_h", &c.SpatialH}, {"spatial_w", &c.SpatialW}, {"latent_dim", &c.LatentDim}} {
		if err := integer(f.key, f.dst); err != nil {
			return c, err
		}
	}
	if x, ok := m["hidden_dims"]; ok {
		l, ok := x.([]any)
		if !ok {
			return c, fmt.Errorf("config hidden_dims is %v, not a list of integers", x)
		}
		if len(l) > maxStages {
			return c, fmt.Errorf("config hidden_dims has %d stages, more than %d", len(l), maxStages)
		}
		c.HiddenDims = make([]int, len(l))
		for i, e := range l {
			n, ok := e.(int64)
			if !ok || n < math.MinInt32 || n > math.MaxInt32 {
				return c, fmt.Errorf("config hidden_dims[%d] is %v, not an integer", i, e)
			}
			c.HiddenDims[i] = int(n)
		}
	}
	return c, c.validate()
}

// numGroups is the authors' _num_groups: the first of 32, 16, 8, 4, 1 that
// divides channels.
func numGroups(channels int) int {
	for _, g := range []int{32, 16, 8, 4} {
		if channels%g == 0 {
			return g
		}
	}
	return 1
}

// Conv2d is a 3×3 convolution with padding 1: Weight [Out][In][3][3], Bias
// [Out].
type Conv2d struct {
	Weight, Bias []float32
	In, Out      int
	Stride       int
}

// GroupNorm is nn.GroupNorm(Groups, Channels) with affine Weight and Bias
// [Channels] and ε = 1e-5.
type GroupNorm struct {
	Weight, Bias     []float32
	Groups, Channels int
}

// ResBlock is the authors' pre-norm residual block: Sequential modules
// block.0 (Norm1), block.1 (SiLU), block.2 (Conv1), block.3 (Norm2),
// block.4 (SiLU), block.5 (Conv2).
type ResBlock struct {
	Norm1 GroupNorm // block.0
	Conv1 Conv2d    // block.2
	Norm2 GroupNorm // block.3
	Conv2 Conv2d    // block.5
}

// Stage is one downsampling stage of encoder.conv_stack: modules 4i
// (Down, stride 2), 4i+1 (Norm), 4i+2 (SiLU) and 4i+3 (Res).
type Stage struct {
	Down Conv2d
	Norm GroupNorm
	Res  ResBlock
}

// Encoder is LatentAE.encoder.
type Encoder struct {
	Stages    []Stage            // conv_stack
	FinalNorm GroupNorm          // final_norm.0 (then SiLU)
	FC        nn.Linear[float32] // fc: weight [latent_dim][channels], bias; packed at fp32
}

// AE is a loaded retrieval autoencoder.
type AE struct {
	Config  Config
	Encoder Encoder
	// File is the checkpoint it was read from.
	File string
	// Ignored lists the state dict's tensors outside the encoder (a
	// training decoder), which the authors' strict=False load ignores too.
	Ignored []string
}

// Load reads the authors' ae_latent_mem.pt at path. Every error names the
// file, and the tensor or config field at fault.
func Load(path string) (*AE, error) {
	cv, err := checkpoint.TorchValueFile(path, "config")
	if err != nil {
		return nil, fmt.Errorf("ragae: %w", err)
	}
	cfg, err := configFrom(cv)
	if err != nil {
		return nil, fmt.Errorf("ragae: %s: %w", path, err)
	}
	sd, err := checkpoint.LoadTorchFile(path, checkpoint.TorchOptions{Entry: "model"})
	if err != nil {
		return nil, fmt.Errorf("ragae: %w", err)
	}
	ae, err := fromStateDict(cfg, sd)
	if err != nil {
		return nil, fmt.Errorf("ragae: %s: %w", path, err)
	}
	ae.File = path
	return ae, nil
}

// fromStateDict builds the encoder of cfg from a state dict (normalised
// keys), checking every tensor's presence, shape and values.
func fromStateDict(cfg Config, sd checkpoint.StateDict) (*AE, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	var errs []string
	take := func(name string, shape ...int) []float32 {
		used[name] = true
		t, ok := sd[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("tensor %s missing (want shape %v)", name, shape))
			return nil
		case !slices.Equal(t.Shape, shape):
			errs = append(errs, fmt.Sprintf("tensor %s has shape %v, want %v (config %s)", name, t.Shape, shape, cfgText(cfg)))
			return nil
		}
		if i := finite.First(t.Data); i >= 0 {
			errs = append(errs, fmt.Sprintf("tensor %s has %v at index %d", name, t.Data[i], i))
			return nil
		}
		return t.Data
	}
	conv := func(prefix string, in, out, stride int) Conv2d {
		return Conv2d{Weight: take(prefix+".weight", out, in, 3, 3), Bias: take(prefix+".bias", out), In: in, Out: out, Stride: stride}
	}
	norm := func(prefix string, ch int) GroupNorm {
		return GroupNorm{Weight: take(prefix+".weight", ch), Bias: take(prefix+".bias", ch), Groups: numGroups(ch), Channels: ch}
	}
	ae := &AE{Config: cfg}
	e := &ae.Encoder
	ch := cfg.InChannels
	for i, hd := range cfg.HiddenDims {
		p := fmt.Sprintf("encoder.conv_stack.%d", 4*i)
		r := fmt.Sprintf("encoder.conv_stack.%d.block", 4*i+3)
		e.Stages = append(e.Stages, Stage{
			Down: conv(p, ch, hd, 2),
			Norm: norm(fmt.Sprintf("encoder.conv_stack.%d", 4*i+1), hd),
			Res:  ResBlock{Norm1: norm(r+".0", hd), Conv1: conv(r+".2", hd, hd, 1), Norm2: norm(r+".3", hd), Conv2: conv(r+".5", hd, hd, 1)},
		})
		ch = hd
	}
	e.FinalNorm = norm("encoder.final_norm.0", ch)
	e.FC = nn.Linear[float32]{W: take("encoder.fc.weight", cfg.LatentDim, ch), B: take("encoder.fc.bias", cfg.LatentDim), In: ch, Out: cfg.LatentDim}
	for _, n := range sd.Names() {
		switch {
		case used[n]:
		case strings.HasPrefix(n, "encoder."):
			errs = append(errs, fmt.Sprintf("unexpected encoder tensor %s %v (config %s)", n, sd[n].Shape, cfgText(cfg)))
		default:
			ae.Ignored = append(ae.Ignored, n)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	e.FC.Pack(gemm.F32)
	return ae, nil
}

func cfgText(c Config) string {
	return fmt.Sprintf("in_channels %d, hidden_dims %v, latent_dim %d", c.InChannels, c.HiddenDims, c.LatentDim)
}
