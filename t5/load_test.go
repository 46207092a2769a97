package t5

import (
	"bytes"
	"encoding/binary"
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
	"github.com/densitykv/densitykv/internal/torchtest"
)

// goldenTensors returns the tiny encoder's tensors (float32) in
// checkpoint order.
func goldenTensors(t *testing.T) []checkpoint.WriteTensor {
	t.Helper()
	dir := golden.T5(t)
	sd, err := checkpoint.LoadFile(filepath.Join(dir, "weights.pth"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.OpenRaw(filepath.Join(dir, "weights.pth"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []checkpoint.WriteTensor
	for _, rt := range f.Tensors {
		out = append(out, checkpoint.WriteTensor{Name: rt.Name, Shape: sd[rt.Name].Shape, Data: slices.Clone(sd[rt.Name].Data)})
	}
	return out
}

func writeST(t *testing.T, ts []checkpoint.WriteTensor) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "enc.safetensors")
	if err := checkpoint.WriteSafetensorsFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeBF16ST writes float32 tensors (bfloat16 values) as a BF16
// safetensors file (checkpoint writes no BF16).
func writeBF16ST(t *testing.T, ts []checkpoint.WriteTensor) string {
	t.Helper()
	hdr := map[string]any{}
	var data []byte
	for _, x := range ts {
		v := x.Data.([]float32)
		hdr[x.Name] = map[string]any{"dtype": "BF16", "shape": x.Shape, "data_offsets": []int{len(data), len(data) + 2*len(v)}}
		for _, f := range v {
			data = binary.LittleEndian.AppendUint16(data, roundBF16(f))
		}
	}
	h, _ := json.Marshal(hdr)
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(h)))
	buf.Write(h)
	buf.Write(data)
	p := filepath.Join(t.TempDir(), "enc_bf16.safetensors")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func edit(ts []checkpoint.WriteTensor, f func([]checkpoint.WriteTensor) []checkpoint.WriteTensor) []checkpoint.WriteTensor {
	c := make([]checkpoint.WriteTensor, len(ts))
	for i, x := range ts {
		c[i] = x
		if d, ok := x.Data.([]float32); ok {
			c[i].Data = slices.Clone(d)
		}
		c[i].Shape = slices.Clone(x.Shape)
	}
	return f(c)
}

func find(ts []checkpoint.WriteTensor, name string) int {
	for i, x := range ts {
		if x.Name == name {
			return i
		}
	}
	panic(name)
}

func sameWeights(a, b *Model) bool {
	pa, pb := a.params(), b.params()
	for i := range pa {
		if pa[i].bf != nil && !slices.Equal(*pa[i].bf, *pb[i].bf) {
			return false
		}
		if pa[i].f32 != nil && !slices.Equal(*pa[i].f32, *pb[i].f32) {
			return false
		}
	}
	return a.Config == b.Config
}

// goldenShape is the configuration of the golden encoder's tensors, read
// from their shapes (so that the tests hold for any golden set: another
// vocabulary, say).
type goldenShape struct {
	vocab, dim, dimAttn, heads, buckets, layers int
	perBlock                                    int // tensors per block
}

func shapeOf(t *testing.T, ts []checkpoint.WriteTensor) goldenShape {
	t.Helper()
	var s goldenShape
	rank2 := func(name string) []int {
		sh := ts[find(ts, name)].Shape
		if len(sh) != 2 {
			t.Fatalf("golden %s has shape %v", name, sh)
		}
		return sh
	}
	e := rank2("token_embedding.weight")
	s.vocab, s.dim = e[0], e[1]
	s.dimAttn = rank2("blocks.0.attn.q.weight")[0]
	pos := rank2("blocks.0.pos_embedding.embedding.weight")
	s.buckets, s.heads = pos[0], pos[1]
	for _, x := range ts {
		if rest, ok := strings.CutPrefix(x.Name, "blocks."); ok {
			var l int
			fmt.Sscanf(rest, "%d.", &l)
			s.layers = max(s.layers, l+1)
			if l == 0 {
				s.perBlock++
			}
		}
	}
	// Defects go into the last block, whose shapes do not configure the
	// encoder (block 0's do): the golden schema has 2 layers.
	if s.layers < 2 || s.heads < 1 || s.dim < 5 || s.dimAttn < 6 {
		t.Fatalf("golden encoder %+v: too small for these tests", s)
	}
	return s
}

// TestLoadBadFiles: each defect is an error naming the file and the
// tensor (or what is wrong with the set of tensors). The sizes, names and
// messages come from the golden tensors' shapes.
func TestLoadBadFiles(t *testing.T) {
	ts := goldenTensors(t)
	testLoadBadFiles(t, ts)
}

// TestLoadBadFilesOtherShapes runs the defects of TestLoadBadFiles on the
// golden tensors with another vocabulary (the embedding's rows doubled)
// and one layer more (a copy of the last), as another golden set may have
// them: the sizes and messages must follow.
func TestLoadBadFilesOtherShapes(t *testing.T) {
	ts := goldenTensors(t)
	s := shapeOf(t, ts)
	ts = edit(ts, func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
		e := &ts[find(ts, "token_embedding.weight")]
		d := e.Data.([]float32)
		e.Data, e.Shape = append(d, d...), []int{2 * s.vocab, s.dim}
		last, next := fmt.Sprintf("blocks.%d.", s.layers-1), fmt.Sprintf("blocks.%d.", s.layers)
		for _, x := range ts {
			if rest, ok := strings.CutPrefix(x.Name, last); ok {
				x.Name = next + rest
				ts = append(ts, x)
			}
		}
		return ts
	})
	if got := shapeOf(t, ts); got.vocab != 2*s.vocab || got.layers != s.layers+1 {
		t.Fatalf("edited tensors have %+v", got)
	}
	testLoadBadFiles(t, ts)
}

func testLoadBadFiles(t *testing.T, ts []checkpoint.WriteTensor) {
	s := shapeOf(t, ts)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	last := fmt.Sprintf("blocks.%d.", s.layers-1) // the last block
	// A head count that does not divide dim_attn.
	badHeads := s.heads + 1
	for s.dimAttn%badHeads == 0 {
		badHeads++
	}
	for _, c := range []struct {
		name string
		mod  func([]checkpoint.WriteTensor) []checkpoint.WriteTensor
		want []string
	}{
		{"missing tensor", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return slices.Delete(ts, find(ts, last+"ffn.fc2.weight"), find(ts, last+"ffn.fc2.weight")+1)
		}, []string{"1 missing: " + last + "ffn.fc2.weight"}},
		{"unexpected tensor", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return append(ts, checkpoint.WriteTensor{Name: "blocks.0.attn.extra.weight", Shape: []int{2}, Data: []float32{1, 2}})
		}, []string{"1 unexpected: blocks.0.attn.extra.weight"}},
		{"mis-shaped norm", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := find(ts, "blocks.0.norm2.weight")
			ts[i].Shape, ts[i].Data = []int{s.dim - 1}, ts[i].Data.([]float32)[:s.dim-1]
			return ts
		}, []string{fmt.Sprintf("mis-shaped: blocks.0.norm2.weight [%d] (want [%d])", s.dim-1, s.dim)}},
		{"mis-shaped last layer's q", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := find(ts, last+"attn.q.weight")
			ts[i].Shape = []int{1, s.dimAttn * s.dim} // the same values, another shape
			return ts
		}, []string{fmt.Sprintf("%sattn.q.weight [1 %d] (want [%d %d])", last, s.dimAttn*s.dim, s.dimAttn, s.dim)}},
		{"integer dtype", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := find(ts, "blocks.0.norm1.weight")
			ts[i].Data = make([]int64, s.dim)
			return ts
		}, []string{"blocks.0.norm1.weight has dtype I64"}},
		{"NaN matrix weight", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			ts[find(ts, last+"attn.o.weight")].Data.([]float32)[2*s.dimAttn+5] = nan // o is [dim, dim_attn]
			return ts
		}, []string{last + "attn.o.weight has NaN at [2 5]"}},
		{"Inf norm weight", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			ts[find(ts, "norm.weight")].Data.([]float32)[4] = inf
			return ts
		}, []string{"norm.weight has +Inf at [4]"}},
		{"float32 beyond bfloat16", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			ts[find(ts, "token_embedding.weight")].Data.([]float32)[0] = math.MaxFloat32
			return ts
		}, []string{"token_embedding.weight has 3.4028235e+38 at [0 0]"}},
		{"shared position table", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			p := ts[find(ts, "blocks.0.pos_embedding.embedding.weight")]
			ts = slices.DeleteFunc(ts, func(x checkpoint.WriteTensor) bool { return strings.Contains(x.Name, "pos_embedding") })
			p.Name = "pos_embedding.embedding.weight"
			return append(ts, p)
		}, []string{"shared_pos=True"}},
		{"no blocks", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return slices.DeleteFunc(ts, func(x checkpoint.WriteTensor) bool { return strings.HasPrefix(x.Name, "blocks.") })
		}, []string{"no blocks.<i> tensors"}},
		{"odd block index", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			ts[find(ts, last+"norm1.weight")].Name = fmt.Sprintf("blocks.0%d.norm1.weight", s.layers-1)
			return ts
		}, []string{fmt.Sprintf(`blocks.0%d.norm1.weight: block index "0%d"`, s.layers-1, s.layers-1)}},
		{"no embedding", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return slices.Delete(ts, find(ts, "token_embedding.weight"), find(ts, "token_embedding.weight")+1)
		}, []string{"token_embedding.weight missing"}},
		{"flat embedding", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			ts[find(ts, "token_embedding.weight")].Shape = []int{s.vocab * s.dim}
			return ts
		}, []string{fmt.Sprintf("token_embedding.weight has shape [%d], want rank 2", s.vocab*s.dim)}},
		{"heads not dividing dim_attn", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			for l := range s.layers {
				i := find(ts, fmt.Sprintf("blocks.%d.pos_embedding.embedding.weight", l))
				ts[i].Shape, ts[i].Data = []int{s.buckets, badHeads}, make([]float32, s.buckets*badHeads)
			}
			return ts
		}, []string{fmt.Sprintf("dim_attn %d is not a multiple of heads %d", s.dimAttn, badHeads)}},
		{"a layer missing in the middle", func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			// The last block renamed one index up: a gap where it was.
			next := fmt.Sprintf("blocks.%d.", s.layers)
			for _, x := range ts {
				if rest, ok := strings.CutPrefix(x.Name, last); ok {
					x.Name = next + rest
					ts = append(ts, x)
				}
			}
			return slices.DeleteFunc(ts, func(x checkpoint.WriteTensor) bool { return strings.HasPrefix(x.Name, last) })
		}, []string{fmt.Sprintf("%d missing: %snorm1.weight", s.perBlock, last)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeST(t, edit(ts, c.mod))
			_, err := Load(p, LoadOptions{})
			if !contains(err, append([]string{"t5: ", p}, c.want...)...) {
				t.Fatalf("Load: %v\nwant mention of %q and the file", err, c.want)
			}
			// Inspect finds every defect but the values (it reads none).
			_, err = Inspect(p, LoadOptions{})
			if values := strings.Contains(c.name, "NaN") || strings.Contains(c.name, "Inf") || strings.Contains(c.name, "beyond"); values != (err == nil) {
				t.Fatalf("Inspect: %v", err)
			} else if !values && !contains(err, append([]string{"t5: ", p}, c.want...)...) {
				t.Fatalf("Inspect: %v\nwant mention of %q and the file", err, c.want)
			}
		})
	}
}

