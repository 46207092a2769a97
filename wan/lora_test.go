package wan

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/internal/torchtest"
)

// blockLinears are the Linear layers of a block LongLive adapts.
var blockLinears = []string{"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o",
	"cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2"}

// loraFactors holds seeded LoRA factors A [rank][in] and B [out][rank] for
// every block Linear of the tiny model, keyed by module name.
type loraFactors map[string][2]*torchtest.Tensor

func newLoRAFactors(t *testing.T, m *Model, rank int, seed uint64) loraFactors {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 9))
	f := loraFactors{}
	for _, p := range m.Params() {
		mod, ok := strings.CutSuffix(p.Name, ".weight")
		if !ok || !strings.HasPrefix(mod, "blocks.") {
			continue
		}
		for _, s := range blockLinears {
			if strings.HasSuffix(mod, "."+s) {
				out, in := p.Shape[0], p.Shape[1]
				a := &torchtest.Tensor{Shape: []int{rank, in}, Data: make([]float32, rank*in)}
				b := &torchtest.Tensor{Shape: []int{out, rank}, Data: make([]float32, out*rank)}
				for i := range a.Data {
					a.Data[i] = float32(r.NormFloat64() / math.Sqrt(float64(in)))
				}
				for i := range b.Data {
					b.Data[i] = float32(0.05 * r.NormFloat64())
				}
				f[mod] = [2]*torchtest.Tensor{a, b}
			}
		}
	}
	if len(f) != len(blockLinears)*m.Cfg.Layers {
		t.Fatalf("%d adapted modules, want %d", len(f), len(blockLinears)*m.Cfg.Layers)
	}
	return f
}

// writeLoRAPt writes a LongLive-style checkpoint: the PEFT state dict of the
// FSDP-wrapped generator under "generator_lora"
// (base_model.model._fsdp_wrapped_module.blocks.<i>.<linear>.lora_{A,B}.weight),
// beside a "critic_lora" entry that must be ignored.
func writeLoRAPt(t *testing.T, path string, f loraFactors, skip string) {
	t.Helper()
	var gen, critic torchtest.Dict
	for l := 0; ; l++ {
		if _, ok := f["blocks."+strconv.Itoa(l)+".ffn.0"]; !ok {
			break
		}
		for _, s := range blockLinears {
			mod := "blocks." + strconv.Itoa(l) + "." + s
			if mod == skip {
				continue
			}
			k := "base_model.model._fsdp_wrapped_module." + mod
			gen = append(gen, torchtest.KV{Key: k + ".lora_A.weight", Value: f[mod][0]}, torchtest.KV{Key: k + ".lora_B.weight", Value: f[mod][1]})
			critic = append(critic, torchtest.KV{Key: k + ".lora_A.weight", Value: &torchtest.Tensor{Shape: []int{1, 1}, Data: []float32{1}}})
		}
	}
	b := torchtest.Bytes(torchtest.Dict{{Key: "critic_lora", Value: critic}, {Key: "generator_lora", Value: gen}}, torchtest.Options{})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadLoRAFromTorchGeneratorLoRA merges LongLive-layout adapters read
// from a .pt file's generator_lora entry and checks EVERY weight of the
// model: each block Linear (self/cross q, k, v, o; ffn.0, ffn.2) must equal
// W + (alpha/r)·B·A computed in float64, to the float32 rounding bound of
// the r-term merge, and every other parameter must be unchanged. Rank 256
// with alpha 256 (LongLive) and alpha 0 (= the rank) both give scale 1; a
// rank-16 adapter with alpha 64 gives scale 4.
func TestLoadLoRAFromTorchGeneratorLoRA(t *testing.T) {
	basePath := filepath.Join(golden.Wan(t), "weights_generator.pt")
	base, err := Load(basePath, TinyConfig(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name        string
		rank        int
		alpha       float64
		wantScale   float64
		fromDefault bool
	}{
		{"LongLive rank 256 alpha 256", 256, 256, 1, false},
		{"rank 256 default alpha", 256, 0, 1, true},
		{"rank 16 alpha 64", 16, 64, 4, false},
		{"rank 16 default alpha", 16, 0, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newLoRAFactors(t, base, c.rank, uint64(c.rank))
			path := filepath.Join(dir, "lora.pt")
			writeLoRAPt(t, path, f, "")
			m, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: path, LoRAAlpha: c.alpha})
			if err != nil {
				t.Fatal(err)
			}
			want := base.Params()
			merged := 0
			for i, p := range m.Params() {
				got, w0 := p.Values(), want[i].Values()
				fa, adapted := f[strings.TrimSuffix(p.Name, ".weight")]
				if !adapted {
					for j := range got {
						if math.Float32bits(got[j]) != math.Float32bits(w0[j]) {
							t.Fatalf("%s[%d] changed: %v → %v (no adapter)", p.Name, j, w0[j], got[j])
						}
					}
					continue
				}
				merged++
				a, b := fa[0].Data, fa[1].Data
				out, in := p.Shape[0], p.Shape[1]
				for o := 0; o < out; o++ {
					for j := 0; j < in; j++ {
						var d, abs float64
						for q := 0; q < c.rank; q++ {
							x := float64(b[o*c.rank+q]) * float64(a[q*in+j])
							d += x
							abs += math.Abs(x)
						}
						exp := float64(w0[o*in+j]) + c.wantScale*d
						// float32 merge: r products summed, scaled, added.
						tol := float64(c.rank+3)*0x1p-24*c.wantScale*abs + 0x1p-23*math.Abs(exp)
						if g := float64(got[o*in+j]); math.Abs(g-exp) > tol {
							t.Fatalf("%s[%d,%d] = %v, want W + %g·(B·A) = %v (±%.3g)", p.Name, o, j, g, c.wantScale, exp, tol)
						}
					}
				}
			}
			if merged != len(f) {
				t.Fatalf("%d Linear layers merged, want %d", merged, len(f))
			}
		})
	}
	// One block Linear without an adapter is named; so are adapters of
	// different ranks when alpha defaults to the rank.
	f := newLoRAFactors(t, base, 4, 1)
	path := filepath.Join(dir, "partial.pt")
	writeLoRAPt(t, path, f, "blocks.1.cross_attn.k")
	if _, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: path}); err == nil || !strings.Contains(err.Error(), "blocks.1.cross_attn.k.weight") {
		t.Fatalf("missing adapter: %v", err)
	}
	mixed := newLoRAFactors(t, base, 4, 2)
	mixed["blocks.1.ffn.2"] = newLoRAFactors(t, base, 8, 3)["blocks.1.ffn.2"]
	path = filepath.Join(dir, "mixed.pt")
	writeLoRAPt(t, path, mixed, "")
	if _, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: path}); err == nil || !strings.Contains(err.Error(), "blocks.1.ffn.2.weight rank 8") {
		t.Fatalf("adapters of ranks 4 and 8 with alpha 0: %v", err)
	}
	if _, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: path, LoRAAlpha: 8}); err != nil {
		t.Fatalf("adapters of ranks 4 and 8 with alpha 8: %v", err)
	}
}
