package checkpoint

import "testing"

// BenchmarkMergeLoRA merges one rank-256 adapter into a Wan2.1-1.3B FFN
// weight (8960×1536), LongLive's shape; the model has 30×(4+4+2) such
// Linears (most of them 1536×1536).
func BenchmarkMergeLoRA(b *testing.B) {
	const out, in, r = 8960, 1536, 256
	mk := func(shape ...int) *Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := &Tensor{Shape: shape, Data: make([]float32, n)}
		for i := range t.Data {
			t.Data[i] = float32(i%7) * 1e-3
		}
		return t
	}
	base := StateDict{"blocks.0.ffn.0.weight": mk(out, in)}
	lora := StateDict{"blocks.0.ffn.0.lora_A.weight": mk(r, in), "blocks.0.ffn.0.lora_B.weight": mk(out, r)}
	b.SetBytes(4 * out * in)
	for b.Loop() {
		if _, err := MergeLoRA(base, lora, 256); err != nil {
			b.Fatal(err)
		}
	}
}
