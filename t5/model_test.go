package t5

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// contains reports whether err's message holds every part.
func contains(err error, parts ...string) bool {
	if err == nil {
		return false
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}

// testModel is NewRandom with weights that make the attention far from
// uniform and the norms non-trivial (Wan's initialisation gives logits
// near 0): q and k N(0, 0.3²), tables N(0, 1.5²), norms U[0.5, 1.5).
func testModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	m, err := NewRandom(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range m.Blocks {
		b := &m.Blocks[i]
		for _, w := range [][]uint16{b.Attn.Q.W, b.Attn.K.W} {
			for j := range w {
				w[j] = roundBF16(float32(r.NormFloat64() * 0.3))
			}
		}
		for j := range b.PosEmbedding {
			b.PosEmbedding[j] = float32(r.NormFloat64() * 1.5)
		}
		for _, w := range [][]float32{b.Norm1, b.Norm2} {
			for j := range w {
				w[j] = float32(0.5 + r.Float64())
			}
		}
	}
	return m
}

// refForward is a slow, literal float64 port of Wan's T5Encoder.forward
// (the oracle): every position, masked keys at −MaxFloat64, the tanh GELU
// with math.Tanh. It returns [n][Dim].
func refForward(m *Model, ids []int32, keep []bool) []float64 {
	c := m.Config
	n, d, da, df, H, hd := len(ids), c.Dim, c.DimAttn, c.DimFFN, c.Heads, c.HeadDim()
	x := make([]float64, n*d)
	for i, id := range ids {
		for j := 0; j < d; j++ {
			x[i*d+j] = float64(widen(m.TokenEmbedding[int(id)*d+j]))
		}
	}
	norm := func(x []float64, w []float32) []float64 {
		y := make([]float64, len(x))
		for i := 0; i < n; i++ {
			var s float64
			for j := 0; j < d; j++ {
				s += x[i*d+j] * x[i*d+j]
			}
			r := 1 / math.Sqrt(s/float64(d)+c.Eps)
			for j := 0; j < d; j++ {
				y[i*d+j] = x[i*d+j] * r * float64(w[j])
			}
		}
		return y
	}
	lin := func(x []float64, l *nn.Linear[uint16]) []float64 {
		y := make([]float64, n*l.Out)
		for i := 0; i < n; i++ {
			for o := 0; o < l.Out; o++ {
				var s float64
				for k := 0; k < l.In; k++ {
					s += x[i*l.In+k] * float64(widen(l.W[o*l.In+k]))
				}
				y[i*l.Out+o] = s
			}
		}
		return y
	}
	for _, b := range m.Blocks {
		h := norm(x, b.Norm1)
		q, k, v := lin(h, &b.Attn.Q), lin(h, &b.Attn.K), lin(h, &b.Attn.V)
		att := make([]float64, n*da)
		for hh := 0; hh < H; hh++ {
			for i := 0; i < n; i++ {
				z := make([]float64, n)
				mx := -math.MaxFloat64
				for j := 0; j < n; j++ {
					var s float64
					for e := 0; e < hd; e++ {
						s += q[i*da+hh*hd+e] * k[j*da+hh*hd+e]
					}
					s += float64(b.PosEmbedding[c.RelativeBucket(j-i)*H+hh])
					if !keep[j] {
						s = -math.MaxFloat64
					}
					z[j] = s
					mx = max(mx, s)
				}
				var sum float64
				for j := range z {
					z[j] = math.Exp(z[j] - mx)
					sum += z[j]
				}
				for e := 0; e < hd; e++ {
					var s float64
					for j := 0; j < n; j++ {
						s += z[j] / sum * v[j*da+hh*hd+e]
					}
					att[i*da+hh*hd+e] = s
				}
			}
		}
		o := lin(att, &b.Attn.O)
		for i := range x {
			x[i] += o[i]
		}
		h = norm(x, b.Norm2)
		g, f := lin(h, &b.FFN.Gate), lin(h, &b.FFN.FC1)
		for i := range g {
			u := g[i]
			f[i] *= 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
		}
		_ = df
		y := lin(f, &b.FFN.FC2)
		for i := range x {
			x[i] += y[i]
		}
	}
	return norm(x, m.Norm)
}

// oddConfigs exercise sizes the golden model does not: heads and head
// dims that are not powers of two, widths across gemm's 32- and 128-column
// blocks, other bucket counts.
var oddConfigs = []Config{
	{Vocab: 50, Dim: 24, DimAttn: 15, DimFFN: 37, Heads: 3, Layers: 2, Buckets: 8, MaxDist: 20, Eps: 1e-6},
	{Vocab: 300, Dim: 40, DimAttn: 64, DimFFN: 130, Heads: 8, Layers: 1, Buckets: 32, MaxDist: 128, Eps: 1e-6},
	{Vocab: 7, Dim: 33, DimAttn: 33, DimFFN: 33, Heads: 1, Layers: 3, Buckets: 5, MaxDist: 4, Eps: 1e-3},
}

// TestForwardMatchesOracle compares Forward and Encode with the float64
// port on odd configurations, lengths and masks.
func TestForwardMatchesOracle(t *testing.T) {
	for ci, cfg := range oddConfigs {
		m := testModel(t, cfg, uint64(ci+1))
		r := rand.New(rand.NewPCG(uint64(ci), 5))
		for _, n := range []int{1, 2, 7, 33, 140} {
			t.Run(fmt.Sprintf("config%d/n%d", ci, n), func(t *testing.T) {
				ids := make([]int32, n)
				for i := range ids {
					ids[i] = int32(r.IntN(cfg.Vocab))
				}
				seqLen := 1 + r.IntN(n)
				mask := make([]int32, n)
				keep := make([]bool, n)
				for i := 0; i < seqLen; i++ {
					mask[i], keep[i] = 1, true
				}
				want := refForward(m, ids, keep)
				got, err := m.Forward(ids, mask, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := compare(got, want); err != nil {
					t.Fatalf("Forward: %v", err)
				}
				enc, err := m.Encode(ids, mask)
				if err != nil {
					t.Fatal(err)
				}
				if i := firstDiff(enc, got[:seqLen*cfg.Dim]); i >= 0 {
					t.Fatalf("Encode differs from Forward's first %d rows at %d", seqLen, i)
				}
				// A mask with a hole: Encode runs every position and
				// returns the first seqLen rows, as Wan does.
				if n > 2 {
					mask[0], keep[0] = 0, false
					mask[n-1], keep[n-1] = 1, true
					want := refForward(m, ids, keep)
					got, err := m.Encode(ids, mask)
					if err != nil {
						t.Fatal(err)
					}
					ones := 0
					for _, v := range mask {
						ones += int(v)
					}
					if _, _, err := compare(got, want[:ones*cfg.Dim]); err != nil {
						t.Fatalf("Encode with a non-prefix mask: %v", err)
					}
				}
			})
		}
	}
}

// TestThreadsBitIdentical: the output does not depend on gemm.Threads().
func TestThreadsBitIdentical(t *testing.T) {
	cfg := oddConfigs[1]
	m := testModel(t, cfg, 3)
	ids := make([]int32, 77)
	for i := range ids {
		ids[i] = int32(i * 13 % cfg.Vocab)
	}
	prev := gemm.SetThreads(1)
	defer gemm.SetThreads(prev)
	want, err := m.Forward(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []int{2, 3, 5, 8} {
		gemm.SetThreads(th)
		got, err := m.Forward(ids, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%d threads: differs at %d", th, i)
		}
	}
}

// TestBadInput: every malformed call is an ErrInput error naming the
// problem, and leaves the model as it was.
func TestBadInput(t *testing.T) {
	cfg := oddConfigs[0]
	m := testModel(t, cfg, 7)
	ids := []int32{3, 4, 1, 0}
	mask := []int32{1, 1, 1, 0}
	want, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	long := make([]int32, MaxTokens+1)
	for _, c := range []struct {
		name      string
		ids, mask []int32
		want      string
	}{
		{"empty", nil, nil, "empty input"},
		{"empty with mask", []int32{}, []int32{}, "empty input"},
		{"id too large", []int32{3, int32(cfg.Vocab), 1}, []int32{1, 1, 1}, "token id 50 at position 1"},
		{"negative id", []int32{-1, 1}, []int32{1, 1}, "token id -1 at position 0"},
		{"short mask", ids, mask[:3], "mask has 3 values for 4 ids"},
		{"mask value 2", ids, []int32{1, 2, 1, 0}, "mask value 2 at position 1"},
		{"negative mask", ids, []int32{1, 1, -1, 0}, "mask value -1 at position 2"},
		{"no mask", ids, nil, "no mask"},
		{"all masked", ids, []int32{0, 0, 0, 0}, "no 1"},
		{"too long", long, long, "4097 tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Encode(c.ids, c.mask)
			if !errors.Is(err, ErrInput) || !contains(err, "t5: ", c.want) {
				t.Fatalf("Encode: %v, want ErrInput mentioning %q", err, c.want)
			}
			if c.name != "no mask" && c.name != "all masked" {
				if _, err := m.Forward(c.ids, c.mask, nil); !errors.Is(err, ErrInput) || !contains(err, c.want) {
					t.Fatalf("Forward: %v, want ErrInput mentioning %q", err, c.want)
				}
			}
		})
	}
	got, err := m.Encode(ids, mask)
	if err != nil || firstDiff(got, want) >= 0 {
		t.Fatalf("after the errors: %v, output changed: %v", err, firstDiff(got, want))
	}
	// Forward accepts an all-zero mask: Wan then attends uniformly.
	all0, err := m.Forward(ids, []int32{0, 0, 0, 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := compare(all0, refForward(m, ids, make([]bool, 4))); err != nil {
		t.Fatalf("all-masked Forward: %v", err)
	}
}

// TestConfigValidate: each bad field is named.
func TestConfigValidate(t *testing.T) {
	if err := UMT5XXL().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Vocab = 0 }, "vocab = 0"},
		{func(c *Config) { c.Dim = -1 }, "dim = -1"},
		{func(c *Config) { c.DimFFN = 1 << 20 }, "dim_ffn"},
		{func(c *Config) { c.Heads = 3 }, "not a multiple of heads 3"},
		{func(c *Config) { c.Layers = 0 }, "layers = 0"},
		{func(c *Config) { c.Buckets = 3 }, "buckets = 3"},
		{func(c *Config) { c.MaxDist = 8 }, "max_dist 8"},
		{func(c *Config) { c.Eps = math.NaN() }, "eps"},
		{func(c *Config) { c.Eps = -1 }, "eps"},
	} {
		cfg := UMT5XXL()
		c.mod(&cfg)
		if err := cfg.Validate(); !contains(err, "t5: config: ", c.want) {
			t.Errorf("%+v: %v, want mention of %q", cfg, err, c.want)
		}
		if _, err := NewRandom(cfg, 1); err == nil {
			t.Errorf("NewRandom accepted %+v", cfg)
		}
	}
	c := UMT5XXL()
	if p := c.Params(); p < 5_600_000_000 || p > 5_800_000_000 {
		t.Errorf("umT5-XXL encoder: %d parameters, want about 5.7 B", p)
	}
	if b := 2 * (c.Params() - int64(c.Layers*(2*c.Dim+c.Buckets*c.Heads)+c.Dim)); b < 11_300_000_000 || b > 11_400_000_000 {
		t.Errorf("umT5-XXL bf16 matrices: %d bytes, want about 11.4 GB", b)
	}
}

// TestNewRandom: the weights depend only on the configuration and the
// seed (not on gemm.Threads()), follow the documented deviations, and
// WeightBytes counts them.
func TestNewRandom(t *testing.T) {
	cfg := Config{Vocab: 3000, Dim: 64, DimAttn: 64, DimFFN: 200, Heads: 4, Layers: 2, Buckets: 32, MaxDist: 128, Eps: 1e-6}
	prev := gemm.SetThreads(1)
	a, err := NewRandom(cfg, 5)
	gemm.SetThreads(3)
	b, _ := NewRandom(cfg, 5)
	gemm.SetThreads(prev)
	c, _ := NewRandom(cfg, 6)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range a.params() {
		q, r := b.params()[i], c.params()[i]
		if p.bf != nil {
			if fmt.Sprint(*p.bf) != fmt.Sprint(*q.bf) || fmt.Sprint(*p.bf) == fmt.Sprint(*r.bf) {
				t.Fatalf("%s: not a function of the seed", p.name)
			}
			var s float64
			for _, h := range *p.bf {
				s += float64(widen(h)) * float64(widen(h))
			}
			if std := math.Sqrt(s / float64(len(*p.bf))); math.Abs(std/p.std-1) > 0.05 {
				t.Errorf("%s: std %.4g, want %.4g", p.name, std, p.std)
			}
		} else if p.std == 0 {
			for _, v := range *p.f32 {
				if v != 1 {
					t.Fatalf("%s: %v, want ones", p.name, v)
				}
			}
		}
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	wantBytes := 2*int64(cfg.Vocab*cfg.Dim+cfg.Layers*(4*64*64+3*64*200)) + 4*int64(cfg.Layers*(2*64+32*4)+64)
	if a.WeightBytes() != wantBytes {
		t.Fatalf("WeightBytes %d, want %d", a.WeightBytes(), wantBytes)
	}
	a.Blocks[1].FFN.FC1.W[3] = 0x7fc0
	if err := a.Check(); !contains(err, "blocks.1.ffn.fc1.weight", "NaN", "[0 3]") {
		t.Fatalf("Check of a NaN weight: %v", err)
	}
	a.Blocks[0].Norm2 = a.Blocks[0].Norm2[:10]
	if err := a.Check(); !contains(err, "blocks.0.norm2.weight", "10 values") {
		t.Fatalf("Check of a short norm: %v", err)
	}
}

// TestWorkspace: buffers are reported, kept across calls and released.
func TestWorkspace(t *testing.T) {
	m := testModel(t, oddConfigs[1], 2)
	if m.WorkspaceBytes() != 0 {
		t.Fatal("workspace before any call")
	}
	ids := make([]int32, 100)
	if _, err := m.Forward(ids, nil, nil); err != nil {
		t.Fatal(err)
	}
	w := m.WorkspaceBytes()
	// Activations alone: 3·n·Dim + 4·n·DimAttn + 2·n·DimFFN floats.
	if act := int64(4 * 100 * (3*40 + 4*64 + 2*130)); w < act {
		t.Fatalf("WorkspaceBytes %d, below the activations' %d", w, act)
	}
	if _, err := m.Forward(ids[:50], nil, nil); err != nil || m.WorkspaceBytes() != w {
		t.Fatalf("a shorter call reallocated: %d → %d (%v)", w, m.WorkspaceBytes(), err)
	}
	m.ReleaseWorkspace()
	if m.WorkspaceBytes() != 0 {
		t.Fatal("ReleaseWorkspace kept buffers")
	}
}

// TestRelativeBucketProperties: exact distances below maxExact, the
// positive side offset by Buckets/2, monotone in |r|, capped, for several
// configurations.
func TestRelativeBucketProperties(t *testing.T) {
	for _, c := range append(oddConfigs, UMT5XXL()) {
		nb := c.Buckets / 2
		prev := -1
		for n := 0; n < 2000; n++ {
			neg := c.RelativeBucket(-n)
			if neg < 0 || neg >= nb || neg < prev {
				t.Fatalf("%+v: bucket(−%d) = %d (previous %d)", c, n, neg, prev)
			}
			if n < nb/2 && neg != n {
				t.Fatalf("%+v: bucket(−%d) = %d, want exact", c, n, neg)
			}
			if n >= c.MaxDist && neg != nb-1 {
				t.Fatalf("%+v: bucket(−%d) = %d beyond max_dist, want %d", c, n, neg, nb-1)
			}
			if n > 0 {
				if pos := c.RelativeBucket(n); pos != nb+neg {
					t.Fatalf("%+v: bucket(%d) = %d, want %d", c, n, pos, nb+neg)
				}
			}
			prev = neg
		}
	}
	m := testModel(t, oddConfigs[0], 1)
	if _, err := m.PositionBias(2, 4); !contains(err, "layer 2") {
		t.Fatalf("PositionBias of a missing layer: %v", err)
	}
	if _, err := m.PositionBias(0, 0); !contains(err, "0 tokens") {
		t.Fatalf("PositionBias of 0 tokens: %v", err)
	}
}
