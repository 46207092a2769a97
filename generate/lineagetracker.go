package generate

import (
	"fmt"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
)

// lineage records the traced banks of a DensityKV policy: prev holds each
// traced (layer, head) bank's entries before the next update.
type lineage struct {
	pol           *memory.DensityKV
	layers, heads []int
	offset        int64 // subtracted from global source ids (authors' ids)
	prev          [][][]bank.Entry
}

func newLineage(pol *memory.DensityKV, layers, heads []int, offset int64) *lineage {
	lg := &lineage{pol: pol, layers: layers, heads: heads, offset: offset}
	lg.snapshot()
	return lg
}

// snapshot records the traced banks' entries (the state the next update
// starts from).
func (lg *lineage) snapshot() {
	lg.prev = make([][][]bank.Entry, len(lg.layers))
	for i, l := range lg.layers {
		lg.prev[i] = make([][]bank.Entry, len(lg.heads))
		for j, h := range lg.heads {
			lg.prev[i][j] = lg.pol.Banks()[l].Entries(h)
		}
	}
}

// header returns the file's first line.
func (lg *lineage) header(tau float64) runfolder.LineageHeader {
	l := lg.pol.Layout()
	ids, off := "global", 0
	if lg.offset != 0 {
		ids, off = "authors", lg.pol.Config().SinkFrames
	}
	return runfolder.LineageHeader{Kind: "header", Format: "density_kv_lineage_v1", FrameSeqLength: l.TokensPerFrame(), SpatialHeight: l.Height, SpatialWidth: l.Width,
		SourceFrameOffset: off, SourceIDs: ids, Layers: lg.layers, Heads: lg.heads, Tau: tau}
}

// insertFrame returns the query frame of the update that admitted e.
func (lg *lineage) insertFrame(e bank.Entry) int32 {
	b := lg.pol.UpdateBlock(int(e.Admitted))
	if b < 0 {
		return -1
	}
	return int32(b * lg.pol.Layout().FramesPerBlock)
}

// events returns the lineage events of block b's bank update (decs, one
// per layer; offered[l] candidates per head, 0 when layer l was not
// updated) and moves the recorded state on.
func (lg *lineage) events(b int, decs []bank.Decision, offered []int) ([]runfolder.LineageEvent, error) {
	defer lg.snapshot()
	cfg := lg.pol.Config()
	lay := cfg.Layout
	F, P, S, W := lay.FramesPerBlock, lay.TokensPerFrame(), cfg.SinkFrames, cfg.WindowFrames
	// The update at block b offers frames [max(S, bF − W), bF + F − W):
	// candidate row x is token x of that range.
	first := int64(max(S, b*F-W)) * int64(P)
	var out []runfolder.LineageEvent
	for i, l := range lg.layers {
		if l >= len(decs) || l >= len(offered) || offered[l] == 0 {
			continue
		}
		d := decs[l]
		for j, h := range lg.heads {
			if h >= len(d.Heads) {
				return nil, fmt.Errorf("lineage: layer %d has %d head decisions, head %d traced", l, len(d.Heads), h)
			}
			hd := d.Heads[h]
			N := d.Candidates
			if len(hd.Order) != N {
				return nil, fmt.Errorf("lineage: layer %d head %d: ordering of %d candidates, want %d", l, h, len(hd.Order), N)
			}
			final := lg.pol.Banks()[l].Entries(h)
			slotOf := map[int64]int32{}
			for s, e := range final {
				if int(e.Admitted) == d.Update {
					slotOf[e.Source] = int32(s)
				}
			}
			prev := lg.prev[i][j]
			ev := runfolder.LineageEvent{Kind: "event", QueryFrame: b * F, SourceBase: first - int64(S*P), Layer: l, Head: h, Mode: "frozen_snapshot",
				Update: d.Update, EvictedMandatory: hd.Mandatory,
				CandidateIndex: make([]int32, N), Accepted: make([]int, N), TargetSlot: make([]int32, N),
				CandidateDensity: make([]float64, N), ReplacementDensity: make([]float64, N), EvictedDensity: make([]float64, N),
				EnergyDelta: make([]float64, N), CandidateSource: make([]int64, N), TargetSourceBefore: make([]int64, N),
				TargetInsertQueryFrame: make([]int32, N)}
			for k, x := range hd.Order {
				src := first + int64(x)
				ev.CandidateIndex[k] = x
				ev.CandidateSource[k] = src - lg.offset
				if int(x) < len(hd.External) {
					ev.CandidateDensity[k] = hd.External[x]
				}
				ev.EnergyDelta[k] = -cfg.Bank.Tau
				if int(x) < len(hd.Score) {
					ev.EnergyDelta[k] += hd.Score[x]
				}
				ev.TargetSlot[k], ev.TargetSourceBefore[k], ev.TargetInsertQueryFrame[k] = -1, -1, -1
				if s, ok := slotOf[src]; ok {
					ev.Accepted[k], ev.TargetSlot[k] = 1, s
					ev.ReplacementDensity[k] = final[s].Density
					if int(s) < len(prev) {
						ev.TargetSourceBefore[k] = prev[s].Source - lg.offset
						ev.TargetInsertQueryFrame[k] = lg.insertFrame(prev[s])
					}
				}
			}
			added := max(0, hd.Accepted-len(hd.Evicted))
			for k, v := range hd.EvictedDensity {
				if added+k < N {
					ev.EvictedDensity[added+k] = v
				}
			}
			ev.EvictedSource = make([]int64, len(hd.Evicted))
			for k, s := range hd.Evicted {
				ev.EvictedSource[k] = s - lg.offset
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// finals returns the traced banks' final states.
func (lg *lineage) finals() []runfolder.LineageFinal {
	var out []runfolder.LineageFinal
	for _, l := range lg.layers {
		for _, h := range lg.heads {
			es := lg.pol.Banks()[l].Entries(h)
			f := runfolder.LineageFinal{Kind: "final", Layer: l, Head: h, Count: len(es), SourceIndex: make([]int64, len(es)),
				InsertQueryFrame: make([]int32, len(es)), Density: make([]float64, len(es)), DensityBaseline: make([]float64, len(es))}
			for i, e := range es {
				f.SourceIndex[i] = e.Source - lg.offset
				f.InsertQueryFrame[i] = lg.insertFrame(e)
				f.Density[i], f.DensityBaseline[i] = e.Density, e.Baseline
			}
			out = append(out, f)
		}
	}
	return out
}
