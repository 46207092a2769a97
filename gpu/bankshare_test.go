package gpu

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestBankSharedScratch: the banks of one device (a model's layers, updated
// one after the other) share one update scratch, which BankBytes bounds,
// and each makes the CPU bank's decisions and states; two banks updating
// at once are refused, not mixed up; the scratch goes with the last bank.
func TestBankSharedScratch(t *testing.T) {
	dev := vulkantest.Open(t)
	c := bankCase{name: "layers", d: 32, m: 96, n: 64, fill: 120}
	cfg := bank.DefaultConfig()
	cfg.Heads, cfg.KeyDim, cfg.ValueDim, cfg.Capacity = 2, c.d, c.d, c.m
	cfg.Sigma = math.Sqrt(float64(c.d)) / 2
	const layers = 3
	var cpu, dv [layers]*bank.Bank
	var blocks [layers][]bank.Block
	for l := range layers {
		var err error
		if cpu[l], err = bank.New(cfg); err != nil {
			t.Fatal(err)
		}
		if dv[l], err = NewBank(dev, cfg); err != nil {
			t.Fatal(err)
		}
		lc := c
		lc.n += l // each layer its own blocks
		blocks[l] = bankBlocks(lc, cfg.Heads)
	}
	if n, _ := scratchBanks(dev); n != layers {
		t.Fatalf("%d banks share the device's scratch, want %d", n, layers)
	}
	_, bound := BankBytes(cfg, c.fill)
	var held int64
	for u := range blocks[0] {
		for l := range layers {
			want, err := cpu[l].Update(blocks[l][u])
			if err != nil {
				t.Fatal(err)
			}
			got, err := dv[l].Update(blocks[l][u])
			if err != nil {
				t.Fatalf("update %d layer %d: %v", u, l, err)
			}
			want.Timings, got.Timings = bank.Timings{}, bank.Timings{}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("update %d layer %d: device decision\n%+v\nCPU\n%+v", u, l, got, want)
			}
			var a, b bytes.Buffer
			if _, err := cpu[l].WriteTo(&a); err != nil {
				t.Fatal(err)
			}
			if _, err := dv[l].WriteTo(&b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("update %d layer %d: snapshots differ", u, l)
			}
			checkKV(t, u, dv[l])
			_, now := scratchBanks(dev)
			if now > bound {
				t.Fatalf("update %d layer %d: the shared scratch holds %d bytes, BankBytes bounds it by %d", u, l, now, bound)
			}
			held = max(held, now)
		}
	}
	// Three banks, one scratch: no more than one bank's update needs.
	if held == 0 {
		t.Fatal("the shared scratch holds nothing")
	}
	t.Logf("shared scratch %d bytes (BankBytes: %d)", held, bound)

	// Two banks interleaving their passes: the second's candidates
	// overwrite the first's, whose scoring fails, naming why.
	pa, pb := dv[0].Passes().(*BankPasses), dv[1].Passes().(*BankPasses)
	one := riesz.Set{X: make([]float32, c.d), Norms: []float32{0}, N: 1, D: c.d}
	pa.Candidates(0, one)
	pb.Candidates(0, one)
	pa.Score(0, one, riesz.Set{D: c.d}, nil, make([]float64, 1), nil, nil, nil, nil)
	if err := pa.Err(); err == nil || !strings.Contains(err.Error(), "another bank") {
		t.Errorf("interleaved passes: Err() = %v, want an error naming another bank's update", err)
	}
	if err := pb.Err(); err != nil {
		t.Errorf("the bank that wrote last: Err() = %v", err)
	}
	for l := range layers {
		dv[l].Passes().(*BankPasses).Free()
		if n, _ := scratchBanks(dev); n != layers-1-l {
			t.Fatalf("after freeing %d banks, %d share the scratch", l+1, n)
		}
	}
	if _, err := dv[1].Update(blocks[1][0]); err == nil {
		t.Error("a freed bank updated")
	}
}
