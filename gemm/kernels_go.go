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

// goF32Strip is the float32 product on float32 panels (stripF32Func). The
// common case of stepF32 is written out: the compiler does not inline it.
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
					x := float64(ap[q*MR+r])
					bq := b[q*NR+s : q*NR+s+4 : q*NR+s+4]
					s0 := x*float64(bq[0]) + float64(c0)
					s1 := x*float64(bq[1]) + float64(c1)
					s2 := x*float64(bq[2]) + float64(c2)
					s3 := x*float64(bq[3]) + float64(c3)
					if fast(s0) && fast(s1) && fast(s2) && fast(s3) {
						c0, c1, c2, c3 = float32(s0), float32(s1), float32(s2), float32(s3)
						continue
					}
					c0 = round32(x*float64(bq[0]), float64(c0), false)
					c1 = round32(x*float64(bq[1]), float64(c1), false)
					c2 = round32(x*float64(bq[2]), float64(c2), false)
					c3 = round32(x*float64(bq[3]), float64(c3), false)
				}
				cr[s], cr[s+1], cr[s+2], cr[s+3] = c0, c1, c2, c3
			}
		}
	}
}

// fast reports whether float32(s) rounds a float64 sum s (of an exact
// product and a float32) correctly: s is at least 2^-125 in magnitude (or
// not finite) and not halfway between two float32 values (see round32).
func fast(s float64) bool {
	u := math.Float64bits(s)
	return u>>52&0x7ff > 1023-126 && u&(1<<29-1) != 1<<28
}

// goBF16Strip is the bfloat16 product on float32 panels of bfloat16
// operand values (stripF32Func; kc is a multiple of BF16Block), with the
// common case of fmaBF16 written out like goF32Strip's.
func goBF16Strip(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool) {
	b = b[:kc*NR]
	var ch [2][4]float32 // even and odd chains of four columns
	for p := 0; p < na; p++ {
		ap := a[p*aStride : p*aStride+kc*MR]
		cp := c[p*MR*ldc:]
		_ = cp[(MR-1)*ldc+NR-1]
		for r := 0; r < MR; r++ {
			cr := cp[r*ldc : r*ldc+NR : r*ldc+NR]
			for s := 0; s < NR; s += 4 {
				var x [4]float32
				if acc {
					for i := range x {
						x[i] = dazC(cr[s+i])
					}
				}
				for q0 := 0; q0 < kc; q0 += BF16Block {
					ch = [2][4]float32{}
					for q := q0; q < q0+BF16Block; q++ {
						v := float64(ap[q*MR+r])
						bq := b[q*NR+s : q*NR+s+4 : q*NR+s+4]
						e := &ch[q&1]
						s0 := v*float64(bq[0]) + float64(e[0])
						s1 := v*float64(bq[1]) + float64(e[1])
						s2 := v*float64(bq[2]) + float64(e[2])
						s3 := v*float64(bq[3]) + float64(e[3])
						if fast(s0) && fast(s1) && fast(s2) && fast(s3) {
							e[0], e[1], e[2], e[3] = float32(s0), float32(s1), float32(s2), float32(s3)
							continue
						}
						for i := range e {
							e[i] = round32(v*float64(bq[i]), float64(e[i]), true)
						}
					}
					for i := range x {
						x[i] = addBF16(x[i], addBF16(ch[0][i], ch[1][i]))
					}
				}
				copy(cr[s:s+4], x[:])
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

// emuAMX emulates the AMX kernel (amxFunc): TDPBF16PS (amxDot) per 16×16
// tile and block.
func emuAMX(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
	const h = BF16Block / 2
	var col [h]uint32
	for jp := 0; jp < nb; jp++ {
		bp := b[jp*bStride:]
		for g := 0; g < ng; g++ {
			for r := 0; r < amxRows; r++ {
				ar := a[(g*amxRows+r)*lda:]
				cr := c[(g*amxRows+r)*ldc+jp*NR:]
				for s := 0; s < NR; s++ {
					var x float32
					if acc {
						x = cr[s]
					}
					for blk := 0; blk < kb; blk++ {
						for t := range col {
							col[t] = bp[(blk*h+t)*NR+s]
						}
						x = amxDot(x, ar[blk*h:(blk+1)*h], col[:])
					}
					cr[s] = x
				}
			}
		}
	}
}

// amxDot is one output element of TDPBF16PS: c (its denormals read as
// zero) + (even + odd), where the even chain runs over the low bfloat16
// halves of the pairs a[t]·b[t] and the odd chain over the high halves,
// both from +0, every step an FMA with tiny results flushed (the AMX
// definition of a bfloat16 block; the interpreter of the AMX kernels uses
// it too).
func amxDot(c float32, a, b []uint32) float32 {
	var e, o float32
	for t, av := range a {
		bv := b[t]
		e = stepBF16(lo(av), lo(bv), e)
		o = stepBF16(hi(av), hi(bv), o)
	}
	return addBF16(dazC(c), addBF16(e, o))
}
