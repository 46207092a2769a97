package wan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/weights"
)

// TestLoRANamings writes one set of adapters in every LoRA naming
// weights.OpenLoRA reads (PEFT folder with adapter_config.json, diffusers
// names under transformer., ComfyUI's diffusion_model. with lora_down/up
// and .alpha tensors, kohya's lora_unet_ names) and checks each merges to
// the model LongLive's .pt layout gives at the same scale, bit for bit,
// and says what it merged; then the refusals.
func TestLoRANamings(t *testing.T) {
	basePath := filepath.Join(golden.Wan(t), "weights_generator.pt")
	base, err := Load(basePath, TinyConfig(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const rank = 4
	f := newLoRAFactors(t, base, rank, 11)
	dir := t.TempDir()
	pt := filepath.Join(dir, "lora.pt")
	writeLoRAPt(t, pt, f, "")
	names := make([]string, 0, len(base.Params()))
	for _, p := range base.Params() {
		names = append(names, p.Name)
	}
	diffusers := weights.Find(weights.DiT, "diffusers")
	write := func(p string, key func(mod string) (string, string, string), alpha float32) {
		var ts []checkpoint.WriteTensor
		for mod, ab := range f {
			ka, kb, kalpha := key(mod)
			ts = append(ts, checkpoint.WriteTensor{Name: ka, Shape: ab[0].Shape, Data: ab[0].Data}, checkpoint.WriteTensor{Name: kb, Shape: ab[1].Shape, Data: ab[1].Data})
			if alpha != 0 {
				ts = append(ts, checkpoint.WriteTensor{Name: kalpha, Shape: []int{}, Data: []float32{alpha}})
			}
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := checkpoint.WriteSafetensorsFile(p, ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	peft := filepath.Join(dir, "peft")
	write(filepath.Join(peft, "adapter_model.safetensors"), func(m string) (string, string, string) {
		return "base_model.model." + m + ".lora_A.weight", "base_model.model." + m + ".lora_B.weight", ""
	}, 0)
	cfg, _ := json.Marshal(map[string]any{"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": []string{"q", "k"}})
	os.WriteFile(filepath.Join(peft, "adapter_config.json"), cfg, 0o644)
	diff := filepath.Join(dir, "diffusers.safetensors")
	write(diff, func(m string) (string, string, string) {
		d, ok := diffusers.FromOfficial(m+".weight", names)
		if !ok {
			t.Fatal(m)
		}
		d = "transformer." + strings.TrimSuffix(d, ".weight")
		return d + ".lora_A.weight", d + ".lora_B.weight", ""
	}, 0)
	comfy := filepath.Join(dir, "comfy.safetensors")
	write(comfy, func(m string) (string, string, string) {
		return "diffusion_model." + m + ".lora_down.weight", "diffusion_model." + m + ".lora_up.weight", "diffusion_model." + m + ".alpha"
	}, 2*rank)
	kohya := filepath.Join(dir, "kohya.safetensors")
	write(kohya, func(m string) (string, string, string) {
		k := "lora_unet_" + strings.ReplaceAll(m, ".", "_")
		return k + ".lora_down.weight", k + ".lora_up.weight", k + ".alpha"
	}, rank)
	for _, c := range []struct {
		name, path, naming string
		scale              float64
		says               string
	}{
		{"PEFT folder", peft, "PEFT", 2, "alpha 8 (adapter_config.json): scale 2"},
		{"diffusers", diff, "diffusers", 1, "alpha = the rank"},
		{"ComfyUI", comfy, "ComfyUI", 2, "alpha 8 (.alpha tensors): scale 2"},
		{"kohya", kohya, "kohya", 1, "alpha 4 (.alpha tensors): scale 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: pt, LoRAAlpha: c.scale * rank})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: c.path})
			if err != nil {
				t.Fatal(err)
			}
			sameModel(t, want, got)
			if !strings.Contains(got.Loaded.LoRA, "20 adapters ("+c.naming+" naming), rank 4") || !strings.Contains(got.Loaded.LoRA, c.says) {
				t.Errorf("Loaded.LoRA %q", got.Loaded.LoRA)
			}
		})
	}
	// Refusals, each naming the tensor or module.
	bad := func(name string, extra ...checkpoint.WriteTensor) string {
		p := filepath.Join(dir, name+".safetensors")
		ts := append([]checkpoint.WriteTensor{
			{Name: "diffusion_model.blocks.0.self_attn.q.lora_down.weight", Shape: []int{rank, 64}, Data: make([]float32, rank*64)},
			{Name: "diffusion_model.blocks.0.self_attn.q.lora_up.weight", Shape: []int{64, rank}, Data: make([]float32, rank*64)}}, extra...)
		checkpoint.WriteSafetensorsFile(p, ts, nil)
		return p
	}
	for _, c := range []struct {
		path, says string
	}{
		{bad("loha", checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.ffn.0.hada_w1_a", Shape: []int{1}, Data: []float32{1}}), "is LoHa, not a LoRA factor"},
		{bad("unpaired", checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.ffn.0.lora_down.weight", Shape: []int{rank, 64}, Data: make([]float32, rank*64)}), "blocks.0.ffn.0.lora_down.weight has no matching diffusion_model.blocks.0.ffn.0.lora_up.weight"},
		{bad("nolinear", checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.norm3.lora_down.weight", Shape: []int{rank, 64}, Data: make([]float32, rank*64)},
			checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.norm3.lora_up.weight", Shape: []int{64, rank}, Data: make([]float32, rank*64)}), "no Linear layer of the Wan DiT: diffusion_model.blocks.0.norm3"},
		{bad("orphan alpha", checkpoint.WriteTensor{Name: "diffusion_model.blocks.1.ffn.0.alpha", Shape: []int{}, Data: []float32{4}}), "diffusion_model.blocks.1.ffn.0.alpha has no adapter"},
		{bad("shape", checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.ffn.2.lora_down.weight", Shape: []int{rank, 64}, Data: make([]float32, rank*64)},
			checkpoint.WriteTensor{Name: "diffusion_model.blocks.0.ffn.2.lora_up.weight", Shape: []int{64, rank}, Data: make([]float32, rank*64)}), "blocks.0.ffn.2.weight: weight [64 128], A [4 64], B [64 4] do not compose"},
	} {
		if _, err := Load(basePath, TinyConfig(), LoadOptions{LoRA: c.path}); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %q", filepath.Base(c.path), err, c.says)
		}
	}
}
