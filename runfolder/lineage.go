package runfolder

// FileLineage is density_kv_lineage.jsonl (generate, DensityKV): every
// admission and eviction of the traced banks.
const FileLineage = "density_kv_lineage.jsonl"

// LineageHeader is the first line of density_kv_lineage.jsonl: the
// authors' export header (utils/density_kv_integration.py,
// export_density_kv_lineage) for this run's geometry.
type LineageHeader struct {
	Kind           string `json:"kind"`   // "header"
	Format         string `json:"format"` // density_kv_lineage_v1
	FrameSeqLength int    `json:"frame_seq_length"`
	SpatialHeight  int    `json:"spatial_height"`
	SpatialWidth   int    `json:"spatial_width"`
	// SourceFrameOffset is what a source id's frame (id / frame_seq_length)
	// needs added to be the global latent frame: the sink frames with the
	// authors' ids, 0 with global ones.
	SourceFrameOffset int     `json:"source_frame_offset"`
	SourceIDs         string  `json:"source_ids"` // global or authors
	Layers            []int   `json:"layers"`
	Heads             []int   `json:"heads"`
	Tau               float64 `json:"density_growth_limit"`
}

// LineageEvent is one bank update of one traced layer and head, with the
// field names of the authors' lineage events (_record_density_kv_lineage,
// format density_kv_lineage_v1). The arrays run over the update's N
// candidates in the head's ordering π: entry j is candidate π(j).
type LineageEvent struct {
	Kind string `json:"kind"` // "event"
	// QueryFrame is the first frame of the block whose first call ran the
	// update; SourceBase the candidates offered to the bank before it (the
	// authors' source_tokens_seen), so candidate_index + source_base is a
	// candidate's authors' id.
	QueryFrame int    `json:"query_frame"`
	SourceBase int64  `json:"source_base"`
	Layer      int    `json:"layer"`
	Batch      int    `json:"batch"`
	Head       int    `json:"head"`
	Mode       string `json:"mode"` // frozen_snapshot: densities against the bank before the update
	// CandidateIndex is π(j), the candidate's row in the offered block.
	CandidateIndex []int32 `json:"candidate_index"`
	Accepted       []int   `json:"accepted"` // 1 when the candidate is stored after the update
	// TargetSlot is the candidate's slot in the bank after the update
	// (survivors first, then the admitted in order), −1 if not stored.
	TargetSlot []int32 `json:"target_slot"`
	// CandidateDensity is Σ_i w(k_i, x) over the bank before the update.
	CandidateDensity []float64 `json:"candidate_density"`
	// ReplacementDensity is the stored candidate's density after the
	// update (0 if not stored).
	ReplacementDensity []float64 `json:"replacement_density"`
	// EvictedDensity holds, at positions added … added+evicted−1 (added =
	// admitted − evicted), the evicted states' projected densities ρ̃(r*)
	// in eviction order, and 0 elsewhere (the authors' layout).
	EvictedDensity []float64 `json:"evicted_density"`
	// EnergyDelta is the candidate's ordering score minus τ.
	EnergyDelta []float64 `json:"energy_delta"`
	// CandidateSource is the candidate's source id; TargetSourceBefore and
	// TargetInsertQueryFrame describe the state at its target slot before
	// the update (−1 for no target or a slot beyond the old occupancy).
	CandidateSource        []int64 `json:"candidate_source"`
	TargetSourceBefore     []int64 `json:"target_source_before"`
	TargetInsertQueryFrame []int32 `json:"target_insert_query_frame"`
	// Not in the authors' events: the bank update index, and the evicted
	// states' source ids (eviction order; the mandatory ones first).
	Update           int     `json:"update"`
	EvictedSource    []int64 `json:"evicted_source"`
	EvictedMandatory int     `json:"evicted_mandatory"`
}

// LineageFinal is a traced bank's state at the end of the run (the
// authors' final_heads entry).
type LineageFinal struct {
	Kind             string    `json:"kind"` // "final"
	Layer            int       `json:"layer"`
	Head             int       `json:"head"`
	Count            int       `json:"count"`
	SourceIndex      []int64   `json:"source_index"`
	InsertQueryFrame []int32   `json:"insert_query_frame"`
	Density          []float64 `json:"density"`
	DensityBaseline  []float64 `json:"density_baseline"`
}
