// Package weights finds and recognises the weights of Wan2.1's parts in
// the layouts people get them in, and maps them onto the names the
// models use (the official Wan2.1 names; packages wan, vae and t5).
//
// A path is a file, a shard index (*.index.json), a folder holding one
// model (a single weight file, an index with its shards, numbered shards
// without an index, or for a LoRA PEFT's adapter_model.safetensors with
// adapter_config.json), or a diffusers model folder (model_index.json),
// whose component sub-folder (transformer/, vae/, text_encoder/,
// tokenizer/) is used: Component. The files are read as
// checkpoint.OpenRaw reads them (safetensors, or PyTorch zip with an
// entry), tensor by tensor: nothing is loaded whole.
//
// The layout is recognised by the tensor names (Layouts, the loader
// table):
//
//	kind          naming        from
//	DiT           official      Wan2.1, Self-Forcing, Causal-Forcing, LongLive (.pt/.pth/.safetensors); ComfyUI single files
//	DiT           diffusers     Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/ (WanTransformer3DModel)
//	VAE           official      Wan2.1_VAE.pth; ComfyUI's wan_2.1_vae.safetensors
//	VAE           diffusers     …-Diffusers vae/ (AutoencoderKLWan)
//	text encoder  official      models_t5_umt5-xxl-enc-bf16.pth
//	text encoder  Hugging Face  google/umt5-xxl, …-Diffusers text_encoder/ (UMT5EncoderModel); ComfyUI's umt5_xxl_*.safetensors
//
// before which a wrapper prefix every tensor carries is stripped
// (ComfyUI's "model.diffusion_model.", …) and ComfyUI's fp8 files are
// read: a float8_e4m3fn or float8_e5m2 weight with a per-tensor scale
// (".scale_weight" with a "scaled_fp8" marker, or ".weight_scale" with
// ".comfy_quant") is decoded as fp8 × scale, the product rounded to
// float32 once; an unscaled fp8 weight is exact in float32 and in
// bfloat16. LoRA files are read by OpenLoRA in PEFT, diffusers and
// ComfyUI/kohya naming.
//
// Weights that are not the kind asked for, or in no known layout, are a
// *LayoutError: a few lines naming what was found, what it looks like
// ("a Wan VAE in the official naming: pass it to --vae") and what the
// flag reads (Supported).
package weights
