package t5

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gemm/kerneltest"
)

// bf16U is bfloat16's unit roundoff (8 significant bits): rounding to
// nearest changes a value by at most 2^-8 of it.
const bf16U = 0x1p-8

// Tolerances of the bf16 encoder against the float64 goldens.
//
// Derivation. A bf16 product rounds both operands: each term moves by at
// most (2u+u²) of itself, and a dot product of many mixed-sign terms by a
// random amount of root-mean-square ≈ u·√(2/3) of the result. An output
// row lies behind, per block, q/k/v, the scores, the probabilities times
// v, o, gate and fc1, and fc2 — five products in sequence, two blocks in
// the golden encoder — whose independent errors add in quadrature
// (√10·u·√(2/3) ≈ 2.6u) and are damped by the RMS norms: measured 0.8u to
// 1.75u relative L2 and at most 2.2u of the largest value per prompt. The
// tolerances leave a factor 2.3 and 3.6: a wrong layout or a skipped
// rounding shows up as O(1) or as an exact fp32 result, and the bits are
// pinned by TestBitsAcrossKernels. Each prompt must also be at least as
// accurate as Wan's own code in bf16 (the sidecar's
// precision.wan_code_bfloat16_rel_l2: 0.7–0.95 %), which also rounds the
// activations between the products.
const (
	tolRelL2BF16   = 4 * bf16U
	tolElementBF16 = 8 * bf16U
)

// TestGoldenBF16 encodes every golden prompt at bf16 and compares the
// output with the float64 reference (tolerances above), with Wan's own
// bf16 error on that prompt, and with the fp32 output (it must differ: the
// rounding happened).
func TestGoldenBF16(t *testing.T) {
	dir, g := openGolden(t)
	m, err := Load(filepath.Join(dir, "weights.safetensors"), LoadOptions{Precision: gemm.BF16})
	if err != nil {
		t.Fatal(err)
	}
	m32, err := Load(filepath.Join(dir, "weights.safetensors"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Precision != gemm.BF16 || m32.Precision != gemm.F32 {
		t.Fatalf("precisions %v, %v", m.Precision, m32.Precision)
	}
	b, err := os.ReadFile(filepath.Join(dir, "encode.json"))
	if err != nil {
		t.Fatal(err)
	}
	var side struct {
		Precision struct {
			WanBF16 []float64 `json:"wan_code_bfloat16_rel_l2"`
		} `json:"precision"`
	}
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatal(err)
	}
	if len(side.Precision.WanBF16) != len(g.side.Prompts) {
		t.Fatalf("encode.json: %d bf16 errors for %d prompts", len(side.Precision.WanBF16), len(g.side.Prompts))
	}
	textLen := g.side.Config.TextLen
	for i, p := range g.side.Prompts {
		ids := toInt32(t, g.i64(p.Key+".input_ids", textLen))
		mask := toInt32(t, g.i64(p.Key+".attention_mask", textLen))
		want := g.f64(p.Key+".output", p.SeqLen, m.Config.Dim)
		out, err := m.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		out32, err := m32.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		var num, den, peak, maxAbs, diff float64
		for j, w := range want {
			d := float64(out[j]) - w
			num, den = num+d*d, den+w*w
			peak, maxAbs = max(peak, math.Abs(w)), max(maxAbs, math.Abs(d))
			diff = max(diff, math.Abs(float64(out[j])-float64(out32[j])))
		}
		rel := math.Sqrt(num / den)
		t.Logf("%s: relative L2 %.3g = %.2fu, max %.2fu of the largest value; Wan's bf16 code %.3g", p.Key, rel, rel/bf16U, maxAbs/peak/bf16U, side.Precision.WanBF16[i])
		switch {
		case !(rel <= tolRelL2BF16):
			t.Errorf("%s: relative L2 error %.3g > %g", p.Key, rel, tolRelL2BF16)
		case !(maxAbs <= tolElementBF16*peak):
			t.Errorf("%s: max error %.3g > %g × max |ref| %.3g", p.Key, maxAbs, tolElementBF16, peak)
		case rel > side.Precision.WanBF16[i]:
			t.Errorf("%s: relative L2 error %.3g, more than Wan's own bf16 code (%.3g)", p.Key, rel, side.Precision.WanBF16[i])
		case diff < bf16U/16*peak:
			t.Errorf("%s: bf16 and fp32 outputs differ by at most %.3g: is bf16 rounding at all?", p.Key, diff)
		}
	}
}

// TestBitsAcrossKernels: at both precisions, the encoder's output is the
// same bits whichever gemm kernel runs the products (every assembly
// kernel this CPU runs, pure Go, the Go emulations of AMX and
// AVX512_BF16), and equals the hash pinned in testdata/bits.json, which
// the -tags noasm build and every CPU must reproduce.
func TestBitsAcrossKernels(t *testing.T) {
	m, err := NewRandom(tinyConfig, 7)
	if err != nil {
		t.Fatal(err)
	}
	ids, mask := benchIDs(40, tinyConfig.Vocab)
	mask[39], mask[38] = 0, 0 // two masked keys
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			m.Precision = prec
			encode := func() []float32 {
				out, err := m.Forward(ids, mask, nil)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			ref := encode()
			kerneltest.Each(t, prec, func(kernel string) {
				if i := kerneltest.FirstDiff(encode(), ref); i >= 0 {
					t.Fatalf("%v kernel %s: output value %d differs from the auto kernel's", prec, kernel, i)
				}
			})
			kerneltest.Pinned(t, "t5 tiny "+prec.String(), kerneltest.Hash(ref))
		})
	}
	m.Precision = 4
	if _, err := m.Forward(ids, mask, nil); err == nil {
		t.Fatal("precision 4 accepted")
	}
}
