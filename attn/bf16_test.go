package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// bf16U is the unit roundoff of bfloat16 (8 significant bits, 7 stored): rounding to
// nearest changes a value by at most this fraction of it.
const bf16U = 0x1p-8

// TestBF16AgainstFloat64 bounds bfloat16 attention against float64 with
// a worst-case error bound derived from the rounding of the inputs: q and
// k rounded to bfloat16 change each logit z_s = scale·q·k_s by at most
// δ_s = (2u+u²)·scale·Σ_i|q_i k_i| (the float32 accumulation adds a
// negligible 2^-24 per term), which changes each probability by a factor
// within e^{±2δ} (numerator and normaliser); rounding the probability and
// the value adds a factor (1+u)² at most. So
//
//	|out − exact| ≤ max_s|v_s| · (e^{2δ}·(1+u)² − 1),  δ = max_s δ_s
//
// (the sum of the probabilities is 1), plus float32's own error. The test
// checks every output against that bound and logs the typical error.
func TestBF16AgainstFloat64(t *testing.T) {
	cases := []struct {
		shape
		amp float64
	}{
		{shape{1, 1, 1, 1}, 1},
		{shape{36, 180, 2, 32}, 1},
		{shape{65, 600, 3, 33}, 1}, // two key tiles, partial blocks of 32
		{shape{64, 256, 1, 128}, 0.3},
		{shape{70, 1100, 2, 128}, 3}, // large logits, three key tiles
		{shape{17, 31, 4, 15}, 10},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.shape), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.T*7+c.S), uint64(c.D)))
			T, S, H, D := c.T, c.S, c.H, c.D
			q, k, v := randVec(rng, T*H*D, c.amp), randVec(rng, S*H*D, c.amp), randVec(rng, S*H*D, 1)
			scale := float32(1 / math.Sqrt(float64(D)))
			out := make([]float32, T*H*D)
			AttentionAs(gemm.BF16, out, q, k, v, T, S, H, D, scale)
			want, _, _ := naive(q, k, v, T, S, H, D, scale, nil, nil)
			var sq, sqw float64
			for h := 0; h < H; h++ {
				for tt := 0; tt < T; tt++ {
					var cond, vmax float64
					for s := 0; s < S; s++ {
						var a float64
						for i := 0; i < D; i++ {
							a += math.Abs(float64(q[(tt*H+h)*D+i]) * float64(k[(s*H+h)*D+i]))
							vmax = max(vmax, math.Abs(float64(v[(s*H+h)*D+i])))
						}
						cond = max(cond, a*float64(scale))
					}
					delta := (2*bf16U + bf16U*bf16U) * cond
					bound := vmax*(math.Exp(2*delta)*(1+bf16U)*(1+bf16U)-1) + vmax*(1+cond)*4e-6
					for i := 0; i < D; i++ {
						j := (tt*H+h)*D + i
						d := math.Abs(float64(out[j]) - want[j])
						sq += d * d
						sqw += want[j] * want[j]
						if !(d <= bound) {
							t.Fatalf("out[t=%d h=%d d=%d] = %v, want %v: error %.3g > bound %.3g", tt, h, i, out[j], want[j], d, bound)
						}
					}
				}
			}
			t.Logf("relative L2 error %.3g (u = %.3g)", math.Sqrt(sq/max(sqw, 1e-300)), bf16U)
		})
	}
}

// TestBF16SingleTileDefinition spells the bfloat16 attention out for key
// sets of one tile, with gemm's bfloat16 product as the definition of the
// products: scores from q and k rounded to bfloat16, the float32 softmax
// of softmax.go (maximum, exponentials, sum of the unrounded
// probabilities), then Σ_s bf16(p_s)·bf16(v_s) by the bfloat16 product,
// times 1/l in float32. Every output must equal it bit for bit.
func TestBF16SingleTileDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	T, S, H, D := 40, 300, 2, 48
	q, k, v := randVec(rng, T*H*D, 2), randVec(rng, S*H*D, 2), randVec(rng, S*H*D, 1)
	scale := float32(0.2)
	out := make([]float32, T*H*D)
	AttentionAs(gemm.BF16, out, q, k, v, T, S, H, D, scale)
	sc := make([]float32, S)
	for h := 0; h < H; h++ {
		kh, vt := make([]float32, S*D), make([]float32, D*S)
		for s := 0; s < S; s++ {
			for i := 0; i < D; i++ {
				kh[s*D+i] = k[(s*H+h)*D+i]
				vt[i*S+s] = v[(s*H+h)*D+i]
			}
		}
		for tt := 0; tt < T; tt++ {
			gemm.NTAs(gemm.BF16, 1, S, D, q[(tt*H+h)*D:], D, kh, D, sc, S)
			m := float32(minMax)
			for _, x := range sc {
				if y := x * scale; y > m {
					m = y
				}
			}
			var l float32
			for s, x := range sc {
				sc[s] = expDef(float32(x*scale) - m)
				l += sc[s]
			}
			o := make([]float32, D)
			gemm.NTAs(gemm.BF16, D, 1, S, vt, S, sc, S, o, 1)
			inv := 1 / l
			for i := range o {
				if got, want := out[(tt*H+h)*D+i], o[i]*inv; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("t=%d h=%d d=%d: %v, definition %v", tt, h, i, got, want)
				}
			}
		}
	}
}

// TestBF16KernelsBitIdentical: bfloat16 attention gives the same bits on
// every gemm kernel (assembly, pure Go, the Go emulations of the AMX and
// AVX512_BF16 layouts) with the assembly and the pure-Go softmax, and for
// every thread count; float32 attention likewise on its kernels.
func TestBF16KernelsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	T, S, H, D := 70, 1100, 2, 40
	q, k, v := randVec(rng, T*H*D, 2), randVec(rng, S*H*D, 2), randVec(rng, S*H*D, 1)
	qb, kb := []int{0, 33, T}, []int{0, 500, S}
	ks, _ := gemm.KernelInfo()
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		ref := make([]float32, T*H*D)
		refMass := make([]float64, 4)
		AttentionMassAs(prec, ref, q, k, v, T, S, H, D, 0.3, qb, kb, refMass)
		for _, ki := range ks {
			if ki.Precision != prec || ki.Available != "" {
				continue
			}
			for _, generic := range []bool{false, true} {
				for _, th := range []int{1, 3} {
					name := fmt.Sprintf("%v:%s", prec, ki.Name)
					restore, err := gemm.Force(name)
					if err != nil {
						t.Fatal(err)
					}
					prev := gemm.SetThreads(th)
					var undo func()
					if generic {
						undo = forceGeneric()
					}
					out := make([]float32, T*H*D)
					mass := make([]float64, 4)
					AttentionMassAs(prec, out, q, k, v, T, S, H, D, 0.3, qb, kb, mass)
					if undo != nil {
						undo()
					}
					gemm.SetThreads(prev)
					restore()
					if i := diff32(out, ref); i >= 0 {
						t.Fatalf("%s generic=%v threads=%d: out[%d] = %v, want %v", name, generic, th, i, out[i], ref[i])
					}
					for i := range mass {
						if mass[i] != refMass[i] {
							t.Fatalf("%s generic=%v threads=%d: mass[%d] = %v, want %v", name, generic, th, i, mass[i], refMass[i])
						}
					}
				}
			}
		}
	}
}
