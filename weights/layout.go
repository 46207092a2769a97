package weights

import (
	"regexp"
	"strings"
)

// Layout is one way the weights of a part of Wan2.1 are named: the
// official names (Wan2.1's own .pth files and the backbones' checkpoints
// derived from them; ComfyUI's single files use them too) or another
// library's. A Layout recognises its names and maps them onto the
// official ones, which the models (packages wan, vae, t5) use.
type Layout struct {
	Kind Kind
	// Name is the naming's short name ("official", "diffusers",
	// "Hugging Face").
	Name string
	// Model is what the names belong to ("Wan2.1 DiT", "diffusers
	// WanTransformer3DModel", "UMT5EncoderModel").
	Model string
	// Markers are names (after NormalizeKey and a ComfyUI prefix) of
	// which any one identifies the naming.
	markers []*regexp.Regexp
	// toOfficial maps a tensor name onto the official one; drop ignores
	// the tensor (e.g. a tied copy); ok is false for a name the naming
	// does not know. names are all of the file's (some namings need the
	// whole set, e.g. a diffusers VAE's blocks per stage).
	toOfficial func(name string, names []string) (official string, drop, ok bool)
	// fromOfficial is the reverse (for writing files in the layout);
	// names are all the official names.
	fromOfficial func(name string, names []string) (string, bool)
}

// FromOfficial returns the layout's name of the tensor the official
// naming calls name (names: all the official names of the model), or
// false when the layout has none. Tests use it to write files in the
// layout.
func (l *Layout) FromOfficial(name string, names []string) (string, bool) {
	if l.fromOfficial == nil {
		return name, true
	}
	return l.fromOfficial(name, names)
}

// Find returns the layout of kind k named name (nil when none).
func Find(k Kind, name string) *Layout {
	for _, l := range Layouts {
		if l.Kind == k && l.Name == name {
			return l
		}
	}
	return nil
}

// String is "<Model> (<Name> naming)".
func (l *Layout) String() string { return l.Model + " (" + l.Name + " naming)" }

func markers(res ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(res))
	for i, r := range res {
		out[i] = regexp.MustCompile("^" + r + "$")
	}
	return out
}

func identity(name string, _ []string) (string, bool, bool) { return name, false, true }

// Layouts is the loader table: every naming densitykv reads, per kind,
// the official one first. Files and folders are found by Open (see the
// package documentation); the names decide the layout.
var Layouts = []*Layout{
	{Kind: DiT, Name: "official", Model: "Wan2.1 DiT",
		markers:    markers(`head\.modulation`, `blocks\.\d+\.self_attn\.q\.weight`, `blocks\.\d+\.cross_attn\.k\.weight`),
		toOfficial: identity},
	{Kind: DiT, Name: "diffusers", Model: "diffusers WanTransformer3DModel",
		markers: markers(`condition_embedder\..*`, `blocks\.\d+\.attn1\.to_q\.weight`, `blocks\.\d+\.ffn\.net\.0\.proj\.weight`),
		toOfficial: func(name string, _ []string) (string, bool, bool) {
			o, ok := ditDiffusers.convert(name, true)
			return o, false, ok
		},
		fromOfficial: func(name string, _ []string) (string, bool) { return ditDiffusers.convert(name, false) }},
	{Kind: VAE, Name: "official", Model: "Wan2.1 VAE",
		markers:    markers(`decoder\.middle\.0\.residual\.0\.gamma`, `decoder\.upsamples\.\d+\..*`, `decoder\.head\.0\.gamma`),
		toOfficial: identity},
	{Kind: VAE, Name: "diffusers", Model: "diffusers AutoencoderKLWan",
		markers: markers(`decoder\.mid_block\..*`, `decoder\.up_blocks\.\d+\..*`, `post_quant_conv\.weight`, `decoder\.conv_in\.weight`),
		toOfficial: func(name string, names []string) (string, bool, bool) {
			o, ok := vaeDiffusers{vaeStage(names)}.toOfficial(name)
			return o, false, ok
		},
		fromOfficial: func(name string, names []string) (string, bool) {
			return vaeDiffusers{vaeOfficialStage(names)}.fromOfficial(name)
		}},
	{Kind: TextEncoder, Name: "official", Model: "Wan2.1 T5Encoder (umT5-XXL)",
		markers:    markers(`token_embedding\.weight`, `blocks\.\d+\.attn\.q\.weight`, `blocks\.\d+\.ffn\.gate\.0\.weight`),
		toOfficial: identity},
	{Kind: TextEncoder, Name: "Hugging Face", Model: "UMT5EncoderModel",
		markers: markers(`shared\.weight`, `encoder\.block\.\d+\.layer\.0\.SelfAttention\.q\.weight`, `encoder\.final_layer_norm\.weight`),
		toOfficial: func(name string, names []string) (string, bool, bool) {
			switch {
			case name == "encoder.embed_tokens.weight":
				// The encoder's copy of the tied embedding: used when
				// shared.weight is not stored.
				for _, n := range names {
					if n == "shared.weight" {
						return "", true, true
					}
				}
				return "token_embedding.weight", false, true
			case strings.HasPrefix(name, "decoder.") || strings.HasPrefix(name, "lm_head."):
				return "", true, true // a whole umT5: the encoder is used
			case name == "spiece_model":
				return "", true, true // ComfyUI's copy of the tokenizer model (--tokenizer reads spiece.model)
			}
			o, ok := t5HF.convert(name, true)
			return o, false, ok
		},
		fromOfficial: func(name string, _ []string) (string, bool) { return t5HF.convert(name, false) }},
}

