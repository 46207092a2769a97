package rollout

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
)

// scoreTieTol is the relative score gap below which two adjacent golden
// candidates count as tied (see orderUpToTies).
const scoreTieTol = 1e-5

// orderUpToTies checks a Go candidate ordering got against the golden one
// want, whose candidates have the golden scores score (ascending, in listed
// order). The rule: the order must match exactly, except inside a run of
// adjacent golden candidates whose scores differ by a nonzero amount of at
// most tol relative (|a−b| ≤ tol·max(|a|, |b|), chained along the run):
// such candidates may appear in any order among themselves, because a gap
// below float32 precision (≈6e-8 relative) cannot be resolved by a float32
// port. Exactly equal golden scores are not a tie: the reference orders
// them by its stable sort, and so must the port (an empty bank scores every
// candidate 0 and keeps the identity order). Whether a candidate was
// admitted, and where it landed, is checked separately and exactly.
func orderUpToTies(want []int64, score []float64, got []int32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d candidates ordered, want %d", len(got), len(want))
	}
	tied := func(a, b float64) bool {
		d := math.Abs(a - b)
		return d > 0 && d <= tol*math.Max(math.Abs(a), math.Abs(b))
	}
	for i := 0; i < len(want); {
		j := i + 1
		for j < len(want) && tied(score[j-1], score[j]) {
			j++
		}
		run := map[int64]int{}
		for k := i; k < j; k++ {
			run[want[k]]++
			run[int64(got[k])]--
		}
		for _, n := range run {
			if n != 0 {
				if j == i+1 {
					return fmt.Errorf("position %d: candidate %d, want %d (golden order %v, got %v)", i, got[i], want[i], want, got)
				}
				return fmt.Errorf("positions %d..%d (golden scores within %g): candidates %v, want %v in any order", i, j-1, tol, got[i:j], want[i:j])
			}
		}
		i = j
	}
	return nil
}