// TestLoadTruncatedAndMissing: a cut .pth or safetensors file, a missing
// file and a file that is no checkpoint are errors naming the file.
func TestLoadTruncatedAndMissing(t *testing.T) {
	dir := golden.T5(t)
	for _, name := range []string{"weights_bf16.pth", "weights.safetensors"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{len(b) - 1, len(b) / 2, 100, 0} {
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, b[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(p, LoadOptions{}); !contains(err, "t5: load", p) {
				t.Fatalf("%s cut to %d bytes: %v", name, n, err)
			}
			if _, err := Inspect(p, LoadOptions{}); !contains(err, "t5: load", p) {
				t.Fatalf("Inspect: %s cut to %d bytes: %v", name, n, err)
			}
		}
	}
	for _, name := range []string{"weights_bf16.pth", "weights.pth", "weights.safetensors"} {
		m, err := Load(filepath.Join(dir, name), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err := Inspect(filepath.Join(dir, name), LoadOptions{}); err != nil || cfg != m.Config {
			t.Fatalf("Inspect %s: %+v %v, Load: %+v", name, cfg, err, m.Config)
		}
	}
	missing := filepath.Join(t.TempDir(), "none.pth")
	if _, err := Load(missing, LoadOptions{}); !contains(err, "t5: load", missing) {
		t.Fatalf("missing file: %v", err)
	}
	text := filepath.Join(t.TempDir(), "notes.pth")
	os.WriteFile(text, []byte("not a checkpoint"), 0o644)
	if _, err := Load(text, LoadOptions{}); !contains(err, "t5: load", text) {
		t.Fatalf("text file: %v", err)
	}
}

// TestLoadDTypes: BF16 safetensors, F64 and F16-free float32 files with
// bfloat16 values load to the same weights bit for bit and Rounded 0;
// float32 values between bfloat16 values are rounded to nearest even and
// counted; norms and tables keep their float32 values.
func TestLoadDTypes(t *testing.T) {
	dir := golden.T5(t)
	ref, err := Load(filepath.Join(dir, "weights_bf16.pth"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := goldenTensors(t)
	bf, err := Load(writeBF16ST(t, ts), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sameWeights(bf, ref) || bf.Rounded != 0 {
		t.Fatalf("BF16 safetensors: weights differ or %d rounded", bf.Rounded)
	}
	f64 := edit(ts, func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
		for i := range ts {
			d := ts[i].Data.([]float32)
			v := make([]float64, len(d))
			for j, x := range d {
				v[j] = float64(x)
			}
			ts[i].Data = v
		}
		return ts
	})
	m64, err := Load(writeST(t, f64), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sameWeights(m64, ref) || m64.Rounded != 0 {
		t.Fatalf("F64 safetensors: weights differ or %d rounded", m64.Rounded)
	}
	// Off-grid float32 values: q weights nudged by 1/4 and 1/2 of a
	// bfloat16 ulp (the half-way ones tie to even); a norm weight keeps its
	// float32 value.
	nudged := edit(ts, func(ts []checkpoint.WriteTensor) []checkpoint.WriteTensor {
		q := ts[find(ts, "blocks.0.attn.q.weight")].Data.([]float32)
		q[0] = math.Float32frombits(math.Float32bits(q[0]) + 0x4000)
		q[1] = math.Float32frombits(math.Float32bits(q[1]) + 0x8000)
		q[2] = math.Float32frombits(math.Float32bits(q[2])&^0x10000 + 0x8000)
		ts[find(ts, "norm.weight")].Data.([]float32)[3] += 1e-4
		return ts
	})
	mn, err := Load(writeST(t, nudged), LoadOptions{MaxDist: 64, Eps: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	if mn.Rounded != 3 {
		t.Fatalf("Rounded = %d, want 3", mn.Rounded)
	}
	q0, qr := ref.Blocks[0].Attn.Q.W, mn.Blocks[0].Attn.Q.W
	tie1 := q0[1] + q0[1]&1 // half way: to the even neighbour
	if qr[0] != q0[0] || qr[1] != tie1 || qr[2] != q0[2]&^1 {
		t.Fatalf("rounding: %#x %#x %#x from %#x %#x %#x", qr[0], qr[1], qr[2], q0[0], q0[1], q0[2])
	}
	if mn.Norm[3] != ref.Norm[3]+1e-4 {
		t.Fatalf("norm weight %v, want the file's float32 %v", mn.Norm[3], ref.Norm[3]+1e-4)
	}
	if mn.Config.MaxDist != 64 || mn.Config.Eps != 1e-5 {
		t.Fatalf("options not applied: %+v", mn.Config)
	}
}

// tinyTensors is a complete encoder of a minimal configuration (vocab 6,
// dim 4, 2 heads, 4 buckets, 1 layer), small enough for the fuzzer.
func tinyTensors(t testing.TB) []checkpoint.WriteTensor {
	m, err := NewRandom(Config{Vocab: 6, Dim: 4, DimAttn: 4, DimFFN: 4, Heads: 2, Layers: 1, Buckets: 4, MaxDist: 8, Eps: 1e-6}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []checkpoint.WriteTensor
	for _, p := range m.params() {
		d := []float32(nil)
		if p.bf != nil {
			d = widenAll(*p.bf)
		} else {
			d = slices.Clone(*p.f32)
		}
		out = append(out, checkpoint.WriteTensor{Name: p.name, Shape: p.shape, Data: d})
	}
	return out
}

// FuzzLoad: whatever the bytes (safetensors or PyTorch zip), loading
// returns a model that passes Check and encodes, or an error; never a
// panic.
func FuzzLoad(f *testing.F) {
	ts := tinyTensors(f)
	var buf bytes.Buffer
	checkpoint.WriteSafetensors(&buf, ts, nil)
	f.Add(buf.Bytes())
	var top torchtest.Dict
	for _, x := range ts {
		top = append(top, torchtest.KV{Key: x.Name, Value: &torchtest.Tensor{Shape: x.Shape, Data: x.Data.([]float32)}})
	}
	f.Add(torchtest.Bytes(top, torchtest.Options{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := checkpoint.NewRaw(bytes.NewReader(data), int64(len(data)), checkpoint.TorchOptions{})
		if err != nil {
			return
		}
		var total int64
		for _, rt := range rf.Tensors {
			total += rt.Bytes()
		}
		if total > 64<<20 {
			return // a header claiming more than the fuzzer's memory cap
		}
		m, err := fromRaw(rf.Tensors, LoadOptions{})
		if err != nil {
			return
		}
		if err := m.Check(); err != nil {
			t.Fatalf("loaded model fails Check: %v", err)
		}
		if m.Config.Params() < 1<<22 {
			if _, err := m.Encode([]int32{0, 0}, []int32{1, 0}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestTinyLoads: the fuzzer's seeds are complete encoders.
func TestTinyLoads(t *testing.T) {
	p := writeST(t, tinyTensors(t))
	m, err := Load(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := m.Encode([]int32{5, 1, 0}, []int32{1, 1, 0}); err != nil || len(out) != 8 {
		t.Fatalf("%d values, %v", len(out), err)
	}
}
