package gemm

// The packed, blocked driver of the fast path (GotoBLAS style). B is packed
// whole into panels of NR columns ([panel][k][NR], zero padded); a block of
// TileM rows of A into panels of MR rows ([panel][k][MR], zero padded). The
// micro-kernel computes an MR×NR block of C over one chunk of KC depth,
// either starting from zero (first chunk) or continuing from C. Partial
// micro-tiles at the edges run the same kernel on a scratch block, so every
// element of C sees exactly the same arithmetic wherever it lies, and the
// result does not depend on the tiling of the work among goroutines.

// packB packs b into p for the fast path (or keeps a row copy for the
// reference path). nn selects the layout of b: k×n (NN) or n×k (NT).
func packB(p *PackedB, nn bool, n, k int, b []float32, ldb int) *PackedB {
	p.n, p.k = n, k
	if !useFast {
		p.raw = grow(p.raw, n*k)
		for j := 0; j < n; j++ {
			for q := 0; q < k; q++ {
				if nn {
					p.raw[j*k+q] = b[q*ldb+j]
				} else {
					p.raw[j*k+q] = b[j*ldb+q]
				}
			}
		}
		// The panels are still filled: MulPacked always reads them.
	}
	np := (n + NR - 1) / NR
	p.data = grow(p.data, np*k*NR)
	if n*k < 1<<16 || Threads() == 1 {
		p.packPanels(nn, 0, np, b, ldb)
	} else {
		parallelFor(Threads(), np, func(_, lo, hi int) { p.packPanels(nn, lo, hi, b, ldb) })
	}
	p.packPairsB()
	return p
}

// packPanels packs the NR-column panels [lo, hi) of b into p.data.
func (p *PackedB) packPanels(nn bool, lo, hi int, b []float32, ldb int) {
	n, k := p.n, p.k
	{
		for jp := lo; jp < hi; jp++ {
			dst := p.data[jp*k*NR : (jp+1)*k*NR]
			j0 := jp * NR
			cols := min(NR, n-j0)
			if nn {
				for q := 0; q < k; q++ {
					d := dst[q*NR : q*NR+NR]
					copy(d, b[q*ldb+j0:q*ldb+j0+cols])
					clear(d[cols:])
				}
				continue
			}
			if cols < NR {
				clear(dst)
			}
			// Four rows at a time: contiguous reads, four writes per step.
			s := 0
			for ; s+4 <= cols; s += 4 {
				r0 := b[(j0+s)*ldb : (j0+s)*ldb+k]
				r1 := b[(j0+s+1)*ldb : (j0+s+1)*ldb+k]
				r2 := b[(j0+s+2)*ldb : (j0+s+2)*ldb+k]
				r3 := b[(j0+s+3)*ldb : (j0+s+3)*ldb+k]
				for q := range r0 {
					d := dst[q*NR+s : q*NR+s+4 : q*NR+s+4]
					d[0], d[1], d[2], d[3] = r0[q], r1[q], r2[q], r3[q]
				}
			}
			for ; s < cols; s++ {
				row := b[(j0+s)*ldb : (j0+s)*ldb+k]
				for q, v := range row {
					dst[q*NR+s] = v
				}
			}
		}
	}
}

// packA packs rows [i0, i0+rows) of a (m×k) into ap as [panel][k][MR].
func packA(ap []float32, rows, k int, a []float32, lda, i0 int) []float32 {
	npan := (rows + MR - 1) / MR
	ap = grow(ap, npan*k*MR)
	for ip := 0; ip < npan; ip++ {
		dst := ap[ip*k*MR : (ip+1)*k*MR]
		r0 := ip * MR
		nr := min(MR, rows-r0)
		if nr < MR {
			clear(dst)
		}
		if nr == MR {
			x0 := a[(i0+r0)*lda : (i0+r0)*lda+k]
			x1 := a[(i0+r0+1)*lda : (i0+r0+1)*lda+k]
			x2 := a[(i0+r0+2)*lda : (i0+r0+2)*lda+k]
			x3 := a[(i0+r0+3)*lda : (i0+r0+3)*lda+k]
			for q := range x0 {
				d := dst[q*MR : q*MR+4 : q*MR+4]
				d[0], d[1], d[2], d[3] = x0[q], x1[q], x2[q], x3[q]
			}
			continue
		}
		for r := 0; r < nr; r++ {
			row := a[(i0+r0+r)*lda : (i0+r0+r)*lda+k]
			for q, v := range row {
				dst[q*MR+r] = v
			}
		}
	}
	return ap
}

