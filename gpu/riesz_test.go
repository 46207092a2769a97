package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// upDoubles allocates a buffer holding v (at least one value).
func upDoubles(t testing.TB, dev *vulkan.Device, v []float64) *vulkan.Buffer {
	t.Helper()
	w := make([]uint32, 2*max(len(v), 1))
	for i, x := range v {
		b := math.Float64bits(x)
		w[2*i], w[2*i+1] = uint32(b), uint32(b>>32)
	}
	return exUpload(t, dev, w)
}

func downDoubles(t testing.TB, dev *vulkan.Device, b *vulkan.Buffer, n int) []float64 {
	t.Helper()
	w := make([]uint32, 2*n)
	if err := dev.DownloadUint32s(b, 0, w); err != nil {
		t.Fatal(err)
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(uint64(w[2*i]) | uint64(w[2*i+1])<<32)
	}
	return v
}

// rieszCase is one pass of the tests.
type rieszCase struct {
	N, M, D int
	p       float64
	bf16    bool
	sigma   float64
}

func (c rieszCase) String() string {
	return fmt.Sprintf("N%d_M%d_D%d_p%g_bf16=%v_sigma%g", c.N, c.M, c.D, c.p, c.bf16, c.sigma)
}

// sets returns the case's sets a (N rows) and b (M rows), on the CPU and
// the device; a few rows coincide (d² = 0) and, with bf16, the values are
// bfloat16.
func (c rieszCase) sets(t *testing.T, dev *vulkan.Device, r *rand.Rand) (a, b riesz.Set, ga, gb RieszSet) {
	n := func(m int) []float32 {
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if c.bf16 {
				x[i] = gemm.BF16ToFloat32(gemm.RoundBF16(x[i]))
			}
		}
		return x
	}
	ax, bx := n(c.N*c.D), n(c.M*c.D)
	if c.N > 1 && c.M > 2 {
		copy(ax[c.D:2*c.D], bx[2*c.D:3*c.D]) // a_1 = b_2
	}
	a, b = riesz.NewSet(ax, c.N, c.D, nil), riesz.NewSet(bx, c.M, c.D, nil)
	a.BF16, b.BF16 = c.bf16, c.bf16
	ga = RieszSet{X: upFloats(t, dev, ax), Norms: upFloats(t, dev, a.Norms), N: c.N, D: c.D, BF16: c.bf16}
	gb = RieszSet{X: upFloats(t, dev, bx), Norms: upFloats(t, dev, b.Norms), N: c.M, D: c.D, BF16: c.bf16}
	return a, b, ga, gb
}

// TestRieszExact: RieszRowStats and RieszRowSums on the device equal
// riesz's RowStats and Sums bit for bit, on sets with tails (N not a
// multiple of the workgroup's rows, M of riesz.TileCols and of the lane
// blocks, D of the bfloat16 block), p = 1, 2, 4, float32 and bfloat16 sets,
// coincident rows, and σ so small that t^p reaches riesz.MaxDenominator.
func TestRieszExact(t *testing.T) {
	dev := vulkantest.Open(t)
	mods := testModules(t, dev, "riesz_rowstats")
	r := rand.New(rand.NewPCG(1, 2))
	cases := []rieszCase{
		{1, 1, 1, 2, false, 1}, {5, 70, 3, 2, false, 1}, {9, 1100, 16, 1, false, 2},
		{6, 600, 128, 4, true, 10}, {7, 515, 40, 2, true, 3}, {3, 130, 5, 4, false, 1e-9},
		{4, 2, 33, 1, true, 0.5}, {37, 20, 4, 2, false, 1},
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			k := riesz.MustNew(c.sigma, c.p, 1e-3)
			a, b, ga, gb := c.sets(t, dev, r)
			inv := make([]float32, c.M)
			for i := range inv {
				inv[i] = float32(1 / (0.5 + r.Float64()))
			}
			sum0 := make([]float64, c.N)
			for i := range sum0 {
				sum0[i] = r.Float64()
			}
			sum, mean, mx := append([]float64(nil), sum0...), make([]float64, c.N), make([]float64, c.N)
			rows := append([]float64(nil), sum0...)
			var ws riesz.Workspace
			k.RowStats(a, b, inv, sum, mean, mx, &ws)
			k.Sums(a, b, rows, nil, &ws)

			ginv := upFloats(t, dev, inv)
			for _, module := range mods {
				gsum, gmean, gmax, grows := upDoubles(t, dev, sum0), upDoubles(t, dev, make([]float64, c.N)), upDoubles(t, dev, make([]float64, c.N)), upDoubles(t, dev, sum0)
				batch := dev.NewBatch()
				if err := rieszPass(dev, batch, module, k, ga, gb, ginv, gsum, gmean, gmax); err != nil {
					t.Fatal(err)
				}
				if err := rieszPass(dev, batch, module, k, ga, gb, nil, grows, nil, nil); err != nil {
					t.Fatal(err)
				}
				if err := batch.Run(); err != nil {
					t.Fatal(err)
				}
				for _, o := range []struct {
					name      string
					got, want []float64
				}{
					{"RowStats sum", downDoubles(t, dev, gsum, c.N), sum}, {"RowStats mean", downDoubles(t, dev, gmean, c.N), mean},
					{"RowStats max", downDoubles(t, dev, gmax, c.N), mx}, {"Sums rows", downDoubles(t, dev, grows, c.N), rows},
				} {
					for i := range o.want {
						if math.Float64bits(o.got[i]) != math.Float64bits(o.want[i]) {
							t.Errorf("%s: %s[%d] = %v, CPU %v", module, o.name, i, o.got[i], o.want[i])
						}
					}
				}
			}
		})
	}
}

