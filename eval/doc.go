// Package eval compares memory policies at matched historical capacity on
// the same KV streams, by what they do to attention (the project's
// evaluation of the paper's claims at the attention level). These are
// attention-level measurements, not video quality: the paper's VBench
// scores need the real models and metrics.
//
// Run drives every Variant (a memory policy and its configuration) and the
// FullHistory reference in lockstep over one stream (package sim), and on
// every clean pass, for every evaluated layer and head:
//
//   - Attention fidelity. Queries sampled per block (the same tokens for
//     every policy) attend over each policy's own context (its own RoPE
//     positions) and over FullHistory's. RelErr is ‖O_p − O_full‖/‖O_full‖
//     over the sampled queries; Dropped is the softmax mass FullHistory puts
//     on history tokens (non-sink tokens that left the local window) the
//     policy does not attend; Recall is the fraction of each query's TopK
//     most-attended history tokens (by FullHistory) the policy attends.
//   - Coverage radius, at each horizon: for every history key, the distance
//     to the nearest history key the policy still attends, max and mean,
//     computed exactly (NearestRetained: a gemm product for candidates,
//     every near-minimal candidate re-measured in float64), or on an evenly
//     spaced sample when Options.CoverageSample asks for one. Keys are
//     compared rotated at temporal position 0 and their own (h, w), the bank
//     geometry; by the paper's logit bound (Eq. logit-bound) radius/√d_k is
//     the worst-case normalised logit discrepancy of replacing a dropped key
//     by its nearest retained one.
//   - Per-frame coverage: the fraction of each source frame's tokens still
//     attended at a horizon (a retention age profile).
//   - Cost: persistent bytes (Policy.Bytes) and memory update time per
//     block (memory.StatsReporter).
//
// Tokens are identified without help from the policies: every policy copies
// values exactly (or rounds them to BF16), so the BF16 value row of a head
// identifies its source token. Run reports rows that match no token and
// hash collisions (both 0 on the built-in streams).
//
// Metrics at a horizon of B blocks average the per-block values of blocks
// 0…B−1 (prefixes of the same trajectory, like the paper's 30/60/120 s).
// Suite builds the paper's tables (parameter sweeps, policy ablations,
// ordering, descriptor geometry, baselines) scaled to the stream;
// MakeTable ranks rows with midranks for ties on the displayed values and
// marks best and second best; Result.WriteFiles writes Markdown, CSV and
// PNG/SVG plots.
//
// Job is the eval command's job: Job.Run checks its settings and folder,
// opens the run's stream (package runinput), takes the folder, runs the
// suite, and writes config.yaml, the tables, the figures and summary.json,
// the summary last.
package eval
