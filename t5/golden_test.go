package t5

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
)

// The golden folder ../shared/golden/t5 (README.md there): a tiny umT5
// encoder in three files holding the same numbers, and Wan's float64
// outputs for 9 prompts with prompt 0's intermediates.

// weightFiles are the three encodings of the tiny encoder's weights.
var weightFiles = []string{"weights.pth", "weights_bf16.pth", "weights.safetensors"}

// Tolerances: the README's relative L2 per tensor for a float32 port, and
// our own per-element bound (1e-3 of the tensor's largest magnitude) so
// that one corrupted value cannot hide in the norm of a large tensor.
const (
	tolRelL2   = 1e-4
	tolElement = 1e-3
)

// goldenSidecar is the part of encode.json the tests read.
type goldenSidecar struct {
	Config struct {
		Vocab      int     `json:"vocab"`
		Dim        int     `json:"dim"`
		DimAttn    int     `json:"dim_attn"`
		DimFFN     int     `json:"dim_ffn"`
		NumHeads   int     `json:"num_heads"`
		NumLayers  int     `json:"num_layers"`
		NumBuckets int     `json:"num_buckets"`
		SharedPos  bool    `json:"shared_pos"`
		HeadDim    int     `json:"head_dim"`
		MaxDist    int     `json:"max_dist"`
		Eps        float64 `json:"eps"`
		TextLen    int     `json:"text_len"`
	} `json:"config"`
	Weights struct {
		Keys   []string         `json:"keys"`
		Shapes map[string][]int `json:"shapes"`
	} `json:"weights"`
	Prompts []struct {
		Key     string `json:"key"`
		SeqLen  int    `json:"seq_len"`
		NPieces int    `json:"n_pieces"`
	} `json:"prompts"`
	Tensors map[string]struct {
		DType string `json:"dtype"`
		Shape []int  `json:"shape"`
	} `json:"tensors"`
	Checks struct {
		BatchedVsSingle float64 `json:"batched_vs_single_max_abs_diff"`
		PerPrompt       []struct {
			Name             string  `json:"name"`
			SeqLen           int     `json:"seq_len"`
			RandomPadIDs     float64 `json:"random_pad_ids_max_abs_diff"`
			UnpaddedLen      float64 `json:"unpadded_len_seq_len_max_abs_diff"`
			UnpaddedNoMask   float64 `json:"unpadded_no_mask_max_abs_diff"`
			PaddedWithoutMsk float64 `json:"padded_without_mask_max_abs_diff"`
		} `json:"per_prompt"`
	} `json:"checks"`
}

func readSidecar(t testing.TB, dir string) *goldenSidecar {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "encode.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s goldenSidecar
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("encode.json: %v", err)
	}
	if len(s.Prompts) == 0 || len(s.Checks.PerPrompt) != len(s.Prompts) || len(s.Weights.Keys) == 0 {
		t.Fatalf("encode.json: %d prompts, %d checks, %d weight keys", len(s.Prompts), len(s.Checks.PerPrompt), len(s.Weights.Keys))
	}
	return &s
}

// compare checks got against the float64 reference want (README
// tolerances) and returns the relative L2 and max abs errors.
func compare(got []float32, want []float64) (relL2, maxAbs float64, err error) {
	if len(got) != len(want) {
		return 0, 0, fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	var num, den, peak float64
	for i, w := range want {
		d := float64(got[i]) - w
		if math.IsNaN(d) {
			return math.NaN(), math.NaN(), fmt.Errorf("value %d is %v, want %v", i, got[i], w)
		}
		num += d * d
		den += w * w
		maxAbs = max(maxAbs, math.Abs(d))
		peak = max(peak, math.Abs(w))
	}
	relL2 = math.Sqrt(num / max(den, 1e-300))
	if relL2 > tolRelL2 {
		return relL2, maxAbs, fmt.Errorf("relative L2 error %.3g > %g (max abs %.3g)", relL2, tolRelL2, maxAbs)
	}
	if maxAbs > tolElement*peak {
		return relL2, maxAbs, fmt.Errorf("max abs error %.3g > %g × max |ref| %.3g", maxAbs, tolElement, peak)
	}
	return relL2, maxAbs, nil
}

func toInt32(t testing.TB, v []int64) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		if x < math.MinInt32 || x > math.MaxInt32 {
			t.Fatalf("id %d at %d out of int32 range", x, i)
		}
		out[i] = int32(x)
	}
	return out
}

