package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func randVec(rng *rand.Rand, n int, amp float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * amp)
	}
	return s
}

// naive computes attention and segment mass in float64. errScale[t*H+h] is
// the error a float32 computation is entitled to, relative to 1: max|v|
// times (1 + the logit magnitude scale·max_s Σ_i |q_i k_i|, since float32
// rounding of the logits perturbs the probabilities by about eps times it).
func naive(q, k, v []float32, T, S, H, D int, scale float32, qb, kb []int) (out []float64, errScale []float64, mass []float64) {
	out = make([]float64, T*H*D)
	errScale = make([]float64, T*H)
	if qb != nil {
		mass = make([]float64, (len(qb)-1)*(len(kb)-1))
	}
	sc := make([]float64, S)
	for h := 0; h < H; h++ {
		for t := 0; t < T; t++ {
			mx := math.Inf(-1)
			cond := 0.0
			for s := 0; s < S; s++ {
				var d, a float64
				for i := 0; i < D; i++ {
					x := float64(q[(t*H+h)*D+i]) * float64(k[(s*H+h)*D+i])
					d += x
					a += math.Abs(x)
				}
				sc[s] = d * float64(scale)
				mx = max(mx, sc[s])
				cond = max(cond, a*math.Abs(float64(scale)))
			}
			var l float64
			for s := range sc {
				sc[s] = math.Exp(sc[s] - mx)
				l += sc[s]
			}
			for s := 0; s < S; s++ {
				p := sc[s] / l
				for i := 0; i < D; i++ {
					x := p * float64(v[(s*H+h)*D+i])
					out[(t*H+h)*D+i] += x
					errScale[t*H+h] = max(errScale[t*H+h], math.Abs(float64(v[(s*H+h)*D+i]))*(1+cond/8))
				}
				if qb != nil {
					qi, ki := 0, 0
					for qb[qi+1] <= t {
						qi++
					}
					for kb[ki+1] <= s {
						ki++
					}
					mass[qi*(len(kb)-1)+ki] += p
				}
			}
		}
	}
	return out, errScale, mass
}

type shape struct{ T, S, H, D int }

func TestAttentionAgainstFloat64(t *testing.T) {
	cases := []struct {
		shape
		amp float64 // std of q and k entries (large → large logits)
	}{
		{shape{1, 1, 1, 1}, 1},
		{shape{3, 5, 2, 16}, 1},
		{shape{36, 180, 2, 32}, 1},    // the golden tiny model
		{shape{65, 257, 3, 33}, 1},    // S, T one past a tile
		{shape{64, 256, 1, 128}, 0.3}, // exact tiles
		{shape{70, 600, 2, 128}, 3},   // large logits (|scale·q·k| ~ 100)
		{shape{17, 31, 4, 15}, 10},    // huge logits, nearly one-hot
		{shape{130, 40, 2, 64}, 1},    // S < tile, T > 2 tiles
	}
	for _, generic := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("generic=%v/%v", generic, c.shape), func(t *testing.T) {
				if generic {
					defer forceGeneric()()
				}
				rng := rand.New(rand.NewPCG(uint64(c.T*1000+c.S), uint64(c.D)))
				T, S, H, D := c.T, c.S, c.H, c.D
				q := randVec(rng, T*H*D, c.amp)
				k := randVec(rng, S*H*D, c.amp)
				v := randVec(rng, S*H*D, 1)
				scale := float32(1 / math.Sqrt(float64(D)))
				out := make([]float32, T*H*D+5)
				for i := T * H * D; i < len(out); i++ {
					out[i] = -9
				}
				qb := []int{0, T / 3, T}
				mid := max(1, S/2)
				kb := []int{0, 1, mid, mid, S}
				mass := make([]float64, 2*4)
				AttentionMass(out, q, k, v, T, S, H, D, scale, qb, kb, mass)
				want, es, wmass := naive(q, k, v, T, S, H, D, scale, qb, kb)
				worst := 0.0
				for i := 0; i < T*H*D; i++ {
					e := math.Abs(float64(out[i])-want[i]) / es[i/D]
					worst = max(worst, e)
					if e > 2e-6 {
						t.Fatalf("out[%d] = %v, want %v (error %.3g of max|v|)", i, out[i], want[i], e)
					}
				}
				for _, g := range out[T*H*D:] {
					if g != -9 {
						t.Fatal("guard after out overwritten")
					}
				}
				for i := range mass {
					if math.Abs(mass[i]-wmass[i]) > 1e-5*float64(H*T) {
						t.Fatalf("mass[%d] = %v, want %v", i, mass[i], wmass[i])
					}
				}
				for i := 0; i+1 < len(qb); i++ {
					var row float64
					for j := 0; j < 4; j++ {
						row += mass[i*4+j]
					}
					if n := float64(H * (qb[i+1] - qb[i])); math.Abs(row-n) > 1e-5*max(n, 1) {
						t.Fatalf("query segment %d mass %v, want %v", i, row, n)
					}
				}
				// Attention alone gives the same output bit for bit.
				out2 := make([]float32, T*H*D)
				Attention(out2, q, k, v, T, S, H, D, scale)
				for i := range out2 {
					if out2[i] != out[i] {
						t.Fatalf("Attention and AttentionMass differ at %d", i)
					}
				}
				t.Logf("worst error %.3g of max|v|", worst)
			})
		}
	}
}

func TestThreadCountDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	T, S, H, D := 200, 700, 3, 64
	q, k, v := randVec(rng, T*H*D, 1), randVec(rng, S*H*D, 1), randVec(rng, S*H*D, 1)
	qb, kb := []int{0, 100, T}, []int{0, 300, S}
	var ref []float32
	var refMass []float64
	defer gemm.SetThreads(gemm.SetThreads(1))
	for _, th := range []int{1, 2, 5} {
		gemm.SetThreads(th)
		out := make([]float32, T*H*D)
		mass := make([]float64, 4)
		AttentionMass(out, q, k, v, T, S, H, D, 0.125, qb, kb, mass)
		if ref == nil {
			ref, refMass = out, mass
			continue
		}
		for i := range out {
			if out[i] != ref[i] {
				t.Fatalf("threads=%d: out[%d] differs", th, i)
			}
		}
		for i := range mass {
			if mass[i] != refMass[i] {
				t.Fatalf("threads=%d: mass[%d] differs", th, i)
			}
		}
	}
}

func TestNaNPropagates(t *testing.T) {
	T, S, H, D := 3, 40, 1, 16
	rng := rand.New(rand.NewPCG(2, 2))
	q, k, v := randVec(rng, T*H*D, 1), randVec(rng, S*H*D, 1), randVec(rng, S*H*D, 1)
	q[D+3] = float32(math.NaN()) // query 1
	v[5*D] = float32(math.NaN()) // key 5 value: poisons every query's dim 0
	out := make([]float32, T*H*D)
	Attention(out, q, k, v, T, S, H, D, 0.25)
	for i := 0; i < D; i++ {
		if !math.IsNaN(float64(out[D+i])) {
			t.Fatalf("query 1 dim %d = %v, want NaN", i, out[D+i])
		}
	}
	if !math.IsNaN(float64(out[0])) || math.IsNaN(float64(out[1])) {
		t.Fatalf("query 0: dim0 %v (want NaN), dim1 %v (want finite)", out[0], out[1])
	}
}

func TestPanics(t *testing.T) {
	ok := make([]float32, 64)
	cases := []struct {
		name, want string
		f          func()
	}{
		{"negative", "negative size", func() { Attention(ok, ok, ok, ok, -1, 1, 1, 1, 1) }},
		{"short q", "q has 3 values, need 4", func() { Attention(ok, ok[:3], ok, ok, 2, 2, 1, 2, 1) }},
		{"no keys", "no keys", func() { Attention(ok, ok, ok, ok, 2, 0, 1, 2, 1) }},
		{"bounds", "segment boundaries", func() {
			AttentionMass(ok, ok, ok, ok, 2, 2, 1, 2, 1, []int{0, 1}, []int{0, 2}, make([]float64, 1))
		}},
		{"mass", "mass has 0 values, need 1", func() {
			AttentionMass(ok, ok, ok, ok, 2, 2, 1, 2, 1, []int{0, 2}, []int{0, 2}, nil)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

func FuzzAttention(f *testing.F) {
	f.Add(uint8(3), uint16(5), uint8(2), uint8(16), uint64(1), float32(1))
	f.Add(uint8(1), uint16(300), uint8(1), uint8(33), uint64(2), float32(8))
	f.Fuzz(func(t *testing.T, T8 uint8, S16 uint16, H8, D8 uint8, seed uint64, amp float32) {
		T, S, H, D := int(T8%80)+1, int(S16%600)+1, int(H8%3)+1, int(D8%70)+1
		if !(amp > 0 && amp < 20) {
			amp = 1
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		q, k, v := randVec(rng, T*H*D, float64(amp)), randVec(rng, S*H*D, float64(amp)), randVec(rng, S*H*D, 1)
		out := make([]float32, T*H*D)
		scale := float32(1 / math.Sqrt(float64(D)))
		Attention(out, q, k, v, T, S, H, D, scale)
		want, es, _ := naive(q, k, v, T, S, H, D, scale, nil, nil)
		for i := range out {
			if e := math.Abs(float64(out[i])-want[i]) / es[i/D]; e > 4e-6 {
				t.Fatalf("T=%d S=%d H=%d D=%d: out[%d] = %v, want %v", T, S, H, D, i, out[i], want[i])
			}
		}
	})
}

// With D = 0 every score is 0: the output is empty and the mass is the
// uniform distribution over the keys.
func TestZeroDim(t *testing.T) {
	T, S, H := 3, 10, 2
	mass := make([]float64, 2)
	AttentionMass(nil, nil, nil, nil, T, S, H, 0, 1, []int{0, T}, []int{0, 4, S}, mass)
	if math.Abs(mass[0]-float64(H*T)*0.4) > 1e-5 || math.Abs(mass[1]-float64(H*T)*0.6) > 1e-5 {
		t.Fatalf("mass %v, want %v %v", mass, float64(H*T)*0.4, float64(H*T)*0.6)
	}
}
