// Package aetest writes small LongLive-RAG autoencoder checkpoints in the
// authors' format (ae_latent_mem.pt: a "config" dictionary and the
// LatentAE "model" state dict with its real key names) for tests.
package aetest

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// Config is the AEConfig written ("config" entry).
type Config struct {
	InChannels, SpatialH, SpatialW, LatentDim int
	HiddenDims                                []int
}

// StateDict returns a random LatentAE state dict of cfg (normal values of
// standard deviation 0.5 from seed), with one decoder tensor that the
// encoder ignores, in the order LatentAE.state_dict() lists them.
func StateDict(cfg Config, seed uint64) torchtest.Dict {
	r := rand.New(rand.NewPCG(seed, 1))
	var sd torchtest.Dict
	add := func(name string, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64() * 0.5)
		}
		sd = append(sd, torchtest.KV{Key: name, Value: &torchtest.Tensor{Shape: shape, Data: d}})
	}
	ch := cfg.InChannels
	for i, hd := range cfg.HiddenDims {
		add(fmt.Sprintf("encoder.conv_stack.%d.weight", 4*i), hd, ch, 3, 3)
		add(fmt.Sprintf("encoder.conv_stack.%d.bias", 4*i), hd)
		add(fmt.Sprintf("encoder.conv_stack.%d.weight", 4*i+1), hd)
		add(fmt.Sprintf("encoder.conv_stack.%d.bias", 4*i+1), hd)
		for _, j := range []int{0, 2, 3, 5} {
			p := fmt.Sprintf("encoder.conv_stack.%d.block.%d", 4*i+3, j)
			if j == 2 || j == 5 {
				add(p+".weight", hd, hd, 3, 3)
			} else {
				add(p+".weight", hd)
			}
			add(p+".bias", hd)
		}
		ch = hd
	}
	add("encoder.final_norm.0.weight", ch)
	add("encoder.final_norm.0.bias", ch)
	add("encoder.fc.weight", cfg.LatentDim, ch)
	add("encoder.fc.bias", cfg.LatentDim)
	add("decoder.fc.weight", 7, cfg.LatentDim)
	return sd
}

// ConfigDict returns cfg as the "config" entry, with two training fields
// the loader drops.
func ConfigDict(c Config) torchtest.Dict {
	hd := make(torchtest.List, len(c.HiddenDims))
	for i, h := range c.HiddenDims {
		hd[i] = h
	}
	return torchtest.Dict{{Key: "in_channels", Value: c.InChannels}, {Key: "spatial_h", Value: c.SpatialH}, {Key: "spatial_w", Value: c.SpatialW},
		{Key: "latent_dim", Value: c.LatentDim}, {Key: "hidden_dims", Value: hd}, {Key: "batch_size", Value: 128}, {Key: "lr", Value: 3e-4}}
}

// File returns the checkpoint {"config": cfg, "model": sd} as bytes.
func File(cfg Config, sd torchtest.Dict) []byte {
	return torchtest.Bytes(torchtest.Dict{{Key: "config", Value: ConfigDict(cfg)}, {Key: "model", Value: sd}}, torchtest.Options{})
}

// Write writes a random autoencoder of cfg (StateDict(cfg, seed)) to path.
func Write(path string, cfg Config, seed uint64) error {
	return os.WriteFile(path, File(cfg, StateDict(cfg, seed)), 0o644)
}