// goldenCase holds encode.safetensors and records which tensors the test
// compared, so that a tensor nobody compares fails the test.
type goldenCase struct {
	t        *testing.T
	st       *checkpoint.Safetensors
	side     *goldenSidecar
	compared map[string]bool
}

func (g *goldenCase) f64(name string, shape ...int) []float64 {
	g.t.Helper()
	v, s, err := g.st.Float64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	g.checkShape(name, s, shape)
	g.compared[name] = true
	return v
}

func (g *goldenCase) i64(name string, shape ...int) []int64 {
	g.t.Helper()
	v, s, err := g.st.Int64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	g.checkShape(name, s, shape)
	g.compared[name] = true
	return v
}

func (g *goldenCase) checkShape(name string, s, want []int) {
	g.t.Helper()
	if !slices.Equal(s, want) {
		g.t.Fatalf("%s: shape %v, want %v", name, s, want)
	}
	if side, ok := g.side.Tensors[name]; !ok || !slices.Equal(side.Shape, s) {
		g.t.Fatalf("%s: encode.json lists shape %v, file has %v", name, side.Shape, s)
	}
}

// check compares a port tensor with a reference tensor and logs the errors.
func (g *goldenCase) check(label string, got []float32, want []float64) {
	g.t.Helper()
	rel, mx, err := compare(got, want)
	if err != nil {
		g.t.Errorf("%s: %v", label, err)
		return
	}
	g.t.Logf("%-34s rel L2 %.2e  max abs %.2e", label, rel, mx)
}

