package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
)

// RunVAE and RunText at both precisions on tiny models: the timings, the
// FLOPs and rates are filled in and consistent, the kernel named is the
// selected one, the text extrapolation scales by the layers, and a
// cancelled context stops them.
func TestRunVAEAndText(t *testing.T) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		v, err := RunVAE(VAEOptions{Name: "tiny", Model: vae.TinyConfig(4), Height: 2, Width: 3, Blocks: 2, Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.BlockSeconds) != 2 || v.PixelFrames[0] != 9 || v.PixelFrames[1] != 12 || v.FLOPs <= 0 || v.GFLOPS <= 0 ||
			v.Kernel != gemm.KernelName(p) || v.Precision != p || v.Peak <= 0 || v.PackedBytes <= 0 || !strings.Contains(v.String(), p.String()) {
			t.Fatalf("%v VAE result %+v", p, v)
		}
		cfg := t5.Config{Vocab: 100, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 4, Buckets: 32, MaxDist: 128, Eps: 1e-6}
		x, err := RunText(TextOptions{Name: "tiny", Model: cfg, LayersRun: 1, Tokens: 20, Prompts: 2, Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		if len(x.PromptSeconds) != 2 || !x.Extrapolated || x.PerPrompt != 4*x.MedianPrompt || x.Kernel != gemm.KernelName(p) ||
			x.FLOPs != (t5.Config{Vocab: 100, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 1, Buckets: 32, MaxDist: 128, Eps: 1e-6}).FLOPs(20) {
			t.Fatalf("%v text result %+v", p, x)
		}
		t.Log(v)
		t.Log(x)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunVAE(VAEOptions{Model: vae.TinyConfig(4), Height: 2, Width: 3, Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled VAE bench: %v", err)
	}
	if _, err := RunText(TextOptions{Model: t5.Config{Vocab: 100, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 1, Buckets: 32, MaxDist: 128, Eps: 1e-6}, Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled text bench: %v", err)
	}
}

// ForceKernel forces and restores, and an unknown kernel's error lists the
// kernels that run here.
func TestForceKernel(t *testing.T) {
	before := gemm.KernelName(gemm.BF16)
	restore, err := ForceKernel("bf16:emu-amx")
	if err != nil {
		t.Fatal(err)
	}
	if gemm.KernelName(gemm.BF16) != "emu-amx" || !Kernels()[1].Forced || Kernels()[0].Forced {
		t.Fatalf("after ForceKernel(bf16:emu-amx): %+v", Kernels())
	}
	restore()
	if gemm.KernelName(gemm.BF16) != before || Kernels()[1].Forced {
		t.Fatalf("not restored: %+v", Kernels())
	}
	_, err = ForceKernel("nope")
	if err == nil || !strings.Contains(err.Error(), "fp32: ") || !strings.Contains(err.Error(), "bf16: ") || !strings.Contains(err.Error(), "go") {
		t.Fatalf("ForceKernel(nope): %v", err)
	}
	if r, err := ForceKernel(""); err != nil || r == nil {
		t.Fatalf("ForceKernel(\"\"): %v", err)
	}
	if s := KernelLines(Kernels()); strings.Count(s, "\n") != 2 || !strings.Contains(s, "kernel fp32: ") {
		t.Fatalf("KernelLines: %q", s)
	}
}

// BenchmarkVAEBlock decodes 3-frame latent blocks with the real Wan2.1 VAE
// configuration (random weights) at 15×26 latents (120×208 video; the
// 480×832 size needs 5 GiB) at each precision and reports the per-block
// time of the second block (12 pixel frames) and its rate.
func BenchmarkVAEBlock(b *testing.B) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				r, err := RunVAE(VAEOptions{Name: "wan2.1-vae", Model: vae.DefaultConfig(), Height: 15, Width: 26, Blocks: 2, Precision: p})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.BlockSeconds[1], "s/block")
				b.ReportMetric(r.BlockCPU[1], "cpu-s/block")
				b.ReportMetric(r.CPUGFLOPS, "GFLOP/cpu-s")
				b.ReportMetric(r.CPUPeakFraction, "peak-fraction/core")
				b.Log(r)
			}
		})
	}
}

// BenchmarkTextPrompt encodes 512-token prompts with one umT5-XXL layer
// (random bf16 weights, 386 MB) at each precision and reports the prompt
// time extrapolated to the 24 layers.
func BenchmarkTextPrompt(b *testing.B) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				r, err := RunText(TextOptions{Name: "umt5-xxl", Model: t5.UMT5XXL(), LayersRun: 1, Tokens: 512, Prompts: 3, Precision: p})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.PerPrompt, "s/prompt")
				b.ReportMetric(Median(r.PromptCPU)*float64(r.Layers)/float64(r.LayersRun), "cpu-s/prompt")
				b.ReportMetric(r.CPUGFLOPS, "GFLOP/cpu-s")
				b.ReportMetric(r.CPUPeakFraction, "peak-fraction/core")
				b.Log(r)
			}
		})
	}
}
