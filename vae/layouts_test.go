package vae

import (
	"bytes"
	"math"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

func paramBytes(m *Model) []byte {
	var b bytes.Buffer
	for _, p := range m.Params() {
		for _, v := range *p.Data {
			u := math.Float32bits(v)
			b.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
		}
	}
	return b.Bytes()
}

// TestLayoutsLoadTheSameModel writes a random VAE (with encoder tensors,
// which are ignored) in the diffusers layout (a file, shards with an
// index, a diffusers model folder) and as ComfyUI's fp16 and bf16 files,
// and checks that each loads to the model the official layout of the same
// values gives: every parameter and a decode, bit for bit.
func TestLayoutsLoadTheSameModel(t *testing.T) {
	m := tinyModel(t, 4)
	var ts []weightstest.Tensor
	for _, w := range modelTensors(m) {
		ts = append(ts, weightstest.Tensor{Name: w.Name, Shape: w.Shape, Data: w.Data.([]float32)})
	}
	// The encoder side (a residual block, its latent conv) is ignored.
	ts = append(ts, weightstest.Tensor{Name: "encoder.downsamples.0.residual.2.weight", Shape: []int{8, 3, 3, 3, 3}, Data: make([]float32, 8*3*27)},
		weightstest.Tensor{Name: "conv1.weight", Shape: []int{8, 8, 1, 1, 1}, Data: make([]float32, 64)})
	z := randLatents(2*4*2*2, 7)
	for _, c := range []struct {
		name   string
		o      weightstest.Options
		folder bool
	}{
		{"diffusers file", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model"}, false},
		{"diffusers shards", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", Shards: 3}, false},
		{"diffusers model folder", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", DType: checkpoint.BF16, Other: checkpoint.BF16}, true},
		{"ComfyUI fp16", weightstest.Options{DType: checkpoint.F16, Other: checkpoint.F16}, false},
		{"ComfyUI bf16 prefixed", weightstest.Options{DType: checkpoint.BF16, Other: checkpoint.BF16, Prefix: "first_stage_model."}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := ""
			if c.folder {
				sub = "vae"
			}
			ref, path, err := weightstest.WritePair(dir, weights.VAE, ts, c.o, sub)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Load(ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Cfg.Equal(want.Cfg) || !bytes.Equal(paramBytes(got), paramBytes(want)) {
				t.Fatalf("the models differ (%s)", got.Loaded)
			}
			a, err := want.Decode(z, 2, 4, 2, 2, tinyStats(4))
			if err != nil {
				t.Fatal(err)
			}
			b, err := got.Decode(z, 2, 4, 2, 2, tinyStats(4))
			if err != nil || !bytes.Equal(u8(a), u8(b)) {
				t.Fatalf("the decodes differ (%v)", err)
			}
		})
	}
}

func u8(v []float32) []byte {
	var b bytes.Buffer
	for _, x := range v {
		u := math.Float32bits(x)
		b.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
	}
	return b.Bytes()
}
