package memory

import (
	"math/rand/v2"
	"testing"
)

// benchPolicy fills a one-layer paper-scale policy (30×52 tokens per frame,
// 12 heads, d = 128) with blocks clean blocks.
func benchPolicy(b *testing.B, name string, blocks int) (Policy, []float32) {
	return benchPolicyWith(b, name, blocks, Options{})
}

// benchPolicyWith is benchPolicy with options.
func benchPolicyWith(b *testing.B, name string, blocks int, opt Options) (Policy, []float32) {
	l := DefaultLayout()
	l.Layers = 1
	cfg := DefaultConfig(l)
	cfg.LongLiveRAG.Descriptor = RAGKeyMean
	p, err := NewWith(name, cfg, opt)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, l.TokensPerBlock()*l.Heads*l.HeadDim)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for blk := 0; blk < blocks; blk++ {
		if err := p.Begin(Call{Block: blk, First: true, Clean: true}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Attend(0, x, x, x); err != nil {
			b.Fatal(err)
		}
		if err := p.End(); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Begin(Call{Block: blocks, First: true}); err != nil {
		b.Fatal(err)
	}
	if _, err := p.Attend(0, x, x, x); err != nil {
		b.Fatal(err)
	}
	if err := p.End(); err != nil {
		b.Fatal(err)
	}
	return p, x
}

// BenchmarkAttendPaperScale measures one denoising call of one layer at the
// paper's scale with a full context (18,720 keys): the context assembly
// (copies and RoPE) each policy adds on top of attention.
func BenchmarkAttendPaperScale(b *testing.B) {
	for _, name := range []string{NameNative, NameInfinityRoPE, NameDensityKV, NameFIFO} {
		b.Run(name, func(b *testing.B) {
			blocks := 4
			if name == NameDensityKV {
				blocks = 5
			}
			p, x := benchPolicy(b, name, blocks)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.Begin(Call{Block: blocks, Step: i + 1}); err != nil {
					b.Fatal(err)
				}
				c, err := p.Attend(0, x, x, x)
				if err != nil {
					b.Fatal(err)
				}
				if c.Parts.Total() > 18720 || c.Parts.Total() < 18720-c.Parts.Memory {
					b.Fatalf("%d keys", c.Parts.Total())
				}
				if err := p.End(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAttendPlanPaperScale measures AttendPlan on one layer of a full
// paper-scale context: "history" assembles the history (sink, memory,
// window: what a device backbone is sent once per block and layer),
// "reuse" plans a call whose history the caller holds (every other call);
// "densitykv-device-banks" has its banks' rows on the device
// (memory.SegDevice), out of the history.
func BenchmarkAttendPlanPaperScale(b *testing.B) {
	for _, name := range []string{NameNative, NameDensityKV, "densitykv-device-banks"} {
		for _, reuse := range []bool{false, true} {
			mode := "history"
			if reuse {
				mode = "reuse"
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				blocks, policy, opt := 4, name, Options{}
				if name != NameNative {
					blocks, policy = 5, NameDensityKV
				}
				if name == "densitykv-device-banks" {
					opt.NewBank = newDeviceLikeBank
				}
				p, _ := benchPolicyWith(b, policy, blocks, opt)
				pl := p.(Planner)
				var have HistoryKey
				if reuse { // the history of this block, held
					if err := p.Begin(Call{Block: blocks, Step: 1}); err != nil {
						b.Fatal(err)
					}
					plan, err := pl.AttendPlan(0, nil, 0)
					if err != nil {
						b.Fatal(err)
					}
					have = plan.Key
					if err := p.End(); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := p.Begin(Call{Block: blocks, Step: i + 2}); err != nil {
						b.Fatal(err)
					}
					plan, err := pl.AttendPlan(0, nil, have)
					if err != nil {
						b.Fatal(err)
					}
					if reuse != (plan.K == nil) {
						b.Fatalf("reuse %v, history sent %v", reuse, plan.K != nil)
					}
					dev := 0
					if opt.NewBank != nil {
						dev = plan.Parts.Memory
					}
					if plan.Parts.Total() > 18720 || plan.HistoryRows() != plan.Parts.Total()-4680-dev {
						b.Fatalf("%d keys, %d history rows", plan.Parts.Total(), plan.HistoryRows())
					}
					if err := p.End(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
