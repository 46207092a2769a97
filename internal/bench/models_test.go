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
	restore, err := ForceKernel("bf16:go")
	if err != nil {
		t.Fatal(err)
	}
	if gemm.KernelName(gemm.BF16) != "go" || !Kernels()[1].Forced || Kernels()[0].Forced {
		t.Fatalf("after ForceKernel(bf16:go): %+v", Kernels())
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
