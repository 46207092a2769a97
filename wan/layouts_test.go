package wan

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

// forwardBits runs the golden first-block forward (t = 1000) and returns
// the flow prediction's bytes.
func forwardBits(t *testing.T, m *Model) []byte {
	t.Helper()
	g := openGolden(t, "forward_a_first_block_t1000.safetensors")
	txt, err := m.EmbedText(g.F32("context"), 8)
	if err != nil {
		t.Fatal(err)
	}
	flow := make([]float32, 3*16*6*8)
	if err := m.Forward(flow, Call{Latent: g.F32("x"), Height: 6, Width: 8, Timesteps: []float32{1000, 1000, 1000}, Text: txt,
		Mem: memory.Call{Block: 0, First: true}}, nativePolicy(t, m)); err != nil {
		t.Fatal(err)
	}
	return f32bytes(flow)
}

// sameModel fails unless a and b have bit-identical parameters.
func sameModel(t *testing.T, a, b *Model) {
	t.Helper()
	pa, pb := a.Params(), b.Params()
	for i := range pa {
		if !bytes.Equal(f32bytes(pa[i].Values()), f32bytes(pb[i].Values())) {
			t.Fatalf("parameter %s differs", pa[i].Name)
		}
	}
}

// TestLayoutsLoadTheSameModel writes the golden DiT's weights in every
// layout package weights reads (diffusers names in one file, in shards
// with and without an index, in a diffusers model folder; ComfyUI's
// prefixed files in fp16, bf16 and fp8 with both kinds of scales;
// unscaled fp8) and checks that each loads to the model the official
// layout of the same values gives, bit for bit (every parameter and a
// forward), at fp32 and bf16.
func TestLayoutsLoadTheSameModel(t *testing.T) {
	ts := weightstest.FromStateDict(goldenStateDict(t))
	comfy := "model.diffusion_model."
	for _, c := range []struct {
		name   string
		o      weightstest.Options
		folder bool // a diffusers model folder around the layout's folder
		want   string
	}{
		{"diffusers file", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model"}, false, "diffusers naming"},
		{"diffusers shards with index", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", Shards: 3}, false, "3 shards of diffusion_pytorch_model.safetensors.index.json"},
		{"diffusers shards without index", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", Shards: 2, NoIndex: true}, false, "2 shards"},
		{"diffusers model folder", weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", Shards: 2, DType: checkpoint.BF16, Other: checkpoint.BF16}, true, "BF16"},
		{"ComfyUI fp16", weightstest.Options{Prefix: comfy, DType: checkpoint.F16, Other: checkpoint.F16}, false, `names under "diffusion_model."`},
		{"ComfyUI bf16", weightstest.Options{Prefix: comfy, DType: checkpoint.BF16, Other: checkpoint.BF16}, false, "BF16"},
		{"ComfyUI fp8 e4m3fn scaled_fp8", weightstest.Options{Prefix: comfy, DType: checkpoint.F8E4M3, Other: checkpoint.BF16, Scaled: "legacy"}, false, "per-tensor scales (ComfyUI scaled_fp8)"},
		{"ComfyUI fp8 e5m2 comfy_quant", weightstest.Options{Prefix: comfy, DType: checkpoint.F8E5M2, Other: checkpoint.F16, Scaled: "comfy"}, false, "F8_E5M2"},
		{"fp8 e4m3fn unscaled", weightstest.Options{DType: checkpoint.F8E4M3}, false, "unscaled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := ""
			if c.folder {
				sub = "transformer"
			}
			ref, path, err := weightstest.WritePair(dir, weights.DiT, ts, c.o, sub)
			if err != nil {
				t.Fatal(err)
			}
			for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
				want, err := Load(ref, TinyConfig(), LoadOptions{Precision: prec})
				if err != nil {
					t.Fatal(err)
				}
				got, err := Load(path, TinyConfig(), LoadOptions{Precision: prec})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(got.Loaded.Source, c.want) {
					t.Errorf("Loaded %q does not say %q", got.Loaded.Source, c.want)
				}
				sameModel(t, want, got)
				if !bytes.Equal(forwardBits(t, want), forwardBits(t, got)) {
					t.Fatalf("%s: the forward differs", prec)
				}
			}
		})
	}
}

// TestLoadedStaysBF16 checks that a bf16 file gives a bf16 model the
// weights of which are the file's values exactly (no rounding through
// another type), and that the weights read at fp32 are the same values.
func TestLoadedStaysBF16(t *testing.T) {
	ts := weightstest.FromStateDict(goldenStateDict(t))
	o := weightstest.Options{DType: checkpoint.BF16, Other: checkpoint.BF16}
	p, err := weightstest.Write(t.TempDir(), weights.DiT, ts, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Load(p, TinyConfig(), LoadOptions{Precision: gemm.BF16})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(p, TinyConfig(), LoadOptions{Precision: gemm.F32})
	if err != nil {
		t.Fatal(err)
	}
	want := weightstest.Quantize(ts, o)
	byName := map[string][]float32{}
	for _, w := range want {
		byName[w.Name] = w.Data
	}
	for i, p := range a.Params() {
		if !bytes.Equal(f32bytes(p.Values()), f32bytes(byName[p.Name])) || !bytes.Equal(f32bytes(b.Params()[i].Values()), f32bytes(byName[p.Name])) {
			t.Fatalf("%s: not the file's bfloat16 values", p.Name)
		}
	}
}

// TestLoadProgress checks that Progress reports every byte read, in
// order, ending at the total.
func TestLoadProgress(t *testing.T) {
	var last, total int64
	calls := 0
	p := filepath.Join(golden.Wan(t), "weights.safetensors")
	if _, err := Load(p, TinyConfig(), LoadOptions{Progress: func(done, tot int64) {
		if done < last || tot <= 0 {
			t.Fatalf("progress %d/%d after %d", done, tot, last)
		}
		last, total = done, tot
		calls++
	}}); err != nil {
		t.Fatal(err)
	}
	if calls != len(mustModel(TinyConfig()).Params()) || last != total {
		t.Fatalf("%d progress calls ending at %d/%d", calls, last, total)
	}
}

// TestLoadMemory checks that Load streams: loading a bf16 file into a
// bf16 model allocates the packed model, the other parameters and about
// one float32 tensor more, not a float32 copy of the checkpoint (the
// Linear weights' float32 values go through one reused buffer).
func TestLoadMemory(t *testing.T) {
	cfg := TinyConfig()
	cfg.Dim, cfg.FFNDim, cfg.Heads, cfg.Layers = 256, 1024, 4, 4
	src, err := Random(cfg, 1, gemm.F32)
	if err != nil {
		t.Fatal(err)
	}
	var ts []weightstest.Tensor
	largest := 0
	for _, p := range src.Params() {
		ts = append(ts, weightstest.Tensor{Name: p.Name, Shape: p.Shape, Data: p.Values()})
		largest = max(largest, prod(p.Shape))
	}
	path, err := weightstest.Write(t.TempDir(), weights.DiT, ts, weightstest.Options{DType: checkpoint.BF16, Other: checkpoint.BF16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, cfg, LoadOptions{Precision: gemm.BF16}); err != nil { // the matrix engine's one-time set-up aside
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := Load(path, cfg, LoadOptions{Precision: gemm.BF16})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	float32Weights := int64(0)
	for _, l := range m.linears() {
		float32Weights += 4 * int64(l.In) * int64(l.Out)
	}
	limit := m.WeightBytes() + 4*int64(largest) + 4<<20
	if alloc > limit || float32Weights < 8<<20 {
		t.Fatalf("Load allocated %d bytes: the model holds %d, the limit is %d (a float32 copy of the weights is %d)", alloc, m.WeightBytes(), limit, float32Weights)
	}
}
