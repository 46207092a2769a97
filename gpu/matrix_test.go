package gpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestRoundBF16 rounds float32 matrices (specials, offsets, odd leading
// dimensions, so that rows share words) and compares every half-word of
// the destination buffer: gemm.RoundBF16 or gemm.BF16OperandBits inside
// the matrix, the guard outside.
func TestRoundBF16(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ rows, cols, pad, off int }{
		{1, 1, 0, 0}, {1, 1, 0, 1}, {3, 5, 0, 1}, {4, 7, 2, 3}, {2, 600, 1, 0}, {33, 31, 0, 0},
	} {
		for _, operand := range []bool{false, true} {
			src := newMat(r, gemm.F32, s.rows, s.cols, s.pad+1, s.off+2, true)
			dst := testMat{prec: gemm.BF16, rows: s.rows, cols: s.cols, ld: s.cols + s.pad, off: s.off, v: make([]uint32, s.rows*s.cols)}
			dm := dst.upload(t, dev)
			batch := dev.NewBatch()
			if err := RoundBF16(dev, batch, dm, src.upload(t, dev), operand); err != nil {
				t.Fatal(err)
			}
			if err := batch.Run(); err != nil {
				t.Fatal(err)
			}
			old := dst.words()
			got := make([]uint32, len(old))
			if err := dev.DownloadUint32s(dm.Buf, 0, got); err != nil {
				t.Fatal(err)
			}
			want := make([]uint16, len(src.v))
			if operand {
				gemm.BF16OperandBits(want, src.f32())
			} else {
				for i, x := range src.f32() {
					want[i] = gemm.RoundBF16(x)
				}
			}
			for e := 0; e < 2*len(got); e++ {
				g, w := uint16(got[e/2]>>(16*(e%2))), uint16(old[e/2]>>(16*(e%2)))
				i, j := (e-dst.off)/dst.ld, (e-dst.off)%dst.ld
				if e >= dst.off && i < dst.rows && j < dst.cols {
					w = want[i*dst.cols+j]
				}
				if g != w {
					t.Errorf("%+v operand=%v: half-word %d = %#04x, want %#04x", s, operand, e, g, w)
				}
			}
		}
	}
}

// TestMatrixTransfers uploads and downloads matrices and views with
// offsets and leading dimensions.
func TestMatrixTransfers(t *testing.T) {
	dev := vulkantest.Open(t)
	f := []float32{1, -2, 3, float32(math.Inf(1)), 0x1p-140, 6}
	m, err := UploadF32(dev, 2, 3, f)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Buf.Free()
	got, err := m.DownloadF32(dev)
	if err != nil || len(got) != 6 {
		t.Fatal(got, err)
	}
	for i := range f {
		if math.Float32bits(got[i]) != math.Float32bits(f[i]) {
			t.Errorf("float32 %d: %g, want %g", i, got[i], f[i])
		}
	}
	view := Matrix{Buf: m.Buf, Prec: gemm.F32, Rows: 2, Cols: 1, Ld: 3, Off: 2}
	if v, err := view.DownloadF32(dev); err != nil || v[0] != 3 || v[1] != 6 {
		t.Errorf("column view: %v, %v; want [3 6]", v, err)
	}
	h := []uint16{0x3f80, 0xc000, 0x4040, 0x7f80, 0x0001}
	bm, err := UploadBF16(dev, 1, 5, h)
	if err != nil {
		t.Fatal(err)
	}
	defer bm.Buf.Free()
	for _, c := range []struct {
		view Matrix
		want []uint16
	}{
		{bm, h},
		{Matrix{Buf: bm.Buf, Prec: gemm.BF16, Rows: 2, Cols: 1, Ld: 2, Off: 1}, []uint16{0xc000, 0x7f80}},
		{Matrix{Buf: bm.Buf, Prec: gemm.BF16, Rows: 1, Cols: 3, Ld: 3, Off: 2}, []uint16{0x4040, 0x7f80, 0x0001}},
	} {
		v, err := c.view.DownloadBF16(dev)
		if err != nil || len(v) != len(c.want) {
			t.Fatalf("%+v: %v, %v", c.view, v, err)
		}
		for i := range v {
			if v[i] != c.want[i] {
				t.Errorf("%+v: element %d = %#04x, want %#04x", c.view, i, v[i], c.want[i])
			}
		}
	}
	if _, err := m.DownloadBF16(dev); err == nil {
		t.Error("DownloadBF16 of a float32 matrix: no error")
	}
	if _, err := UploadF32(dev, 2, 2, f); err == nil || !strings.Contains(err.Error(), "6 values for 2×2") {
		t.Errorf("UploadF32 of 6 values as 2×2: %v", err)
	}
}

