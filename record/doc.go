// Package record holds what a real rollout records besides its video, for
// replay and diagnosis: the KV stream of its clean passes (the stream file
// format, its writer and reader, and the Recorder that writes it) and the
// attention trace (AttentionTracer).
//
// # Stream files
//
// Writer and FileReader implement a little-endian record stream: a header
// (magic "DKVSTRM1", a JSON description: layout, dtype, block count, and the
// recording run's attention budget), then per block a block record (index,
// optional latent) followed by one layer record per layer (q, k, v as
// float32 or bfloat16), each record carrying a CRC-32, and an end record.
// Sizes are validated against the layout before anything is allocated.
// FileReader is a synth.Reader, so a recorded stream replays wherever the
// synthetic one runs (simulate, eval); Copy writes any synth.Reader to a
// file.
//
// Recorder wraps any memory.Policy and writes the q/k/v of every clean pass
// to a Writer, so streams from real rollouts of any backbone can be
// replayed.
//
// # The attention trace
//
// AttentionTracer measures a rollout: wrapped around the policy a backbone
// runs with, it sums on one denoising step of every block the attention mass
// each query frame puts on each source frame (attention_trace.json of a
// generate run, drawn by TraceFigure), and per head for chosen layers (the
// authors' attention_trace_layers.safetensors: LayerTrace).
package record