// TestRieszEmptyAndErrors: an empty bank gives mean = max = 0 and leaves
// sum; unsupported exponents, mixed precisions and short buffers are
// refused, naming what.
func TestRieszEmptyAndErrors(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(3, 4))
	k := riesz.MustNew(1, 2, 1e-3)
	_, _, ga, gb := rieszCase{N: 3, M: 4, D: 8}.sets(t, dev, r)
	sum, mean, mx := upDoubles(t, dev, []float64{1, 2, 3}), upDoubles(t, dev, []float64{7, 7, 7}), upDoubles(t, dev, []float64{7, 7, 7})
	empty := gb
	empty.N = 0
	batch := dev.NewBatch()
	if err := RieszRowStats(dev, batch, k, ga, empty, upFloats(t, dev, nil), sum, mean, mx); err != nil {
		t.Fatal(err)
	}
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		name string
		buf  *vulkan.Buffer
		want []float64
	}{{"sum", sum, []float64{1, 2, 3}}, {"mean", mean, []float64{0, 0, 0}}, {"max", mx, []float64{0, 0, 0}}} {
		if got := downDoubles(t, dev, o.buf, 3); fmt.Sprint(got) != fmt.Sprint(o.want) {
			t.Errorf("empty bank: %s = %v, want %v", o.name, got, o.want)
		}
	}

	inv := upFloats(t, dev, make([]float32, 4))
	bf := gb
	bf.BF16 = true
	wide := ga
	wide.D = 16
	for _, c := range []struct {
		name string
		k    riesz.Kernel
		a, b RieszSet
		sum  *vulkan.Buffer
		want string
	}{
		{"p=3", riesz.MustNew(1, 3, 1e-3), ga, gb, sum, "exponent p = 3"},
		{"mixed", k, ga, bf, sum, "BF16=false and one with BF16=true"},
		{"dims", k, wide, gb, sum, "holds 96 bytes, need 192"},
		{"short sum", k, ga, gb, upDoubles(t, dev, []float64{1}), "sum holds 8 bytes, need 24 (3 float64)"},
		{"alias", k, ga, gb, ga.X, "shares a buffer"},
	} {
		err := RieszRowStats(dev, dev.NewBatch(), c.k, c.a, c.b, inv, c.sum, mean, mx)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestRieszNorms: RieszNorms equals riesz.Norms bit for bit (rows of one
// value, of 129, values whose squares are denormal or overflow).
func TestRieszNorms(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ n, d int }{{1, 1}, {70, 3}, {5, 129}, {3000, 2}} {
		x := make([]float32, c.n*c.d)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			switch i % 17 {
			case 3:
				x[i] *= 1e-20 // a denormal square
			case 5:
				x[i] *= 1e19 // an overflowing square
			}
		}
		want := make([]float32, c.n)
		riesz.Norms(want, x, c.n, c.d)
		dst := upFloats(t, dev, make([]float32, c.n))
		batch := dev.NewBatch()
		if err := RieszNorms(dev, batch, dst, upFloats(t, dev, x), c.n, c.d); err != nil {
			t.Fatal(err)
		}
		if err := batch.Run(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, c.n)
		if err := dev.DownloadFloat32s(dst, 0, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !exSameBits(exBits(got[i]), exBits(want[i])) {
				t.Errorf("n=%d d=%d: norm %d = %g, CPU %g", c.n, c.d, i, got[i], want[i])
			}
		}
	}
}

