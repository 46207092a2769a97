package wan

import (
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/memory"
)

// BenchmarkForward times forward calls of a first block (the Native
// policy: the block attends to itself) at each precision: the tiny golden
// configuration and one Wan2.1-1.3B layer on 30×52 latents (1,170 tokens
// and keys).
func BenchmarkForward(b *testing.B) {
	for _, c := range []struct {
		name   string
		cfg    Config
		h, w   int
		layers int
	}{{"tiny", TinyConfig(), 6, 8, 2}, {"1.3b-1layer-30x52", DefaultConfig(), 30, 52, 1}} {
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			b.Run(c.name+"/"+prec.String(), func(b *testing.B) {
				cfg := c.cfg
				cfg.Layers = c.layers
				m, err := Random(cfg, 1, prec)
				if err != nil {
					b.Fatal(err)
				}
				txt, err := m.EmbedText(make([]float32, cfg.TextLen*cfg.TextDim), cfg.TextLen)
				if err != nil {
					b.Fatal(err)
				}
				x := make([]float32, 3*cfg.InDim*c.h*c.w)
				for i := range x {
					x[i] = float32(i%17) * 0.1
				}
				flow := make([]float32, len(x))
				pol, err := memory.New(memory.NameNative, memory.Config{Layout: cfg.Layout(c.h, c.w, 3)})
				if err != nil {
					b.Fatal(err)
				}
				step := 0
				first := true
				for b.Loop() {
					if err := m.Forward(flow, Call{Latent: x, Height: c.h, Width: c.w, Timesteps: []float32{1000, 1000, 1000}, Text: txt,
						Mem: memory.Call{Block: 0, Step: step, First: first}}, pol); err != nil {
						b.Fatal(err)
					}
					step++
					first = false
				}
			})
		}
	}
}
