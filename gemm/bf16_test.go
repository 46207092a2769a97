package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withBF16 runs f with the bfloat16 path on, using kern (the assembly
// kernel or kernelBF16Go), and restores the previous state.
func withBF16(kern func(int, *uint32, *uint32, *float32, int, bool), f func()) {
	old, oldOn := bf16Kernel, useBF16.Load()
	bf16Kernel = kern
	useBF16.Store(true)
	defer func() { bf16Kernel = old; useBF16.Store(oldOn) }()
	f()
}

// bf16Kernels lists the pair kernels this build can run: always the Go
// one, plus the assembly one where the build and CPU have it.
func bf16Kernels() map[string]func(int, *uint32, *uint32, *float32, int, bool) {
	ks := map[string]func(int, *uint32, *uint32, *float32, int, bool){"go": kernelBF16Go}
	if bf16Kernel != nil {
		ks["asm"] = bf16Kernel
	}
	return ks
}

// randBF16 returns n exact bfloat16 values with exponents in [elo, ehi]
// (each sign, about one in ten zero), so that sums depend on the order and
// rounding of every step.
func randBF16(rng *rand.Rand, n, elo, ehi int) []float32 {
	s := make([]float32, n)
	for i := range s {
		if rng.IntN(10) == 0 {
			if rng.IntN(2) == 0 {
				s[i] = float32(math.Copysign(0, -1))
			}
			continue
		}
		m := float64(128+rng.IntN(128)) / 128
		if rng.IntN(2) == 0 {
			m = -m
		}
		s[i] = float32(math.Ldexp(m, elo+rng.IntN(ehi-elo+1)))
	}
	return s
}

func bitsEqual(x, y []float32) int {
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			return i
		}
	}
	return -1
}

// TestBF16MatchesFloat32 checks the bfloat16 path bit for bit against the
// float32 micro-kernel and the naive reference loops over shapes with
// partial tiles, several depth chunks, sub-block offsets and accumulation,
// with exponents across the whole exact range (its ends included).
func TestBF16MatchesFloat32(t *testing.T) {
	defer SetBF16(SetBF16(false))
	rng := rand.New(rand.NewPCG(31, 7))
	type shape struct{ m, n, k, i0, j0, k0, kk int }
	shapes := []shape{
		{4, 32, 2, 0, 0, 0, 2},
		{128, 512, 128, 0, 0, 0, 128},
		{70, 100, 300, 4, 32, 6, 290},  // partial tiles, three depth chunks
		{9, 33, 130, 0, 0, 0, 130},     // k > KC by one pair
		{64, 96, 256, 8, 64, 128, 128}, // the second depth chunk only
	}
	ranges := [][2]int{{-4, 4}, {-8, 8}, {bf16MinExp, bf16MinExp + 4}, {bf16MaxExp - 4, bf16MaxExp}, {bf16MinExp, bf16MaxExp}}
	for kname, kern := range bf16Kernels() {
		for _, s := range shapes {
			for _, er := range ranges {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("%s/%dx%dx%d+%d,%d,%d/e%v/acc=%v", kname, s.m, s.n, s.k, s.i0, s.j0, s.k0, er, acc)
					a := randBF16(rng, (s.i0+s.m)*s.k, er[0], er[1])
					b := randBF16(rng, (s.j0+s.n)*s.k, er[0], er[1])
					c0 := randBF16(rng, s.m*s.n, er[0], er[1])
					pa := PackA(nil, s.i0+s.m, s.k, a, s.k)
					pb := PackNT(nil, s.j0+s.n, s.k, b, s.k)
					run := func() []float32 {
						c := append([]float32(nil), c0...)
						MulPacked(s.m, s.n, s.kk, pa, s.i0, s.k0, pb, s.j0, s.k0, c, s.n, acc)
						return c
					}
					want := run() // float32 kernel: no pairs were packed
					if pa.pairs || pb.pairs {
						t.Fatalf("%s: pairs packed with the bfloat16 path off", name)
					}
					// The naive loops agree with the float32 kernel.
					ref := append([]float32(nil), c0...)
					for i := 0; i < s.m; i++ {
						for j := 0; j < s.n; j++ {
							var x float32
							if acc {
								x = ref[i*s.n+j]
							}
							for q := s.k0; q < s.k0+s.kk; q++ {
								x += a[(s.i0+i)*s.k+q] * b[(s.j0+j)*s.k+q]
							}
							ref[i*s.n+j] = x
						}
					}
					if i := bitsEqual(want, ref); i >= 0 {
						t.Fatalf("%s: float32 kernel %v differs from the naive loops %v at %d", name, want[i], ref[i], i)
					}
					withBF16(kern, func() {
						PackA(pa, s.i0+s.m, s.k, a, s.k)
						PackNT(pb, s.j0+s.n, s.k, b, s.k)
						if !pa.pairs || !pb.pairs {
							t.Fatalf("%s: exact bfloat16 operands got no pairs (A %v, B %v)", name, pa.pairs, pb.pairs)
						}
						calls := BF16Calls()
						got := run()
						if BF16Calls() == calls && s.kk > 0 {
							t.Fatalf("%s: MulPacked did not use the bfloat16 kernel", name)
						}
						if i := bitsEqual(got, want); i >= 0 {
							t.Fatalf("%s: bfloat16 path %v (%#x) differs from float32 %v (%#x) at %d", name, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]), i)
						}
					})
				}
			}
		}
	}
}

