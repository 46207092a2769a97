package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

func TestSafetensorsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := []WriteTensor{
		{"a", []int{2, 3}, []float32{1, 2, 3, 4, 5, float32(math.Inf(-1))}},
		{"b.f64", []int{2}, []float64{math.Pi, -0.5}},
		{"c", []int{3}, []int32{-1, 0, 7}},
		{"d", []int{1, 2}, []int64{1 << 40, -3}},
		{"scalar", nil, []float32{9}},
		{"empty", []int{0, 4}, []float32{}},
	}
	if err := WriteSafetensors(&buf, in, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	s, err := NewSafetensors(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if s.Metadata["k"] != "v" || len(s.Names()) != 6 {
		t.Fatalf("metadata %v names %v", s.Metadata, s.Names())
	}
	a, sh, err := s.Float32("a")
	if err != nil || !slices.Equal(sh, []int{2, 3}) || a[5] != float32(math.Inf(-1)) || a[1] != 2 {
		t.Fatalf("a = %v %v %v", a, sh, err)
	}
	b, _, err := s.Float64("b.f64")
	if err != nil || b[0] != math.Pi {
		t.Fatalf("b = %v %v", b, err)
	}
	c, _, err := s.Int64("c")
	if err != nil || c[0] != -1 || c[2] != 7 {
		t.Fatalf("c = %v %v", c, err)
	}
	d, _, err := s.Int64("d")
	if err != nil || d[0] != 1<<40 || d[1] != -3 {
		t.Fatalf("d = %v %v", d, err)
	}
	if _, _, err := s.Float32("c"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("float read of int tensor: %v", err)
	}
	if _, _, err := s.Float32("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing tensor: %v", err)
	}
	for _, bad := range [][]WriteTensor{
		{{"x", []int{2}, []float32{1}}},
		{{"x", []int{1}, []float32{1}}, {"x", []int{1}, []float32{1}}},
		{{"x", []int{1}, []string{"s"}}},
	} {
		if err := WriteSafetensors(&bytes.Buffer{}, bad, nil); err == nil {
			t.Fatalf("write %v: no error", bad)
		}
	}
}

func TestHalfAndBF16(t *testing.T) {
	cases := []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x0001, float32(math.Ldexp(1, -24))}, {0x7bff, 65504},
		{0x0000, 0}, {0x7c00, float32(math.Inf(1))}, {0x3555, 0.333251953125},
	}
	for _, c := range cases {
		if got := HalfToFloat32(c.h); got != c.want {
			t.Errorf("HalfToFloat32(%#x) = %v, want %v", c.h, got, c.want)
		}
	}
	if v := HalfToFloat32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("NaN half → %v", v)
	}
	// A safetensors file with F16 and BF16 tensors written by hand.
	raw := []byte{0x00, 0x3c, 0x00, 0xc0, 0x80, 0x3f, 0x40, 0xc0} // F16 [1,-2], BF16 [1,-3]
	hdr := `{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}`
	file := stFile(hdr, raw)
	s, err := NewSafetensors(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ := s.Float32("h")
	b, _, _ := s.Float32("b")
	if h[0] != 1 || h[1] != -2 || b[0] != 1 || b[1] != -3 {
		t.Fatalf("h %v b %v", h, b)
	}
}

func stFile(hdr string, data []byte) []byte {
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(hdr)))
	return append(append(lb[:], hdr...), data...)
}

func TestSafetensorsMalformed(t *testing.T) {
	cases := []struct {
		name, hdr string
		data      int
		want      string
	}{
		{"bad json", `{"a":`, 0, "header JSON"},
		{"unknown dtype", `{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, 1, `"a"`},
		{"beyond data", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, `"a"`},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8, `"a"`},
		{"negative shape", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0, `"a"`},
		{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlap"},
		{"huge shape", `{"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, 8, `"a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := stFile(c.hdr, make([]byte, c.data))
			_, err := NewSafetensors(bytes.NewReader(f), int64(len(f)))
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want mention of %q wrapping ErrFormat", err, c.want)
			}
		})
	}
	short := []byte{1, 2, 3}
	if _, err := NewSafetensors(bytes.NewReader(short), 3); err == nil {
		t.Fatal("3-byte file accepted")
	}
	big := stFile("", nil)
	binary.LittleEndian.PutUint64(big, 1<<40)
	if _, err := NewSafetensors(bytes.NewReader(big), int64(len(big))); err == nil {
		t.Fatal("oversized header accepted")
	}
}

