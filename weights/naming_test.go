package weights_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
	"github.com/densitykv/densitykv/weights"
)

// diffusersDiT is diffusers' scripts/convert_wan_to_diffusers.py
// TRANSFORMER_KEYS_RENAME_DICT (the entries a text-to-video model
// meets), applied as the script applies it: each entry's str.replace in
// order on the official name.
var diffusersDiT = [][2]string{
	{"time_embedding.0", "condition_embedder.time_embedder.linear_1"},
	{"time_embedding.2", "condition_embedder.time_embedder.linear_2"},
	{"text_embedding.0", "condition_embedder.text_embedder.linear_1"},
	{"text_embedding.2", "condition_embedder.text_embedder.linear_2"},
	{"time_projection.1", "condition_embedder.time_proj"},
	{"head.modulation", "scale_shift_table"},
	{"head.head", "proj_out"},
	{"modulation", "scale_shift_table"},
	{"ffn.0", "ffn.net.0.proj"},
	{"ffn.2", "ffn.net.2"},
	{"norm2", "norm__placeholder"},
	{"norm3", "norm2"},
	{"norm__placeholder", "norm3"},
	{"self_attn.q", "attn1.to_q"},
	{"self_attn.k", "attn1.to_k"},
	{"self_attn.v", "attn1.to_v"},
	{"self_attn.o", "attn1.to_out.0"},
	{"self_attn.norm_q", "attn1.norm_q"},
	{"self_attn.norm_k", "attn1.norm_k"},
	{"cross_attn.q", "attn2.to_q"},
	{"cross_attn.k", "attn2.to_k"},
	{"cross_attn.v", "attn2.to_v"},
	{"cross_attn.o", "attn2.to_out.0"},
	{"cross_attn.norm_q", "attn2.norm_q"},
	{"cross_attn.norm_k", "attn2.norm_k"},
}

func scriptRename(name string) string {
	for _, r := range diffusersDiT {
		name = strings.ReplaceAll(name, r[0], r[1])
	}
	return name
}

// TestDiffusersDiTNames checks the diffusers layout against the
// conversion script's renaming, on every parameter of the real 1.3B DiT:
// FromOfficial gives the script's name and the layout maps it back.
func TestDiffusersDiTNames(t *testing.T) {
	cfg := wan.DefaultConfig()
	shell := &wan.Model{Cfg: cfg, Blocks: make([]wan.Block, cfg.Layers)}
	l := weights.Find(weights.DiT, "diffusers")
	var names, diff []string
	for _, e := range shell.Expected() {
		names = append(names, e.Name)
	}
	for _, n := range names {
		want := scriptRename(n)
		got, ok := l.FromOfficial(n, names)
		if !ok || got != want {
			t.Fatalf("%s: layout name %q, the script's %q", n, got, want)
		}
		diff = append(diff, got)
	}
	src := openNames(t, weights.DiT, diff)
	for i, tn := range src {
		if tn != names[i] {
			t.Fatalf("%s maps back to %s, want %s", diff[i], tn, names[i])
		}
	}
}