func TestOrderUpToTies(t *testing.T) {
	for _, c := range []struct {
		name  string
		want  []int64
		score []float64
		got   []int32
		ok    bool
	}{
		{"identical", []int64{2, 0, 1}, []float64{0.1, 0.2, 0.3}, []int32{2, 0, 1}, true},
		{"swap of distinct scores", []int64{2, 0, 1}, []float64{0.1, 0.2, 0.3}, []int32{0, 2, 1}, false},
		{"swap within a sub-float32 gap", []int64{2, 0, 1}, []float64{0.1, 0.2, 0.2 * (1 + 2.4e-7)}, []int32{2, 1, 0}, true},
		{"gap just above the tolerance", []int64{2, 0, 1}, []float64{0.1, 0.2, 0.2 * (1 + 2e-5)}, []int32{2, 1, 0}, false},
		{"chained run of three", []int64{3, 2, 0, 1}, []float64{0.1, 1, 1 + 5e-6, 1 + 1e-5}, []int32{3, 1, 0, 2}, true},
		{"tie does not reach past the run", []int64{3, 2, 0, 1}, []float64{0.1, 1, 1 + 5e-6, 2}, []int32{3, 0, 1, 2}, false},
		{"equal scores keep the stable order", []int64{0, 1, 2}, []float64{0, 0, 0}, []int32{1, 0, 2}, false},
		{"equal scores in order", []int64{0, 1, 2}, []float64{0, 0, 0}, []int32{0, 1, 2}, true},
		{"different candidate in a run", []int64{0, 1}, []float64{1, 1 + 1e-7}, []int32{0, 2}, false},
		{"length", []int64{0, 1}, []float64{1, 2}, []int32{0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := orderUpToTies(c.want, c.score, c.got, scoreTieTol)
			if (err == nil) != c.ok {
				t.Fatalf("orderUpToTies = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// bankGolden holds every bank.* and attn.* tensor of a density-bank rollout
// file, with the dimensions read from their shapes.
type bankGolden struct {
	B, L, H, Cap, N, D int
	// TPF and Sink are the tokens per frame and the sink's tokens (set by
	// the test from the policy): golden provenance excludes the sink.
	TPF, Sink int64

	updated, numCand, accepted []int64 // [B][L]
	count                      []int64 // [B][L][H]
	sourceToken, sourceFrame   []int64 // [B][L][H][Cap]
	keys, values               []float64
	density, baseline          []float64 // [B][L][H][Cap]
	candOrder, candSlot        []int64   // [B][L][H][N]
	candScore, candExt         []float64 // [B][L][H][N]
	parts                      []int64   // [B][L][3]
}

func loadBankGolden(t *testing.T, g *goldenFile) *bankGolden {
	t.Helper()
	bg := &bankGolden{}
	shape := func(name string, want int) []int {
		t.Helper()
		i, ok := g.Info(name)
		if !ok {
			t.Fatalf("golden file lacks %s", name)
		}
		if len(i.Shape) != want {
			t.Fatalf("%s has shape %v, want rank %d", name, i.Shape, want)
		}
		return i.Shape
	}
	s := shape("bank.keys", 5)
	bg.B, bg.L, bg.H, bg.Cap, bg.D = s[0], s[1], s[2], s[3], s[4]
	bg.N = shape("bank.cand_order", 4)[3]
	bg.updated, _ = g.I64("bank.updated")
	bg.numCand, _ = g.I64("bank.num_candidates")
	bg.accepted, _ = g.I64("bank.accepted_count")
	bg.count, _ = g.I64("bank.count")
	bg.sourceToken, _ = g.I64("bank.source_token")
	bg.sourceFrame, _ = g.I64("bank.source_frame")
	bg.keys, bg.values = g.F64("bank.keys"), g.F64("bank.values")
	bg.density, bg.baseline = g.F64("bank.density"), g.F64("bank.density_baseline")
	bg.candOrder, _ = g.I64("bank.cand_order")
	bg.candSlot, _ = g.I64("bank.cand_target_slot")
	bg.candScore, bg.candExt = g.F64("bank.cand_score"), g.F64("bank.cand_external_density")
	bg.parts, _ = g.I64("attn.tokens_mem_local_total")
	BL, BLH := bg.B*bg.L, bg.B*bg.L*bg.H
	for _, c := range []struct {
		name string
		n, w int
	}{
		{"bank.updated", len(bg.updated), BL}, {"bank.num_candidates", len(bg.numCand), BL}, {"bank.accepted_count", len(bg.accepted), BL},
		{"bank.count", len(bg.count), BLH}, {"bank.source_token", len(bg.sourceToken), BLH * bg.Cap},
		{"bank.source_frame", len(bg.sourceFrame), BLH * bg.Cap}, {"bank.values", len(bg.values), BLH * bg.Cap * bg.D},
		{"bank.density", len(bg.density), BLH * bg.Cap}, {"bank.density_baseline", len(bg.baseline), BLH * bg.Cap},
		{"bank.cand_target_slot", len(bg.candSlot), BLH * bg.N}, {"bank.cand_score", len(bg.candScore), BLH * bg.N},
		{"bank.cand_external_density", len(bg.candExt), BLH * bg.N}, {"attn.tokens_mem_local_total", len(bg.parts), BL * 3},
	} {
		if c.n != c.w {
			t.Fatalf("%s has %d values, want %d for %d blocks × %d layers × %d heads, capacity %d, %d candidates", c.name, c.n, c.w, bg.B, bg.L, bg.H, bg.Cap, bg.N)
		}
	}
	return bg
}

// relWorst accumulates, per tensor, the worst relative error
// max|got−want| / max|want| over the rows (block, layer, head) compared.
type relWorst map[string]float64

func (w relWorst) row(name string, got, want []float64) {
	var md, mw float64
	for i := range want {
		md = math.Max(md, math.Abs(got[i]-want[i]))
		mw = math.Max(mw, math.Abs(want[i]))
	}
	e := md
	if mw > 0 {
		e = md / mw
	}
	if math.IsNaN(e) {
		e = math.Inf(1)
	}
	w[name] = math.Max(w[name], e)
}

// checkBankBlock compares the bank state and decisions of block b (recorded
// after its clean pass) with the golden file: integers exactly, floats to
// goldenTol relative, candidate orders by orderUpToTies.
func checkBankBlock(t *testing.T, bg *bankGolden, dk *memory.DensityKV, b int, log BlockLog, worst relWorst) {
	t.Helper()
	decs := dk.LastDecisions()
	for l := 0; l < bg.L; l++ {
		bl := b*bg.L + l
		dec := decs[l]
		upd := dk.UpdateBlock(dec.Update) == b && dec.Candidates > 0
		nc, acc := 0, 0
		if upd {
			nc, acc = dec.Candidates, dec.Accepted
		}
		if want := bg.updated[bl] == 1; upd != want || (bg.updated[bl] != 0 && bg.updated[bl] != 1) {
			t.Errorf("block %d layer %d: updated %v, golden bank.updated %d", b, l, upd, bg.updated[bl])
		}
		if int64(nc) != bg.numCand[bl] {
			t.Errorf("block %d layer %d: %d candidates, golden bank.num_candidates %d", b, l, nc, bg.numCand[bl])
		}
		if int64(acc) != bg.accepted[bl] {
			t.Errorf("block %d layer %d: accepted %d, golden bank.accepted_count %d", b, l, acc, bg.accepted[bl])
		}
		p := log.Attention[l]
		if got := [3]int64{int64(p.Memory), int64(p.Local), int64(p.Total())}; got != [3]int64(bg.parts[bl*3:bl*3+3]) {
			t.Errorf("block %d layer %d: (bank, local, total) = %v, golden attn.tokens_mem_local_total %v", b, l, got, bg.parts[bl*3:bl*3+3])
		}
		bk := dk.Banks()[l]
		for h := 0; h < bg.H; h++ {
			bh := bl*bg.H + h
			checkBankHead(t, bg, bk, b, l, h, bh, worst)
			checkCandidates(t, bg, bk, dec, upd, b, l, h, bh, worst)
		}
	}
}

// checkBankHead compares one head's storage: counts, provenance, keys,
// values, densities and baselines slot by slot; empty slots must be −1
// (provenance) and 0 (contents) in the golden file.
func checkBankHead(t *testing.T, bg *bankGolden, bk *bank.Bank, b, l, h, bh int, worst relWorst) {
	t.Helper()
	n := bk.HeadLen(h)
	if int64(n) != bg.count[bh] {
		t.Errorf("block %d layer %d head %d: count %d, golden bank.count %d", b, l, h, n, bg.count[bh])
		return
	}
	if n > bg.Cap {
		t.Errorf("block %d layer %d head %d: %d entries exceed the golden capacity %d", b, l, h, n, bg.Cap)
		return
	}
	ents := bk.Entries(h)
	o := bh * bg.Cap
	for s := 0; s < bg.Cap; s++ {
		tok, fr := int64(-1), int64(-1)
		if s < n {
			tok, fr = ents[s].Source-bg.Sink, ents[s].Source/bg.TPF
		}
		if tok != bg.sourceToken[o+s] {
			t.Errorf("block %d layer %d head %d slot %d: source_token %d, golden %d", b, l, h, s, tok, bg.sourceToken[o+s])
			break
		}
		if fr != bg.sourceFrame[o+s] {
			t.Errorf("block %d layer %d head %d slot %d: source_frame %d, golden %d", b, l, h, s, fr, bg.sourceFrame[o+s])
			break
		}
	}
	D := bg.D
	k64 := func(x []float32) []float64 {
		out := make([]float64, bg.Cap*D)
		for i, v := range x[:n*D] {
			out[i] = float64(v)
		}
		return out
	}
	dens, base := make([]float64, bg.Cap), make([]float64, bg.Cap)
	for s, e := range ents {
		dens[s], base[s] = e.Density, e.Baseline
	}
	// Whole rows including the empty slots: there the golden values are 0,
	// and any nonzero golden value would count as an error.
	worst.row("bank.keys", k64(bk.Keys(h)), bg.keys[o*D:(o+bg.Cap)*D])
	worst.row("bank.values", k64(bk.Values(h)), bg.values[o*D:(o+bg.Cap)*D])
	worst.row("bank.density", dens, bg.density[o:o+bg.Cap])
	worst.row("bank.density_baseline", base, bg.baseline[o:o+bg.Cap])
}

// checkCandidates compares one head's candidate diagnostics. Golden rows
// list candidates in admission-score order: cand_order[i] is the candidate
// index, cand_score[i], cand_external_density[i] and cand_target_slot[i]
// belong to that candidate. Scores, external densities and target slots are
// compared per candidate (so a permitted tie swap does not misalign them);
// target slots exactly. Blocks without an update must have golden rows of
// −1 (order, slot) and NaN (score, external density).
func checkCandidates(t *testing.T, bg *bankGolden, bk *bank.Bank, dec bank.Decision, upd bool, b, l, h, bh int, worst relWorst) {
	t.Helper()
	o := bh * bg.N
	ord, slot := bg.candOrder[o:o+bg.N], bg.candSlot[o:o+bg.N]
	sc, ext := bg.candScore[o:o+bg.N], bg.candExt[o:o+bg.N]
	N := 0
	if upd {
		N = dec.Candidates
	}
	if N > bg.N {
		t.Errorf("block %d layer %d: %d candidates exceed the golden %d", b, l, N, bg.N)
		return
	}
	for i := N; i < bg.N; i++ {
		if ord[i] != -1 || slot[i] != -1 || !math.IsNaN(sc[i]) || !math.IsNaN(ext[i]) {
			t.Errorf("block %d layer %d head %d position %d (no candidate): golden order %d slot %d score %v external %v, want −1, −1, NaN, NaN",
				b, l, h, i, ord[i], slot[i], sc[i], ext[i])
			return
		}
	}
	if N == 0 {
		return
	}
	hd := dec.Heads[h]
	if err := orderUpToTies(ord[:N], sc[:N], hd.Order, scoreTieTol); err != nil {
		t.Errorf("block %d layer %d head %d: bank.cand_order: %v", b, l, h, err)
		return
	}
	// Per candidate: golden values, and the Go target slot. The first
	// Accepted candidates of the order were admitted with the source ids
	// HeadDecision.Admitted (in admission order); each landed in the slot
	// whose entry has that source and this update's index.
	wScore, wExt := make([]float64, N), make([]float64, N)
	wSlot, gSlot := make([]int64, N), make([]int64, N)
	seen := make([]bool, N)
	for i := 0; i < N; i++ {
		c := ord[i]
		if c < 0 || c >= int64(N) || seen[c] {
			t.Errorf("block %d layer %d head %d: golden cand_order %v is not a permutation of 0..%d", b, l, h, ord[:N], N-1)
			return
		}
		seen[c] = true
		wScore[c], wExt[c], wSlot[c] = sc[i], ext[i], slot[i]
	}
	if len(hd.Admitted) != hd.Accepted || hd.Accepted > N {
		t.Errorf("block %d layer %d head %d: %d admitted sources for %d accepted of %d", b, l, h, len(hd.Admitted), hd.Accepted, N)
		return
	}
	ents := bk.Entries(h)
	for i := range gSlot {
		gSlot[i] = -1
	}
	for i := 0; i < hd.Accepted; i++ {
		c, src := hd.Order[i], hd.Admitted[i]
		for s, e := range ents {
			if e.Source == src && int(e.Admitted) == dec.Update {
				gSlot[c] = int64(s)
			}
		}
	}
	for c := 0; c < N; c++ {
		if gSlot[c] != wSlot[c] {
			t.Errorf("block %d layer %d head %d candidate %d: target slot %d, golden bank.cand_target_slot %d", b, l, h, c, gSlot[c], wSlot[c])
		}
	}
	worst.row("bank.cand_score", hd.Score, wScore)
	worst.row("bank.cand_external_density", hd.External, wExt)
}

// blockRecord is what the sidecar checks need of one block: its memory log
// line and, per layer, the decision of the update the block ran (nil when
// it ran none).
type blockRecord struct {
	log  BlockLog
	decs []*bank.Decision
}

// densitySidecar is the part of a density-bank rollout sidecar compared by
// checkDensitySidecar.
type densitySidecar struct {
	Density      map[string]json.RawMessage   `json:"density"`
	Capacity     json.RawMessage              `json:"capacity_tokens_per_head"`
	TotalEvicted json.RawMessage              `json:"total_evicted_entries_all_layers"`
	Log          []map[string]json.RawMessage `json:"layer0_memory_log"`
}

// checkDensitySidecar compares the sidecar of a density-bank rollout with
// the run: the density settings and capacity against the policy's resolved
// configuration, the total eviction count, and the layer-0 memory log
// against the rollout's BlockLog and bank decisions. The reference's log
// describes its first decision group, which is head 0 (each head is its own
// group): candidate_density_mean is head 0's mean external density and
// admission_score_mean its mean ordering score minus the growth limit τ.
// Its admission "gate" is the prefix search; the Go bank admits the whole
// gated prefix, so gate_accepted equals accepted and nothing is pruned
// after the gate.
func checkDensitySidecar(t *testing.T, g *goldenFile, pol memory.Policy, recs []blockRecord) {
	t.Helper()
	var sc densitySidecar
	g.Sidecar(&sc)
	pc := pol.(interface{ Config() memory.Config }).Config()
	chunk := checkDensitySettings(t, g, sc, pc)
	checkEvictions(t, g, sc, recs)
	if len(sc.Log) != len(recs) {
		t.Fatalf("%s: layer0_memory_log has %d entries for %d blocks", g.Name(), len(sc.Log), len(recs))
	}
	seen := 0
	for b, e := range sc.Log {
		seen += recs[b].log.Offered[0]
		checkDensityLogEntry(t, g, pol, pc, b, e, recs[b], chunk, seen)
	}
}

// checkDensitySettings compares the sidecar's density settings and
// capacity with the policy's configuration pc, and returns the reference's
// work chunk size (checked through the log's decision_group_sizes).
func checkDensitySettings(t *testing.T, g *goldenFile, sc densitySidecar, pc memory.Config) (chunk int) {
	t.Helper()
	for k, raw := range sc.Density {
		var want any
		switch k {
		case "density_scale":
			want = pc.Bank.Sigma
		case "riesz_power":
			want = pc.Bank.P
		case "riesz_eps":
			want = pc.Bank.Eps
		case "density_growth_limit":
			want = pc.Bank.Tau
		case "density_baseline_floor":
			want = pc.Bank.Delta
		case "local_window_frames":
			want = pc.WindowFrames
		case "sink_size_frames":
			want = pc.SinkFrames
		case "logical_precommit":
			// DensityKV updates its banks at a block's first call, before
			// attention; the bank checks above depend on it.
			want = true
		case "work_chunk_size":
			// The reference processes candidates in chunks of this many;
			// checked through the log's decision_group_sizes below.
			if json.Unmarshal(raw, &chunk) != nil || chunk <= 0 {
				t.Errorf("%s: density.work_chunk_size = %s, want a positive integer", g.Name(), raw)
			}
			continue
		default:
			if !g.Prose("density." + k) {
				t.Errorf("%s: sidecar density.%s = %s is not compared: add it to checkDensitySidecar", g.Name(), k, raw)
			}
			continue
		}
		if !golden.SameJSON(t, raw, want) {
			t.Errorf("%s: sidecar density.%s = %s, the policy uses %v", g.Name(), k, raw, want)
		}
		g.MarkSidecar("density." + k)
	}
	if !golden.SameJSON(t, sc.Capacity, pc.Capacity) {
		t.Errorf("%s: capacity_tokens_per_head = %s, the policy uses %d", g.Name(), sc.Capacity, pc.Capacity)
	}
	g.MarkSidecar("capacity_tokens_per_head")

	return chunk
}

// checkEvictions compares the sidecar's total eviction count with the
// run's.
func checkEvictions(t *testing.T, g *goldenFile, sc densitySidecar, recs []blockRecord) {
	t.Helper()
	// Evictions per head, summed over blocks and layers (the heads of a
	// layer hold the same number of entries, so they evict alike).
	evicted := 0
	for _, r := range recs {
		for l, d := range r.decs {
			if d == nil {
				continue
			}
			for h, hd := range d.Heads {
				if n, n0 := hd.Mandatory+hd.Capacity, d.Heads[0].Mandatory+d.Heads[0].Capacity; n != n0 {
					t.Errorf("block %d layer %d: head %d evicted %d, head 0 %d", r.log.Block, l, h, n, n0)
				}
			}
			evicted += d.Heads[0].Mandatory + d.Heads[0].Capacity
		}
	}
	if !golden.SameJSON(t, sc.TotalEvicted, evicted) {
		t.Errorf("%s: total_evicted_entries_all_layers = %s, the run evicted %d per head", g.Name(), sc.TotalEvicted, evicted)
	}
	g.MarkSidecar("total_evicted_entries_all_layers")
}

// checkDensityLogEntry compares block b's entry e of the layer-0 memory
// log with the run's record r (seen: the candidates offered up to it).
func checkDensityLogEntry(t *testing.T, g *goldenFile, pol memory.Policy, pc memory.Config, b int, e map[string]json.RawMessage, r blockRecord, chunk, seen int) {
	t.Helper()
	lg, d := r.log, r.decs[0]
	occ := lg.Occupancy[0]
	omin, omax, osum := slices.Min(occ), slices.Max(occ), 0
	for _, o := range occ {
		osum += o
	}
	offered := lg.Offered[0]
	var groups []int
	for n := offered; n > 0; n -= min(n, chunk) {
		groups = append(groups, min(n, chunk))
	}
	if groups == nil {
		groups = []int{}
	}
	amin, amax := 0, 0
	var extMean, scoreMean float64
	if d != nil {
		amin, amax = d.Heads[0].Accepted, d.Heads[0].Accepted
		for _, hd := range d.Heads {
			amin, amax = min(amin, hd.Accepted), max(amax, hd.Accepted)
		}
		h0 := d.Heads[0]
		for c := range h0.External {
			extMean += h0.External[c] / float64(len(h0.External))
			scoreMean += h0.Score[c] / float64(len(h0.Score))
		}
		scoreMean -= pc.Bank.Tau
	}
	p := lg.Attention[0]
	for k, raw := range e {
		var want any
		num := false
		switch k {
		case "query_frame":
			want = lg.Frames[0]
		case "mode":
			var mode string
			if json.Unmarshal(raw, &mode) != nil {
				t.Errorf("%s: log block %d: mode %s is not a string", g.Name(), b, raw)
				continue
			}
			// The reference's name for the policy must build the same one.
			other, err := memory.New(mode, pc)
			if err != nil || other.Name() != pol.Name() {
				t.Errorf("%s: log block %d: mode %q is not policy %s (%v)", g.Name(), b, mode, pol.Name(), err)
			}
			g.MarkSidecar("layer0_memory_log[]." + k)
			continue
		case "active_entries_per_head":
			want, num = float64(osum)/float64(len(occ)), true
		case "active_entries_per_head_min":
			want = omin
		case "active_entries_per_head_max":
			want = omax
		case "processed_entries", "decision_entries":
			want = offered
		case "decision_group_sizes":
			want = groups
			if chunk > 0 {
				g.MarkSidecar("density.work_chunk_size")
			}
		case "accepted_entries", "gate_accepted_entries":
			want = lg.Admitted[0]
		case "accepted_entries_min", "gate_accepted_entries_min":
			want = amin
		case "accepted_entries_max", "gate_accepted_entries_max":
			want = amax
		case "pruned_after_gate_entries":
			want = 0
		case "candidate_density_mean":
			want, num = extMean, true
		case "admission_score_mean":
			want, num = scoreMean, true
		case "source_tokens_seen":
			want = seen
		case "attention_memory_tokens":
			want = p.Memory
		case "attention_local_tokens":
			want = p.Local
		case "attention_total_tokens":
			want = p.Total()
		default:
			t.Errorf("%s: layer0_memory_log[].%s = %s is not compared: add it to checkDensitySidecar", g.Name(), k, raw)
			continue
		}
		ok := false
		if num {
			var v float64
			w := want.(float64)
			ok = json.Unmarshal(raw, &v) == nil && math.Abs(v-w) <= goldenTol*math.Abs(v)+1e-12
		} else {
			ok = golden.SameJSON(t, raw, want)
		}
		if !ok {
			t.Errorf("%s: layer0_memory_log block %d: %s = %s, the run has %v", g.Name(), b, k, raw, want)
		}
		g.MarkSidecar("layer0_memory_log[]." + k)
	}
}

// TestGoldenRolloutDensityKV runs the three density-bank rollouts through
// the real memory.DensityKV policy and checks every step's tensors (see
// checkRollout) and, after each block's clean pass, every bank.* and attn.*
// tensor of the file: bank.updated, num_candidates, accepted_count, count,
// source_token, source_frame, cand_target_slot and the (bank, local,
// total) key counts exactly; cand_order exactly up to sub-float32 score
// ties (orderUpToTies); keys, values, density, density_baseline, cand_score
// and cand_external_density to goldenTol relative (max-abs over max-abs per
// block, layer and head).
func TestGoldenRolloutDensityKV(t *testing.T) {
	m := goldenModel(t)
	for _, c := range []struct {
		file     string
		capacity int
	}{{"rollout_densitykv", 24}, {"rollout_densitykv_cap60", 60}, {"rollout_densitykv_large", 72}} {
		t.Run(c.file, func(t *testing.T) {
			g := openGolden(t, c.file+".safetensors")
			bg := loadBankGolden(t, g)
			cfg := memory.Config{Layout: m.Cfg.Layout(6, 8, 3), SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: c.capacity}
			cfg.Bank.Ordering = bank.OrderMax
			cfg.Bank.Sigma = 4
			cfg.Bank.Payload = bank.PayloadF32
			pol, err := memory.New(memory.NameDensityKV, cfg)
			if err != nil {
				t.Fatal(err)
			}
			dk := pol.(*memory.DensityKV)
			lay := pol.Layout()
			if bg.Cap != c.capacity || bg.L != lay.Layers || bg.H != lay.Heads || bg.D != lay.HeadDim || bg.N != lay.TokensPerBlock() {
				t.Fatalf("golden bank tensors for %d blocks × %d layers × %d heads, capacity %d, %d candidates, head dim %d; the policy has %+v, capacity %d",
					bg.B, bg.L, bg.H, bg.Cap, bg.N, bg.D, lay, c.capacity)
			}
			bg.TPF, bg.Sink = int64(lay.TokensPerFrame()), int64(cfg.SinkFrames*lay.TokensPerFrame())
			worst := relWorst{}
			var recs []blockRecord
			checkRollout(t, g, m, pol, func(b int, log BlockLog) {
				checkBankBlock(t, bg, dk, b, log, worst)
				r := blockRecord{log: log, decs: make([]*bank.Decision, bg.L)}
				for l, d := range dk.LastDecisions() {
					if dk.UpdateBlock(d.Update) == b && d.Candidates > 0 {
						r.decs[l] = &d
					}
				}
				recs = append(recs, r)
			})
			if len(recs) != bg.B {
				t.Fatalf("%d blocks checked, golden has %d", len(recs), bg.B)
			}
			g.Mark("bank.updated", "bank.num_candidates", "bank.accepted_count", "bank.count", "bank.source_token", "bank.source_frame",
				"bank.keys", "bank.values", "bank.density", "bank.density_baseline", "bank.cand_order", "bank.cand_target_slot",
				"bank.cand_score", "bank.cand_external_density", "attn.tokens_mem_local_total")
			checkDensitySidecar(t, g, pol, recs)
			for name, e := range worst {
				if !(e <= goldenTol) {
					t.Errorf("%s: worst relative error %.3g > %g", name, e, goldenTol)
				}
			}
			if len(worst) != 6 {
				t.Errorf("compared %d float bank tensors, want 6: %v", len(worst), worst)
			}
			t.Logf("bank relative errors: %v", worst)
		})
	}
}
