package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// bankCase is one configuration of TestBankExact.
type bankCase struct {
	name       string
	d, dd      int // key and descriptor dimension (dd 0: the key)
	m, n, fill int // capacity, block size, first block size
	mod        func(*bank.Config)
}

// bankBlocks returns the test's blocks: a first block filling the bank,
// steady blocks near scene 0 (evictions by capacity), a burst of near
// duplicates of a few points (mandatory evictions, a prefix cut short), a
// scene change and a steady block of the new scene.
func bankBlocks(c bankCase, heads int) []bank.Block {
	rng := rand.New(rand.NewPCG(uint64(c.m), uint64(c.n)))
	dd := c.dd
	centre := func(scene int) []float32 {
		r := rand.New(rand.NewPCG(uint64(scene), 9))
		x := make([]float32, c.d)
		for i := range x {
			x[i] = float32(3 * r.NormFloat64())
		}
		return x
	}
	block := func(n int, ctr []float32, spread float64, points int) bank.Block {
		var blk bank.Block
		var base [][]float32
		for range points {
			p := make([]float32, c.d)
			for i := range p {
				p[i] = ctr[i] + float32(spread*rng.NormFloat64())
			}
			base = append(base, p)
		}
		for h := 0; h < heads; h++ {
			for j := 0; j < n; j++ {
				for i := 0; i < c.d; i++ {
					v := ctr[i] + float32(spread*rng.NormFloat64())
					if points > 0 {
						v = base[j%points][i] + float32(0.05*rng.NormFloat64())
					}
					blk.Keys = append(blk.Keys, v)
					blk.Values = append(blk.Values, float32(rng.NormFloat64()))
				}
				for range dd {
					blk.Desc = append(blk.Desc, float32(2*rng.NormFloat64()))
				}
			}
		}
		return blk
	}
	c0, c1 := centre(0), centre(1)
	return []bank.Block{
		block(c.fill, c0, 1, 0),
		block(c.n, c0, 1, 0),
		block(c.n, c0, 1, 0),
		block(c.n, c0, 0.5, 3),
		block(c.n, c1, 1, 0),
		block(c.n, c1, 1, 0),
	}
}

// TestBankExact: a bank on the device (NewBank) makes the CPU bank's
// decisions (every field but the timings), keeps the same states (the
// snapshot's bytes) after every update, and continues from a snapshot
// read back into it as the CPU does; over the paper's configuration and
// other orderings, evictions, prefixes, baselines, payloads, descriptors
// and exponents.
func TestBankExact(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	cases := []bankCase{
		{"paper", 32, 0, 96, 64, 120, func(*bank.Config) {}},
		{"max-densest-f32", 16, 0, 64, 48, 40, func(c *bank.Config) {
			c.Ordering, c.Eviction, c.Payload = bank.OrderMax, bank.EvictDensest, bank.PayloadF32
		}},
		{"source-mandsource-perhead-refresh", 32, 0, 80, 56, 80, func(c *bank.Config) {
			c.Ordering, c.Eviction, c.Prefix, c.Baselines = bank.OrderSource, bank.EvictMandatorySource, bank.PrefixPerHead, bank.BaselinesRefresh
		}},
		{"desc-p1-f64", 24, 16, 100, 60, 70, func(c *bank.Config) {
			c.P, c.Density, c.Payload = 1, bank.F64, bank.PayloadF32
		}},
		{"p4-d64-checkpoint", 64, 0, 200, 128, 128, func(c *bank.Config) { c.P, c.Sigma = 4, 16 }},
		{"past-checkpoint-f32", 16, 0, 240, 170, 240, func(c *bank.Config) { c.Payload, c.Tau = bank.PayloadF32, 2.2 }},
	}
	// cut: r* < min(N, M); between: also past the first checkpoint of the
	// prefix sums, between two (the device scans again).
	var cut, between, evicted, mandatory int
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := bank.DefaultConfig()
			cfg.Heads, cfg.KeyDim, cfg.ValueDim, cfg.DescDim, cfg.Capacity = 2, c.d, c.d, c.dd, c.m
			cfg.Sigma = math.Sqrt(float64(c.d)) / 2
			c.mod(&cfg)
			cpu, err := bank.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			gb, err := NewBank(dev, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer gb.Passes().(*BankPasses).Free()
			blocks := bankBlocks(c, cfg.Heads)
			for u, blk := range blocks {
				if u == 3 {
					// Both continue from a snapshot read back.
					var snap bytes.Buffer
					if _, err := cpu.WriteTo(&snap); err != nil {
						t.Fatal(err)
					}
					if _, err := gb.ReadFrom(bytes.NewReader(snap.Bytes())); err != nil {
						t.Fatalf("update %d: ReadFrom: %v", u, err)
					}
				}
				want, err := cpu.Update(blk)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gb.Update(blk)
				if err != nil {
					t.Fatalf("update %d: %v", u, err)
				}
				want.Timings, got.Timings = bank.Timings{}, bank.Timings{}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("update %d: device decision\n%+v\nCPU\n%+v", u, got, want)
				}
				var a, b bytes.Buffer
				if _, err := cpu.WriteTo(&a); err != nil {
					t.Fatal(err)
				}
				if _, err := gb.WriteTo(&b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatalf("update %d: snapshots differ (%d and %d bytes)", u, a.Len(), b.Len())
				}
				checkKV(t, u, gb)
				checkRows(t, u, gb, be)
				R := min(want.Candidates, cfg.Capacity)
				if !want.Empty && want.Accepted < R {
					cut++
					if want.Accepted > riesz.TileRows && want.Accepted%riesz.TileRows != 0 {
						between++
					}
				}
				for _, hd := range want.Heads {
					evicted += len(hd.Evicted)
					mandatory += hd.Mandatory
				}
				t.Logf("update %d: N %d r* %d len %d evicted %d mandatory %d", u, want.Candidates, want.Accepted, gb.Len(), len(want.Heads[0].Evicted), want.Heads[0].Mandatory)
			}
		})
	}
	// The sequence must exercise what it claims to.
	if cut == 0 || between == 0 || evicted == 0 || mandatory == 0 {
		t.Errorf("the blocks cut the prefix short %d times (%d past a checkpoint), evicted %d states, %d of them mandatory: want all > 0",
			cut, between, evicted, mandatory)
	}
}

