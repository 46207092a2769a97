package t5

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
)

// The golden comparison must notice corrupted data: a changed weight (in
// memory or in the file), a changed reference value, a missing folder.

// prompt0 returns the golden prompt 0's ids, mask and reference output.
func prompt0(t *testing.T) (ids, mask []int32, want []float64) {
	t.Helper()
	dir := golden.T5(t)
	st, err := checkpoint.OpenSafetensors(filepath.Join(dir, "encode.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	i, _, err := st.Int64("prompt0.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	mk, _, err := st.Int64("prompt0.attention_mask")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err = st.Float64("prompt0.output")
	if err != nil {
		t.Fatal(err)
	}
	return toInt32(t, i), toInt32(t, mk), want
}

func TestGoldenDetectsCorruptWeights(t *testing.T) {
	dir := golden.T5(t)
	ids, mask, want := prompt0(t)
	m, err := Load(filepath.Join(dir, "weights_bf16.pth"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustMatch := func(label string) {
		t.Helper()
		out, err := m.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := compare(out, want); err != nil {
			t.Fatalf("%s: %v", label, err)
		}
	}
	mustDiffer := func(label string) {
		t.Helper()
		out, err := m.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		rel, _, err := compare(out, want)
		if err == nil {
			t.Fatalf("%s: still within tolerance (rel L2 %.3g)", label, rel)
		}
		t.Logf("%s: detected (%v)", label, err)
	}
	mustMatch("intact")
	// One weight of each kind, each changed alone and restored (in block 0
	// and the last block, whichever the golden set's depth).
	L, last := len(m.Blocks), m.Blocks[len(m.Blocks)-1]
	for _, c := range []struct {
		name string
		w    []uint16
		i    int
	}{
		{"embedding of the first token", m.TokenEmbedding, int(ids[0])*m.Config.Dim + 3},
		{"blocks.0.attn.k", m.Blocks[0].Attn.K.W, 5},
		{fmt.Sprintf("blocks.%d.ffn.fc2", L-1), last.FFN.FC2.W, 17},
		{fmt.Sprintf("blocks.%d.ffn.gate.0", L-1), last.FFN.Gate.W, 40},
	} {
		old := c.w[c.i]
		c.w[c.i] = roundBF16(widen(old)*-4 + 1)
		mustDiffer(c.name)
		c.w[c.i] = old
	}
	for _, c := range []struct {
		name string
		v    []float32
		i    int
	}{
		{fmt.Sprintf("blocks.%d.norm2", L-1), last.Norm2, 7},
		{"norm", m.Norm, 0},
		{fmt.Sprintf("blocks.%d.pos_embedding (bucket 0, last head)", L-1), last.PosEmbedding, m.Config.Heads - 1},
	} {
		old := c.v[c.i]
		c.v[c.i] = old*-4 + 1
		mustDiffer(c.name)
		c.v[c.i] = old
	}
	mustMatch("restored")
}

// TestGoldenDetectsCorruptFile changes one float32 of a weight in a copy
// of weights.safetensors: the file still loads, the output no longer
// matches. A NaN written there is a load error naming the tensor.
func TestGoldenDetectsCorruptFile(t *testing.T) {
	dir := golden.T5(t)
	ids, mask, want := prompt0(t)
	src := filepath.Join(dir, "weights.safetensors")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.OpenSafetensors(src)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := st.Info("blocks.0.attn.q.weight")
	st.Close()
	if !ok || info.DType != checkpoint.F32 {
		t.Fatalf("blocks.0.attn.q.weight: %+v", info)
	}
	off := int(8+binary.LittleEndian.Uint64(raw)) + int(info.Begin) + 4*9
	for _, c := range []struct {
		name string
		bits uint32
	}{{"changed value", math.Float32bits(3)}, {"NaN", 0x7fc00000}} {
		bad := append([]byte(nil), raw...)
		binary.LittleEndian.PutUint32(bad[off:], c.bits)
		p := filepath.Join(t.TempDir(), "weights.safetensors")
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(p, LoadOptions{})
		if c.bits == 0x7fc00000 {
			if err == nil || !contains(err, "blocks.0.attn.q.weight", p, "NaN", "[0 9]") {
				t.Fatalf("NaN weight: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := compare(out, want); err == nil {
			t.Fatalf("%s: not detected", c.name)
		}
	}
}

// TestGoldenDetectsCorruptReference: one reference value changed by 0.05
// (a few % of its scale) fails the comparison.
func TestGoldenDetectsCorruptReference(t *testing.T) {
	dir := golden.T5(t)
	ids, mask, want := prompt0(t)
	m, err := Load(filepath.Join(dir, "weights.pth"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, len(want) / 2, len(want) - 1} {
		bad := append([]float64(nil), want...)
		bad[i] += 0.05
		if _, _, err := compare(out, bad); err == nil {
			t.Fatalf("reference value %d changed by 0.05: not detected", i)
		}
	}
	if _, _, err := compare(out[:len(out)-1], want); err == nil {
		t.Fatal("a short output was accepted")
	}
}

// fakeTB records a fatal failure instead of stopping the test.
type fakeTB struct{ failed bool }

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }

// TestGoldenFolderMissingFails: a missing or empty golden folder fails
// the test (never skips).
func TestGoldenFolderMissingFails(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		t.Setenv(golden.EnvT5, dir)
		f := &fakeTB{}
		golden.T5(f)
		if !f.failed {
			t.Fatalf("golden folder %s accepted", dir)
		}
	}
}