// loraMarker recognises the factors of a LoRA file in any naming.
var loraMarker = regexp.MustCompile(`(^|[._])lora(_[AB]|_down|_up|\.down|\.up)(\.|$)`)

// prefixes are the wrappers stripped when every tensor carries one: a
// ComfyUI diffusion model ("model.diffusion_model.", which NormalizeKey
// leaves as "diffusion_model."), a VAE or text encoder inside a ComfyUI
// or diffusers bundle.
var prefixes = []string{
	"diffusion_model.", "first_stage_model.", "vae.",
	"text_encoders.umt5xxl.transformer.", "umt5xxl.transformer.", "t5xxl.transformer.", "text_encoder.", "transformer.",
}

// stripPrefix returns the prefix every name but the ignored ones carries
// ("" when none does).
func stripPrefix(names []string, ignore func(string) bool) string {
	for _, p := range prefixes {
		all, any := true, false
		for _, n := range names {
			if ignore(n) {
				continue
			}
			any = true
			if !strings.HasPrefix(n, p) {
				all = false
				break
			}
		}
		if all && any {
			return p
		}
	}
	return ""
}

// identify returns the layouts whose markers a name of names matches, in
// table order.
func identify(names []string) []*Layout {
	var out []*Layout
	for _, l := range Layouts {
	names:
		for _, n := range names {
			for _, m := range l.markers {
				if m.MatchString(n) {
					out = append(out, l)
					break names
				}
			}
		}
	}
	return out
}

// isLoRA reports whether names look like LoRA factors.
func isLoRA(names []string) bool {
	for _, n := range names {
		if loraMarker.MatchString(n) {
			return true
		}
	}
	return false
}

// Supported describes what the flag of kind reads, one item per line.
func Supported(k Kind) []string {
	switch k {
	case DiT:
		return []string{
			"official naming: Wan2.1's DiT, the Self-Forcing, Causal-Forcing and LongLive checkpoints (.pt/.pth, --entry picks generator/generator_ema) or .safetensors",
			"diffusers naming: a diffusers model folder (model_index.json), its transformer/ folder (sharded safetensors with an index) or one of its files",
			"ComfyUI single files (diffusion_models/wan2.1_t2v_1.3B_*.safetensors): fp32, fp16, bf16, fp8 e4m3fn/e5m2 with or without scales",
		}
	case VAE:
		return []string{
			"official naming: Wan2.1_VAE.pth or .safetensors (ComfyUI's wan_2.1_vae.safetensors too)",
			"diffusers naming: a diffusers model folder (model_index.json), its vae/ folder or its file",
		}
	case TextEncoder:
		return []string{
			"official naming: Wan2.1's models_t5_umt5-xxl-enc-bf16.pth or .safetensors",
			"Hugging Face naming: a UMT5EncoderModel folder (google/umt5-xxl, a diffusers model's text_encoder/, sharded safetensors with an index) or file",
			"ComfyUI single files (text_encoders/umt5_xxl_*.safetensors): fp16, bf16, fp8 e4m3fn scaled",
		}
	case LoRA:
		return []string{
			"LongLive's longlive_lora.pt (generator_lora entry, PEFT naming)",
			"PEFT (lora_A/lora_B; a folder with adapter_model.safetensors and adapter_config.json), diffusers (transformer.…lora_A) and ComfyUI/kohya (diffusion_model.…lora_down/lora_up with .alpha, lora_unet_…) files",
		}
	case Tokenizer:
		return []string{
			"spiece.model (umT5's SentencePiece model), or a folder holding it or tokenizer.json (google/umt5-xxl, a diffusers model's tokenizer/ folder, a diffusers model folder)",
		}
	}
	return nil
}