// macro computes the block C[0:rows][0:cols] (c has leading dimension ldc)
// from packed A rows (ap: panels of depth aK, whose columns [aK0, aK0+k1-k0)
// are used) and the packed B panels starting at column j0 (a multiple of
// NR), over the inner range [k0, k1) of B. With acc the products are added
// to C (continuing its value), otherwise C is overwritten.
func (p *PackedB) macro(ap []float32, aK, aK0, rows, j0, cols, k0, k1 int, c []float32, ldc int, acc bool, tmp *[MR * NR]float32) {
	macroPanels(p.data, p.k, ap, aK, aK0, rows, j0, cols, k0, k1, KC, c, ldc, acc, tmp, kernel)
}

// macroPanels is macro over panels of any element type: b holds B's panels
// of depth bk ([panel][bk][NR]), ap A's of depth aK, depths are counted in
// elements (values, or bfloat16 pairs), chunks are kc deep, and kern is the
// micro-kernel for one MR×NR block. Partial micro-tiles go through tmp.
func macroPanels[E float32 | uint32](b []E, bk int, ap []E, aK, aK0, rows, j0, cols, k0, k1, kc int, c []float32, ldc int, acc bool, tmp *[MR * NR]float32,
	kern func(kc int, a, b []E, c []float32, ldc int, acc bool)) {
	akk := k1 - k0
	if akk == 0 {
		if !acc {
			for r := 0; r < rows; r++ {
				clear(c[r*ldc : r*ldc+cols])
			}
		}
		return
	}
	for pc := 0; pc < akk; pc += kc {
		kc := min(kc, akk-pc)
		acc := acc || pc > 0
		for jj := 0; jj < cols; jj += NR {
			nc := min(NR, cols-jj)
			jp := (j0 + jj) / NR
			bp := b[(jp*bk+k0+pc)*NR : (jp*bk+k0+pc+kc)*NR]
			for ii := 0; ii < rows; ii += MR {
				mr := min(MR, rows-ii)
				a := ap[((ii/MR)*aK+aK0+pc)*MR : ((ii/MR)*aK+aK0+pc+kc)*MR]
				if mr == MR && nc == NR {
					kern(kc, a, bp, c[ii*ldc+jj:], ldc, acc)
					continue
				}
				t := tmp[:]
				if acc {
					for r := 0; r < mr; r++ {
						copy(t[r*NR:r*NR+nc], c[(ii+r)*ldc+jj:(ii+r)*ldc+jj+nc])
					}
				}
				kern(kc, a, bp, t, NR, acc)
				for r := 0; r < mr; r++ {
					copy(c[(ii+r)*ldc+jj:(ii+r)*ldc+jj+nc], t[r*NR:r*NR+nc])
				}
			}
		}
	}
}

// sub computes C[0:m][0:j1-j0] (+)= A[0:m][0:k1-k0]·op(B)[k0:k1][j0:j1] on
// the calling goroutine (see ProductSub).
func (p *PackedB) sub(m int, a []float32, lda int, j0, j1, k0, k1 int, c []float32, ldc int, acc bool) {
	ws := getWorkspace()
	akk := k1 - k0
	for i0 := 0; i0 < m; i0 += TileM {
		rows := min(TileM, m-i0)
		if !useFast {
			subGeneric(rows, a[i0*lda:], lda, p.raw, p.k, j0, j1, k0, k1, c[i0*ldc:], ldc, acc)
			continue
		}
		ws.ap = packA(ws.ap, rows, akk, a, lda, i0)
		for jb := j0; jb < j1; jb += TileN {
			cols := min(TileN, j1-jb)
			p.macro(ws.ap, akk, 0, rows, jb, cols, k0, k1, c[i0*ldc+jb-j0:], ldc, acc, &ws.tmp)
		}
	}
	putWorkspace(ws)
}

// subGeneric is sub with the reference loops; raw is op(B) transposed
// (n×k rows).
func subGeneric(m int, a []float32, lda int, raw []float32, k, j0, j1, k0, k1 int, c []float32, ldc int, acc bool) {
	for i := 0; i < m; i++ {
		ar := a[i*lda : i*lda+k1-k0]
		for j := j0; j < j1; j++ {
			br := raw[j*k+k0 : j*k+k1]
			var s float32
			if acc {
				s = c[i*ldc+j-j0]
			}
			for q, v := range ar {
				s += v * br[q]
			}
			c[i*ldc+j-j0] = s
		}
	}
}