// pk builds the pickle of hand-made .pt archives.
type pk = torchtest.Pickler

type ptTensor struct {
	key          string
	storage      string // torch.FloatStorage etc
	numel        int
	offset       int
	size, stride []int
}

// ptArchive builds a torch zip archive with top-level dict {entry: {name: tensor}}.
func ptArchive(entries map[string][]struct {
	name string
	t    ptTensor
}, order []string, storages map[string][]byte) []byte {
	p := &pk{}
	p.Op(0x80, 2, '}', '(')
	for _, e := range order {
		p.Str(e)
		p.Op('}', '(')
		for _, nt := range entries[e] {
			p.Str(nt.name)
			p.Global("torch._utils", "_rebuild_tensor_v2")
			p.Op('(')
			// persistent id tuple
			p.Op('(')
			p.Str("storage")
			p.Global("torch", nt.t.storage)
			p.Str(nt.t.key)
			p.Str("cpu")
			p.Int(nt.t.numel)
			p.Op('t', 'Q')
			p.Int(nt.t.offset)
			p.Tuple(nt.t.size...)
			p.Tuple(nt.t.stride...)
			p.Op(0x89) // False
			p.Global("collections", "OrderedDict")
			p.Op(')', 'R')
			p.Op('t', 'R')
		}
		p.Op('u')
	}
	p.Op('u', '.')
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("archive/data.pkl")
	w.Write(p.B)
	for k, v := range storages {
		w, _ := zw.Create("archive/data/" + k)
		w.Write(v)
	}
	zw.Close()
	return buf.Bytes()
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

type named = struct {
	name string
	t    ptTensor
}

func TestTorchStridesOffsetsAndKeys(t *testing.T) {
	// Storage 0: 0..11 as F32. "w" is a transposed 3×2 view at offset 2 of a
	// 2×3 block (stride (1,3)); "b" is a 2-element view at offset 9.
	st := map[string][]byte{
		"0": f32bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
		"1": {0x00, 0x3c, 0x00, 0xc0},          // F16 [1, -2]
		"2": {0x80, 0x3f, 0x40, 0xc0, 0, 0x40}, // BF16 [1, -3, 2]
	}
	ents := map[string][]named{
		"generator_ema": {
			{"model._fsdp_wrapped_module.blocks.0.w", ptTensor{"0", "FloatStorage", 12, 2, []int{3, 2}, []int{1, 3}}},
			{"model.b", ptTensor{"0", "FloatStorage", 12, 9, []int{2}, []int{1}}},
			{"model.h", ptTensor{"1", "HalfStorage", 2, 0, []int{2}, []int{1}}},
			{"model.bf", ptTensor{"2", "BFloat16Storage", 3, 1, []int{2}, []int{1}}},
		},
		"generator": {
			{"model.b", ptTensor{"0", "FloatStorage", 12, 0, []int{2}, []int{1}}},
		},
	}
	arc := ptArchive(ents, []string{"generator_ema", "generator"}, st)
	r := bytes.NewReader(arc)
	sd, err := LoadTorch(r, int64(len(arc)), TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sd) != 1 || sd["b"].Data[1] != 1 {
		t.Fatalf("default entry should be generator: %v", sd.Names())
	}
	sd, err = LoadTorch(r, int64(len(arc)), TorchOptions{Entry: "generator_ema"})
	if err != nil {
		t.Fatal(err)
	}
	w := sd["blocks.0.w"]
	want := []float32{2, 5, 3, 6, 4, 7}
	if w == nil || !slices.Equal(w.Shape, []int{3, 2}) {
		t.Fatalf("blocks.0.w = %+v (names %v)", w, sd.Names())
	}
	for i := range want {
		if w.Data[i] != want[i] {
			t.Fatalf("strided view = %v, want %v", w.Data, want)
		}
	}
	if b := sd["b"].Data; b[0] != 9 || b[1] != 10 {
		t.Fatalf("offset view = %v", b)
	}
	if h := sd["h"].Data; h[0] != 1 || h[1] != -2 {
		t.Fatalf("half = %v", h)
	}
	if b := sd["bf"].Data; b[0] != -3 || b[1] != 2 {
		t.Fatalf("bf16 = %v", b)
	}
	// A view that runs past its storage is rejected, naming the tensor.
	bad := ptArchive(map[string][]named{"generator": {{"model.x", ptTensor{"0", "FloatStorage", 12, 8, []int{2, 3}, []int{3, 1}}}}},
		[]string{"generator"}, st)
	if _, err := LoadTorch(bytes.NewReader(bad), int64(len(bad)), TorchOptions{}); err == nil || !strings.Contains(err.Error(), `"model.x"`) {
		t.Fatalf("out-of-bounds view: %v", err)
	}
	// A storage record shorter than its declared numel.
	short := ptArchive(map[string][]named{"generator": {{"model.x", ptTensor{"0", "FloatStorage", 13, 0, []int{1}, []int{1}}}}},
		[]string{"generator"}, st)
	if _, err := LoadTorch(bytes.NewReader(short), int64(len(short)), TorchOptions{}); err == nil {
		t.Fatal("short storage accepted")
	}
}

func TestStateDictCheck(t *testing.T) {
	sd := StateDict{"a": {Shape: []int{2}}, "b": {Shape: []int{3, 1}}, "z": {Shape: []int{1}}}
	err := sd.Check([]Expect{{"a", []int{2}}, {"b", []int{3}}, {"c", []int{4}}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{"missing: c", "unexpected: z", "b [3 1] (want [3])"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if err := sd.Check([]Expect{{"a", []int{2}}, {"b", []int{3, 1}}, {"z", []int{1}}}); err != nil {
		t.Fatal(err)
	}
}

func TestMergeLoRA(t *testing.T) {
	base := StateDict{
		"blocks.0.self_attn.q.weight": {Shape: []int{2, 3}, Data: []float32{1, 0, 0, 0, 1, 0}},
		"blocks.0.ffn.0.weight":       {Shape: []int{2, 3}, Data: make([]float32, 6)},
	}
	lora := StateDict{
		"base_model.model.blocks.0.self_attn.q.lora_A.weight": {Shape: []int{1, 3}, Data: []float32{1, 2, 3}},
		"base_model.model.blocks.0.self_attn.q.lora_B.weight": {Shape: []int{2, 1}, Data: []float32{1, -1}},
	}
	names, err := MergeLoRA(base, lora, 2) // scale alpha/r = 2
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "blocks.0.self_attn.q.weight" {
		t.Fatalf("merged %v", names)
	}
	want := []float32{3, 4, 6, -2, -3, -6}
	for i, v := range base["blocks.0.self_attn.q.weight"].Data {
		if v != want[i] {
			t.Fatalf("merged weight %v, want %v", base["blocks.0.self_attn.q.weight"].Data, want)
		}
	}
	// Errors leave base untouched.
	before := append([]float32(nil), base["blocks.0.ffn.0.weight"].Data...)
	bad := StateDict{
		"blocks.0.ffn.0.lora_A.weight": {Shape: []int{1, 3}, Data: []float32{1, 1, 1}},
		"blocks.0.ffn.0.lora_B.weight": {Shape: []int{2, 1}, Data: []float32{1, 1}},
		"blocks.9.o.lora_A.weight":     {Shape: []int{1, 3}, Data: []float32{1, 1, 1}},
		"blocks.9.o.lora_B.weight":     {Shape: []int{2, 1}, Data: []float32{1, 1}},
	}
	if _, err := MergeLoRA(base, bad, 1); err == nil || !strings.Contains(err.Error(), "blocks.9.o.weight") {
		t.Fatalf("missing target: %v", err)
	}
	for i, v := range base["blocks.0.ffn.0.weight"].Data {
		if v != before[i] {
			t.Fatal("failed merge modified base")
		}
	}
	unpaired := StateDict{"blocks.0.ffn.0.lora_A.weight": {Shape: []int{1, 3}, Data: []float32{1, 1, 1}}}
	if _, err := MergeLoRA(base, unpaired, 1); err == nil || !strings.Contains(err.Error(), "lora_B") {
		t.Fatalf("unpaired: %v", err)
	}
}

func FuzzSafetensors(f *testing.F) {
	var buf bytes.Buffer
	WriteSafetensors(&buf, []WriteTensor{{"a", []int{2}, []float32{1, 2}}, {"b", []int{1}, []int64{3}}}, map[string]string{"m": "x"})
	f.Add(buf.Bytes())
	f.Add(stFile(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, []byte{0, 0x3c, 0, 0xc0}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewSafetensors(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, n := range s.Names() {
			i, _ := s.Info(n)
			if i.DType.IsFloat() {
				v, _, err := s.Float32(n)
				if err != nil || int64(len(v)) != i.Elems() {
					t.Fatalf("%s: %d values for %d elements: %v", n, len(v), i.Elems(), err)
				}
			} else if _, _, err := s.Int64(n); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
	})
}

// TestMergeLoRAAlpha checks the scale alpha/r with r = lora_A's first
// dimension: alpha 0 means alpha = r when every adapter has that rank, and
// is an error naming two adapters when their ranks differ; a negative or
// non-finite alpha is an error.
func TestMergeLoRAAlpha(t *testing.T) {
	// W = 0 [2×2]; A [r×2] and B [2×r] are all ones, so B·A = r everywhere
	// and the merged weight is alpha (or r when alpha is 0).
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	adapter := func(lora StateDict, mod string, r int) {
		lora[mod+".lora_A.weight"] = &Tensor{Shape: []int{r, 2}, Data: ones(2 * r)}
		lora[mod+".lora_B.weight"] = &Tensor{Shape: []int{2, r}, Data: ones(2 * r)}
	}
	for _, c := range []struct {
		name   string
		ranks  [2]int // of blocks.0.q and blocks.0.k
		alpha  float64
		want   [2]float32
		errHas string
	}{
		{"alpha = rank", [2]int{3, 3}, 3, [2]float32{3, 3}, ""},
		{"default alpha is the rank", [2]int{3, 3}, 0, [2]float32{3, 3}, ""},
		{"rank wider than the layer", [2]int{5, 5}, 0, [2]float32{5, 5}, ""},
		{"explicit alpha with mixed ranks", [2]int{2, 4}, 8, [2]float32{8, 8}, ""},
		{"default alpha with mixed ranks", [2]int{2, 4}, 0, [2]float32{}, "blocks.0.k.weight has rank 4, blocks.0.q.weight rank 2"},
		{"negative alpha", [2]int{2, 2}, -1, [2]float32{}, "alpha -1"},
		{"NaN alpha", [2]int{2, 2}, math.NaN(), [2]float32{}, "alpha NaN"},
		{"infinite alpha", [2]int{2, 2}, math.Inf(1), [2]float32{}, "alpha +Inf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := StateDict{"blocks.0.q.weight": {Shape: []int{2, 2}, Data: make([]float32, 4)},
				"blocks.0.k.weight": {Shape: []int{2, 2}, Data: make([]float32, 4)}}
			lora := StateDict{}
			adapter(lora, "blocks.0.q", c.ranks[0])
			adapter(lora, "blocks.0.k", c.ranks[1])
			_, err := MergeLoRA(base, lora, c.alpha)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want mention of %q", err, c.errHas)
				}
				for _, w := range base {
					if w.Data[0] != 0 {
						t.Fatal("failed merge modified base")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range []string{"blocks.0.q.weight", "blocks.0.k.weight"} {
				for _, v := range base[n].Data {
					if v != c.want[i] {
						t.Fatalf("%s = %v, want all %v", n, base[n].Data, c.want[i])
					}
				}
			}
		})
	}
}

// TestTorchKeyLayouts loads the state-dict layouts of released checkpoints,
// written as .pt files, through LoadFile: entries generator,
// generator_ema (FSDP-wrapped keys), model and state_dict, and a
// top-level model.-prefixed state dict. Each must give the same normalised
// tensors; the automatic entry choice prefers generator, then
// generator_ema, model, state_dict.
func TestTorchKeyLayouts(t *testing.T) {
	w := &torchtest.Tensor{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}}
	b := &torchtest.Tensor{Shape: []int{2}, Data: []float32{-1, 0.5}}
	decoy := &torchtest.Tensor{Shape: []int{1}, Data: []float32{99}}
	sd := func(prefix string) torchtest.Dict {
		return torchtest.Dict{{Key: prefix + "blocks.0.self_attn.q.weight", Value: w}, {Key: prefix + "head.head.bias", Value: b}}
	}
	for _, c := range []struct {
		name  string
		top   torchtest.Dict
		entry string
	}{
		{"top-level model.-prefixed state dict", sd("model."), ""},
		{"top-level bare state dict", sd(""), ""},
		{"model entry", torchtest.Dict{{Key: "model", Value: sd("")}}, ""},
		{"state_dict entry", torchtest.Dict{{Key: "state_dict", Value: sd("module.")}}, ""},
		{"generator entry", torchtest.Dict{{Key: "generator", Value: sd("model.")}}, ""},
		{"generator_ema entry with FSDP keys", torchtest.Dict{{Key: "generator_ema", Value: sd("model._fsdp_wrapped_module.")}}, ""},
		{"generator preferred over generator_ema", torchtest.Dict{
			{Key: "generator_ema", Value: torchtest.Dict{{Key: "model.x", Value: decoy}}}, {Key: "generator", Value: sd("model.")}}, ""},
		{"model preferred over state_dict", torchtest.Dict{
			{Key: "state_dict", Value: torchtest.Dict{{Key: "x", Value: decoy}}}, {Key: "model", Value: sd("")}}, ""},
		{"named entry", torchtest.Dict{{Key: "generator", Value: torchtest.Dict{{Key: "model.x", Value: decoy}}},
			{Key: "generator_ema", Value: sd("model._fsdp_wrapped_module.")}}, "generator_ema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ckpt.pt")
			if err := os.WriteFile(p, torchtest.Bytes(c.top, torchtest.Options{}), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadFile(p, TorchOptions{Entry: c.entry})
			if err != nil {
				t.Fatal(err)
			}
			if names := got.Names(); !slices.Equal(names, []string{"blocks.0.self_attn.q.weight", "head.head.bias"}) {
				t.Fatalf("names %v", names)
			}
			for n, want := range map[string]*torchtest.Tensor{"blocks.0.self_attn.q.weight": w, "head.head.bias": b} {
				if g := got[n]; !slices.Equal(g.Shape, want.Shape) || !slices.Equal(g.Data, want.Data) {
					t.Errorf("%s = %v %v, want %v %v", n, g.Shape, g.Data, want.Shape, want.Data)
				}
			}
		})
	}
}

// TestTorchCorruptFiles checks that malformed .pt files give an error that
// names the problem and wraps ErrFormat.
func TestTorchCorruptFiles(t *testing.T) {
	top := torchtest.Dict{{Key: "generator", Value: torchtest.Dict{
		{Key: "model.a", Value: &torchtest.Tensor{Shape: []int{4}, Data: []float32{1, 2, 3, 4}}},
		{Key: "model.b", Value: &torchtest.Tensor{Shape: []int{2}, Data: []float32{5, 6}}}}}}
	good := torchtest.Bytes(top, torchtest.Options{})
	omit := func(rec string) []byte {
		return torchtest.Bytes(top, torchtest.Options{Omit: func(r string) bool { return r == rec }})
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"no data.pkl", omit("archive/data.pkl"), "data.pkl not found"},
		{"missing storage record", omit("archive/data/1"), "storage record data/1 missing"},
		{"not a zip file", []byte("this is not a PyTorch checkpoint at all"), "not a zip archive"},
		{"truncated zip", good[:len(good)/2], "truncated or corrupt zip archive"},
		{"truncated to the first header", good[:30], "truncated or corrupt zip archive"},
		{"empty file", nil, "not a zip archive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadTorch(bytes.NewReader(c.data), int64(len(c.data)), TorchOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrFormat) {
				t.Fatalf("LoadTorch: %v, want mention of %q wrapping ErrFormat", err, c.want)
			}
			p := filepath.Join(t.TempDir(), "bad.pt")
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = LoadFile(p, TorchOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) || !errors.Is(err, ErrFormat) {
				t.Fatalf("LoadFile: %v, want mention of %q and the file wrapping ErrFormat", err, c.want)
			}
		})
	}
	if sd, err := LoadTorch(bytes.NewReader(good), int64(len(good)), TorchOptions{}); err != nil || len(sd) != 2 {
		t.Fatalf("intact archive: %v %v", sd, err)
	}
}

// TestLoadFileSafetensorsWithTorchExtension: a safetensors file is read
// whatever its extension (the format is chosen by content).
func TestLoadFileSafetensorsWithTorchExtension(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ctx.bin")
	if err := WriteSafetensorsFile(p, []WriteTensor{{Name: "context", Shape: []int{2}, Data: []float32{1, 2}}}, nil); err != nil {
		t.Fatal(err)
	}
	sd, err := LoadFile(p, TorchOptions{})
	if err != nil || sd["context"] == nil || sd["context"].Data[1] != 2 {
		t.Fatalf("LoadFile(%s) = %v, %v", p, sd, err)
	}
}
