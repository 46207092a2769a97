// Package runinput is the input stage the jobs share, between a run's
// configuration (package config: data only, reading nothing but its own
// YAML) and the run: it opens a run's KV stream (the synthetic generator
// or a recorded stream file, package record; OpenStream), reads what a
// recorded stream brings to a replay's configuration (its layout and its
// recording run's attention budget: StreamDefaults, Resolve), checks the
// input files of a generate configuration around its resolution
// (ResolveGenerate: a diffusers model folder's parts, the checkpoint and
// its entry, the LoRA against the backbone, the text and VAE files), and
// reads the models a generate configuration records something of
// (LongLive-RAG's autoencoder: CheckRAGAE).
package runinput
