package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/attn"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// upFloats allocates a buffer holding v (at least one word).
func upFloats(t testing.TB, dev *vulkan.Device, v []float32) *vulkan.Buffer {
	t.Helper()
	b, err := dev.Alloc(int64(4 * max(len(v), 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	if err := dev.UploadFloat32s(b, 0, v); err != nil {
		t.Fatal(err)
	}
	return b
}

// attnCase is one attention call of the tests; mod changes the inputs.
type attnCase struct {
	T, S, H, D int
	scale      float32
	mod        string
}

func (c attnCase) String() string {
	return fmt.Sprintf("T%d_S%d_H%d_D%d_%s", c.T, c.S, c.H, c.D, c.mod)
}

// inputs returns q, k, v for the case.
func (c attnCase) inputs(r *rand.Rand) (q, k, v []float32) {
	n := func(m int) []float32 {
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v = n(c.T*c.H*c.D), n(c.S*c.H*c.D), n(c.S*c.H*c.D)
	switch c.mod {
	case "large": // scores in the hundreds: most probabilities underflow
		for i := range q {
			q[i] *= 30
		}
	case "tiny": // exponentials that underflow to denormals and 0, denormal values
		for i := range k {
			k[i] *= 40
		}
		for i := range q {
			q[i] *= 10
		}
		for i := range v {
			if i%7 == 0 {
				v[i] = 1e-39
			}
		}
	case "naninf": // a NaN query, ±Inf keys and values, a −Inf score row
		q[0] = float32(math.NaN())
		k[3] = float32(math.Inf(1))
		k[10] = float32(math.Inf(-1))
		v[5] = float32(math.Inf(-1))
		q[len(q)-1] = float32(math.Inf(1))
	}
	return q, k, v
}

// TestAttentionExact: Attention on the device equals attn.AttentionAs
// byte for byte (NaN-aware) at both precisions, on shapes with tails (T
// not a multiple of the workgroup's rows, S of attn.BlockS and of the
// bfloat16 block), S = 1, D = 1, 3, 128, large and tiny scores, ±Inf and
// NaN inputs.
func TestAttentionExact(t *testing.T) {
	dev := vulkantest.Open(t)
	mods := testModules(t, dev, "attn_exact")
	r := rand.New(rand.NewPCG(1, 2))
	cases := []attnCase{
		{1, 1, 1, 1, 1, ""}, {3, 5, 2, 3, 0.5, ""}, {5, 600, 2, 16, 0.25, ""},
		{9, 1100, 1, 40, 0.1, "large"}, {6, 513, 2, 128, 0.088, ""}, {4, 70, 1, 8, 1, "naninf"},
		{7, 1030, 1, 5, 1, "tiny"}, {2, 33, 3, 1, 2, ""}, {37, 40, 2, 8, 1, ""},
	}
	for _, c := range cases {
		q, k, v := c.inputs(r)
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			t.Run(c.String()+"_"+prec.String(), func(t *testing.T) {
				want := make([]float32, c.T*c.H*c.D)
				attn.AttentionAs(prec, want, q, k, v, c.T, c.S, c.H, c.D, c.scale)
				gq, gk, gv := upFloats(t, dev, q), upFloats(t, dev, k), upFloats(t, dev, v)
				for _, module := range mods {
					out := upFloats(t, dev, make([]float32, len(want)))
					batch := dev.NewBatch()
					if err := attention(dev, batch, module, prec, out, gq, gk, gv, c.T, c.S, c.H, c.D, c.scale); err != nil {
						t.Fatal(err)
					}
					if err := batch.Run(); err != nil {
						t.Fatal(err)
					}
					got := make([]float32, len(want))
					if err := dev.DownloadFloat32s(out, 0, got); err != nil {
						t.Fatal(err)
					}
					bad := 0
					for i := range want {
						if !exSameBits(exBits(got[i]), exBits(want[i])) {
							if bad < 5 {
								t.Errorf("%s: out[%d] = %g (%#08x), CPU %g (%#08x)", module, i, got[i], exBits(got[i]), want[i], exBits(want[i]))
							}
							bad++
						}
					}
					if bad > 0 {
						t.Errorf("%s: %d of %d outputs differ", module, bad, len(want))
					}
				}
			})
		}
	}
}

// testModules returns the modules of exact kernel name to test on dev:
// name_softfma (integer fma32) always, and name (fma()) where the
// exactness probe found fma() one rounding (not on lavapipe).
func testModules(t *testing.T, dev *vulkan.Device, name string) []string {
	t.Helper()
	props, err := CheckExact(dev)
	if err != nil {
		t.Fatal(err)
	}
	if props.FMA {
		return []string{name + "_softfma", name}
	}
	t.Logf("%v: fma() is not one rounding: %s tested alone", dev, name+"_softfma")
	return []string{name + "_softfma"}
}

// TestAttentionRows: the rows per workgroup change no bit (1, 3, 12 rows
// against the CPU, on rows that fill some workgroups and not others).
func TestAttentionRows(t *testing.T) {
	dev := vulkantest.Open(t)
	mods := testModules(t, dev, "attn_exact")
	c := attnCase{T: 21, S: 530, H: 2, D: 4, scale: 0.5}
	q, k, v := c.inputs(rand.New(rand.NewPCG(5, 6)))
	want := make([]float32, c.T*c.H*c.D)
	attn.Attention(want, q, k, v, c.T, c.S, c.H, c.D, c.scale)
	gq, gk, gv := upFloats(t, dev, q), upFloats(t, dev, k), upFloats(t, dev, v)
	defer func() { testRows = 0 }()
	for _, rows := range []int{1, 3, 12} {
		testRows = rows
		for _, module := range mods {
			out := upFloats(t, dev, make([]float32, len(want)))
			batch := dev.NewBatch()
			if err := attention(dev, batch, module, gemm.F32, out, gq, gk, gv, c.T, c.S, c.H, c.D, c.scale); err != nil {
				t.Fatal(err)
			}
			if err := batch.Run(); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(want))
			if err := dev.DownloadFloat32s(out, 0, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !exSameBits(exBits(got[i]), exBits(want[i])) {
					t.Fatalf("%s, %d rows: out[%d] = %g, CPU %g", module, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttentionErrors: bad sizes and buffers are refused, naming what.
func TestAttentionErrors(t *testing.T) {
	dev := vulkantest.Open(t)
	small := upFloats(t, dev, make([]float32, 4))
	big := upFloats(t, dev, make([]float32, 1024))
	big2 := upFloats(t, dev, make([]float32, 1024))
	for _, c := range []struct {
		name         string
		prec         gemm.Precision
		out, q, k, v *vulkan.Buffer
		T, S, H, D   int
		want         string
	}{
		{"no keys", gemm.F32, big, big2, big2, big2, 2, 0, 1, 4, "no keys"},
		{"D", gemm.F32, big, big2, big2, big2, 1, 1, 1, AttnMaxD + 1, "head dimension"},
		{"short q", gemm.F32, big, small, big2, big2, 2, 2, 1, 4, "q holds 16 bytes, need 32"},
		{"alias", gemm.F32, big, big, big2, big2, 2, 2, 1, 4, "shares a buffer"},
		{"negative", gemm.F32, big, big2, big2, big2, -1, 2, 1, 4, "negative size"},
		{"precision", gemm.Precision(7), big, big2, big2, big2, 1, 1, 1, 1, "unknown precision"},
	} {
		err := Attention(dev, dev.NewBatch(), c.prec, c.out, c.q, c.k, c.v, c.T, c.S, c.H, c.D, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
