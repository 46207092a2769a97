package generate

import (
	"fmt"

	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
	"github.com/densitykv/densitykv/weights"
)

// CheckBackbone checks a DiT checkpoint against configuration cfg without
// reading its weights: its layout recognised (package weights: a file,
// sharded safetensors, a diffusers or ComfyUI layout), every parameter
// present with its shape, nothing unexpected, floating-point dtypes, the
// file's records within its size (wan.Check). wan.Load reads and checks
// the values later; this lets a run refuse a wrong file before it spends
// minutes on the text encoder. entry selects a PyTorch checkpoint's
// entry ("" = automatic). Errors name the file and the tensors.
func CheckBackbone(path, entry string, cfg wan.Config) error {
	src, err := weights.Open(path, weights.DiT, weights.Options{Entry: entry})
	if err != nil {
		return fmt.Errorf("generate: backbone: %w", err)
	}
	defer src.Close()
	if err := wan.Check(src, cfg); err != nil {
		return fmt.Errorf("generate: backbone: %w", err)
	}
	return nil
}

// LoadVAE reads the VAE decoder of a checkpoint and checks that latent
// statistics mean and std (nil: Wan2.1's) fit it, and that it decodes the
// DiT's latent channels (channels; 0 skips the check).
func LoadVAE(path string, mean, std []float32, channels int) (*vae.Model, error) {
	m, err := vae.Load(path)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if channels > 0 && m.Cfg.ZDim != channels {
		return nil, fmt.Errorf("generate: VAE %s decodes %d latent channels, the DiT makes %d", path, m.Cfg.ZDim, channels)
	}
	if _, err := m.NewDecoder(vae.Options{Mean: mean, Std: std}); err != nil {
		return nil, fmt.Errorf("generate: VAE %s: %w", path, err)
	}
	return m, nil
}
