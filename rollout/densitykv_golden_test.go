package rollout

import (
	"math"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// TestGoldenRolloutDensityKV runs the three density-bank rollouts through
// the real memory.DensityKV policy and checks the latents (1e-4 relative)
// and, exactly, the per-block bank decisions: accepted_count, count,
// source_token in storage order, and the (bank, local, total) key counts.
// Bank keys and densities are checked to 1e-4 relative.
func TestGoldenRolloutDensityKV(t *testing.T) {
	m := goldenModel(t)
	for _, c := range []struct {
		file     string
		capacity int
	}{{"rollout_densitykv", 24}, {"rollout_densitykv_cap60", 60}, {"rollout_densitykv_large", 72}} {
		t.Run(c.file, func(t *testing.T) {
			g := openGolden(t, c.file+".safetensors")
			cfg := memory.Config{Layout: m.Cfg.Layout(6, 8, 3), SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: c.capacity}
			cfg.Bank.Ordering = "max"
			cfg.Bank.Sigma = 4
			cfg.Bank.Payload = "f32"
			pol, err := memory.New(memory.NameDensityKV, cfg)
			if err != nil {
				t.Fatal(err)
			}
			dk := pol.(*memory.DensityKV)
			L, H, D, capy := 2, 2, 32, c.capacity
			updated, _ := g.i64("bank.updated")
			accepted, _ := g.i64("bank.accepted_count")
			count, _ := g.i64("bank.count")
			source, _ := g.i64("bank.source_token")
			parts, _ := g.i64("attn.tokens_mem_local_total")
			keys, dens := g.f64("bank.keys"), g.f64("bank.density")
			var worstKey, worstDens float64
			checkRollout(t, g, m, pol, func(b int, log BlockLog) {
				decs := dk.LastDecisions()
				for l := 0; l < L; l++ {
					bl := b*L + l
					acc := 0
					if dk.UpdateBlock(decs[l].Update) == b && decs[l].Candidates > 0 {
						acc = decs[l].Accepted
						if updated[bl] != 1 {
							t.Errorf("block %d layer %d: updated, golden says not", b, l)
						}
					} else if updated[bl] != 0 {
						t.Errorf("block %d layer %d: no update, golden says updated", b, l)
					}
					if int64(acc) != accepted[bl] {
						t.Errorf("block %d layer %d: accepted %d, want %d", b, l, acc, accepted[bl])
					}
					p := log.Attention[l]
					if int64(p.Memory) != parts[bl*3] || int64(p.Local) != parts[bl*3+1] || int64(p.Total()) != parts[bl*3+2] {
						t.Errorf("block %d layer %d: (bank, local, total) = (%d, %d, %d), want %v", b, l, p.Memory, p.Local, p.Total(), parts[bl*3:bl*3+3])
					}
					bk := dk.Banks()[l]
					for h := 0; h < H; h++ {
						bh := bl*H + h
						n := bk.HeadLen(h)
						if int64(n) != count[bh] {
							t.Errorf("block %d layer %d head %d: count %d, want %d", b, l, h, n, count[bh])
							continue
						}
						ents := bk.Entries(h)
						for s := 0; s < capy; s++ {
							want := source[bh*capy+s]
							got := int64(-1)
							if s < n {
								got = ents[s].Source - 12
							}
							if got != want {
								t.Errorf("block %d layer %d head %d slot %d: source_token %d, want %d", b, l, h, s, got, want)
								break
							}
						}
						kk := bk.Keys(h)
						var md, mw, dd, dw float64
						for s := 0; s < n; s++ {
							for j := 0; j < D; j++ {
								w := keys[(bh*capy+s)*D+j]
								md = math.Max(md, math.Abs(float64(kk[s*D+j])-w))
								mw = math.Max(mw, math.Abs(w))
							}
							w := dens[bh*capy+s]
							dd = math.Max(dd, math.Abs(ents[s].Density-w))
							dw = math.Max(dw, math.Abs(w))
						}
						if mw > 0 {
							worstKey = math.Max(worstKey, md/mw)
						}
						if dw > 0 {
							worstDens = math.Max(worstDens, dd/dw)
						}
					}
				}
			})
			if worstKey > goldenTol || worstDens > goldenTol {
				t.Errorf("bank keys relative error %.3g, densities %.3g (tolerance %g)", worstKey, worstDens, goldenTol)
			}
			t.Logf("bank keys relative error %.3g, densities %.3g", worstKey, worstDens)
		})
	}
}
