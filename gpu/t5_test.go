package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestProductWidenB: a float32 A times a bfloat16 B (umT5's weights at
// fp32) gives gemm's float32 product of B widened, bit for bit: NT and
// NN, odd shapes, B a view at an odd (half-word) offset with a padded
// leading dimension, denormal, zero and large bfloat16 values with A
// values that keep their products normal (a flush of the denormals, as
// the bfloat16 product reads its operands, would show).
func TestProductWidenB(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(3, 5))
	for _, sh := range []struct {
		m, n, k int
		nn      bool
		tiny    bool // B only denormal and zero
	}{{5, 19, 37, false, false}, {33, 70, 65, false, false}, {7, 13, 40, true, false}, {1, 1, 1, false, false}, {6, 9, 35, false, true}, {4, 11, 33, true, true}} {
		t.Run(fmt.Sprintf("%dx%dx%d/nn=%v/tiny=%v", sh.m, sh.n, sh.k, sh.nn, sh.tiny), func(t *testing.T) {
			a := make([]float32, sh.m*sh.k)
			for i := range a {
				a[i] = float32(r.NormFloat64())
				if r.IntN(4) == 0 {
					a[i] *= 0x1p100
				}
			}
			brows, bcols := sh.n, sh.k // NT: B is N×K
			if sh.nn {
				brows, bcols = sh.k, sh.n
			}
			const off, pad = 1, 3
			ld := bcols + pad
			bits := make([]uint16, off+brows*ld)
			for i := range bits {
				c := r.IntN(6)
				if sh.tiny {
					c %= 2
				}
				switch c {
				case 0: // a denormal bfloat16
					bits[i] = uint16(r.IntN(0x7f)+1) | uint16(r.IntN(2))<<15
				case 1:
					bits[i] = uint16(r.IntN(2)) << 15 // ±0
				default:
					bits[i] = gemm.RoundBF16(float32(r.NormFloat64()))
				}
			}
			wide := make([]float32, brows*bcols)
			for i := 0; i < brows; i++ {
				for j := 0; j < bcols; j++ {
					wide[i*bcols+j] = gemm.BF16ToFloat32(bits[off+i*ld+j])
				}
			}
			want := make([]float32, sh.m*sh.n)
			if sh.nn {
				gemm.NNAs(gemm.F32, sh.m, sh.n, sh.k, a, sh.k, wide, bcols, want, sh.n)
			} else {
				gemm.NTAs(gemm.F32, sh.m, sh.n, sh.k, a, sh.k, wide, bcols, want, sh.n)
			}
			am, err := UploadF32(dev, sh.m, sh.k, a)
			if err != nil {
				t.Fatal(err)
			}
			defer am.Buf.Free()
			bm, err := UploadBF16(dev, 1, len(bits), bits)
			if err != nil {
				t.Fatal(err)
			}
			defer bm.Buf.Free()
			bm.Rows, bm.Cols, bm.Ld, bm.Off = brows, bcols, ld, off
			cm, err := NewMatrix(dev, gemm.F32, sh.m, sh.n)
			if err != nil {
				t.Fatal(err)
			}
			defer cm.Buf.Free()
			batch := dev.NewBatch()
			if err := (Product{C: cm, A: am, B: bm, NN: sh.nn}).Record(dev, batch); err != nil {
				t.Fatal(err)
			}
			if err := batch.Run(); err != nil {
				t.Fatal(err)
			}
			got, err := cm.DownloadF32(dev)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("C[%d] = %v (%#08x), gemm's %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
	// A bfloat16 A with a float32 B stays an error.
	am, _ := NewMatrix(dev, gemm.BF16, 2, 2)
	bm, _ := NewMatrix(dev, gemm.F32, 2, 2)
	cm, _ := NewMatrix(dev, gemm.F32, 2, 2)
	defer am.Buf.Free()
	defer bm.Buf.Free()
	defer cm.Buf.Free()
	if err := NT(dev, dev.NewBatch(), cm, am, bm, false); err == nil {
		t.Error("NT of a bfloat16 A and a float32 B: no error")
	}
}
