package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
)

func tinyPipeline() PipelineOptions {
	return PipelineOptions{Text: t5.Config{Vocab: 400, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 2, Buckets: 32, MaxDist: 128, Eps: 1e-6},
		TextTokens: 8, Model: wan.TinyConfig(), Height: 6, Width: 8, VAE: vae.TinyConfig(16), Precision: gemm.F32, Seed: 3}
}

// RunPipeline at full depth measures the last block: its steps in order,
// the forward calls of the warm-up (1 step + clean pass per block) and of
// the measured block (4 steps + clean pass) per layer, the VAE frames
// (a warm-up frame, then the block's 3 latent frames → 12 video frames),
// and the block's summary made of exactly those steps.
func TestPipelineMeasuresOneBlock(t *testing.T) {
	o := tinyPipeline()
	L := o.Model.Layers
	var calls, total int
	o.Progress = func(d, n int) { calls, total = d, n }
	r, err := RunPipeline(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stages) != 2 || r.Stages[0].Name != "text" || r.Stages[1].Layers != L || r.Extrapolated || r.Block == nil {
		t.Fatalf("stages %+v, extrapolated %v, block %+v", r.Stages, r.Extrapolated, r.Block)
	}
	steps := r.Stages[1].Steps
	want := []struct {
		prefix      string
		calls       int
		vae, frames int
	}{{stepLoad, 0, 0, 0}, {stepWarm, 3 * 2 * L, 0, 0}, {stepVAEPre, 0, 1, 1}, {stepBlock, 5 * L, 0, 0}, {stepVAE, 0, 3, 12}}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		s := steps[i]
		if !strings.HasPrefix(s.Name, w.prefix) || s.Calls != w.calls || s.VAEFrames != w.vae || s.VideoFrames != w.frames || s.Seconds <= 0 || s.PeakRSS <= 0 {
			t.Errorf("step %d: %+v, want %s with %d calls, %d latent → %d video frames", i, s, w.prefix, w.calls, w.vae, w.frames)
		}
	}
	if calls != total || total != 3*2*L+5*L {
		t.Errorf("progress %d of %d, want %d", calls, total, 3*2*L+5*L)
	}
	b, blk, dec := r.Block, steps[3], steps[4]
	if b.Seconds != blk.Seconds+dec.Seconds || b.BankSeconds != blk.BankSeconds || b.BankSeconds <= 0 || b.DiTSeconds != blk.Seconds-blk.BankSeconds ||
		b.VAESeconds != dec.Seconds || b.VideoFrames != 12 || b.VideoSeconds != 0.75 || b.Video30sSecond != 30*(b.Seconds/0.75) {
		t.Errorf("block %+v from steps %+v and %+v", b, blk, dec)
	}
}

// A shallower depth is no block measurement: the memory is extrapolated
// from two depths and the result has no block; an interrupt stops it.
func TestPipelineExtrapolatesAndStops(t *testing.T) {
	o := tinyPipeline()
	o.SkipText, o.Layers, o.Blocks = true, []int{1, 2}, 2
	o.Model.Layers = 3
	r, err := RunPipeline(o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Extrapolated || r.Block != nil || len(r.Stages) != 2 || r.GenPeakRSS <= 0 {
		t.Fatalf("result %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.Context = ctx
	o.Layers = nil
	o.Progress = func(d, n int) {
		if d > 0 {
			cancel()
		}
	}
	if _, err := RunPipeline(o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
}
