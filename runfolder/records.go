package runfolder

import (
	"slices"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
)

// Parts is memory.Parts with JSON names.
type Parts struct {
	Sink   int `json:"sink"`
	Memory int `json:"memory"`
	Local  int `json:"local"`
}

// LogLine is one line of memory_log.jsonl: one policy, block and layer,
// recorded after the block's clean pass.
type LogLine struct {
	Policy string  `json:"policy"`
	Block  int     `json:"block"`
	Layer  int     `json:"layer"`
	Second float64 `json:"seconds"` // video time at the end of the block
	// Update is the DensityKV bank update index of this block (-1 when the
	// block offered nothing or the policy has no bank).
	Update int `json:"update"`
	// Occupancy is the historical memory per head read by this block.
	Occupancy []int `json:"occupancy"`
	OccMin    int   `json:"occupancy_min"`
	OccMax    int   `json:"occupancy_max"`
	// Offered candidates per head; Admitted per head (largest over heads);
	// AdmittedTotal and the evictions are summed over heads.
	Offered       int `json:"offered"`
	Admitted      int `json:"admitted"`
	AdmittedTotal int `json:"admitted_total"`
	// AdmittedHeads is the admitted count of each head (DensityKV only).
	AdmittedHeads    []int `json:"admitted_per_head,omitempty"`
	EvictedMandatory int   `json:"evicted_mandatory"`
	EvictedCapacity  int   `json:"evicted_capacity"`
	// Tokens counts this layer's attention keys by part.
	Tokens Parts `json:"tokens"`
	// Bytes is the policy's live persistent state after the block (sink,
	// window and memory); BankBytes is this layer's DensityKV bank alone
	// (K/V payload, densities, baselines, provenance).
	Bytes     int64 `json:"bytes"`
	BankBytes int64 `json:"bank_bytes,omitempty"`
	// Flags of the bank decision (DensityKV only).
	Flushed      bool `json:"flushed,omitempty"`
	FloorBlocked bool `json:"floor_blocked,omitempty"`
	Infeasible   bool `json:"infeasible,omitempty"`
	// Timings (wall clock, not reproducible): the whole policy's memory
	// update of this block, and this layer's Attend call.
	UpdateSeconds float64 `json:"update_seconds"`
	AttendSeconds float64 `json:"attend_seconds"`
	// Diag holds the fields of the DensityKV authors' memory log.
	Diag
}

// Diag are the fields of the DensityKV authors' memory log
// (pipeline/causal_inference.py, memory_indices_log) that a line carries
// when they apply: the bank update's candidate-density and admission-score
// means (DensityKV; head 0 of the layer, the authors' group 0), the frames
// LongLive-RAG retrieved for the block with their cosine similarities, and
// the frames a LongLive recache recomputed before the block (layer 0's
// line).
type Diag struct {
	// CandidateDensityMean is the mean over the block's N candidates of
	// their density over the bank before the update (candidate_density).
	CandidateDensityMean *float64 `json:"candidate_density_mean,omitempty"`
	// AdmissionScoreMean is the mean over the candidates of their ordering
	// score minus τ (energy_delta: the authors' max-normalised score with
	// --ordering max, the configured ordering's score otherwise; −τ for an
	// empty bank).
	AdmissionScoreMean *float64 `json:"admission_score_mean,omitempty"`
	// NumEvicted is LongLive-RAG's pool size when the block retrieved
	// (the authors' num_evicted: the frames evicted from the physical
	// cache so far, or that left the window with --rag-pool window).
	NumEvicted           *int      `json:"num_evicted,omitempty"`
	SelectedGlobalFrames []int     `json:"selected_global_frames,omitempty"`
	SelectedSimilarities []float64 `json:"selected_similarities,omitempty"`
	Recached             []int     `json:"recached,omitempty"`
}

// DiagFor returns layer l's Diag of policy p after a block whose bank
// decisions are decs (DensityKV; nil otherwise) and whose layer offered
// offered candidates.
func DiagFor(p memory.Policy, l int, decs []bank.Decision, offered int) Diag {
	var d Diag
	if dk, ok := p.(*memory.DensityKV); ok && l < len(decs) && offered > 0 && len(decs[l].Heads) > 0 {
		h := decs[l].Heads[0]
		tau := dk.Config().Bank.Tau
		var cd, sc float64
		for i := range h.External {
			cd += h.External[i]
		}
		for i := range h.Score {
			sc += h.Score[i] - tau
		}
		if n := float64(len(h.External)); n > 0 {
			cd /= n
		}
		if len(h.Score) > 0 {
			sc /= float64(len(h.Score))
		} else {
			sc = -tau
		}
		d.CandidateDensityMean, d.AdmissionScoreMean = &cd, &sc
	}
	if r, ok := p.(*memory.LongLiveRAG); ok {
		n := r.PoolFrames()
		d.NumEvicted = &n
		d.SelectedGlobalFrames, d.SelectedSimilarities = r.Retrieved(), r.RetrievedSimilarities()
	}
	return d
}

// PolicyTotals accumulates one policy over a run.
type PolicyTotals struct {
	Policy           string  `json:"policy"`
	Admitted         int64   `json:"admitted_total"`
	EvictedMandatory int64   `json:"evicted_mandatory"`
	EvictedCapacity  int64   `json:"evicted_capacity"`
	Bytes            int64   `json:"bytes_final"`
	PeakBytes        int64   `json:"bytes_peak"`
	OccMin           int     `json:"occupancy_final_min"`
	OccMax           int     `json:"occupancy_final_max"`
	Tokens           int     `json:"attention_tokens_final"` // keys read by layer 0 in the last block
	UpdateSeconds    float64 `json:"update_seconds"`
	AttendSeconds    float64 `json:"attend_seconds"`
	// BytesByBlock is the live state after each block (storage vs horizon).
	BytesByBlock []int64 `json:"-"`
}

