package gemm

import "fmt"

// The packing loops unroll the MR=4 rows of a panel by hand.
const _ = uint(MR-4) + uint(4-MR)

// PackedA is a left-hand operand packed into micro-kernel panels of MR rows:
// element (i, q) of the m×k matrix A lives at
//
//	Data()[(i/MR)*k*MR + q*MR + i%MR]
//
// and the padding rows (m ≤ i < ceil(m/MR)·MR) are zero. Callers that
// produce A themselves may write this layout directly (see Resize).
type PackedA struct {
	m, k int
	data []float32

	// bfloat16 pair panels [ceil(m/MR)][k/2][MR] (see bf16.go), valid
	// when pairs is set.
	bf    []uint32
	pairs bool
}

// M returns the number of rows of the packed operand.
func (p *PackedA) M() int { return p.m }

// K returns the inner dimension of the packed operand.
func (p *PackedA) K() int { return p.k }

// Data returns the packed values (layout in the type's comment).
func (p *PackedA) Data() []float32 { return p.data }

// Resize makes p an m×k operand, reusing its storage, and returns the
// packed values for the caller to fill completely (padding rows included).
func (p *PackedA) Resize(m, k int) []float32 {
	if m < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackedA.Resize: negative size m=%d k=%d", m, k))
	}
	p.m, p.k = m, k
	p.pairs = false
	p.data = grow(p.data, (m+MR-1)/MR*MR*k)
	return p.data
}

// PackA packs A (m×k, row-major, leading dimension lda) into p, reusing its
// storage, and returns p (allocated when nil).
func PackA(p *PackedA, m, k int, a []float32, lda int) *PackedA {
	check("PackA", m, 0, k, a, lda, k, nil, 0, 0, nil, 0)
	if p == nil {
		p = new(PackedA)
	}
	if m > 0 && k > 0 && (lda < k || len(a) < (m-1)*lda+k) {
		panic(fmt.Sprintf("gemm.PackA: A has %d values with leading dimension %d, need %d×%d", len(a), lda, m, k))
	}
	p.Resize(m, k)
	p.data = packA(p.data, m, k, a, lda, 0)
	p.packPairsA()
	return p
}

// PackAT packs A = Xᵀ into p, where X is k×m (row-major, leading dimension
// ldx), e.g. the values of one attention head so that A = Vᵀ. It reuses p's
// storage and returns p (allocated when nil).
func PackAT(p *PackedA, m, k int, x []float32, ldx int) *PackedA {
	if m < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackAT: negative size m=%d k=%d", m, k))
	}
	if m > 0 && k > 0 && (ldx < m || len(x) < (k-1)*ldx+m) {
		panic(fmt.Sprintf("gemm.PackAT: X has %d values with leading dimension %d, need %d×%d", len(x), ldx, k, m))
	}
	if p == nil {
		p = new(PackedA)
	}
	d := p.Resize(m, k)
	for ip := 0; ip < (m+MR-1)/MR; ip++ {
		dst := d[ip*k*MR : (ip+1)*k*MR]
		i0 := ip * MR
		nr := min(MR, m-i0)
		if nr == MR {
			for q := 0; q < k; q++ {
				row := x[q*ldx+i0 : q*ldx+i0+MR : q*ldx+i0+MR]
				o := dst[q*MR : q*MR+MR : q*MR+MR]
				o[0], o[1], o[2], o[3] = row[0], row[1], row[2], row[3]
			}
			continue
		}
		for q := 0; q < k; q++ {
			row := x[q*ldx+i0 : q*ldx+i0+nr]
			o := dst[q*MR : q*MR+MR : q*MR+MR]
			copy(o, row)
			clear(o[nr:])
		}
	}
	return p
}

// Panels returns the packed values of p in the fast layout: element (q, j)
// of op(B) (K()×N()) lives at
//
//	Panels()[(j/NR)*K()*NR + q*NR + j%NR]
//
// with zero padding columns (N() ≤ j < ceil(N()/NR)·NR).
func (p *PackedB) Panels() []float32 { return p.data }

// Resize makes p a packed operand with op(B) of size k×n (N()=n, K()=k),
// reusing its storage, and returns the panels (layout as in Panels) for the
// caller to fill completely, padding included. Such an operand is only for
// MulPacked.
func (p *PackedB) Resize(n, k int) []float32 {
	if n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackedB.Resize: negative size n=%d k=%d", n, k))
	}
	p.n, p.k = n, k
	p.raw = p.raw[:0]
	p.pairs = false
	p.data = grow(p.data, (n+NR-1)/NR*NR*k)
	return p.data
}

// MulPacked multiplies sub-blocks of packed operands on the calling
// goroutine:
//
//	for i < m, j < n:
//	    c[i*ldc+j] = (acc ? c[i*ldc+j] : 0) + Σ_{q<k} A[ai0+i][ak0+q] · op(B)[bk0+q][bj0+j]
//
// with the sum in order of q (after C's value when acc). ai0 must be a
// multiple of MR and bj0 of NR; the blocks must lie inside the operands. It
// always runs the packed micro-kernel (AVX-512 when available; the
// bit-identical AVX512_BF16 kernel when both operands were packed by PackA
// and PackNT/PackNN from exact bfloat16 values, see SetBF16) and does not
// allocate in steady state. The tiled attention uses it to keep its
// operands packed across many small products.
func MulPacked(m, n, k int, pa *PackedA, ai0, ak0 int, pb *PackedB, bj0, bk0 int, c []float32, ldc int, acc bool) {
	if m < 0 || n < 0 || k < 0 || ai0 < 0 || ai0%MR != 0 || ai0+m > pa.m || ak0 < 0 || ak0+k > pa.k ||
		bj0 < 0 || bj0%NR != 0 || bj0+n > pb.n || bk0 < 0 || bk0+k > pb.k {
		panic(fmt.Sprintf("gemm.MulPacked: %d×%d×%d product at A[%d:][%d:] (A is %d×%d) and B[%d:][%d:] (op(B) is %d×%d); A rows must start at a multiple of %d, B columns of %d",
			m, n, k, ai0, ak0, pa.m, pa.k, bk0, bj0, pb.k, pb.n, MR, NR))
	}
	if m == 0 || n == 0 {
		return
	}
	if ldc < n || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm.MulPacked: C has %d values with leading dimension %d, need %d×%d", len(c), ldc, m, n))
	}
	ws := getWorkspace()
	if pa.pairs && pb.pairs && k%2 == 0 && ak0%2 == 0 && bk0%2 == 0 && BF16() {
		// Bit-identical to the float32 kernel (bf16.go).
		bf16Calls.Add(1)
		ap := pa.bf[(ai0/MR)*pa.k/2*MR:]
		for jb := 0; jb < n; jb += TileN {
			nc := min(TileN, n-jb)
			pb.macroBF16(ap, pa.k/2, ak0/2, m, bj0+jb, nc, bk0/2, (bk0+k)/2, c[jb:], ldc, acc, &ws.tmp)
		}
		putWorkspace(ws)
		return
	}
	ap := pa.data[(ai0/MR)*pa.k*MR:]
	for jb := 0; jb < n; jb += TileN {
		nc := min(TileN, n-jb)
		pb.macro(ap, pa.k, ak0, m, bj0+jb, nc, bk0, bk0+k, c[jb:], ldc, acc, &ws.tmp)
	}
	putWorkspace(ws)
}
