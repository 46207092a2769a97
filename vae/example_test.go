package vae_test

import (
	"fmt"

	"github.com/densitykv/densitykv/vae"
)

// Streaming a video: each generation block's 3 latent frames are decoded as
// soon as they are final, the decoder carrying its caches from block to
// block, and each pixel frame is converted to the bytes ffmpeg reads
// (rgb24). With real weights, vae.Load("Wan2.1_VAE.pth") gives the model
// and the default Options use Wan's latent statistics.
func Example_stream() {
	m, err := vae.Random(vae.TinyConfig(16), 1) // z_dim 16, widths of the real model / 12
	if err != nil {
		panic(err)
	}
	dec, err := m.NewDecoder(vae.Options{})
	if err != nil {
		panic(err)
	}
	const h, w = 2, 3 // latent size; frames are 16×24
	rgb := make([]uint8, 3*h*8*w*8)
	for block := 0; block < 2; block++ {
		z := make([]float32, 3*16*h*w) // [3][16][h][w], as the rollout produces them
		n := 0
		err := dec.DecodeFunc(z, 3, 16, h, w, func(i int, frame []float32) error {
			vae.RGB24(rgb, frame, h*8, w*8) // write rgb to the encoder here
			n++
			return nil
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("block %d: %d frames, %d in all\n", block, n, dec.PixelFrames())
	}
	// Output:
	// block 0: 9 frames, 9 in all
	// block 1: 12 frames, 21 in all
}