// Admissions aggregates the DensityKV admission events of a run for the
// montage (each admitted state counted once per layer–head bank):
// admissions.json.
type Admissions struct {
	Layers, Heads, Height, Width, Frames int
	FPS                                  float64
	// FirstLayer is the stream layer of LayerFrame's row 0.
	FirstLayer int `json:"first_layer"`
	// TokenBanks[f·P + p] counts the layer–head banks that admitted source
	// token p of frame f.
	TokenBanks []int32 `json:"token_banks"`
	// LayerFrame[l·Frames + f] counts admissions of layer l from frame f.
	LayerFrame []int64 `json:"layer_frame"`
	// UpdateBlock[u] is the block whose first call ran bank update u.
	UpdateBlock []int `json:"update_block"`
	// InitFrames is the number of source frames admitted by the first
	// (empty-bank) update.
	InitFrames int `json:"init_frames"`
}

// NewAdmissions returns the empty aggregate of a run of c.
func NewAdmissions(c config.Config) *Admissions {
	l := c.Memory.Layout
	F := c.Frames()
	return &Admissions{Layers: l.Layers, Heads: l.Heads, Height: l.Height, Width: l.Width, Frames: F, FPS: c.Stream.FPS, FirstLayer: c.Stream.FirstLayer,
		TokenBanks: make([]int32, F*l.TokensPerFrame()), LayerFrame: make([]int64, l.Layers*F)}
}

// Add counts the admissions of one block's bank decisions (one per layer;
// offered[l] = 0 for a layer whose bank was offered nothing).
func (a *Admissions) Add(block int, decs []bank.Decision, offered []int) {
	P := a.Height * a.Width
	recorded := false
	for l, d := range decs {
		if offered[l] == 0 {
			continue
		}
		if !recorded {
			for len(a.UpdateBlock) <= d.Update {
				a.UpdateBlock = append(a.UpdateBlock, -1)
			}
			a.UpdateBlock[d.Update] = block
			recorded = true
		}
		for _, h := range d.Heads {
			for _, src := range h.Admitted {
				f, p := int(src)/P, int(src)%P
				if f < 0 || f >= a.Frames {
					continue
				}
				a.TokenBanks[f*P+p]++
				a.LayerFrame[l*a.Frames+f]++
				if d.Empty && f+1 > a.InitFrames {
					a.InitFrames = f + 1
				}
			}
		}
	}
}

// RunState is everything a run accumulates, saved with each checkpoint.
type RunState struct {
	NextBlock int             `json:"next_block"`
	LogBytes  int64           `json:"log_bytes"`
	Totals    []*PolicyTotals `json:"totals"`
	Bytes     [][]int64       `json:"bytes_by_block"` // [policy][block]
	Adm       *Admissions     `json:"admissions,omitempty"`
	// Snapshots reports that policy snapshots were saved with this
	// checkpoint (otherwise --resume replays blocks 0..NextBlock−1).
	Snapshots bool `json:"snapshots"`
}

// BankBytes returns the live bytes of each layer's DensityKV bank, or nil
// for other policies.
func BankBytes(p memory.Policy) []int64 {
	d, ok := p.(*memory.DensityKV)
	if !ok {
		return nil
	}
	out := make([]int64, len(d.Banks()))
	for l, b := range d.Banks() {
		out[l] = b.Bytes()
	}
	return out
}

// StatsOf returns the policy's latest per-call record.
func StatsOf(p memory.Policy) memory.Stats {
	if r, ok := p.(memory.StatsReporter); ok {
		return r.LastStats()
	}
	return memory.Stats{}
}

// LineFor is the log line of policy at block b, layer l (of the policy:
// the caller adds the stream's first layer), at video second sec: from the
// policy's statistics of the block, its bank decisions (DensityKV; nil
// otherwise), its live bytes and the layer's Attend time.
func LineFor(policy string, b, l int, sec float64, s memory.Stats, decs []bank.Decision, bytes int64, attend float64) LogLine {
	ln := LogLine{Policy: policy, Block: b, Layer: l, Second: sec, Update: -1, Bytes: bytes,
		UpdateSeconds: s.UpdateSeconds, AttendSeconds: attend}
	if l < len(s.Occupancy) {
		ln.Occupancy = append([]int(nil), s.Occupancy[l]...)
	}
	if len(ln.Occupancy) > 0 {
		ln.OccMin, ln.OccMax = slices.Min(ln.Occupancy), slices.Max(ln.Occupancy)
	}
	if l < len(s.Offered) {
		ln.Offered, ln.Admitted = s.Offered[l], s.Admitted[l]
		ln.EvictedMandatory, ln.EvictedCapacity = s.EvictedMandatory[l], s.EvictedCapacity[l]
		ln.AdmittedTotal = s.Admitted[l] * max(1, len(ln.Occupancy))
	}
	if l < len(s.Parts) {
		ln.Tokens = Parts{Sink: s.Parts[l].Sink, Memory: s.Parts[l].Memory, Local: s.Parts[l].Local}
	}
	if l < len(decs) && ln.Offered > 0 {
		d := decs[l]
		ln.Update = d.Update
		ln.AdmittedTotal = 0
		for _, h := range d.Heads {
			ln.AdmittedTotal += len(h.Admitted)
			ln.AdmittedHeads = append(ln.AdmittedHeads, len(h.Admitted))
		}
		ln.Flushed, ln.FloorBlocked, ln.Infeasible = d.Flushed, d.FloorBlocked, d.Infeasible
	}
	return ln
}