// TestRieszCachedScan: RieszRowStatsCached writes the CPU's interaction
// matrix (and the same statistics), and RieszScanRows over it gives
// riesz.ScanRows' crossings and checkpoints bit for bit: candidates in a
// shuffled order, headrooms ≤ 0, NaN, crossed at every depth and never,
// checkpoints every 128 rows with and without the final slot, and none.
func TestRieszCachedScan(t *testing.T) {
	dev := vulkantest.Open(t)
	mods := testModules(t, dev, "riesz_rowstats")
	r := rand.New(rand.NewPCG(9, 10))
	c := rieszCase{N: 300, M: 45, D: 5, p: 2, sigma: 1}
	k := riesz.MustNew(c.sigma, c.p, 1e-3)
	a, b, ga, gb := c.sets(t, dev, r)
	inv := make([]float32, c.M)
	for i := range inv {
		inv[i] = 1
	}
	sum, mean, mx := make([]float64, c.N), make([]float64, c.N), make([]float64, c.N)
	cache := make([]float32, c.N*c.M)
	var ws riesz.Workspace
	k.RowStatsCached(a, b, inv, sum, mean, mx, cache, &ws)

	ginv := upFloats(t, dev, inv)
	var gcache *vulkan.Buffer
	for _, module := range mods {
		gcache = upFloats(t, dev, make([]float32, c.N*c.M))
		gsum, gmean, gmax := upDoubles(t, dev, make([]float64, c.N)), upDoubles(t, dev, make([]float64, c.N)), upDoubles(t, dev, make([]float64, c.N))
		batch := dev.NewBatch()
		if err := rieszPassCached(dev, batch, module, k, ga, gb, ginv, gsum, gmean, gmax, gcache); err != nil {
			t.Fatal(err)
		}
		if err := batch.Run(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(cache))
		if err := dev.DownloadFloat32s(gcache, 0, got); err != nil {
			t.Fatal(err)
		}
		for i := range cache {
			if exBits(got[i]) != exBits(cache[i]) {
				t.Fatalf("%s: W[%d][%d] = %g, CPU %g", module, i/c.M, i%c.M, got[i], cache[i])
			}
		}
		if gs := downDoubles(t, dev, gsum, c.N); fmt.Sprint(gs) != fmt.Sprint(sum) {
			t.Errorf("%s: cached pass: sums differ from the CPU's", module)
		}
	}

	order := make([]int32, c.N)
	for i, x := range r.Perm(c.N) {
		order[i] = int32(x)
	}
	colSum := make([]float64, c.M)
	for i, w := range cache {
		colSum[i%c.M] += float64(w)
	}
	rem := make([]float64, c.M)
	for j := range rem {
		switch j % 9 {
		case 0:
			rem[j] = 0
		case 1:
			rem[j] = -1
		case 2:
			rem[j] = math.NaN()
		case 3:
			rem[j] = math.Inf(1) // never
		default:
			rem[j] = (0.05 + 0.9*r.Float64()) * colSum[j] // crossed mid-scan
		}
	}
	rowsBuf := exUpload(t, dev, func() []uint32 {
		v := make([]uint32, len(order))
		for i, x := range order {
			v[i] = uint32(x)
		}
		return v
	}())
	for _, sc := range []struct{ every, slots int }{{0, 0}, {128, 2}, {128, 3}} {
		cross := make([]int32, c.M)
		ckpt := make([]float64, sc.slots*c.M)
		riesz.ScanRows(cache, c.M, order, rem, cross, sc.every, ckpt, &ws)

		gcross := exUpload(t, dev, make([]uint32, c.M))
		var gckpt *vulkan.Buffer
		if sc.slots > 0 {
			gckpt = upDoubles(t, dev, make([]float64, sc.slots*c.M))
		}
		batch := dev.NewBatch()
		if err := RieszScanRows(dev, batch, gcache, c.N, c.M, rowsBuf, c.N, upDoubles(t, dev, rem), gcross, sc.every, gckpt); err != nil {
			t.Fatal(err)
		}
		if err := batch.Run(); err != nil {
			t.Fatal(err)
		}
		gc := make([]uint32, c.M)
		if err := dev.DownloadUint32s(gcross, 0, gc); err != nil {
			t.Fatal(err)
		}
		crossed := 0
		for j := range cross {
			if int32(gc[j]) != cross[j] {
				t.Errorf("every %d: cross[%d] = %d, CPU %d", sc.every, j, int32(gc[j]), cross[j])
			}
			if cross[j] > 0 && cross[j] < riesz.Never {
				crossed++
			}
		}
		if crossed < c.M/3 {
			t.Errorf("every %d: only %d columns cross mid-scan: the test does not test crossings", sc.every, crossed)
		}
		if sc.slots > 0 {
			g := downDoubles(t, dev, gckpt, sc.slots*c.M)
			for i := range ckpt {
				if math.Float64bits(g[i]) != math.Float64bits(ckpt[i]) {
					t.Fatalf("every %d, %d slots: ckpt[%d] = %v, CPU %v", sc.every, sc.slots, i, g[i], ckpt[i])
				}
			}
		}
	}

	// A row index outside the matrix: cross = −1 everywhere.
	bad := exUpload(t, dev, []uint32{0, uint32(c.N)})
	gcross := exUpload(t, dev, make([]uint32, c.M))
	batch := dev.NewBatch()
	if err := RieszScanRows(dev, batch, gcache, c.N, c.M, bad, 2, upDoubles(t, dev, rem), gcross, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	gc := make([]uint32, c.M)
	if err := dev.DownloadUint32s(gcross, 0, gc); err != nil {
		t.Fatal(err)
	}
	for j, x := range gc {
		if int32(x) != -1 {
			t.Fatalf("row index %d of %d rows: cross[%d] = %d, want -1", c.N, c.N, j, int32(x))
		}
	}
	if err := RieszScanRows(dev, dev.NewBatch(), gcache, c.N, c.M, rowsBuf, c.N, upDoubles(t, dev, rem), gcross, 100, nil); err == nil || !strings.Contains(err.Error(), "not a multiple of 128") {
		t.Errorf("every = 100: error %v, want one about the interval", err)
	}
}
