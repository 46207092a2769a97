package rollout

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gemm/kerneltest"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

// goldenTolBF16 is the bf16 model's tolerance on the rollouts' latents,
// max |Δ| over max |ref| per block: package wan's bf16 forward tolerance
// (4u, u = 2^-8, derived there), which the rollout keeps because the
// errors do not grow across blocks (measured: at most 1.6u over 8 blocks
// on the shared set, 2.3u on another seed, where the bank's choices
// differ from the reference's).
const goldenTolBF16 = 4 * 0x1p-8

// goldenBF16Rollouts lists the golden rollouts TestGoldenRolloutBF16 runs,
// with their bank capacities (0: the native cache).
var goldenBF16Rollouts = []struct {
	file     string
	capacity int
}{{"rollout_native", 0}, {"rollout_densitykv", 24}, {"rollout_densitykv_cap60", 60}, {"rollout_densitykv_large", 72}}

// bankStep is what one layer's density bank did in one block of a
// rollout, recorded after the block's clean pass.
type bankStep struct {
	Updated              bool
	Candidates, Accepted int
	Counts               []int     // entries per head after the update
	Sources              [][]int64 // per head: the entries' sources, in storage order
	Evicted              [][]int64 // per head: sources this block's update evicted
	Parts                memory.Parts
}

// recordedRollout is one rollout of a golden file: each block's latents and,
// with a density bank, each block's bankStep per layer ([block][layer]).
type recordedRollout struct {
	latents [][]float32
	bank    [][]bankStep
}