// scriptVAE is diffusers' convert_vae for Wan2.1's VAE (decoder side and
// the latent convs), transcribed with its fixed block numbers: residual
// blocks 0-2, 4-6, 8-10, 12-14 of decoder.upsamples become
// up_blocks.0..3.resnets.0-2, the resamples 3, 7, 11
// up_blocks.0..2.upsamplers.0, and upsamples.4's shortcut
// up_blocks.1.resnets.0.conv_shortcut.
func scriptVAE(key string) string {
	res := map[string]string{".residual.0.gamma": "norm1.gamma", ".residual.2.bias": "conv1.bias", ".residual.2.weight": "conv1.weight",
		".residual.3.gamma": "norm2.gamma", ".residual.6.bias": "conv2.bias", ".residual.6.weight": "conv2.weight"}
	switch key {
	case "conv1.weight", "conv1.bias":
		return "quant_conv." + strings.TrimPrefix(key, "conv1.")
	case "conv2.weight", "conv2.bias":
		return "post_quant_conv." + strings.TrimPrefix(key, "conv2.")
	case "decoder.conv1.weight", "decoder.conv1.bias":
		return "decoder.conv_in." + strings.TrimPrefix(key, "decoder.conv1.")
	case "decoder.head.0.gamma":
		return "decoder.norm_out.gamma"
	case "decoder.head.2.bias", "decoder.head.2.weight":
		return "decoder.conv_out." + strings.TrimPrefix(key, "decoder.head.2.")
	}
	for i, m := range []string{"decoder.middle.0", "decoder.middle.2"} {
		for sfx, to := range res {
			if key == m+sfx {
				return fmt.Sprintf("decoder.mid_block.resnets.%d.%s", i, to)
			}
		}
	}
	if r, ok := strings.CutPrefix(key, "decoder.middle.1."); ok {
		return "decoder.mid_block.attentions.0." + r
	}
	if r, ok := strings.CutPrefix(key, "decoder.upsamples."); ok {
		var idx int
		fmt.Sscanf(r, "%d", &idx)
		switch {
		case strings.Contains(key, "residual"):
			for _, b := range []int{0, 4, 8, 12} {
				if idx >= b && idx < b+3 {
					for sfx, to := range res {
						if strings.HasSuffix(key, sfx) {
							return fmt.Sprintf("decoder.up_blocks.%d.resnets.%d.%s", b/4, idx-b, to)
						}
					}
				}
			}
		case strings.Contains(key, ".shortcut.") && idx == 4:
			return strings.Replace(strings.Replace(key, ".shortcut.", ".resnets.0.conv_shortcut.", 1), "decoder.upsamples.4", "decoder.up_blocks.1", 1)
		case strings.Contains(key, ".resample.") || strings.Contains(key, ".time_conv."):
			for i, b := range []int{3, 7, 11} {
				if idx == b {
					return strings.Replace(key, fmt.Sprintf("decoder.upsamples.%d", b), fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0", i), 1)
				}
			}
		}
	}
	return "?" + key
}

// TestDiffusersVAENames checks the diffusers VAE layout against the
// conversion script on every decoder tensor of Wan2.1's VAE structure.
func TestDiffusersVAENames(t *testing.T) {
	m, err := vae.Random(vae.TinyConfig(16), 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range m.Expected() {
		names = append(names, e.Name)
	}
	l := weights.Find(weights.VAE, "diffusers")
	var diff []string
	for _, n := range names {
		want := scriptVAE(n)
		got, ok := l.FromOfficial(n, names)
		if !ok || got != want {
			t.Fatalf("%s: layout name %q, the script's %q", n, got, want)
		}
		diff = append(diff, got)
	}
	for i, tn := range openNames(t, weights.VAE, diff) {
		if tn != names[i] {
			t.Fatalf("%s maps back to %s, want %s", diff[i], tn, names[i])
		}
	}
}

// TestHFUMT5Names checks the Hugging Face umT5 layout against
// UMT5EncoderModel's module names (transformers' modeling_umt5.py:
// shared, encoder.block.<i>.layer.0.SelfAttention.{q,k,v,o,
// relative_attention_bias}, layer.0.layer_norm,
// layer.1.DenseReluDense.{wi_0,wi_1,wo}, layer.1.layer_norm,
// encoder.final_layer_norm), written out here for a 2-layer encoder.
func TestHFUMT5Names(t *testing.T) {
	want := map[string]string{"token_embedding.weight": "shared.weight", "norm.weight": "encoder.final_layer_norm.weight"}
	for i := range 2 {
		b, h := fmt.Sprintf("blocks.%d.", i), fmt.Sprintf("encoder.block.%d.layer.", i)
		for o, n := range map[string]string{"norm1.weight": "0.layer_norm.weight", "attn.q.weight": "0.SelfAttention.q.weight",
			"attn.k.weight": "0.SelfAttention.k.weight", "attn.v.weight": "0.SelfAttention.v.weight", "attn.o.weight": "0.SelfAttention.o.weight",
			"pos_embedding.embedding.weight": "0.SelfAttention.relative_attention_bias.weight", "norm2.weight": "1.layer_norm.weight",
			"ffn.gate.0.weight": "1.DenseReluDense.wi_0.weight", "ffn.fc1.weight": "1.DenseReluDense.wi_1.weight",
			"ffn.fc2.weight": "1.DenseReluDense.wo.weight"} {
			want[b+o] = h + n
		}
	}
	var names []string // Wan's T5Encoder names
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	l := weights.Find(weights.TextEncoder, "Hugging Face")
	var hf []string
	for _, n := range names {
		got, ok := l.FromOfficial(n, names)
		if !ok || got != want[n] {
			t.Fatalf("%s: layout name %q, transformers' %q", n, got, want[n])
		}
		hf = append(hf, got)
	}
	for i, tn := range openNames(t, weights.TextEncoder, hf) {
		if tn != names[i] {
			t.Fatalf("%s maps back to %s, want %s", hf[i], tn, names[i])
		}
	}
}

// openNames writes one-value tensors of the given names and returns the
// names weights.Open maps them to, in the same order.
func openNames(t *testing.T, k weights.Kind, names []string) []string {
	t.Helper()
	var ts []checkpoint.WriteTensor
	for _, n := range names {
		ts = append(ts, checkpoint.WriteTensor{Name: n, Shape: []int{1}, Data: []float32{1}})
	}
	p := filepath.Join(t.TempDir(), "w.safetensors")
	if err := checkpoint.WriteSafetensorsFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	src, err := weights.Open(p, k, weights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out []string
	for _, tn := range src.Tensors {
		out = append(out, tn.Name)
	}
	if len(out) != len(names) {
		t.Fatalf("%d tensors back from %d", len(out), len(names))
	}
	return out
}
