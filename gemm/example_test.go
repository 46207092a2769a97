package gemm_test

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
)

// A 2×3 matrix times the transpose of a 2×3 matrix.
func ExampleNT() {
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 0, 1, 0, 1, 0}
	c := make([]float32, 4)
	gemm.NT(2, 2, 3, a, 3, b, 3, c, 2)
	fmt.Println(c)
	// Output: [4 2 10 5]
}

// Row maxima of A·Bᵀ without storing the product: the bank's interaction
// passes work this way, with B packed once and reused.
func ExamplePackedB_TileFunc() {
	a := []float32{1, 2, 3, 4}       // 2×2
	b := []float32{1, 0, 0, 1, 1, 1} // 3×2
	pb := gemm.PackNT(nil, 3, 2, b, 2)
	rowMax := []float32{-1e30, -1e30}
	pb.TileFunc(2, a, 2, func(i0, j0, rows, cols int, tile []float32, ldt int) {
		for r := 0; r < rows; r++ {
			for _, v := range tile[r*ldt : r*ldt+cols] {
				rowMax[i0+r] = max(rowMax[i0+r], v)
			}
		}
	})
	fmt.Println(rowMax)
	// Output: [3 7]
}

// A Linear layer whose weights stay in bfloat16 (as in a real checkpoint):
// the weights are packed once as a BF16 operand, and the activations are
// rounded to bfloat16 as they are multiplied (PackedB.Product packs A at
// B's precision), so y is the bfloat16 product of the package
// documentation, identical on every CPU.
func ExamplePackNTBF16() {
	w := []uint16{ // 2×2 weights [out][in]
		gemm.RoundBF16(1), gemm.RoundBF16(0.5),
		gemm.RoundBF16(-2), gemm.RoundBF16(0.25),
	}
	pw := gemm.PackNTBF16(nil, gemm.BF16, 2, 2, w, 2)
	x := []float32{1, 2.001} // one token; 2.001 rounds to 2 in bfloat16
	y := make([]float32, 2)
	pw.Product(1, x, 2, y, 2)
	fmt.Println(y)
	// Output: [2 -1.5]
}