// TestNewBankRefuses: a variant without a device path is refused at
// construction, naming it.
func TestNewBankRefuses(t *testing.T) {
	dev := vulkantest.Open(t)
	for _, c := range []struct {
		mod  func(*bank.Config)
		want string
	}{
		{func(c *bank.Config) { c.P = 1.5 }, "exponent P = 1.5"},
		{func(c *bank.Config) { c.Admission = bank.AdmitSequential }, "AdmitSequential"},
		{func(c *bank.Config) { c.DescDim = RieszMaxD + 1 }, "descriptor dimension 257"},
		{func(c *bank.Config) { c.Capacity = 0 }, "bank: config"},
	} {
		cfg := bank.DefaultConfig()
		cfg.Heads, cfg.Capacity = 1, 16
		c.mod(&cfg)
		b, err := NewBank(dev, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBank(%+v) = %v, %v; want an error naming %q", cfg, b, err, c.want)
		}
	}
}

// checkRows compares the rows BankPasses.WriteRows copies into a context
// on the device (after 3 rows of others, two rows past the longest head)
// with bank.Interleaved's, bit for bit; the rows before stay.
func checkRows(t *testing.T, u int, b *bank.Bank, be *Backend) {
	t.Helper()
	cfg := b.Config()
	H, row0, rows := cfg.Heads, 3, b.Len()+2
	wantK, wantV := make([]float32, (row0+rows)*H*cfg.KeyDim), make([]float32, (row0+rows)*H*cfg.ValueDim)
	for i := range row0 * H * cfg.KeyDim {
		wantK[i], wantV[i] = float32(i)+0.5, -float32(i)
	}
	k, v := be.New(len(wantK)), be.New(len(wantV))
	defer be.Free(k)
	defer be.Free(v)
	be.Upload(k, wantK)
	be.Upload(v, wantV)
	b.Interleaved(wantK[row0*H*cfg.KeyDim:], wantV[row0*H*cfg.ValueDim:], 0, rows)
	if err := b.Passes().(*BankPasses).WriteRows(be, k, v, row0, rows); err != nil {
		t.Fatalf("update %d: WriteRows: %v", u, err)
	}
	for _, c := range []struct {
		name string
		t    compute.Tensor
		want []float32
	}{{"keys", k, wantK}, {"values", v, wantV}} {
		got := make([]float32, len(c.want))
		if err := be.Download(got, c.t); err != nil {
			t.Fatal(err)
		}
		for i, w := range c.want {
			if math.Float32bits(got[i]) != math.Float32bits(w) {
				t.Fatalf("update %d: context %s[%d] (row %d) = %v on the device, %v by Interleaved", u, c.name, i, i/(len(c.want)/(row0+rows)), got[i], w)
			}
		}
	}
}

// checkKV compares the device's keys and values of every head with the
// bank's (bit for bit).
func checkKV(t *testing.T, u int, b *bank.Bank) {
	t.Helper()
	p := b.Passes().(*BankPasses)
	for h := 0; h < b.Config().Heads; h++ {
		kb, vb, n := p.KV(h)
		if n != b.HeadLen(h) {
			t.Fatalf("update %d head %d: %d states on the device, %d in the bank", u, h, n, b.HeadLen(h))
		}
		for _, c := range []struct {
			name string
			buf  *vulkan.Buffer
			want []float32
		}{{"keys", kb, b.Keys(h)}, {"values", vb, b.Values(h)}} {
			got := make([]float32, len(c.want))
			if err := p.dev.DownloadFloat32s(c.buf, 0, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range c.want {
				if math.Float32bits(got[i]) != math.Float32bits(v) {
					t.Fatalf("update %d head %d: device %s[%d] = %v, bank %v", u, h, c.name, i, got[i], v)
				}
			}
		}
	}
}
