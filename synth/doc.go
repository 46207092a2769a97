// Package synth produces video-like KV streams for the memory policies: a
// deterministic procedural generator, and the Reader interface every stream
// presents (the generator, and the recorded streams of real rollouts: package
// record).
//
// # Streams
//
// A stream is what the backbone hands a memory policy on the clean pass of
// every block: for each layer, the block's queries, keys and values
// [T][H][D] (T = Layout.TokensPerBlock(), token = f·H·W + h·W + w), queries
// and keys after qk-norm and before RoPE (the policies apply RoPE), values raw.
// Reader is the pull interface shared by the generator and the file reader
// of package record: NextBlock advances to the next block, Layer(l) returns
// layer l of it, layers in order 0..Layers−1. Nothing larger than one layer
// of one block is held, so a 120 s stream at the paper scale never sits in
// memory.
//
// # The generator
//
// Generator renders a 2D scene per latent frame on the Height×Width token grid
// and turns every token into a C-channel latent-like feature vector:
//
//   - Background: each scene has a few region prototypes (sky, ground, …);
//     smooth random fields over world coordinates pick the region of every
//     token, and a smooth random texture field adds within-region variation.
//     Many tokens therefore share a region and crowd key space, as in real
//     latents.
//   - Camera pan: the viewport slides over the world along a slow sinusoid
//     (PanAmplitude tokens, PanPeriod frames), so background content leaves
//     the view and comes back.
//   - Objects: every scene has Objects discs with their own prototype and an
//     object-fixed texture, moving on Lissajous paths wider than the view, so
//     they move, leave the frame and return with the same appearance.
//   - Scene cut: at frame CutAt·frames the stream cuts to a second scene
//     (own regions, texture and objects); at ReturnAt·frames it cuts back to
//     the first one, which is what a long-range memory should still hold.
//   - Appearance drift: every prototype rotates slowly towards a random
//     direction (Drift radians per frame), so the same content drifts.
//   - Noise: i.i.d. Gaussian noise (Noise) per token and channel, seeded by
//     (seed, frame), so each frame is independent of the order of calls.
//
// Features feed a residual stack that mimics per-layer hidden states: a fixed
// lift E (Hidden×C) gives h₀ = E·f and layer l uses h_l = h_{l−1} +
// tanh(A_l·h_{l−1}). Every layer and head has fixed random projections:
// k = g_k ⊙ rmsnorm(W_k·h_l), q = g_q·rmsnorm(W_q·h_l) with W_q = α·W_k + √(1−α²)·R
// (α per head, so some heads address content more strongly than others), and
// v = W_v·h_l + noise. The RMS normalisation plays the role of Wan's qk-norm,
// so per-head keys have ‖k‖ ≈ √D and the paper's bandwidth σ = √(D/2)
// applies. Everything is a pure function of the Config (seed included) and
// the frame index.
//
// Call.Latent for LongLive-RAG style descriptors is provided as
// [F][C][2H][2W], the features upsampled by two (Wan's latents sit at twice the
// token resolution per axis).
package synth