// product computes C = A·op(B) into c (m×n, leading dimension ldc) on up to
// Threads() goroutines, splitting the TileM×TileN blocks of C into
// contiguous ranges (row blocks outer).
func (p *PackedB) product(m int, a []float32, lda int, c []float32, ldc int) {
	n, k := p.n, p.k
	if !useFast {
		parallelRows(m, func(i0, i1 int) {
			ntGeneric(i1-i0, n, k, a[i0*lda:], lda, p.raw, k, c[i0*ldc:], ldc)
		})
		return
	}
	rb := (m + TileM - 1) / TileM
	cb := (n + TileN - 1) / TileN
	workers := Threads()
	if flops := 2 * m * n * k; flops < 1<<21 {
		workers = 1
	}
	if workers <= 1 {
		p.productRange(0, rb*cb, m, a, lda, c, ldc)
		return
	}
	parallelFor(workers, rb*cb, func(_, lo, hi int) { p.productRange(lo, hi, m, a, lda, c, ldc) })
}

// productRange computes the blocks [lo, hi) of C. With one depth chunk
// (k ≤ KC) blocks are numbered row-major, so a packed A block serves a
// whole row of blocks; with several, column-major, so that consecutive
// blocks reuse the same B block from cache (B is usually the larger
// operand, e.g. a Linear layer's weights) while A is re-packed per block,
// which costs one copy per 2·TileN flops.
func (p *PackedB) productRange(lo, hi, m int, a []float32, lda int, c []float32, ldc int) {
	n, k := p.n, p.k
	cb := (n + TileN - 1) / TileN
	rb := (m + TileM - 1) / TileM
	ws := getWorkspace()
	last := -1
	for it := lo; it < hi; it++ {
		ic, jc := it/cb, it%cb
		if k > KC {
			ic, jc = it%rb, it/rb
		}
		i0, j0 := ic*TileM, jc*TileN
		rows, cols := min(TileM, m-i0), min(TileN, n-j0)
		if ic != last {
			ws.ap = packA(ws.ap, rows, k, a, lda, i0)
			last = ic
		}
		p.macro(ws.ap, k, 0, rows, j0, cols, 0, k, c[i0*ldc+j0:], ldc, false, &ws.tmp)
	}
	putWorkspace(ws)
}

// tiles runs the fused tile loop on up to workers goroutines, each owning a
// contiguous range of row blocks. Exactly one of seq (workers must be 1) and
// par is non-nil.
func (p *PackedB) tiles(m int, a []float32, lda int, workers int, seq TileFunc, par ParallelTileFunc) {
	rb := (m + TileM - 1) / TileM
	if 2*m*p.n*p.k < 1<<21 {
		workers = 1
	}
	if workers <= 1 || rb == 1 {
		p.tileRange(0, 0, rb, m, a, lda, seq, par)
		return
	}
	parallelFor(workers, rb, func(w, lo, hi int) { p.tileRange(w, lo, hi, m, a, lda, seq, par) })
}

// tileRange runs the row blocks [lo, hi) of the fused tile loop as worker w.
func (p *PackedB) tileRange(w, lo, hi, m int, a []float32, lda int, seq TileFunc, par ParallelTileFunc) {
	n, k := p.n, p.k
	ws := getWorkspace()
	ws.tile = grow(ws.tile, TileM*TileN)
	for ic := lo; ic < hi; ic++ {
		i0 := ic * TileM
		rows := min(TileM, m-i0)
		if useFast {
			ws.ap = packA(ws.ap, rows, k, a, lda, i0)
		}
		for j0 := 0; j0 < n; j0 += TileN {
			cols := min(TileN, n-j0)
			if useFast {
				p.macro(ws.ap, k, 0, rows, j0, cols, 0, k, ws.tile, TileN, false, &ws.tmp)
			} else {
				ntGeneric(rows, cols, k, a[i0*lda:], lda, p.raw[j0*k:], k, ws.tile, TileN)
			}
			if seq != nil {
				seq(i0, j0, rows, cols, ws.tile, TileN)
			} else {
				par(w, i0, j0, rows, cols, ws.tile, TileN)
			}
		}
	}
	putWorkspace(ws)
}
