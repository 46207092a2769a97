package t5_test

import (
	"fmt"

	"github.com/densitykv/densitykv/t5"
)

// A prompt as the tokenizer returns it (text_len 8 here, 512 in Wan):
// pieces, the EOS (1), then pads (0) with mask 0. Encode returns the rows
// of the real tokens, which the DiT pads back to text_len with zeros.
func ExampleModel_Encode() {
	cfg := t5.Config{Vocab: 100, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 2, Buckets: 32, MaxDist: 128, Eps: 1e-6}
	m, err := t5.NewRandom(cfg, 1) // or t5.Load("models_t5_umt5-xxl-enc-bf16.pth", t5.LoadOptions{})
	if err != nil {
		panic(err)
	}
	ids := []int32{17, 42, 9, 1, 0, 0, 0, 0}
	mask := []int32{1, 1, 1, 1, 0, 0, 0, 0}
	ctx, err := m.Encode(ids, mask)
	if err != nil {
		panic(err)
	}
	fmt.Printf("context [%d][%d], weights %d bytes\n", len(ctx)/cfg.Dim, cfg.Dim, m.WeightBytes())
	// Output: context [4][32], weights 49024 bytes
}
