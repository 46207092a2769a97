// Package generate holds the stages that turn prompts into video around
// the rollout (issue #12; it was package pipeline): the text stage before
// it and the video stage after it, as Wan2.1 and the DensityKV release
// chain them.
//
//	prompt ──Clean, SentencePiece, T5 layout (tokenizer)──▶ ids, mask [TextLen]
//	       ──umT5 encoder (t5)──▶ Embedding [SeqLen][4096]       EncodePrompts (cached)
//	       ──zero-padded to the DiT's TextLen (wan.Model.EmbedText)──▶ rollout
//	block b's latents [F][16][h][w] ──streaming VAE decoder (vae)──▶ frames
//	       ──rgb24 (vae.Uint8, truncating)──▶ segment b and its      VideoStream.Block
//	                                          lossless copy (video)
//	every block's lossless copy ──one libx264 encode──▶ video.mp4    VideoStream.Finish
//
// Text: CheckText checks the tokenizer and the encoder's tensors without
// reading its weights and identifies both files (internal/filehash);
// EncodePrompts encodes the prompts of a run at once, reading and writing
// the embedding cache (keyed by prompt, encoder, tokenizer, text length
// and the encoder's precision: CacheKey), loading the encoder only when a prompt misses the
// cache and releasing it (memory handed back to the OS) before it
// returns, so that the DiT loads into the room the 11.4 GB encoder left.
// A prompt longer than TextLen−1 pieces is cut, as Wan does, with a
// warning. Embedding files are safetensors with tensor "context" (what
// rollout.LoadText and generate --text read) and the prompt and file
// hashes as metadata.
//
// Precision: TextOptions.Precision and VideoOptions.Precision are the
// encoder's and the decoder's (gemm.Precision, fp32 or bf16), generate's
// --precision like the DiT's: bf16 for the real models, fp32 for the tiny
// golden ones.
//
// Video: a VideoStream decodes each block as the rollout finishes it,
// carrying the decoder's feature caches from block to block, and pipes
// the frames into that block's mp4 segment and its lossless copy (package
// video; PNG frames without ffmpeg); Finish encodes video.mp4 once from
// the copies. Resume continues a stopped video: it keeps the finished
// segments and warms a fresh decoder up on the WarmupFrames latent frames
// before the block it continues at, the decoder's temporal receptive field
// (39 for Wan2.1's VAE), after which the frames equal an uninterrupted
// stream's bit for bit; a lost lossless copy of a kept segment is decoded
// again from the latents.
//
// CheckBackbone checks a DiT checkpoint's tensors without reading them,
// LoadVAE loads a VAE and checks it against the DiT and the latent
// statistics, and Provenance is what a video records about its making
// (mp4 metadata, generation.json).
//
// The generate job: the stages run in this order in Generate, the one
// generate path (the densitykv command's generate calls it): all inputs
// checked, prompts encoded and the encoder released, the DiT loaded, then
// the rollout (genRun, its steps named, the crash-consistency order of its
// writes stated once on it) with each block's outputs written by a
// blockSink (sinks.go) as it finishes. GenerateList and GenerateBatch run
// a list of prompts (generate --prompts), one run folder each; CollectJob
// reads a list's folders into one report (densitykv collect); Decode
// re-decodes a run's latents. The run folder's files, records and
// checkpoints are package runfolder's.
package generate
