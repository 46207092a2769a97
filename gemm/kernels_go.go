package gemm

import "math"

// The pure-Go kernels (always built): the float32 and bfloat16 products on
// float32 panels, which the noasm build runs, and Go emulations of the
// assembly kernels' own layouts (AVX512_BF16 quad pairs, AMX tiles), which
// let every CPU test the packing and driver code of kernels it cannot run.
// Each computes exactly the definitions of define.go.

// stepF32 is fma32 with the common case inlined.
func stepF32(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c) // the product is exact in float64
	if x := math.Float64bits(s); x>>52&0x7ff > 1023-126 && x&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return round32(float64(a)*float64(b), float64(c), false)
}

// stepBF16 is fmaBF16 with the common case inlined (the slow path covers
// every result that could be tiny).
func stepBF16(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c)
	if x := math.Float64bits(s); x>>52&0x7ff > 1023-126 && x&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return round32(float64(a)*float64(b), float64(c), true)
}

// goF32Strip is the float32 product on float32 panels (stripF32Func).
func goF32Strip(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool) {
	b = b[:kc*NR]
	for p := 0; p < na; p++ {
		ap := a[p*aStride : p*aStride+kc*MR]
		cp := c[p*MR*ldc:]
		_ = cp[(MR-1)*ldc+NR-1]
		for r := 0; r < MR; r++ {
			cr := cp[r*ldc : r*ldc+NR : r*ldc+NR]
			for s := 0; s < NR; s += 4 {
				var c0, c1, c2, c3 float32
				if acc {
					c0, c1, c2, c3 = cr[s], cr[s+1], cr[s+2], cr[s+3]
				}
				for q := 0; q < kc; q++ {
					x := ap[q*MR+r]
					bq := b[q*NR+s : q*NR+s+4 : q*NR+s+4]
					c0 = stepF32(x, bq[0], c0)
					c1 = stepF32(x, bq[1], c1)
					c2 = stepF32(x, bq[2], c2)
					c3 = stepF32(x, bq[3], c3)
				}
				cr[s], cr[s+1], cr[s+2], cr[s+3] = c0, c1, c2, c3
			}
		}
	}
}

// goBF16Strip is the bfloat16 product on float32 panels of bfloat16
// operand values (stripF32Func; kc is a multiple of BF16Block).
func goBF16Strip(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool) {
	b = b[:kc*NR]
	for p := 0; p < na; p++ {
		ap := a[p*aStride : p*aStride+kc*MR]
		cp := c[p*MR*ldc:]
		_ = cp[(MR-1)*ldc+NR-1]
		for r := 0; r < MR; r++ {
			cr := cp[r*ldc : r*ldc+NR : r*ldc+NR]
			for s := 0; s < NR; s += 2 {
				var c0, c1 float32
				if acc {
					c0, c1 = dazC(cr[s]), dazC(cr[s+1])
				}
				for q0 := 0; q0 < kc; q0 += BF16Block {
					var e0, o0, e1, o1 float32
					for q := q0; q < q0+BF16Block; q += 2 {
						x, y := ap[q*MR+r], ap[(q+1)*MR+r]
						e0 = stepBF16(x, b[q*NR+s], e0)
						e1 = stepBF16(x, b[q*NR+s+1], e1)
						o0 = stepBF16(y, b[(q+1)*NR+s], o0)
						o1 = stepBF16(y, b[(q+1)*NR+s+1], o1)
					}
					c0 = addBF16(c0, addBF16(e0, o0))
					c1 = addBF16(c1, addBF16(e1, o1))
				}
				cr[s], cr[s+1] = c0, c1
			}
		}
	}
}

// hi and lo are the bfloat16 operand values in the high and low halves of
// a packed pair.
func hi(x uint32) float32 { return math.Float32frombits(x & 0xffff0000) }
func lo(x uint32) float32 { return math.Float32frombits(x << 16) }

// emuVDPStrip emulates the AVX512_BF16 kernel (stripU32Func) on quad-pair
// panels: per block, VDPBF16PS steps each chain twice per dword, high
// half first (as measured on Zen 4: one fused multiply-add per half,
// denormal inputs read as zero, tiny results flushed after rounding).
func emuVDPStrip(a []uint32, aStride, na int, b []uint32, kq int, c []float32, ldc int, acc bool) {
	b = b[:kq*NR]
	for p := 0; p < na; p++ {
		ap := a[p*aStride : p*aStride+kq*MR]
		cp := c[p*MR*ldc:]
		for r := 0; r < MR; r++ {
			for s := 0; s < NR; s++ {
				var x float32
				if acc {
					x = dazC(cp[r*ldc+s])
				}
				for d0 := 0; d0 < kq; d0 += BF16Block / 2 {
					var e, o float32
					for d := d0; d < d0+BF16Block/2; d += 2 {
						ae, be := ap[d*MR+r], b[d*NR+s]
						ao, bo := ap[(d+1)*MR+r], b[(d+1)*NR+s]
						e = stepBF16(hi(ae), hi(be), e)
						e = stepBF16(lo(ae), lo(be), e)
						o = stepBF16(hi(ao), hi(bo), o)
						o = stepBF16(lo(ao), lo(bo), o)
					}
					x = addBF16(x, addBF16(e, o))
				}
				cp[r*ldc+s] = x
			}
		}
	}
}

// emuAMX emulates the AMX kernel (amxFunc): TDPBF16PS per 16×16 tile and
// block, the even chain over the low halves of the pairs, the odd chain
// over the high halves, then C + (even + odd).
func emuAMX(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
	for jp := 0; jp < nb; jp++ {
		bp := b[jp*bStride:]
		for g := 0; g < ng; g++ {
			for r := 0; r < amxRows; r++ {
				ar := a[(g*amxRows+r)*lda:]
				cr := c[(g*amxRows+r)*ldc+jp*NR:]
				for s := 0; s < NR; s++ {
					var x float32
					if acc {
						x = dazC(cr[s])
					}
					for blk := 0; blk < kb; blk++ {
						var e, o float32
						for t := 0; t < BF16Block/2; t++ {
							av, bv := ar[blk*BF16Block/2+t], bp[(blk*BF16Block/2+t)*NR+s]
							e = stepBF16(lo(av), lo(bv), e)
							o = stepBF16(hi(av), hi(bv), o)
						}
						x = addBF16(x, addBF16(e, o))
					}
					cr[s] = x
				}
			}
		}
	}
}