// runGoldenRollout runs the golden rollout file g with model m (at its
// precision) through the native cache (capacity 0) or a density bank of
// that capacity with the golden settings, and records it.
func runGoldenRollout(t *testing.T, m *wan.Model, g *goldenFile, capacity int) recordedRollout {
	t.Helper()
	cfg := memory.Config{Layout: m.Cfg.Layout(goldenH, goldenW, goldenF), SinkFrames: 1, CacheFrames: 12}
	name := memory.NameNative
	if capacity > 0 {
		name, cfg.WindowFrames, cfg.Capacity = memory.NameDensityKV, 5, capacity
		cfg.Bank.Ordering, cfg.Bank.Sigma, cfg.Bank.Payload = bank.OrderMax, 4, bank.PayloadF32
	}
	pol, err := memory.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var r recordedRollout
	opt := goldenOptions(t, m, g)
	opt.BlockDone = func(b int, x []float32, log BlockLog) error {
		r.latents = append(r.latents, slices.Clone(x))
		dk, ok := pol.(*memory.DensityKV)
		if !ok {
			return nil
		}
		var steps []bankStep
		for l, d := range dk.LastDecisions() {
			bk := dk.Banks()[l]
			s := bankStep{Parts: log.Attention[l]}
			if dk.UpdateBlock(d.Update) == b && d.Candidates > 0 {
				s.Updated, s.Candidates, s.Accepted = true, d.Candidates, d.Accepted
			}
			for h := range bk.Config().Heads {
				var src []int64
				for _, e := range bk.Entries(h) {
					src = append(src, e.Source)
				}
				var ev []int64
				if s.Updated {
					ev = slices.Clone(d.Heads[h].Evicted)
				}
				s.Counts, s.Sources, s.Evicted = append(s.Counts, bk.HeadLen(h)), append(s.Sources, src), append(s.Evicted, ev)
			}
			steps = append(steps, s)
		}
		r.bank = append(r.bank, steps)
		return nil
	}
	if err := Run(m, pol, opt); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGoldenRolloutBF16 runs the four golden rollouts with the model in
// bf16 (checkRolloutBF16).
func TestGoldenRolloutBF16(t *testing.T) {
	m, err := wan.Load(filepath.Join(golden.Wan(t), "weights_generator.pt"), wan.TinyConfig(), wan.LoadOptions{Precision: gemm.BF16})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range goldenBF16Rollouts {
		t.Run(c.file, func(t *testing.T) { checkRolloutBF16(t, m, c.file, c.capacity) })
	}
}

// checkRolloutBF16 runs the golden rollout file (without extension) with
// the bf16 model m and requires:
//
//   - every block's latents within goldenTolBF16 of the float64 reference;
//   - the same latents, bit for bit, and the same bank decisions (what each
//     update admitted and evicted, every head's entries and their sources)
//     as a second run with every product on the pure-Go definition
//     ("fp32:go", "bf16:go"): the reference at the same precision, on the
//     same rounded operands;
//   - of the density bank, only what holds at any precision (checkBankBF16).
//
// The bank's decisions are not compared with the float64 reference's. The
// keys the bf16 model hands the bank differ from the reference's by about
// u = 2^-8 relative, while a valid golden set is only guaranteed to decide
// alike at float32 precision (its conditioning checks gaps above 1e-5
// relative): candidate scores, growth ratios and densities that are
// closer than u can order the other way, so another candidate is admitted
// or evicted, the prefix search stops one candidate earlier or later, and
// from then on the head counts, and what later updates admit, differ too.
// That happens on some valid sets (one update admitting 3 where the
// reference admits 2) and, on the shared set, with the weights under
// symmetries of the model (TestGoldenRolloutBF16OtherWeights); it is bf16
// being ill-conditioned there, not wrong. The test logs where the counts
// part from the reference's. (At fp32, TestGoldenRolloutDensityKV requires
// every decision of the reference.)
func checkRolloutBF16(t *testing.T, m *wan.Model, file string, capacity int) {
	t.Helper()
	if m.Precision != gemm.BF16 {
		t.Fatalf("model precision %v, want bf16", m.Precision)
	}
	g := openGolden(t, file+".safetensors")
	got := runGoldenRollout(t, m, g, capacity)
	lat := g.F64("latents")
	bs := len(lat) / len(got.latents)
	worst := 0.0
	for b, x := range got.latents {
		e := relErr(x, lat[b*bs:(b+1)*bs])
		worst = max(worst, e)
		if e > goldenTolBF16 {
			t.Errorf("block %d latents: relative error %.3g > %g", b, e, goldenTolBF16)
		}
	}
	t.Logf("worst latent error %.3g = %.2fu", worst, worst/0x1p-8)

	var def recordedRollout
	func() {
		for _, k := range []string{"fp32:go", "bf16:go"} {
			restore, err := gemm.Force(k)
			if err != nil {
				t.Fatalf("gemm.Force(%s): %v", k, err)
			}
			defer restore()
		}
		def = runGoldenRollout(t, m, g, capacity)
	}()
	for b := range got.latents {
		if i := kerneltest.FirstDiff(got.latents[b], def.latents[b]); i >= 0 {
			t.Fatalf("block %d latent %d: %v with kernel %s, %v on the pure-Go definition", b, i, got.latents[b][i], gemm.KernelName(gemm.BF16), def.latents[b][i])
		}
	}
	for b := range got.bank {
		for l := range got.bank[b] {
			if !reflect.DeepEqual(got.bank[b][l], def.bank[b][l]) {
				t.Fatalf("block %d layer %d: bank %+v with kernel %s, %+v on the pure-Go definition", b, l, got.bank[b][l], gemm.KernelName(gemm.BF16), def.bank[b][l])
			}
		}
	}
	if capacity > 0 {
		bg := loadBankGolden(t, g)
		tpf := int64(m.Cfg.Layout(goldenH, goldenW, goldenF).TokensPerFrame())
		bg.TPF, bg.Sink = tpf, tpf // the golden sink is one frame
		checkBankBF16(t, bg, capacity, got.bank)
	}
}

// checkBankBF16 checks a density-bank rollout at a precision whose keys
// are not close enough to the reference's for the same decisions, against
// what holds whatever the keys (per block and layer):
//
//   - which blocks update and how many candidates they offer (the
//     schedule: bank.updated, bank.num_candidates) exactly;
//   - the local window's key count (attn.tokens_mem_local_total) exactly,
//     the bank's part equal to the bank's entry count;
//   - every head of a layer holds as many entries; an update admits at
//     most min(N, M) and the bank then holds min(M, A + admitted) (A
//     before the update; the evictions free exactly the slots the admitted
//     prefix needs beyond the free ones), and evicts A + admitted minus
//     that; without an update nothing changes;
//   - an update of an empty bank admits the first min(N, M) candidates in
//     token order, whatever their keys: accepted_count, count and the
//     sources (source_token) equal the reference's there.
//
// It logs the first update (layer by layer) whose counts part from the
// reference's.
func checkBankBF16(t testing.TB, bg *bankGolden, capacity int, steps [][]bankStep) {
	t.Helper()
	if len(steps) != bg.B || bg.Cap != capacity {
		t.Fatalf("%d blocks of bank decisions for %d golden blocks; capacity %d, golden %d", len(steps), bg.B, capacity, bg.Cap)
	}
	parted := ""
	for l := 0; l < bg.L; l++ {
		before := 0
		for b := range steps {
			s := steps[b][l]
			bl := b*bg.L + l
			where := fmt.Sprintf("block %d layer %d", b, l)
			if s.Updated != (bg.updated[bl] == 1) || int64(s.Candidates) != bg.numCand[bl] {
				t.Errorf("%s: updated %v with %d candidates, golden bank.updated %d, bank.num_candidates %d", where, s.Updated, s.Candidates, bg.updated[bl], bg.numCand[bl])
			}
			if gl := bg.parts[bl*3+1]; s.Parts.Memory != s.Counts[0] || int64(s.Parts.Local) != gl ||
				int64(s.Parts.Total()) != bg.parts[bl*3+2]-bg.parts[bl*3]+int64(s.Parts.Memory) {
				t.Errorf("%s: attention parts %+v with %d bank entries; golden (bank, local, total) %v", where, s.Parts, s.Counts[0], bg.parts[bl*3:bl*3+3])
			}
			n := s.Counts[0]
			for h, c := range s.Counts {
				if c != n || len(s.Sources[h]) != c {
					t.Errorf("%s: head %d holds %d entries (%d sources), head 0 %d", where, h, c, len(s.Sources[h]), n)
				}
			}
			switch {
			case !s.Updated:
				if n != before || s.Accepted != 0 {
					t.Errorf("%s: no update, yet %d entries (before %d), %d accepted", where, n, before, s.Accepted)
				}
			case s.Accepted > min(s.Candidates, capacity) || n != min(capacity, before+s.Accepted):
				t.Errorf("%s: %d of %d candidates accepted into %d of %d entries: the bank holds %d, want min(M, A + accepted) = %d",
					where, s.Accepted, s.Candidates, before, capacity, n, min(capacity, before+s.Accepted))
			default:
				for h, ev := range s.Evicted {
					if len(ev) != before+s.Accepted-n {
						t.Errorf("%s head %d: %d evicted, want %d + %d − %d", where, h, len(ev), before, s.Accepted, n)
					}
				}
			}
			if s.Updated && before == 0 {
				if int64(s.Accepted) != bg.accepted[bl] {
					t.Errorf("%s: the empty bank admitted %d, golden bank.accepted_count %d", where, s.Accepted, bg.accepted[bl])
				}
				for h, src := range s.Sources {
					bh := bl*bg.H + h
					if int64(len(src)) != bg.count[bh] {
						t.Errorf("%s head %d: the empty bank holds %d, golden bank.count %d", where, h, len(src), bg.count[bh])
						continue
					}
					for i, x := range src {
						if x-bg.Sink != bg.sourceToken[bh*bg.Cap+i] {
							t.Errorf("%s head %d slot %d: the empty bank admitted source %d, golden bank.source_token %d", where, h, i, x-bg.Sink, bg.sourceToken[bh*bg.Cap+i])
							break
						}
					}
				}
			}
			if parted == "" && s.Updated && (int64(s.Accepted) != bg.accepted[bl] || int64(n) != bg.count[bl*bg.H]) {
				parted = fmt.Sprintf("%s: admitted %d into %d entries, the reference %d into %d", where, s.Accepted, n, bg.accepted[bl], bg.count[bl*bg.H])
			}
			before = n
		}
	}
	if parted == "" {
		t.Logf("every update admitted the reference's counts")
	} else {
		t.Logf("counts part from the float64 reference's (allowed at bf16) first at %s", parted)
	}
}

// TestGoldenRolloutBF16OtherWeights runs checkRolloutBF16 on the density
// rollouts with the golden weights under symmetries of the model
// (otherWeightsModel): a model the float64 reference can hardly tell from
// the golden one (its outputs move by float32 roundings of the weights,
// far below every tolerance), as a golden set made with other weights
// would be, whose bf16 run rounds other operands and sums in another
// order. With seed otherWeightsSeed, on the shared set, a bf16 update of
// rollout_densitykv_large admits 27 where the reference admits 28, and
// the bank then holds 63 entries, not 64: a check of the bf16 counts
// against the float64 ones fails there, checkRolloutBF16 passes.
func TestGoldenRolloutBF16OtherWeights(t *testing.T) {
	m := otherWeightsModel(t, otherWeightsSeed, gemm.BF16)
	for _, c := range goldenBF16Rollouts[1:] {
		t.Run(c.file, func(t *testing.T) { checkRolloutBF16(t, m, c.file, c.capacity) })
	}
}

// otherWeightsSeed seeds the symmetries of TestGoldenRolloutBF16OtherWeights.
const otherWeightsSeed = 2

// otherWeightsModel loads the golden weights and applies, per block, two
// symmetries of the model drawn from seed: the FFN's hidden units permuted
// (ffn.0's rows and bias, ffn.2's columns), and the values of self- and
// cross-attention scaled by a factor c in [0.7, 1.4] that the output
// projection undoes (v's rows and bias × c, o's columns ÷ c: attention is
// linear in the values, and the bank's decisions read only the keys). The
// float64 function is the reference's but for the float32 rounding of the
// scaled weights (relative 2^-24); the bf16 model rounds other operands
// and sums in another order. It returns the model at precision prec.
func otherWeightsModel(t *testing.T, seed uint64, prec gemm.Precision) *wan.Model {
	t.Helper()
	sd, err := checkpoint.LoadFile(filepath.Join(golden.Wan(t), "weights_generator.pt"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Draws from PCG's specified output, so that the weights do not depend
	// on the Go release's Perm or Float64.
	r := rand.NewPCG(seed, 0)
	perm := func(n int) []int {
		p := make([]int, n)
		for i := range p {
			j := int(r.Uint64() % uint64(i+1))
			p[i], p[j] = p[j], i
		}
		return p
	}
	cfg := wan.TinyConfig()
	get := func(name string, rank int) *checkpoint.Tensor {
		x := sd[name]
		if x == nil || len(x.Shape) != rank {
			t.Fatalf("%s: missing or not of rank %d", name, rank)
		}
		return x
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blocks.%d.", l)
		w0, b0, w2 := get(p+"ffn.0.weight", 2), get(p+"ffn.0.bias", 1), get(p+"ffn.2.weight", 2)
		hid, in, out := w0.Shape[0], w0.Shape[1], w2.Shape[0]
		if w2.Shape[1] != hid || len(b0.Data) != hid {
			t.Fatalf("%sffn: shapes %v %v %v", p, w0.Shape, b0.Shape, w2.Shape)
		}
		perm := perm(hid)
		nw0, nb0, nw2 := make([]float32, len(w0.Data)), make([]float32, hid), make([]float32, len(w2.Data))
		for i, j := range perm {
			copy(nw0[i*in:(i+1)*in], w0.Data[j*in:(j+1)*in])
			nb0[i] = b0.Data[j]
			for o := range out {
				nw2[o*hid+i] = w2.Data[o*hid+j]
			}
		}
		w0.Data, b0.Data, w2.Data = nw0, nb0, nw2
		for _, a := range []string{"self_attn.", "cross_attn."} {
			c := 0.7 + 0.7*float64(r.Uint64()>>11)*0x1p-53
			v, vb, o := get(p+a+"v.weight", 2), get(p+a+"v.bias", 1), get(p+a+"o.weight", 2)
			for i := range v.Data {
				v.Data[i] = float32(float64(v.Data[i]) * c)
			}
			for i := range vb.Data {
				vb.Data[i] = float32(float64(vb.Data[i]) * c)
			}
			for i := range o.Data {
				o.Data[i] = float32(float64(o.Data[i]) / c)
			}
		}
	}
	m, err := wan.FromStateDict(cfg, sd, prec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// errRecorder is a testing.TB that records Errorf calls instead of
// failing, and drops logs.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *errRecorder) Logf(string, ...any) {}

// TestCheckBankBF16 runs checkBankBF16 on the fp32 rollout of the golden
// cap60 file, whose decisions are the reference's (all its invariants
// hold), and on copies broken one way each, which it must reject.
func TestCheckBankBF16(t *testing.T) {
	const file, capacity = "rollout_densitykv_cap60", 60
	m := goldenModel(t)
	g := openGolden(t, file+".safetensors")
	bg := loadBankGolden(t, g)
	tpf := int64(m.Cfg.Layout(goldenH, goldenW, goldenF).TokensPerFrame())
	bg.TPF, bg.Sink = tpf, tpf
	ref := runGoldenRollout(t, m, g, capacity).bank
	// The block of the first update into the empty bank, and the first
	// update of a bank with entries.
	first, later := -1, -1
	for b := range ref {
		if ref[b][0].Updated && first < 0 {
			first = b
		} else if ref[b][0].Updated && later < 0 {
			later = b
		}
	}
	if first < 0 || later < 0 {
		t.Fatalf("%s: the bank updates at blocks %d, %d: want an update of the empty bank and a later one", file, first, later)
	}
	clone := func() [][]bankStep {
		c := make([][]bankStep, len(ref))
		for b := range ref {
			for _, s := range ref[b] {
				s.Counts = slices.Clone(s.Counts)
				s.Sources = slices.Clone(s.Sources)
				for h := range s.Sources {
					s.Sources[h] = slices.Clone(s.Sources[h])
				}
				s.Evicted = slices.Clone(s.Evicted)
				c[b] = append(c[b], s)
			}
		}
		return c
	}
	r := &errRecorder{TB: t}
	checkBankBF16(r, bg, capacity, clone())
	if len(r.errs) > 0 {
		t.Fatalf("the fp32 rollout fails: %v", r.errs)
	}
	for _, c := range []struct {
		name   string
		mutate func(s [][]bankStep)
	}{
		{"a head holds more", func(s [][]bankStep) {
			x := &s[later][0]
			x.Counts[1]++
			x.Sources[1] = append(x.Sources[1], 1)
		}},
		{"an update admits one more than it keeps", func(s [][]bankStep) { s[later][1].Accepted++ }},
		{"an update admits more than offered", func(s [][]bankStep) {
			s[first][0].Accepted = s[first][0].Candidates + 1
		}},
		{"one eviction too many", func(s [][]bankStep) {
			x := &s[later][0]
			x.Evicted[0] = append(x.Evicted[0], 1)
		}},
		{"no update, yet entries change", func(s [][]bankStep) {
			x := &s[first-1][0]
			x.Counts = []int{1, 1}
			x.Sources = [][]int64{{tpf}, {tpf}}
			x.Parts.Memory = 1
		}},
		{"an update where the schedule has none", func(s [][]bankStep) { s[first-1][1].Updated = true }},
		{"the empty bank admits another source", func(s [][]bankStep) { s[first][0].Sources[1][3]++ }},
		{"another local window", func(s [][]bankStep) { s[later][0].Parts.Local++ }},
		{"a bank part that is not the bank", func(s [][]bankStep) { s[later][1].Parts.Memory-- }},
	} {
		steps := clone()
		c.mutate(steps)
		r := &errRecorder{TB: t}
		checkBankBF16(r, bg, capacity, steps)
		if len(r.errs) == 0 {
			t.Errorf("%s: not detected", c.name)
		} else {
			t.Logf("%s: %s", c.name, r.errs[0])
		}
	}
}