// TestBF16Fallback checks that an operand holding any value outside the
// exact range gets no pairs and its products still equal the float32
// kernel's, and that odd depths or offsets take the float32 kernel.
func TestBF16Fallback(t *testing.T) {
	defer SetBF16(SetBF16(false))
	rng := rand.New(rand.NewPCG(5, 9))
	m, n, k := 12, 70, 64
	for _, bad := range []float32{
		1 + 1.0/1024, // not a bfloat16
		float32(math.Ldexp(1, bf16MinExp-1)),
		float32(math.Ldexp(1.5, bf16MaxExp+1)),
		float32(math.Ldexp(1, -130)), // denormal
		float32(math.Inf(-1)),
		float32(math.NaN()),
	} {
		for _, inA := range []bool{false, true} {
			a := randBF16(rng, m*k, -4, 4)
			b := randBF16(rng, n*k, -4, 4)
			if inA {
				a[rng.IntN(len(a))] = bad
			} else {
				b[rng.IntN(len(b))] = bad
			}
			want := make([]float32, m*n)
			MulPacked(m, n, k, PackA(nil, m, k, a, k), 0, 0, PackNT(nil, n, k, b, k), 0, 0, want, n, false)
			withBF16(kernelBF16Go, func() {
				pa, pb := PackA(nil, m, k, a, k), PackNT(nil, n, k, b, k)
				if pa.pairs == inA || pb.pairs != inA {
					t.Fatalf("bad value %v in A=%v: pairs A %v B %v", bad, inA, pa.pairs, pb.pairs)
				}
				got := make([]float32, m*n)
				MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, got, n, false)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("bad value %v in A=%v: %v, want %v at %d", bad, inA, got[i], want[i], i)
					}
				}
			})
		}
	}
	// Odd depth: no pairs; odd offsets: the float32 kernel.
	withBF16(kernelBF16Go, func() {
		if p := PackNT(nil, 8, 7, randBF16(rng, 56, -2, 2), 7); p.pairs {
			t.Fatal("pairs packed for an odd depth")
		}
		a, b := randBF16(rng, m*k, -4, 4), randBF16(rng, n*k, -4, 4)
		pa, pb := PackA(nil, m, k, a, k), PackNT(nil, n, k, b, k)
		got := make([]float32, m*n)
		MulPacked(m, n, k-2, pa, 0, 1, pb, 0, 1, got, n, false)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var x float32
				for q := 1; q < k-1; q++ {
					x += a[i*k+q] * b[j*k+q]
				}
				if got[i*n+j] != x {
					t.Fatalf("odd offset: (%d,%d) = %v, want %v", i, j, got[i*n+j], x)
				}
			}
		}
	})
}

