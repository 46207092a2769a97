package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/internal/asmtext"
)

// normInputs returns ch×P values: mostly normal ones at several scales,
// with zeros, denormals, values whose squares overflow, ±Inf and NaN
// sprinkled in, and gammas from 0 to ±1e30 so that the SiLU's exponential
// meets both of its clamps and its scaling by 2^n near both ends.
func normInputs(rng *rand.Rand, ch, P int) (src, gamma []float32) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 1e-20, 3e19, -2e19, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	src = make([]float32, ch*P)
	for i := range src {
		switch x := rng.IntN(1000); {
		case x < 3:
			src[i] = special[rng.IntN(len(special))]
		default:
			src[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	gs := []float32{0, 1e-30, 0.3, 1, 5, 30, 87.2, 87.4, 88.6, 88.8, 89, 100, 103.5, 104, 104.5, 1e30}
	gamma = make([]float32, ch)
	for c := range gamma {
		gamma[c] = gs[rng.IntN(len(gs))] * float32(1-2*rng.IntN(2))
		if rng.IntN(3) == 0 {
			gamma[c] *= float32(0.5 + rng.Float64())
		}
	}
	return src, gamma
}

// TestNormKernelBitIdentical: RMSNormChannels (the assembly kernel on whole blocks
// where the CPU has it) gives normBlockGo's bits for every value (any two
// NaNs count as equal), with and without the SiLU, in place or not, for
// channel counts and strides that leave partial blocks.
func TestNormKernelBitIdentical(t *testing.T) {
	if normBlockAsm == nil {
		t.Logf("no assembly norm in this build or on this CPU: both sides are normBlockGo")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, sh := range []struct{ ch, P int }{{1, 256}, {3, 300}, {16, 1024}, {96, 600}, {384, 520}} {
		src, gamma := normInputs(rng, sh.ch, sh.P)
		scale := float32(math.Sqrt(float64(sh.ch)))
		for _, act := range []bool{false, true} {
			want := make([]float32, len(src))
			normBlockGo(want, src, sh.ch, sh.P, sh.P, gamma, scale, act, make([]float32, sh.P))
			for _, inPlace := range []bool{false, true} {
				got := make([]float32, len(src))
				in := src
				if inPlace {
					copy(got, src)
					in = got
				}
				RMSNormChannels(got, in, sh.ch, sh.P, gamma, act)
				for i := range got {
					g, w := got[i], want[i]
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						c, p := i/sh.P, i%sh.P
						t.Fatalf("ch %d P %d act %v in place %v: [%d][%d] (src %v, gamma %v) = %v (%#08x), want %v (%#08x)",
							sh.ch, sh.P, act, inPlace, c, p, src[i], gamma[c], g, math.Float32bits(g), w, math.Float32bits(w))
					}
				}
			}
		}
	}
}

// TestNormGeneratedAssemblyUpToDate regenerates ops_amd64.s with
// gen_ops.go and requires the checked-in file to match.
func TestNormGeneratedAssemblyUpToDate(t *testing.T) {
	asmtext.CheckGenerated(t, "gen_ops.go", "ops_amd64.s")
}

// TestBiasAndWidenBitIdentical: AddBias and WidenBF16 (assembly on whole
// groups of 64 where the CPU has it) give their Go definitions' bits at
// every length, with and without the residual.
func TestBiasAndWidenBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	src, _ := normInputs(rng, 1, 700)
	res, _ := normInputs(rng, 1, 700)
	h := make([]uint16, 700)
	for i := range h {
		h[i] = uint16(rng.Uint32())
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, n := range []int{0, 1, 63, 64, 65, 128, 200, 700} {
		for _, b := range []float32{0, -1.5, 3e38, float32(math.Inf(-1))} {
			for _, r := range [][]float32{nil, res[:n]} {
				got, want := make([]float32, n), make([]float32, n)
				AddBias(got, src[:n], r, b)
				addBiasGo(want, src[:n], r, b, 0)
				for i := range got {
					if !same(got[i], want[i]) {
						t.Fatalf("AddBias n %d b %v residual %v: [%d] = %v, want %v", n, b, r != nil, i, got[i], want[i])
					}
				}
			}
		}
		got := make([]float32, n)
		WidenBF16(got, h[:n])
		for i := range got {
			if math.Float32bits(got[i]) != uint32(h[i])<<16 {
				t.Fatalf("WidenBF16 n %d: [%d] = %#08x, want %#08x", n, i, math.Float32bits(got[i]), uint32(h[i])<<16)
			}
		}
	}
}

// TestGatherRows: GatherRows copies exactly the rows it is given, for
// several row counts and strides, and leaves the rest of dst alone.
func TestGatherRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, sh := range []struct{ rows, stride int }{{1, 32}, {5, 40}, {96, 1000}, {3, 33}} {
		src := make([]float32, (sh.rows-1)*sh.stride+32)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		dst := make([]float32, 32*sh.rows+5)
		for i := range dst {
			dst[i] = -7
		}
		GatherRows(dst, src, sh.stride, sh.rows)
		for r := 0; r < sh.rows; r++ {
			for i := 0; i < 32; i++ {
				if dst[r*32+i] != src[r*sh.stride+i] {
					t.Fatalf("rows %d stride %d: dst[%d][%d] = %v, want %v", sh.rows, sh.stride, r, i, dst[r*32+i], src[r*sh.stride+i])
				}
			}
		}
		for _, v := range dst[32*sh.rows:] {
			if v != -7 {
				t.Fatalf("rows %d: wrote past the rows", sh.rows)
			}
		}
	}
}
