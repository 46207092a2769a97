package gpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// BenchmarkBankUpdate times one paper-scale update of a bank on the device
// (NewBank; the paper's configuration: 12 heads, d = 128, M = 9,360,
// N = 4,680) once the bank is full, and reports ms per update (wall time:
// the device passes, the transfers and the host's decisions);
// BenchmarkBankUpdateCPU is the same on the CPU. Never run by default (go test -tags vulkan -run '^$' -bench
// BankUpdate ./gpu); on lavapipe it takes hours.
func BenchmarkBankUpdate(b *testing.B) {
	dev := vulkantest.Open(b)
	cfg := bank.DefaultConfig()
	bk, err := NewBank(dev, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Passes().(*BankPasses).Free()
	benchBank(b, bk)
}

// BenchmarkBankUpdateCPU is BenchmarkBankUpdate on the CPU bank, for
// comparison.
func BenchmarkBankUpdateCPU(b *testing.B) {
	bk, err := bank.New(bank.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	benchBank(b, bk)
}

// benchBlock returns a block of n candidates per head: keys standard
// normal around a centre of the block's own (each block a new scene, so an
// update admits its whole block and evicts as many states), values
// standard normal.
func benchBlock(r *rand.Rand, cfg bank.Config, n int) bank.Block {
	blk := bank.Block{
		Keys:   benchFloats(r, cfg.Heads*n*cfg.KeyDim),
		Values: benchFloats(r, cfg.Heads*n*cfg.ValueDim),
	}
	for h := 0; h < cfg.Heads; h++ {
		c := benchFloats(r, cfg.KeyDim)
		for i := range n {
			for j, v := range c {
				blk.Keys[(h*n+i)*cfg.KeyDim+j] += 4 * v
			}
		}
	}
	return blk
}

// benchBank fills bk with two blocks, then times updates with fresh blocks.
func benchBank(b *testing.B, bk *bank.Bank) {
	cfg := bk.Config()
	n := cfg.Capacity / 2
	r := rand.New(rand.NewPCG(1, 2))
	for range 2 {
		if _, err := bk.Update(benchBlock(r, cfg, n)); err != nil {
			b.Fatal(err)
		}
	}
	blocks := []bank.Block{benchBlock(r, cfg, n), benchBlock(r, cfg, n), benchBlock(r, cfg, n)}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		d, err := bk.Update(blocks[i%3])
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		if i == 0 {
			b.Logf("r* %d, evicted %d per head; score %v scan %v evict %v commit %v", d.Accepted, len(d.Heads[0].Evicted),
				d.Timings.Score, d.Timings.Scan, d.Timings.Evict, d.Timings.Commit)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms/update")
}