func openGolden(t *testing.T) (dir string, g *goldenCase) {
	t.Helper()
	dir = golden.T5(t)
	st, err := checkpoint.OpenSafetensors(filepath.Join(dir, "encode.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return dir, &goldenCase{t: t, st: st, side: readSidecar(t, dir), compared: map[string]bool{}}
}

// TestGolden loads each weight file and checks every tensor of
// encode.safetensors: every prompt's output, prompt 0's intermediates,
// the position bias and the buckets.
func TestGolden(t *testing.T) {
	for _, file := range weightFiles {
		t.Run(file, func(t *testing.T) {
			dir, g := openGolden(t)
			m, err := Load(filepath.Join(dir, file), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenConfig(t, dir, file, m, g.side)
			for i, p := range g.side.Prompts {
				// The sidecar's checks once: the files hold the same numbers.
				checkGoldenPrompt(g, m, i, p.Key, p.SeqLen, file == weightFiles[1])
			}
			checkGoldenIntermediates(g, m)
			checkGoldenPosition(g, m)
			for _, name := range g.st.Names() {
				if !g.compared[name] {
					t.Errorf("encode.safetensors: tensor %s was not compared", name)
				}
			}
			if len(g.side.Tensors) != len(g.st.Names()) {
				t.Errorf("encode.json lists %d tensors, the file holds %d", len(g.side.Tensors), len(g.st.Names()))
			}
		})
	}
}

// checkGoldenConfig: the inferred configuration is the sidecar's, the
// tensors are its keys in order with its shapes, every weight is a
// bfloat16 value, and the weight bytes add up.
func checkGoldenConfig(t *testing.T, dir, file string, m *Model, s *goldenSidecar) {
	c, sc := m.Config, s.Config
	want := Config{Vocab: sc.Vocab, Dim: sc.Dim, DimAttn: sc.DimAttn, DimFFN: sc.DimFFN, Heads: sc.NumHeads,
		Layers: sc.NumLayers, Buckets: sc.NumBuckets, MaxDist: sc.MaxDist, Eps: sc.Eps}
	if c != want || c.HeadDim() != sc.HeadDim || sc.SharedPos {
		t.Fatalf("config %+v (head dim %d), sidecar %+v", c, c.HeadDim(), sc)
	}
	if m.Rounded != 0 {
		t.Errorf("%d weights rounded: the golden weights are all bfloat16 values", m.Rounded)
	}
	f, err := checkpoint.OpenRaw(filepath.Join(dir, file), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	for _, rt := range f.Tensors {
		names = append(names, rt.Name)
		if !slices.Equal(rt.Shape, s.Weights.Shapes[rt.Name]) {
			t.Errorf("%s: shape %v, sidecar %v", rt.Name, rt.Shape, s.Weights.Shapes[rt.Name])
		}
	}
	if strings.HasSuffix(file, ".pth") && !slices.Equal(names, s.Weights.Keys) {
		t.Errorf("tensor order %v, sidecar %v", names, s.Weights.Keys)
	}
	slices.Sort(names)
	keys := slices.Sorted(slices.Values(s.Weights.Keys))
	if !slices.Equal(names, keys) {
		t.Errorf("tensors %v, sidecar %v", names, keys)
	}
	bf := c.Vocab*c.Dim + c.Layers*(4*c.Dim*c.DimAttn+3*c.Dim*c.DimFFN)
	f32 := c.Layers*(2*c.Dim+c.Buckets*c.Heads) + c.Dim
	if int64(bf+f32) != c.Params() {
		t.Errorf("Params %d, want %d", c.Params(), bf+f32)
	}
	if got, want := m.WeightBytes(), int64(2*bf+4*f32); got != want {
		t.Errorf("WeightBytes %d, want %d", got, want)
	}
}

// checkGoldenPrompt compares Encode with prompt k's output and, with
// sidecarChecks, runs the sidecar's checks: Encode equals Forward's first rows bit for bit, the
// pads' ids do not matter, the unpadded prompt gives the same rows, and
// without the mask the output changes by the recorded amount.
func checkGoldenPrompt(g *goldenCase, m *Model, k int, key string, seqLen int, sidecarChecks bool) {
	t := g.t
	textLen := g.side.Config.TextLen
	ids := toInt32(t, g.i64(key+".input_ids", textLen))
	mask := toInt32(t, g.i64(key+".attention_mask", textLen))
	ones := 0
	for i, v := range mask {
		if v == 1 {
			ones++
			if ids[i] == 0 {
				t.Errorf("%s: pad id under mask 1 at %d", key, i)
			}
		} else if v != 0 || ids[i] != 0 {
			t.Errorf("%s: position %d: id %d mask %d, want a pad (0, 0)", key, i, ids[i], v)
		}
	}
	if ones != seqLen || ids[seqLen-1] != 1 {
		t.Fatalf("%s: %d mask ones, last real id %d; sidecar seq_len %d with EOS (1)", key, ones, ids[seqLen-1], seqLen)
	}
	d := m.Config.Dim
	out, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	g.check(key+".output", out, g.f64(key+".output", seqLen, d))
	if !sidecarChecks {
		return
	}
	full, err := m.Forward(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(out, full[:seqLen*d]); i >= 0 {
		t.Errorf("%s: Encode differs from Forward's rows at %d", key, i)
	}
	c := g.side.Checks.PerPrompt[k]
	if c.SeqLen != seqLen {
		t.Fatalf("checks[%d] is for seq_len %d, prompt has %d", k, c.SeqLen, seqLen)
	}
	// Random pad ids: the real rows do not change at all (sidecar: 0).
	rnd := slices.Clone(ids)
	for i := seqLen; i < len(rnd); i++ {
		rnd[i] = int32((i*7919 + 13) % m.Config.Vocab)
	}
	alt, err := m.Forward(rnd, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(alt[:seqLen*d], out); i >= 0 || c.RandomPadIDs != 0 {
		t.Errorf("%s: random pad ids change row value %d (sidecar %g)", key, i, c.RandomPadIDs)
	}
	// The unpadded prompt, with or without a mask: identical here; the
	// float64 reference differs by summation order only.
	for _, mk := range [][]int32{nil, mask[:seqLen]} {
		u, err := m.Forward(ids[:seqLen], mk, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(u, out); i >= 0 || c.UnpaddedLen > 1e-12 || c.UnpaddedNoMask > 1e-12 {
			t.Errorf("%s: unpadded run differs at %d (sidecar %g, %g)", key, i, c.UnpaddedLen, c.UnpaddedNoMask)
		}
	}
	// Without the mask the pads leak into the real rows by the recorded
	// amount (0 when there are no pads).
	nm, err := m.Forward(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var diff float64
	for i := range out {
		diff = max(diff, math.Abs(float64(nm[i])-float64(out[i])))
	}
	if math.Abs(diff-c.PaddedWithoutMsk) > 1e-3*max(1, c.PaddedWithoutMsk) {
		t.Errorf("%s: without the mask the output changes by %g, sidecar %g", key, diff, c.PaddedWithoutMsk)
	}
}

func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// checkGoldenIntermediates compares prompt 0's intermediates at all 512
// positions: the embedding (exact: a gather of the same bfloat16 values),
// each block's attention residual and output, the final norm, and block
// 0's probabilities over the real tokens (exactly 0 on the pad keys).
func checkGoldenIntermediates(g *goldenCase, m *Model) {
	t := g.t
	p := g.side.Prompts[0]
	if p.Key != "prompt0" {
		t.Fatalf("first prompt %s", p.Key)
	}
	n, d, sl, H := g.side.Config.TextLen, m.Config.Dim, p.SeqLen, m.Config.Heads
	ids, _, _ := g.st.Int64("prompt0.input_ids")
	mask, _, _ := g.st.Int64("prompt0.attention_mask")
	tr := &Trace{WantProbs: true}
	out, err := m.Forward(toInt32(t, ids), toInt32(t, mask), tr)
	if err != nil {
		t.Fatal(err)
	}
	emb := g.f64("prompt0.embedding", n, d)
	for i, v := range emb {
		if float64(tr.Embedding[i]) != v {
			t.Fatalf("prompt0.embedding[%d] = %v, want %v", i, tr.Embedding[i], v)
		}
	}
	if len(tr.AfterAttn) != m.Config.Layers || len(tr.Blocks) != m.Config.Layers || len(tr.Probs) != m.Config.Layers {
		t.Fatalf("trace has %d/%d/%d blocks", len(tr.AfterAttn), len(tr.Blocks), len(tr.Probs))
	}
	for l := range m.Config.Layers {
		name := fmt.Sprintf("prompt0.layer%d.", l)
		g.check(name+"after_attn", tr.AfterAttn[l], g.f64(name+"after_attn", n, d))
		g.check(name+"output", tr.Blocks[l], g.f64(name+"output", n, d))
	}
	g.check("prompt0.output_full", out, g.f64("prompt0.output_full", n, d))
	want := g.f64("prompt0.layer0.attn_probs_real", H, sl, sl)
	got := make([]float32, 0, len(want))
	for h := range H {
		for i := range sl {
			row := tr.Probs[0][(h*n+i)*n : (h*n+i+1)*n]
			got = append(got, row[:sl]...)
			for j := sl; j < n; j++ {
				if row[j] != 0 {
					t.Fatalf("head %d query %d: probability %v on pad key %d", h, i, row[j], j)
				}
			}
		}
	}
	g.check("prompt0.layer0.attn_probs_real", got, want)
}

// checkGoldenPosition compares block 0's position bias (exact: a gather
// of float32 weights) and the bucket of every relative position.
func checkGoldenPosition(g *goldenCase, m *Model) {
	t := g.t
	n, H := g.side.Config.TextLen, m.Config.Heads
	want := g.f64("prompt0.pos_bias_layer0", H, n, n)
	got, err := m.PositionBias(0, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range want {
		if float64(got[i]) != v {
			t.Fatalf("pos_bias_layer0[%d] = %v, want %v", i, got[i], v)
		}
	}
	rb := g.i64("rel_bucket", 2*n-1)
	for i, b := range rb {
		if r := i - (n - 1); int64(m.Config.RelativeBucket(r)) != b {
			t.Fatalf("bucket of r = %d: %d, want %d", r, m.Config.RelativeBucket(r), b)
		}
	}
}
