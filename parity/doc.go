// Package parity compares two runs of the rollout block by block: two
// densitykv generate run folders, or a run folder and a folder of the
// DensityKV authors' outputs (densitykv compare). It reports, per block,
// the latents' absolute and relative errors, the overlap of the DensityKV
// banks' decisions (the Jaccard index of the source ids each traced layer
// and head admitted, from the lineage) and the distance between the
// attention traces (the total variation between the attention mass a query
// frame puts on each source frame), as text, JSON and a figure.
//
// A densitykv run folder is read from manifest.json and its latent shards
// (package rollout), density_kv_lineage.jsonl and
// attention_trace_layers.safetensors (package runfolder). A folder of the
// authors' outputs holds, each optional but at least one present:
//
//   - latents: their streaming rollout's shards latents/latent_SSSSSS_EEEEEE.pt
//     (LatentShardWriter: start_frame, end_frame, latents [1, f, C, H, W];
//     also found in a *_stream/ sub-folder), or one file latents.pt or
//     *_latents.pt holding {"latents": [1, F, C, H, W] or [F, C, H, W]}
//     (torch.save of the pipeline's returned latents);
//   - the lineage: their export_density_kv_lineage saved with torch.save
//     (*_density_lineage.pt, format density_kv_lineage_v1 or v2), or
//     density_kv_lineage.jsonl in the same fields;
//   - the attention trace: their export_temporal_attention_trace saved with
//     torch.save (*_temporal_attention.pt, temporal_attention_trace_v2:
//     layers.L.heads, mass [1, H, F, F], count [1, F]), or
//     attention_trace_layers.safetensors.
//
// Source ids are compared as global token ids, id + source_frame_offset ×
// frame_seq_length by each lineage's own header; lineages of different
// frame_seq_length (token counts per frame) are refused. Only batch 0 of
// the authors' files is read.
package parity