// TestProductErrors records bad products and requires an error naming
// what is wrong, and nothing recorded.
func TestProductErrors(t *testing.T) {
	dev := vulkantest.Open(t)
	mk := func(prec gemm.Precision, rows, cols int) Matrix {
		m, err := NewMatrix(dev, prec, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Buf.Free)
		return m
	}
	a, b, c := mk(gemm.BF16, 3, 4), mk(gemm.BF16, 5, 4), mk(gemm.F32, 3, 5)
	long := c
	long.Rows = 4
	for _, e := range []struct {
		p    Product
		want string
	}{
		{Product{C: c, A: a, B: mk(gemm.BF16, 4, 4)}, "shapes do not match"},
		{Product{C: c, A: a, B: b, NN: true}, "shapes do not match"},
		{Product{C: c, A: a, B: mk(gemm.F32, 5, 4)}, "B is fp32, want bf16"},
		{Product{C: mk(gemm.BF16, 3, 5), A: a, B: b}, "C is bf16, want fp32"},
		{Product{C: long, A: mk(gemm.BF16, 4, 4), B: b}, "beyond its buffer"},
		{Product{C: Matrix{Buf: c.Buf, Prec: gemm.F32, Rows: 3, Cols: 5, Ld: 4}, A: a, B: b}, "leading dimension 4 for 5 columns"},
		{Product{C: c, A: Matrix{Prec: gemm.BF16, Rows: 3, Cols: 4, Ld: 4}, B: b}, "A: no buffer"},
		{Product{C: c, A: a, B: b, Tile: Tile{WX: 64, WY: 32, TM: 1, TN: 1}}, "at most 1024 invocations"},
		{Product{C: c, A: a, B: b, Tile: Tile{WX: 1, WY: 1024, TM: 64, TN: 1}}, "bytes of shared memory"},
		{Product{C: Matrix{Buf: a.Buf, Prec: gemm.F32, Rows: 3, Cols: 2, Ld: 2}, A: a, B: mk(gemm.BF16, 2, 4)}, "shares a buffer"},
	} {
		batch := dev.NewBatch()
		err := e.p.Record(dev, batch)
		if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%+v: error %v, want one with %q", e.p, err, e.want)
		}
		if batch.Len() != 0 {
			t.Errorf("%+v: %d commands recorded", e.p, batch.Len())
		}
	}
}

// TestProductTooManyGroups requires an error, not a failed batch, for a C
// wider than the device's workgroup count allows with the tile.
func TestProductTooManyGroups(t *testing.T) {
	dev := vulkantest.Open(t)
	lim := int(dev.Info().MaxWorkgroupCount[0])
	if lim == 0 || lim > 1<<18 {
		t.Skipf("the device allows %d workgroups: a C too wide would not fit in memory here", lim)
	}
	n := (lim + 1) * 12 // smallTile: 12 columns a workgroup
	var ms []Matrix
	for _, s := range []struct {
		prec       gemm.Precision
		rows, cols int
	}{{gemm.F32, 1, n}, {gemm.BF16, 1, 1}, {gemm.BF16, n, 1}} {
		m, err := NewMatrix(dev, s.prec, s.rows, s.cols)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Buf.Free()
		ms = append(ms, m)
	}
	err := Product{C: ms[0], A: ms[1], B: ms[2], Tile: smallTile}.Record(dev, dev.NewBatch())
	if err == nil || !strings.Contains(err.Error(), "workgroups in dimension 0") {
		t.Errorf("C 1×%d with 12-column tiles: error %v", n, err)
	}
}
