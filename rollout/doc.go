// Package rollout runs the streaming block rollout of a few-step causal
// video generator (Self-Forcing / Causal-Forcing / LongLive) on the wan
// backbone with any memory.Policy:
//
//	noise for every frame is drawn up front (Noise.Initial, indexed by frame,
//	so it is read block by block without holding the whole video)
//	for block b (frames [bF, bF+F)):
//	    x = noise of the block
//	    for step s < S:                       (warped float32 timesteps, e.g. 1000, 937.5, 833.33…, 625)
//	        v  = model(x, t_s)                (first call of the block: memory.Call.First)
//	        x0 = x − σ_s·v
//	        if s < S−1: x = (1 − σ_{s+1})·x0 + σ_{s+1}·ε   (fresh noise, Noise.Renoise(b, s))
//	    latents[block] = x0
//	    model(x0, t = 0)                      (clean pass: the policy commits the block's K/V)
//
// That is the released models' schedule (the default). The authors' other
// options (ScheduleOptions): block 0 may have its own step list
// (FirstSchedule), the steps may be used unwarped (BuildSchedule with warp
// off: raw timesteps, σ at the table's nearest entry), and the update may
// be a float32 Euler step of the flow instead of the x0 re-noise
// (UpdateFlowEuler: x = x + v·(σ_{s+1} − σ_s), latents x + v·(0 − σ), no
// fresh noise). With Options.Recacher a prompt switch first recomputes the
// cached K/V of the most recent frames under the new prompt (LongLive's
// recache, memory.Recacher).
//
// Results stream out per block (Writer: safetensors latent shards + a JSON
// manifest; a JSON-lines memory log), so long rollouts never hold all
// latents. A rollout stopped between blocks (Options.Stop) continues at
// block b with Options.Start = b, the policy restored from a snapshot
// (memory.Snapshotter) and the folder reopened by ResumeWriter,
// bit-identically.
//
// The generate path (generate.go) is what every caller shares:
// NewGeneratorFor embeds the prompt schedule for a loaded model (each
// prompt's text conditioning a TextSource: a tensor file, TextFile, or
// values from an encoder, TextValues), and Generator.Run rolls it out with
// any memory policy, handing each finished block to Options.BlockDone (the
// densitykv command's run folder writes its logs, latent previews, video
// and checkpoints there). (The backbone benchmark,
// per-block time and peak memory, is package bench's RunWan.)
package rollout