// TestBF16SelfTest checks that the start-up self-test accepts the
// documented arithmetic and rejects the two plausible other readings of
// VDPBF16PS (low product first; the pair summed exactly and rounded once).
func TestBF16SelfTest(t *testing.T) {
	lowFirst := pairKernelGo(func(x float32, pa, pb uint32) float32 {
		x += math.Float32frombits(pa<<16) * math.Float32frombits(pb<<16)
		return x + math.Float32frombits(pa&0xffff0000)*math.Float32frombits(pb&0xffff0000)
	})
	fused := pairKernelGo(func(x float32, pa, pb uint32) float32 {
		hi := float64(math.Float32frombits(pa&0xffff0000)) * float64(math.Float32frombits(pb&0xffff0000))
		lo := float64(math.Float32frombits(pa<<16)) * float64(math.Float32frombits(pb<<16))
		return float32(float64(x) + (hi + lo)) // hi+lo is exact in float64
	})
	for name, c := range map[string]struct {
		kern func(int, *uint32, *uint32, *float32, int, bool)
		want bool
	}{"go": {kernelBF16Go, true}, "low-first": {lowFirst, false}, "fused": {fused, false}} {
		withBF16(c.kern, func() {
			if got := bf16SelfTest(); got != c.want {
				t.Errorf("%s: bf16SelfTest() = %v, want %v", name, got, c.want)
			}
		})
	}
	if bf16Kernel != nil && !bf16SelfTest() {
		t.Error("the assembly kernel is installed but fails the self-test")
	}
}

// BenchmarkMicroKernelBF16 is BenchmarkMicroKernel for the pair kernel
// (GFLOP/s counts 2·MR·NR·KC per call, as for the float32 kernel).
func BenchmarkMicroKernelBF16(b *testing.B) {
	if bf16Kernel == nil {
		b.Skip("no bfloat16 kernel in this build or on this CPU")
	}
	a, bb, c := make([]uint32, KC/2*MR), make([]uint32, KC/2*NR), make([]float32, MR*NR)
	for i := range a {
		a[i] = 0x3f803f80
	}
	for i := range bb {
		bb[i] = 0x3f803f80
	}
	start := cpuTime()
	for b.Loop() {
		bf16Kernel(KC/2, &a[0], &bb[0], &c[0], NR, true)
	}
	reportFlops(b, 2*float64(KC*MR*NR), start)
}

// BenchmarkMulPackedTiles is the Riesz passes' use of MulPacked: the bank
// (9360×128) packed once, every 128×512 tile of the 4680×9360 product
// against a 128-row block packed once per row block, on one goroutine, with
// bfloat16-exact operands through the float32 and the bfloat16 kernels.
func BenchmarkMulPackedTiles(b *testing.B) {
	m, n, k := 4680, 9360, 128
	rng := rand.New(rand.NewPCG(1, 2))
	a, bb := randBF16(rng, m*k, -3, 3), randBF16(rng, n*k, -3, 3)
	tile := make([]float32, 128*512)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("bf16=%v", on), func(b *testing.B) {
			if on && bf16Kernel == nil {
				b.Skip("no bfloat16 kernel in this build or on this CPU")
			}
			defer SetBF16(SetBF16(on))
			pb := PackNT(nil, n, k, bb, k)
			var pa PackedA
			start := cpuTime()
			for b.Loop() {
				for i0 := 0; i0 < m; i0 += 128 {
					rows := min(128, m-i0)
					PackA(&pa, rows, k, a[i0*k:], k)
					for j0 := 0; j0 < n; j0 += 512 {
						MulPacked(rows, min(512, n-j0), k, &pa, 0, 0, pb, j0, 0, tile, 512, false)
					}
				}
			}
			reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
		})
	}
}
