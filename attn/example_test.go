package attn_test

import (
	"fmt"

	"github.com/densitykv/densitykv/attn"
)

// One query attending over two keys of one head: the second key matches
// the query, so it takes most of the weight.
func ExampleAttentionMass() {
	q := []float32{0, 4}       // T=1, H=1, D=2
	k := []float32{4, 0, 0, 4} // S=2
	v := []float32{1, 0, 0, 1} // key 0 → (1,0), key 1 → (0,1)
	out := make([]float32, 2)
	mass := make([]float64, 2) // one query segment × two key segments
	attn.AttentionMass(out, q, k, v, 1, 2, 1, 2, 0.25, []int{0, 1}, []int{0, 1, 2}, mass)
	fmt.Printf("out %.4f %.4f, mass %.4f %.4f\n", out[0], out[1], mass[0], mass[1])
	// Output: out 0.0180 0.9820, mass 0.0180 0.9820
}
